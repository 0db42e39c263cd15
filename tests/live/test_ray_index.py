"""`declrag index --ray` for real: a two-node Ray cluster on loopback (scripts/ray.sh: a head and a worker node, each a
raylet of its own) indexing real files into a real Weaviate and into the embedded store. The index equals the one a
single process builds (chunk ids, texts, spans, metadata, document records; vectors within float tolerance); a worker
node killed midway leaves a complete index with no duplicate; a driver killed midway and run again embeds nothing
twice."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from declrag.stores import child_uri, connect
from tests.conftest import ROOT

pytestmark = pytest.mark.weaviate
RAY = ROOT / "scripts" / "ray.sh"
NO_RAY = 3  # scripts/ray.sh's exit status when Ray is not installed


def start_ray(folder: Path, workers: int, **env: str) -> str:
    """A cluster from scripts/ray.sh in ``folder`` (a head and ``workers`` worker nodes of 1 CPU), its nodes run
    with ``env`` added; its address. Skips the test where Ray is not installed."""
    r = subprocess.run(["bash", str(RAY), "start", "--dir", str(folder), "--workers", str(workers)],
                       capture_output=True, text=True, timeout=300, env={**os.environ, **env},
                       stdin=subprocess.DEVNULL)
    if r.returncode == NO_RAY:
        pytest.skip("indexing over Ray needs Ray: pip install 'declrag[ray]' (scripts/setup.sh installs it)")
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def stop_ray(folder: Path) -> None:
    subprocess.run(["bash", str(RAY), "stop", "--dir", str(folder), "--clean"], capture_output=True, timeout=120,
                   stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A head and one worker node, 1 CPU each. Their embedding cache is their own (not this session's), so what
    they index they embed themselves."""
    folder = tmp_path_factory.mktemp("ray")
    address = start_ray(folder / "cluster", 1, DECLRAG_CACHE=str(folder / "cache"))
    yield {"address": address, "dir": folder / "cluster", "cache": folder / "cache"}
    stop_ray(folder / "cluster")


def declrag(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "declrag.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, **kw)


def finished(p: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def dump(uri: str) -> tuple[dict[str, dict], dict[str, tuple]]:
    """Every chunk of the store (its fields and vector) by id, and every document record."""
    store = connect(uri)
    try:
        if hasattr(store, "collection"):  # Weaviate
            coll = store.collection(store.name)
            chunks = {}
            for o in coll.iterator(include_vector=True):
                p = dict(o.properties)
                vec = o.vector["default"] if isinstance(o.vector, dict) else o.vector
                assert p["chunk_id"] not in chunks, "a chunk stored twice"
                chunks[p["chunk_id"]] = {**p, "vector": np.asarray(vec, np.float32)}
        else:
            rows = store._table("chunks").to_arrow().to_pylist()
            chunks = {r["id"]: {**r, "vector": np.asarray(r["vector"], np.float32)} for r in rows}
        return chunks, {d: dataclasses.astuple(r) for d, r in store.documents().items()}
    finally:
        store.close()


def same_index(a: str, b: str) -> int:
    (ca, da), (cb, db) = dump(a), dump(b)
    assert set(ca) == set(cb) and ca, f"{len(set(ca) ^ set(cb))} chunk ids differ"
    for i, x in ca.items():
        y = cb[i]
        assert {k: v for k, v in x.items() if k != "vector"} == {k: v for k, v in y.items() if k != "vector"}
        assert np.abs(x["vector"] - y["vector"]).max() < 1e-4, i
    assert da == db
    return len(ca)


def chunked_as_one_process(docs: Path, uri: str) -> int:
    """The store at ``uri`` holds exactly the chunks one process cuts from ``docs`` (ids, texts, spans, headers),
    each once (its vectors are checked against a one-process index in the first test)."""
    from declrag.config import IngestConfig
    from declrag.embed.embedder import Embedder
    from declrag.ingest.chunkers import Chunker
    from declrag.ingest.loaders import load_paths

    ingest = IngestConfig()
    chunker = Chunker(ingest.chunker, Embedder(ingest.embedder).tokens, None, ingest.context)
    documents, _ = load_paths([docs])
    fields = ("doc_id", "text", "start", "end", "section", "header")
    want = {c.id: tuple(getattr(c, f) for f in fields) for d in documents for c in chunker(d)}
    got = {i: tuple(c[f] for f in fields) for i, c in dump(uri)[0].items()}
    assert got == want
    return len(got)


def corpus(tmp: Path, files: int) -> Path:
    """Real files: the project's own pages (Markdown), ``files`` of them, each title marked with this copy's own
    tag: every chunk carries its title (ingest ``context``), so no text of one copy is in the cluster's embedding
    cache from another."""
    tag = uuid.uuid4().hex[:6]
    out = tmp / "corpus"
    for f in sorted((ROOT / "docs").rglob("*.md"))[:files]:
        dest = out / f.relative_to(ROOT / "docs")
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = f.read_text()
        dest.write_text(re.sub(r"^# (.*)$", rf"# \1 ({tag})", text, count=1, flags=re.M) if text.startswith("#")
                        else f"# {f.stem} ({tag})\n\n{text}")
    return out


def test_over_ray_into_weaviate_is_the_one_process_index(tmp_path, ray_cluster, weaviate_url):
    """The same chunks, vectors and records, readers included (a rules file and the run's groups), as one process
    writes; incremental runs and a relabelling run do the same on both."""
    docs = corpus(tmp_path, 12)
    (tmp_path / "rules.yaml").write_text("corpus/benchmarks/s*: [bench]\n")  # serve.md, soak.md
    labels = ["--readers-file", str(tmp_path / "rules.yaml"), "--readers", "staff"]
    one, over = (child_uri(weaviate_url, f"{k}{uuid.uuid4().hex[:8]}") for k in ("one", "ray"))
    code, out, err = finished(declrag("index", str(docs), "--store", one, "-q", *labels))
    assert code == 0, err
    code, out, err = finished(declrag("index", str(docs), "--store", over, "--ray", ray_cluster["address"], "-q",
                                      *labels))
    assert code == 0, err
    assert "12 documents indexed (12 new" in out and "0 skipped" in out
    n = same_index(one, over)
    assert f"{n} chunks" in out
    # incremental over Ray as in one process: one file changed, one removed, the rest unchanged
    changed = sorted(docs.rglob("*.md"))
    changed[0].write_text(changed[0].read_text() + "\n\nA paragraph added later, about Ray clusters.\n")
    changed[1].unlink()
    for uri, extra in ((one, []), (over, ["--ray", ray_cluster["address"]])):
        code, out, err = finished(declrag("index", str(docs), "--store", uri, "--prune", "-q", *extra))
        assert code == 0 and "1 documents indexed (0 new, 1 changed" in out and "1 removed" in out, (out, err)
        assert "10 unchanged" in out
    same_index(one, over)
    readers = {r[-1] for r in dump(over)[1].values()}
    assert readers == {("bench",), ("staff",)}, readers  # the rules file's, the run's: written by the cluster
    said = []
    for uri, extra in ((one, []), (over, ["--ray", ray_cluster["address"]])):  # the rules dropped: relabelled only
        code, out, err = finished(declrag("index", str(docs), "--store", uri, "--readers", "staff", "-q", *extra))
        assert code == 0 and "0 documents indexed" in out, (out, err)
        said.append(re.search(r"\d+ unchanged \((\d+) of them relabelled", out).group(1))  # type: ignore[union-attr]
    assert said[0] == said[1] != "0", said
    same_index(one, over)
    assert {r[-1] for r in dump(over)[1].values()} == {("staff",)}


def test_a_driver_killed_midway_and_run_again_embeds_nothing_twice(tmp_path, ray_cluster):
    """The embedded store (the driver writes it): killed after its first batches, the rerun embeds only the texts
    that no node embedded before, and the index is the one-process index."""
    docs = corpus(tmp_path, 40)
    over = str(tmp_path / "ray")
    cache = ray_cluster["cache"] / "embeddings.sqlite3"
    before = _cached(cache)
    p = declrag("index", str(docs), "--store", over, "--ray", ray_cluster["address"], "-q")
    _until(lambda: _cached(cache) > before + 20 or p.poll() is not None)
    assert p.poll() is None, "the job ended before it could be killed: give it more files"
    p.send_signal(signal.SIGKILL)
    p.wait()
    first = _settled(cache) - before  # the job's actors, told of their driver's end, stop too
    code, out, err = finished(declrag("index", str(docs), "--store", over, "--ray", ray_cluster["address"], "-q"))
    assert code == 0, err
    again = int(out.split(" texts embedded")[0].rsplit("chunks, ", 1)[1])
    assert _cached(cache) - before == first + again  # every text embedded once, by one run or the other
    chunked_as_one_process(docs, over)  # complete: the chunks the killed run wrote and the rest


def test_a_worker_node_lost_midway_leaves_a_complete_index(tmp_path, ray_cluster, weaviate_url):
    docs = corpus(tmp_path, 43)
    over = child_uri(weaviate_url, f"lost{uuid.uuid4().hex[:8]}")
    cache = ray_cluster["cache"] / "embeddings.sqlite3"
    before = _cached(cache)
    p = declrag("index", str(docs), "--store", over, "--ray", ray_cluster["address"], "-q")
    _until(lambda: _cached(cache) > before + 10 or p.poll() is not None)
    assert p.poll() is None, "the job ended before the node could be killed: give it more files"
    kill = subprocess.run(["bash", str(RAY), "kill-worker", "--dir", str(ray_cluster["dir"])], capture_output=True,
                          text=True, timeout=60)
    assert kill.returncode == 0, kill.stderr
    code, out, err = finished(p)
    assert code == 0, err
    assert chunked_as_one_process(docs, over) == int(out.split(" chunks,")[0].rsplit(" ", 1)[1])  # none missing


def _cached(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path, timeout=30) as db:
        try:
            return db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


def _until(ok, timeout: float = 300) -> None:
    end = time.time() + timeout
    while not ok():
        assert time.time() < end, "timed out"
        time.sleep(0.2)


def _settled(path: Path, quiet: float = 5.0) -> int:
    """The cache's count once it has not changed for ``quiet`` seconds."""
    last, since = _cached(path), time.time()
    while time.time() - since < quiet:
        time.sleep(0.5)
        if (now := _cached(path)) != last:
            last, since = now, time.time()
    return last


def test_a_cluster_whose_nodes_lack_declrag_is_one_line_before_any_work(tmp_path):
    """A node started where declrag cannot be imported (its Python's path without declrag's folder, as on a machine
    it was never installed on): the job is refused before anything is read or written, naming the fix."""
    stub = tmp_path / "site"
    stub.mkdir()
    src = str(ROOT / "src")
    (stub / "sitecustomize.py").write_text(f"import sys\nsys.path[:] = [p for p in sys.path if p != {src!r}]\n")
    folder = tmp_path / "bare"
    address = start_ray(folder, 0, PYTHONPATH=str(stub), DECLRAG_CACHE=str(tmp_path / "cache"))
    try:
        docs = corpus(tmp_path, 2)
        store = tmp_path / "store"
        code, out, err = finished(declrag("index", str(docs), "--store", str(store), "-q", "--ray", address,
                                          cwd=tmp_path))
        assert code == 2 and "Traceback" not in err, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines[0].startswith("error: ") and "cannot import declrag" in lines[0], err
        assert lines[-1].startswith("  fix: ") and "every node" in lines[-1]
        assert not store.exists()  # refused before the store was made
    finally:
        stop_ray(folder)
