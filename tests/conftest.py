"""Shared fixtures. Tests never write outside their temporary folders: the embedding cache, the default
store and DSPy's LM cache (in this process and in the processes tests start) are redirected per test session. The
servers' builds are the one exception: they are read from (and built once into) the real cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("declrag-cache")
    old = {k: os.environ.get(k) for k in ("DECLRAG_CACHE", "DECLRAG_STORE", "DSPY_CACHEDIR", "DECLRAG_BUILD_CACHE")}
    # the servers the live tests start (Weaviate, Jaeger: built from Go; MLflow: installed) stay in the real cache,
    # where scripts/test.sh built them once; in the session's own cache every run built them again (15 minutes)
    os.environ["DECLRAG_BUILD_CACHE"] = old["DECLRAG_BUILD_CACHE"] or old["DECLRAG_CACHE"] or str(
        Path.home() / ".cache" / "declrag")
    os.environ["DECLRAG_CACHE"] = str(cache)
    os.environ["DECLRAG_STORE"] = str(cache / "default-store")
    os.environ["DSPY_CACHEDIR"] = str(cache / "dspy")  # read by DSPy at import, in the processes tests start
    from declrag.lm import use_lm_cache

    use_lm_cache(cache / "dspy")  # this process: the test run owns it, as the `declrag` command owns its own
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def filled_store(folder: Path, created: bool = False):
    """The store contract's ten-chunk corpus (`declrag.testing.store_contract.corpus`, hash embeddings) in a LanceStore
    at ``folder``: what most unit tests search. ``created``: with its metadata written, so the CLI can open it."""
    # imported here, not at the top: every test session loads this file, most never open a store
    from declrag.stores.base import StoreMeta
    from declrag.stores._lancedb import LanceStore
    from declrag.testing import HashEmbedder
    from declrag.testing.store_contract import corpus

    s = LanceStore(folder)
    if created:
        s.create(StoreMeta())
    s.upsert(*corpus(HashEmbedder()))
    return s


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """`filled_store`, shared by a module's tests (they only read it; a test that writes makes its own)."""
    return filled_store(tmp_path_factory.mktemp("store") / "store")


def shared(*parts: str) -> Path:
    """A file of the shared golden sets; skips the test when the folder is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared dataset not found: {p}")
    return p


@pytest.fixture(scope="session")
def minilm():
    """The real default embedder (all-MiniLM-L6-v2, from the hub or its offline package)."""
    from declrag.embed.embedder import Embedder

    e = Embedder()
    e.model  # load once per session
    return e


WEAVIATE_SCRIPT = ROOT / "scripts" / "weaviate.sh"
NO_SERVER = 3  # scripts/weaviate.sh's exit status when the server cannot be had here (no Go)


def free_port_block() -> int:
    """A base port whose cluster ports are free (scripts/weaviate.sh: REST P+N, gRPC P+100+N, gossip and data
    P+200+10N and +1, RAFT and its RPC P+300+10N and +1, for nodes N = 0, 1, 2)."""
    import random
    import socket

    for _ in range(50):
        base = random.randrange(20000, 40000, 10)
        ok = True
        ports = [base + off + step * n for n in range(3) for off, step in ((0, 1), (100, 1), (200, 10), (201, 10),
                                                                          (300, 10), (301, 10))]
        for p in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


def start_weaviate(folder: Path, nodes: int = 1, api_key: str | None = None, flush_s: int | None = None) -> str:
    """Start a real Weaviate (built from its Go module by scripts/weaviate.sh) in ``folder``; returns the
    store URI of its first node. ``flush_s``: its PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS (60 by default).
    Skips the test when the server cannot be had here (no Go)."""
    import subprocess

    args = ["bash", str(WEAVIATE_SCRIPT), "start", "--nodes", str(nodes), "--dir", str(folder),
            "--port", str(free_port_block())] + (["--api-key", api_key] if api_key else [])
    env = {**os.environ, **({"PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS": str(flush_s)} if flush_s else {})}
    r = subprocess.run(args, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL, env=env)
    if r.returncode == NO_SERVER:
        pytest.skip("Weaviate tests need a Weaviate server: install Go (https://go.dev/dl) so that "
                    "scripts/weaviate.sh can build one, or set WEAVIATE_URL=weaviate://host:port/?grpc=PORT")
    if r.returncode != 0:
        pytest.fail(f"scripts/weaviate.sh start failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


def stop_weaviate(folder: Path) -> None:
    import subprocess

    subprocess.run(["bash", str(WEAVIATE_SCRIPT), "stop", "--dir", str(folder), "--clean"],
                   capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def weaviate_url(tmp_path_factory):
    """A live one-node Weaviate for the session: $WEAVIATE_URL if set, else one started here. That one flushes its
    memtables after 2 s (60 by default), so its stores wait 3 s (``settle=3``), not 65, for keyword search to see a
    write before a test measures."""
    if os.environ.get("WEAVIATE_URL"):
        yield os.environ["WEAVIATE_URL"]
        return
    folder = tmp_path_factory.mktemp("weaviate")
    uri = start_weaviate(folder, flush_s=2)
    yield uri + ("&" if "?" in uri else "?") + "settle=3"
    stop_weaviate(folder)


POSTGRES_SCRIPT = ROOT / "scripts" / "postgres.sh"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_served(base: str, proc, log: Path, timeout: float = 300.0, in_a_row: int = 1) -> None:
    """Until the `declrag serve` process ``proc`` answers ``base``/readyz with 200, ``in_a_row`` times on new
    connections (several server processes are ready one by one); fails with the end of its ``log`` if it exits."""
    import time
    import urllib.error
    import urllib.request

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    deadline = time.monotonic() + timeout
    while not all(ready() for _ in range(in_a_row)):
        assert proc.poll() is None, f"the server exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the server was not ready in {timeout:g} s"
        time.sleep(0.5)


def start_postgres(password_env: str | None = None) -> tuple[str, Path]:
    """Start a real PostgreSQL (Debian's package, installed by scripts/postgres.sh if missing) in a new
    temporary cluster on loopback; returns its SQLAlchemy URL and folder. Skips the test when PostgreSQL
    cannot be installed here."""
    import subprocess
    import tempfile

    # a short folder under /tmp: the server runs as a system user when we are root, and needs to reach it
    folder = Path(tempfile.mkdtemp(prefix="declrag-pg-", dir="/tmp"))
    args = ["bash", str(POSTGRES_SCRIPT), "start", "--dir", str(folder), "--port", str(free_port())]
    if password_env:
        args += ["--password-env", password_env]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if r.returncode == 3:
        pytest.skip("PostgreSQL tests need Debian's postgresql package, which scripts/postgres.sh could not install "
                    f"here ({r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'no reason given'}); "
                    "or set DECLRAG_TEST_POSTGRES_URL to a server of yours")
    if r.returncode != 0:
        pytest.fail(f"scripts/postgres.sh start failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1], folder


def stop_postgres(folder: Path) -> None:
    import subprocess

    subprocess.run(["bash", str(POSTGRES_SCRIPT), "stop", "--dir", str(folder), "--clean"], capture_output=True,
                   timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def postgres_url():
    """A live PostgreSQL for the session: $DECLRAG_TEST_POSTGRES_URL if set, else one started here."""
    if os.environ.get("DECLRAG_TEST_POSTGRES_URL"):
        yield os.environ["DECLRAG_TEST_POSTGRES_URL"]
        return
    url, folder = start_postgres()
    yield url
    stop_postgres(folder)


def asked_plain_and_streamed(app, question: str) -> tuple[dict, str, str]:
    """A serve ``app`` asked ``question`` on ``/v1/ask``, then again streamed (a space added: not the same
    question), then ``/metrics``: (the JSON answer, the event stream's text, the metrics' text)."""
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        while c.get("/readyz").status_code != 200:
            pass
        answer = c.post("/v1/ask", json={"question": question}).json()
        streamed = c.post("/v1/ask", json={"question": question + " ", "stream": True}).text
        metrics = c.get("/metrics").text
    return answer, streamed, metrics


@pytest.fixture
def serve_process(tmp_path, minilm):
    """``start(**settings)``: `declrag.serve.serve` in a process of its own, over a real store of two small files
    (the default program), on a free port; returns ``(process, base URL)`` once /readyz answers 200. Killed at the
    end if still running."""
    import socket
    import subprocess
    import sys
    import time

    import httpx

    from declrag.api import index

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "italy.txt").write_text("Rome is the capital of Italy. The Colosseum is an amphitheatre in Rome.")
    (docs / "france.txt").write_text("Paris is the capital of France. The Eiffel Tower stands in Paris.")
    index([docs], store=tmp_path / "store", progress=False, embedder=minilm)
    procs: list[subprocess.Popen] = []

    def start(extra: str = "", settings: str = "") -> tuple[subprocess.Popen, str]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        code = ("from declrag.serve import ServeSettings, serve; from declrag.usage import RecordSettings; "
                f"serve(store={str(tmp_path / 'store')!r}{extra}, settings=ServeSettings(port={port}{settings}), "
                "log_level='warning')")
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        procs.append(proc)
        base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "never ready"
            try:
                if httpx.get(base + "/readyz", timeout=5).status_code == 200:
                    return proc, base
            except httpx.TransportError:
                pass
            time.sleep(0.5)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
