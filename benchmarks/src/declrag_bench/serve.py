"""`declrag bench serve`: what serving costs. A real `declrag serve` app under uvicorn, in its own process
on loopback, driven by N concurrent HTTP clients (threads, keep-alive) for a bounded time; compared with
calling the same program directly in Python on the same questions.

Three scenarios, over SQuAD v2.0's first 200 paragraphs (real MiniLM index, cached by content):

- ``retrieval``: the naive program whose LM is an instant scripted one (`declrag.testing.ScriptedLM`,
  through create_app's testing hook): query embedding, hybrid search, prompt building and citation handling
  all run, the model does not. This isolates the serving overhead (HTTP, JSON, the worker-thread hop,
  concurrency on the GIL) on a realistic request path.
- ``program``: the default program on the real local model (``local/smollm2``, in-process), with a cold LM
  cache on both sides. One in-process model answers one prompt at a time, so with N clients a request
  waits for the ones ahead of it: latency is mostly queueing, and ``overhead_ratio`` says how much.
- ``search``: ``POST /v1/search`` on the same program as ``retrieval``: its compiled retrieval and the hits as
  JSON, no LM in the path (the direct call is `RAGProgram.search`). Every request asks a question no other
  request asked (the questions about the indexed paragraphs, then the set's others); the arm ends early, and
  says so (``questions_exhausted``), when they run out.

Each scenario runs one or two arms on the same server: ``retrieval`` asks plain JSON requests (``/v1/ask``
without ``stream``, as an application calling the service for search does), then streamed ones
(``retrieval/stream``, ``stream: true``); ``program`` streams. ``first_token_p50_ms``/``first_token_p95_ms`` are the
time to the first streamed piece of the answer, beside the full answer's (for a JSON request, the whole
response). The scripted LM of ``retrieval`` does not stream, so there the first piece is the whole answer; the
local model streams its tokens.

The load generator runs in this process, on the same cores as the server: ``clients`` threads, each with one
keep-alive connection and a minimal HTTP/1.1 client (`http.client`), so that the generator's own CPU per request
(``client_cpu_ms``, reported beside the server's ``server_cpu_ms``) takes as little from the server as it can.

Per scenario: ``clients``, ``p50_ms``/``p95_ms``/``p99_ms`` (client-side latency of successful requests, to the
whole answer), ``first_token_p50_ms``/``first_token_p95_ms``, ``rps`` (successes per second of wall time),
``errors`` (non-200, failed or unfinished requests), ``overhead_ratio`` = ``http_overhead_p50_ms`` /
``direct_p50_ms``: what the server adds to a request (client latency minus the time inside the program, per
request: HTTP, JSON, the thread hop) against a direct Python call of the program; and ``queueing_ratio`` =
(server p50 - direct p50) / direct p50, which also counts waiting for the other clients' requests (one model,
two cores), plus ``direct_p50_ms`` and ``server_program_p50_ms``. Query embeddings are cached (warmed for every
question first) on both sides, except in the ``embed`` arms (``--embed-backend torch,onnx``): there the server's
query embedder runs that backend with an empty embedding cache of its own, so that each new question is embedded
(in ``search``, where no question repeats, every request; the direct call stays cached). The server runs with
``max_in_flight`` = clients, so nothing is turned away with 503, on ``workers`` threads (`declrag serve --workers`; by
default one per client; several counts give one server each, measured back to back, their arms tagged ``workers=N``),
and a long timeout, so slow answers are measured rather than cut off. After the duration no new request starts; those
in flight are waited for and counted. ``server`` names the event loop and HTTP parser uvicorn ran with (uvloop and
httptools when installed).
"""

from __future__ import annotations

import contextlib
import http.client
import importlib
import itertools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.metrics.stats import percentiles

from .rounds import print_rounds, summary
from .servers import run_script

SCENARIOS = ("retrieval", "program", "search")
SCRIPTED_ANSWER = {"answer": "It is stated in the passage [1]."}
SERVER_TIMEOUT_S = 600.0


def _scripted_lm_factory():
    """One instant scripted LM per thread (DSPy's DummyLM is not safe to share between threads)."""
    from declrag.testing import ScriptedLM

    local = threading.local()

    def get():
        if not hasattr(local, "lm"):
            local.lm = ScriptedLM({}, SCRIPTED_ANSWER)
        return local.lm

    return get


def _program(scenario: str, store: str, embed: tuple[str, Path] | None = None):
    """The program of a scenario and the LM override it runs under (None: its configured route). ``embed``
    (backend, folder): the query embedder runs that backend with an empty embedding cache in the folder, so
    that every new question is embedded (the ``--embed-backend`` arms)."""
    from declrag.config import ProgramConfig
    from declrag.embed.embedder import Embedder, EmbeddingCache
    from declrag.pipeline.program import RAGProgram, default_program
    from declrag.stores import read_meta

    if scenario in ("retrieval", "search"):
        if (meta := read_meta(store)) is None:
            raise ValueError(f"no index at {store}: the {scenario} scenario runs on an existing one")
        embedder = None
        if embed:
            backend, folder = embed
            embedder = Embedder(meta.ingest.embedder.model_copy(update={"backend": backend}),
                                cache=EmbeddingCache(folder / f"embeddings-{backend}.sqlite3"))
        return RAGProgram(ProgramConfig(ingest=meta.ingest), store=store, embedder=embedder), \
            _scripted_lm_factory()
    if scenario == "program":
        return default_program(store, model="local/smollm2"), None
    raise ValueError(f"unknown scenario {scenario!r}; use one of {SCENARIOS}")


def _pct(xs: list[float], q: float) -> float | None:
    return percentiles(xs, (q,))[f"p{q:g}"]


def _direct(scenario: str, store: str, questions: list[str], budget_s: float, lm_cache: Path) -> dict[str, Any]:
    """Sequential in-process calls on the first questions, for at most ``budget_s`` (at least 3 calls)."""
    from declrag.lm import use_lm_cache, using_lm

    use_lm_cache(lm_cache)
    prog, lm = _program(scenario, store)
    limit = 12 if scenario == "program" else 200
    call = prog.search if scenario == "search" else (lambda q: prog(question=q))
    with using_lm(lm()) if lm else nullcontext():
        call(questions[-1])  # warm-up: models loaded, not timed
        times, t_end = [], time.perf_counter() + budget_s
        for q in questions[:limit]:
            t0 = time.perf_counter()
            call(q)
            times.append(1000 * (time.perf_counter() - t0))
            if time.perf_counter() > t_end and len(times) >= 3:
                break
    return {"n": len(times), "p50_ms": _pct(times, 50)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(scenario: str, store: str, clients: int, lm_cache: Path, workers: int | None = None,
                  env: dict[str, str] | None = None, processes: int = 1,
                  embed: str | None = None, record: Path | None = None) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "declrag_bench.served", "--scenario", scenario, "--store", store,
                             "--port", str(port), "--max-in-flight", str(clients), "--lm-cache", str(lm_cache),
                             *(["--workers", str(workers)] if workers else []), "--processes", str(processes),
                             *(["--embed-backend", embed] if embed else []),
                             *(["--record", str(record)] if record else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None  # stderr=PIPE
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 600
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the benchmark server exited: {proc.stderr.read()[-2000:]}")
        try:  # several processes: ready when 20 requests in a row, on new connections, found one that is ready
            tries = 20 if processes > 1 else 1
            if all(httpx.get(base + "/readyz", timeout=5).status_code == 200 for _ in range(tries)):
                return proc, base
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the benchmark server did not become ready within 600 s")
        time.sleep(0.25)


def _rows(db: Path) -> int:
    from declrag.usage import UsageStore

    store = UsageStore(db, create=False)
    try:
        return store.counts()["answers"]
    finally:
        store.close()


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _ask(c: http.client.HTTPConnection, question: str, stream: bool,
         search: bool = False) -> tuple[float | None, dict | None]:
    """One question on a keep-alive connection: (seconds to the first piece of the answer, the final response), or
    (_, None) on an error status. Streamed: the first piece is the first ``delta`` event (or the ``answer``, when
    nothing streamed); plain JSON: the whole response. ``search``: ``/v1/search`` (JSON) instead of ``/v1/ask``."""
    t0, first, event, final = time.perf_counter(), None, None, None
    body = {"query": question} if search else {"question": question, "stream": True} if stream else \
        {"question": question}
    c.request("POST", "/v1/search" if search else "/v1/ask", json.dumps(body).encode(),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        return None, None
    if not stream:
        final = json.loads(r.read())
        return time.perf_counter() - t0, final
    while line := r.readline():
        line = line.rstrip(b"\r\n")
        if line.startswith(b"event: "):
            event = line[len(b"event: "):]
        elif line.startswith(b"data: ") and event == b"delta" and first is None:
            first = time.perf_counter() - t0
        elif line.startswith(b"data: ") and event == b"answer":
            final = json.loads(line[len(b"data: "):])
            first = time.perf_counter() - t0 if first is None else first  # an empty answer: nothing streamed
    return first, final


def _own_cpu_s() -> float:
    """CPU seconds (user + system) of this process: the load generator's."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _proc_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) of process ``pid`` and its live children (the server processes of a
    ``--processes`` server) (Linux's /proc; None elsewhere, or without a pid)."""
    if pid is None:
        return None

    def stat(p: int | str) -> list[str] | None:
        try:
            return Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None

    if (own := stat(pid)) is None:
        return None
    kids = [f for d in os.listdir("/proc") if d.isdigit() and (f := stat(d)) is not None and f[1] == str(pid)]
    return sum(int(f[11]) + int(f[12]) for f in [own, *kids]) / os.sysconf("SC_CLK_TCK")


def _load(base: str, questions: list[str], clients: int, duration_s: float, stream: bool = True,
          server_pid: int | None = None, search: bool = False) -> dict[str, Any]:
    """``clients`` threads asking in a loop until ``duration_s`` has passed; in-flight requests finish. With
    ``search``, ``/v1/search`` (JSON, never streamed) and every question once at most: the arm also ends when
    they run out."""
    stream = stream and not search
    host, port = base.removeprefix("http://").rsplit(":", 1)
    counter, lock = itertools.count(), threading.Lock()
    rows: list[tuple[float, float | None, float]] = []  # (client ms, server program ms, first piece ms) of successes
    errors = [0]
    cpu0, server0 = _own_cpu_s(), _proc_cpu_s(server_pid)
    start = time.perf_counter()
    stop_at, last_done = start + duration_s, [start]

    def client() -> None:
        c = http.client.HTTPConnection(host, int(port), timeout=SERVER_TIMEOUT_S + 30)
        try:
            while time.perf_counter() < stop_at:
                with lock:
                    i = next(counter)
                if search and i >= len(questions):
                    return  # every question asked once: no repeats
                q = questions[i % len(questions)]
                t0 = time.perf_counter()
                try:
                    first, final = _ask(c, q, stream, search)
                except (OSError, http.client.HTTPException, ValueError):
                    first, final = None, None
                    c.close()  # a fresh connection for the next request
                t1 = time.perf_counter()
                with lock:
                    if final is not None and first is not None:
                        rows.append((1000 * (t1 - t0), final["latency_ms"].get("total"), 1000 * first))
                    else:
                        errors[0] += 1
                    last_done[0] = max(last_done[0], t1)
        finally:
            c.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = last_done[0] - start
    cpu1, server1 = _own_cpu_s(), _proc_cpu_s(server_pid)
    n = len(rows) + errors[0]
    lat, first = [a for a, _, _ in rows], [f for _, _, f in rows]
    prog_ms = [b for _, b, _ in rows if b is not None]
    return {"clients": clients, "stream": stream, "requests": n,
            "questions_exhausted": search and next(counter) > len(questions),
            "p50_ms": _pct(lat, 50), "p95_ms": _pct(lat, 95),
            "p99_ms": _pct(lat, 99), "first_token_p50_ms": _pct(first, 50), "first_token_p95_ms": _pct(first, 95),
            "rps": round(len(rows) / wall, 2) if wall > 0 else 0.0, "errors": errors[0],
            "wall_s": round(wall, 1), "server_program_p50_ms": _pct(prog_ms, 50),
            "http_overhead_p50_ms": _pct([a - b for a, b, _ in rows if b is not None], 50),
            # CPU per request: the load generator's (this process) and the server's, on the same cores
            "client_cpu_ms": round(1000 * (cpu1 - cpu0) / n, 3) if n else None,
            "server_cpu_ms": round(1000 * (server1 - server0) / n, 3)
            if n and server0 is not None and server1 is not None else None}


def _server_stack() -> dict[str, str]:
    """The event loop and HTTP parser uvicorn picks (its "auto" settings, as `declrag serve` runs it): uvloop
    and httptools when they import, else asyncio and h11."""

    def imports(module: str) -> bool:
        try:
            importlib.import_module(module)
        except ImportError:
            return False
        return True

    return {"loop": "uvloop" if imports("uvloop") else "asyncio",
            "http": "httptools" if imports("httptools") else "h11"}


TRACING = ("off", "unreachable", "jaeger")  # the server's traces: none, to a receiver that is down, to a real Jaeger


def _tracing_envs(tracing: tuple[str, ...], stack: contextlib.ExitStack) -> dict[str, dict[str, str]]:
    """The server's environment per tracing arm (`declrag.runtime.tracing` reads OTEL_EXPORTER_OTLP_ENDPOINT); "jaeger"
    starts one (scripts/jaeger.sh), stopped when ``stack`` closes."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    envs = {"off": base, "unreachable": {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}}
    if "jaeger" in tracing:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="declrag-bench-jaeger-"))
        query = run_script("jaeger.sh", "start", "--dir", folder, "--port", str(_free_port()))
        stack.callback(run_script, "jaeger.sh", "stop", "--dir", folder)
        host, _, port = query.rpartition(":")
        envs["jaeger"] = {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": f"{host}:{int(port) - 1}"}  # OTLP/HTTP: query - 1
    return {t: envs[t] for t in tracing}


def run(duration_s: float = 20.0, clients: int = 16, scenarios: tuple[str, ...] = SCENARIOS, n_docs: int = 200,
        dataset: str = "squad-v2.0", progress: bool = True,
        workers: tuple[int | None, ...] = (None,), tracing: tuple[str, ...] = ("off",),
        processes: tuple[int, ...] = (1,), embed: tuple[str | None, ...] = (None,),
        record: tuple[str, ...] = ("off",), rounds: int = 1) -> dict[str, Any]:
    from declrag.config import IngestConfig
    from declrag.embed.embedder import Embedder
    from declrag.golden import load_golden
    from declrag.ingest.corpus import corpus_store
    from declrag.lm import use_lm_cache
    from declrag.runtime.folders import cache_dir

    gs = load_golden(dataset)
    docs = gs.documents[:n_docs]
    store, _ = corpus_store(docs, IngestConfig(), f"{gs.name}-head", progress=progress)
    ids = {d.id for d in docs}
    questions = list(dict.fromkeys(e.question for split in gs.splits.values() for e in split
                                   if e.gold and set(e.gold) <= ids))
    # search asks each question once: those about the indexed paragraphs first, then the set's others
    distinct = list(dict.fromkeys([*questions, *(e.question for split in gs.splits.values() for e in split)])) \
        if "search" in scenarios else questions
    Embedder(IngestConfig().embedder).embed_queries(distinct)  # both sides find every query embedding cached
    out: dict[str, Any] = {"dataset": gs.name, "documents": len(docs), "chunks": store.count(),
                           "questions": len(questions), "search_questions": len(distinct), "duration_s": duration_s,
                           "server": _server_stack(),
                           "load_average": [round(x, 2) for x in os.getloadavg()], "scenarios": {}}
    path = store.uri
    try:
        with tempfile.TemporaryDirectory(prefix="declrag-bench-serve-") as tmp, contextlib.ExitStack() as stack:
            envs = _tracing_envs(tracing, stack)
            for sc in scenarios:
                asked = distinct if sc == "search" else questions
                direct = _direct(sc, path, asked, duration_s, Path(tmp) / f"{sc}-direct")
                results = {}
                # one server per worker-thread count, process count and tracing arm, measured back to back
                for k, w, n, (t, env), b, rec in itertools.product(range(1, rounds + 1), workers, processes,
                                                                   envs.items(), embed, record):  # round by round
                    db = Path(tmp) / f"{sc}-{w}-{n}-{t}-{b}-{k}-usage.sqlite3" if rec == "on" else None
                    proc, base = _start_server(sc, path, clients, Path(tmp) / f"{sc}-server", w, env, n, b, db)
                    tag = (f" workers={w}" if len(workers) > 1 else "") + (f" processes={n}" if len(processes) > 1
                                                                             else "") + \
                        (f" tracing={t}" if len(envs) > 1 else "") + (f" embed={b}" if b else "") + \
                        (f" record={rec}" if len(record) > 1 else "") + (f" round={k}" if rounds > 1 else "")
                    try:
                        # retrieval: plain JSON requests (what a search client sends), then streamed ones
                        arms = {sc: False, f"{sc}/stream": True} if sc == "retrieval" else \
                            {sc: False} if sc == "search" else {sc: True}
                        for arm, stream in arms.items():
                            results[arm + tag] = {**_load(base, asked, clients, duration_s, stream, proc.pid,
                                                          search=sc == "search"), "workers": w or clients,
                                                  "processes": n, "embed_backend": b, "record": rec}
                    finally:
                        _stop(proc)  # SIGTERM: what the recorder has queued is written first
                    if db is not None:  # the rows written: every answer of the arms run on this server
                        results[next(iter(arms)) + tag]["recorded"] = _rows(db)
                d50 = direct["p50_ms"]
                for arm, r in results.items():
                    r["direct_p50_ms"], r["direct_calls"] = d50, direct["n"]
                    # what HTTP and serialization add to each request, against a direct Python call of the program
                    r["overhead_ratio"] = round(r["http_overhead_p50_ms"] / d50, 4) \
                        if r.get("http_overhead_p50_ms") is not None and d50 else None
                    r["queueing_ratio"] = round((r["p50_ms"] - d50) / d50, 3) \
                        if r["p50_ms"] is not None and d50 else None
                    out["scenarios"][arm] = r
    finally:
        use_lm_cache(cache_dir() / "dspy")  # back to the shared LM cache
    if rounds > 1:
        out["rounds"] = summary(out["scenarios"])
    return out


def print_report(r: dict[str, Any], console: Console) -> None:
    stack = r.get("server") or {}
    t = Table(title=f"declrag serve under load: {r['dataset']} ({r['documents']} documents, {r['chunks']:,} chunks), "
                    f"{r['duration_s']:g} s per arm, loopback, uvicorn on {stack.get('loop', '?')} + "
                    f"{stack.get('http', '?')}")
    for col in ("scenario", "clients", "requests", "first token p50 ms", "first token p95 ms", "p50 ms", "p95 ms",
                "p99 ms", "rps", "errors", "direct p50 ms", "overhead ratio", "in program p50 ms",
                "server adds p50 ms", "server CPU ms/req", "client CPU ms/req"):
        t.add_column(col, justify="left" if col == "scenario" else "right")

    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    for name, s in r["scenarios"].items():
        t.add_row(name, str(s["clients"]), str(s["requests"]), f(s.get("first_token_p50_ms")),
                  f(s.get("first_token_p95_ms")), f(s["p50_ms"]), f(s["p95_ms"]), f(s["p99_ms"]),
                  f(s["rps"], "{:.2f}"), str(s["errors"]), f(s["direct_p50_ms"]), f(s["overhead_ratio"], "{:.3f}"),
                  f(s["server_program_p50_ms"]), f(s["http_overhead_p50_ms"]), f(s.get("server_cpu_ms"), "{:.2f}"),
                  f(s.get("client_cpu_ms"), "{:.2f}"))
    console.print(t)
    if r.get("rounds"):
        print_rounds(r["rounds"], console)
    if exhausted := [n for n, s in r["scenarios"].items() if s.get("questions_exhausted")]:
        console.print(f"{', '.join(exhausted)}: every question was asked once before the duration ended; the arm "
                      "stopped there (no repeats).", style="dim")
    console.print("'retrieval' and 'search' (/v1/search, no LM) ask plain JSON requests, 'retrieval/stream' and "
                  "'program' stream: 'first token' is the "
                  "time to the first piece of the answer (the whole response for JSON), p50/p95/p99 the time to the "
                  "whole answer. overhead ratio = server adds (client latency - time in the program) / direct p50: "
                  "the cost of HTTP and serialization. With many clients on two cores, latency is mostly waiting for "
                  "the other requests ('in program' includes that wait); 'retrieval' uses an instant scripted LM, "
                  "which does not stream (its first piece is the whole answer). The load generator runs on the same "
                  f"cores (client CPU per request); load average at the start: {r.get('load_average', '?')}.",
                  style="dim")
