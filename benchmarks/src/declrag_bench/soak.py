"""`declrag bench soak`: does a server that runs for weeks stay within its memory and disk? A real `declrag
serve` subprocess on loopback (the program over SQuAD v2.0's first paragraphs, real MiniLM query embeddings,
its LM an instant OpenAI-compatible stand-in, `declrag.testing._standin`, so that the server is what is
measured; ``model="local/smollm2"`` runs the local model at its own pace instead) under ``clients`` keep-alive
clients for ``duration_s`` seconds, with questions that never repeat: every question of SQuAD v1.1, v2.0 and
SciFact (about 23,000), then seeded recombinations of two of them.

Every route is asked: ``/v1/ask`` plain and streaming, ``/v1/chat/completions`` plain and streaming (with the
served model's name, from ``GET /v1/models``), ``/v1/search``; and about 10% hostile requests (broken JSON, a
lone surrogate, a 120 kB question, a wrong key, a blank question, a bad filter), each of which must get a 4xx.
Every 10 s a sampler records the server's resident memory (in all, and per process: ``--serve-arg=--processes=2``
runs two server processes under a supervisor), open file descriptors and threads, the bytes of its
cache folder's parts (DSPy's response cache, the query-embedding SQLite file with its WAL) and the cache gauges
of ``/metrics``, and the bytes of the usage store the server records to (``--record``: a fresh one in the run's
folder, unless ``--serve-arg`` says ``--record`` or ``--no-record``). The server's cache folder (``DECLRAG_CACHE``)
is a fresh one per run.

``callers=N`` serves N callers (`declrag serve --keys`, `declrag_bench.soak_callers`), each client asking as one of
them; every response is checked for a document its caller may not read (``leaks``, of ``checked`` responses).

``summary``: ``distinct_questions`` (answered with 200), ``rss_mb_start`` (ready, before load),
``rss_mb_after_warmup`` (at ``warmup_s``: minute 5, or a quarter of the run when it is shorter than 20 minutes),
``rss_mb_end``, ``growth_pct`` (end against after-warmup), ``processes`` (the same per process),
``growth_mb_per_10k_questions`` (after warm-up),
``status_counts`` (by route), ``errors`` (5xx and dropped connections), ``hostile_not_4xx``, and the usage store's
``usage_bytes_end``, ``usage_bytes_max`` and ``usage_rows_end`` (answers it holds once the server stopped)."""

from __future__ import annotations

import http.client
import json
import os
import random
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .serve import _free_port, _stop
from .soak_callers import Callers, labelled

KEY = "soak-key"
ROUTES = (("ask", 25), ("ask/stream", 20), ("chat", 15), ("chat/stream", 15), ("search", 15), ("hostile", 10))
HOSTILE = ("broken-json", "lone-surrogate", "huge-question", "wrong-key", "blank-question", "bad-filter")
SAMPLE_S = 10.0
USAGE = "usage.sqlite3"  # the server's usage store, in the run's folder (`declrag serve --record`)


class Questions:
    """Questions that never repeat: the sets' own, then seeded recombinations (the first half of one with the
    second half of another), each checked against every one given out before (a numbered variant when 100
    tries find nothing new). Safe across threads."""

    def __init__(self, base: list[str], seed: int = 0):
        self.base, self.rng, self.seen = base, random.Random(seed), set(base)
        self.i, self.lock = 0, threading.Lock()

    def next(self) -> str:
        with self.lock:
            self.i += 1
            if self.i <= len(self.base):
                return self.base[self.i - 1]
            for _ in range(100):
                a, b = self.rng.choice(self.base).split(), self.rng.choice(self.base).split()
                q = " ".join(a[: max(1, len(a) // 2)] + b[len(b) // 2:])
                if q not in self.seen:
                    break
            else:  # a base too uniform to recombine into anything new: numbered variants
                q = f"{self.rng.choice(self.base)} ({self.i})"
            self.seen.add(q)
            return q


def load_questions(datasets: tuple[str, ...] = ("squad-v1.1", "squad-v2.0", "scifact")) -> list[str]:
    from declrag.golden import load_golden

    out: dict[str, None] = {}
    for name in datasets:
        gs = load_golden(name)
        out.update((e.question.strip(), None) for split in gs.splits.values() for e in split if e.question.strip())
    return list(out)


def _hostile(kind: str, question: str, model: str, key: str) -> tuple[str, bytes, dict[str, str]]:
    """(path, body, headers) of a hostile request of ``kind``."""
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if kind == "broken-json":
        return "/v1/ask", b'{"question": "' + question.encode()[:40], auth
    if kind == "lone-surrogate":
        return "/v1/ask", b'{"question": "why \\ud800 here?"}', auth
    if kind == "huge-question":
        return "/v1/ask", json.dumps({"question": "why " * 30_000}).encode(), auth
    if kind == "wrong-key":
        return "/v1/ask", json.dumps({"question": question}).encode(), {**auth, "Authorization": "Bearer nope"}
    if kind == "blank-question":
        return "/v1/chat/completions", json.dumps({"model": model, "messages": [{"role": "user",
                                                                                   "content": "  "}]}).encode(), auth
    return "/v1/ask", json.dumps({"question": question, "where": {"year": {"$regex": "x"}}}).encode(), auth


def _request(route: str, question: str, model: str, rng: random.Random,
             key: str = KEY) -> tuple[str, bytes, dict[str, str]]:
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    stream = route.endswith("/stream")
    if route.startswith("ask"):
        return "/v1/ask", json.dumps({"question": question, "stream": stream}).encode(), auth
    if route.startswith("chat"):
        return "/v1/chat/completions", json.dumps({"model": model, "stream": stream, "messages": [
            {"role": "user", "content": question}]}).encode(), auth
    if route == "search":
        return "/v1/search", json.dumps({"query": question}).encode(), auth
    return _hostile(rng.choice(HOSTILE), question, model, key)


def _send(c: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """One request on a keep-alive connection; the whole response read (a stream to its end): status and body."""
    c.request("POST", path, body, headers)
    r = c.getresponse()
    data = r.read()
    if r.getheader("connection", "").lower() == "close":
        c.close()
    return r.status, data


class Load:
    """``clients`` threads asking until ``stop`` is set; counts by route and status, distinct answered."""

    def __init__(self, base: str, questions: Questions, clients: int, model: str, seed: int = 0,
                 callers: Callers | None = None):
        self.host, port = base.removeprefix("http://").rsplit(":", 1)
        self.port, self.questions, self.clients, self.model = int(port), questions, clients, model
        self.status: Counter[str] = Counter()
        self.answered = self.requests = self.dropped = 0
        self.hostile_not_4xx = self.leaks = self.checked = 0
        self.callers = callers
        self.key = callers.keys[0] if callers is not None else KEY  # for the routes that answer no question
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.seed = seed
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def _client(self, n: int) -> None:
        rng = random.Random(self.seed * 1000 + n)
        names, weights = zip(*ROUTES)
        c = http.client.HTTPConnection(self.host, self.port, timeout=300)
        who = n % len(self.callers.keys) if self.callers is not None else 0
        key = self.callers.keys[who] if self.callers is not None else KEY
        while not self.stop.is_set():
            route = rng.choices(names, weights)[0]
            q = self.questions.next()
            path, body, headers = _request(route, q, self.model, rng, key)
            try:
                status, data = _send(c, path, body, headers)
            except (OSError, http.client.HTTPException):
                status, data = 0, b""
                c.close()
            leaked = self.callers.leaked(who, data) if self.callers is not None else 0
            with self.lock:
                self.leaks += leaked
                self.checked += self.callers is not None
                self.requests += 1
                self.status[f"{route} {status or 'dropped'}"] += 1
                if status == 0:
                    self.dropped += 1
                if status == 200 and route != "hostile":
                    self.answered += 1
                if route == "hostile" and not 400 <= status < 500:
                    self.hostile_not_4xx += 1
            if status == 503:
                time.sleep(0.05)  # admission refused: as a polite client, a short pause
        c.close()


def folder_bytes(root: Path) -> dict[str, int]:
    """Bytes of the cache folder's parts: ``dspy`` (DSPy's response cache), ``embeddings`` (the SQLite file and
    its WAL/SHM), ``other``."""
    out = {"dspy": 0, "embeddings": 0, "other": 0}
    for p in root.rglob("*"):
        try:
            size = p.stat().st_size if p.is_file() else 0
        except OSError:
            continue
        rel = p.relative_to(root).parts
        out["dspy" if rel[0] == "dspy" else "embeddings" if rel[0].startswith("embeddings.sqlite3") else "other"] \
            += size
    return out


def usage_bytes(folder: Path) -> int:
    """Bytes of the usage store the server records to (the SQLite file with its WAL and SHM)."""
    return sum(p.stat().st_size for p in folder.glob(USAGE + "*") if p.is_file())


def usage_rows(folder: Path) -> int | None:
    """The answers the usage store holds once the server has stopped (None: it records elsewhere, or nothing)."""
    from declrag.usage import UsageStore

    if not (folder / USAGE).exists():
        return None
    store = UsageStore(folder / USAGE, create=False)
    try:
        return store.counts()["answers"]
    finally:
        store.close()


def _metrics_gauges(base: str, key: str = KEY) -> dict[str, float]:
    import httpx

    try:
        text = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30).text
    except httpx.HTTPError:
        return {}
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
            if line.startswith(("declrag_cache_", "declrag_usage_")) and " " in line}


def sample(pid: int, cache: Path, base: str, load: Load, t0: float) -> dict[str, Any]:
    """The server's resident memory, file descriptors and threads, summed over its process and their children
    (the server processes of ``--serve-arg=--processes=N``); ``rss_mb_by_process`` per process id."""
    import psutil

    rss, fds, threads = {}, 0, 0
    root = psutil.Process(pid)
    for p in [root, *root.children(recursive=True)]:
        try:
            with p.oneshot():
                rss[str(p.pid)] = round(p.memory_info().rss / 2**20, 1)
                fds, threads = fds + p.num_fds(), threads + p.num_threads()
        except psutil.Error:  # a child that ended between the listing and the reading
            continue
    with load.lock:
        counts = {"requests": load.requests, "distinct_questions": load.answered}
    return {"t_s": round(time.monotonic() - t0, 1), **counts, "rss_mb": round(sum(rss.values()), 1),
            "rss_mb_by_process": rss, "fds": fds, "threads": threads, "cache_bytes": folder_bytes(cache),
            "usage_bytes": usage_bytes(cache.parent),
            "gauges": _metrics_gauges(base, load.key)}


def per_process(start: dict[str, Any], warm: dict[str, Any], end: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """RSS of each process that lived from the start to the end (MB at the start, after warm-up and at the end, and
    its growth after warm-up, %): a server of several processes keeps its bound in each."""
    out = {}
    for pid, mb in end.get("rss_mb_by_process", {}).items():
        w, s = warm.get("rss_mb_by_process", {}).get(pid), start.get("rss_mb_by_process", {}).get(pid)
        if w and s is not None:
            out[pid] = {"rss_mb_start": s, "rss_mb_after_warmup": w, "rss_mb_end": mb,
                        "growth_pct": round(100 * (mb - w) / w, 2)}
    return out


def _program_file(folder: Path, lm_port: int) -> Path:
    cfg = {"lm": {"route": "openai/standin", "api_base": f"http://127.0.0.1:{lm_port}/v1", "num_retries": 0,
                  "adapter": "plain", "timeout_s": 60}}
    (path := folder / "program.json").write_text(json.dumps(cfg))
    return path


def _serve(folder: Path, store: str, cfg: Path, model: str | None, max_in_flight: int, extra: list[str],
           keys: Path | None = None):
    """`declrag serve` in a subprocess with its own cache folder, behind the one key (or the callers of ``keys``);
    (process, base URL) once ready."""
    import subprocess
    import sys

    import httpx

    port = _free_port()
    (folder / "key").write_text(KEY)
    if not any(a in ("--record", "--no-record") or a.startswith("--record=") for a in extra):
        extra = ["--record", str(folder / USAGE), *extra]  # a fresh usage store per run, as the cache folder is
    env = {**os.environ, "DECLRAG_CACHE": str(folder / "cache"), "OPENAI_API_KEY": "standin",
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "declrag.cli", "serve", "--config", str(cfg), "--store", store, "--port", str(port),
           "--max-in-flight", str(max_in_flight),
           *(["--keys", str(keys)] if keys is not None else ["--api-key-file", str(folder / "key")]),
           *(["--model", model] if model else []), *extra]
    log = (folder / "serve.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"declrag serve exited: {(folder / 'serve.log').read_text()[-2000:]}")
        try:
            if httpx.get(base + "/readyz", timeout=5).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    proc.kill()
    raise RuntimeError("declrag serve did not become ready within 600 s")


def _served_model(base: str, key: str = KEY) -> str:
    import httpx

    r = httpx.get(base + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return r.json()["data"][0]["id"]


def _warm_up_question(base: str, model: str, key: str = KEY) -> None:
    """One chat request before the clock starts: the program's lazy parts (the embedding model) are loaded."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=300)
    _send(c, "/v1/ask", json.dumps({"question": "What is this about?"}).encode(),
          {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    c.close()


def run(duration_s: float = 1200.0, clients: int = 16, model: str | None = None, n_docs: int = 200,
        max_in_flight: int = 8, seed: int = 0, serve_args: tuple[str, ...] = (),
        questions: list[str] | None = None, store: str | None = None, progress: bool = True,
        callers: int = 0) -> dict[str, Any]:
    """The soak (see the module docstring); ``store`` (default: SQuAD v2.0's first ``n_docs`` paragraphs, indexed
    once) and ``questions`` (default: `load_questions`) are for tests; ``callers``: served to that many callers
    (0: behind one key)."""
    from declrag.testing import _standin as standin

    if store is None:
        from declrag.config import IngestConfig
        from declrag.golden import load_golden
        from declrag.ingest.corpus import corpus_store

        gs = load_golden("squad-v2.0")
        store = corpus_store(gs.documents[:n_docs], IngestConfig(), f"{gs.name}-head", progress=progress)[0].uri
    qs = Questions(questions if questions is not None else load_questions(), seed)
    warmup_s = 300.0 if duration_s >= 1200 else duration_s / 4
    with tempfile.TemporaryDirectory(prefix="declrag-soak-") as tmp:
        folder = Path(tmp)
        lm_port = _free_port()
        store, keys, who = labelled(store, folder, callers) if callers else (store, None, None)
        lm = standin.start(lm_port)
        try:
            proc, base = _serve(folder, store, _program_file(folder, lm_port), model, max_in_flight,
                                list(serve_args), keys)
            try:
                key = who.keys[0] if who is not None else KEY
                served = _served_model(base, key)
                _warm_up_question(base, served, key)
                samples, load = [], Load(base, qs, clients, served, seed, who)
                t0 = time.monotonic()
                samples.append(sample(proc.pid, folder / "cache", base, load, t0))
                load.start()
                while (left := duration_s - (time.monotonic() - t0)) > 0:
                    time.sleep(min(SAMPLE_S, left))
                    samples.append(sample(proc.pid, folder / "cache", base, load, t0))
                    if progress:
                        s = samples[-1]
                        print(f"{s['t_s']:7.0f} s  {s['requests']:8d} requests  {s['distinct_questions']:7d} "
                              f"distinct  RSS {s['rss_mb']:7.1f} MB  fds {s['fds']}  threads {s['threads']}  "
                              f"cache {sum(s['cache_bytes'].values()) / 2**20:.1f} MB  "
                              f"usage store {s['usage_bytes'] / 2**20:.1f} MB", flush=True)
                load.join()
                samples.append(sample(proc.pid, folder / "cache", base, load, t0))
            finally:
                _stop(proc)  # SIGTERM: the recorder writes what it has queued first
            rows = usage_rows(folder)
        finally:
            lm.terminate()
            lm.wait()
    return {"duration_s": duration_s, "clients": clients, "model": model or "instant stand-in (openai/standin)",
            "served_model": served, "server_pid": proc.pid, "documents": n_docs, "max_in_flight": max_in_flight,
            "warmup_s": warmup_s,
            "serve_args": list(serve_args), "callers": callers, "load_average": [round(x, 2) for x in os.getloadavg()],
            "summary": {**summarize(samples, load, warmup_s), "usage_rows_end": rows}, "samples": samples}


def summarize(samples: list[dict], load: Load, warmup_s: float) -> dict[str, Any]:
    start = samples[0]
    warm = min(samples, key=lambda s: abs(s["t_s"] - warmup_s))
    end = samples[-1]
    grew, asked = end["rss_mb"] - warm["rss_mb"], end["distinct_questions"] - warm["distinct_questions"]
    fivexx = sum(n for k, n in load.status.items() if k.split()[-1].startswith("5") and not k.endswith(" 503"))
    return {"distinct_questions": end["distinct_questions"], "requests": end["requests"],
            "rss_mb_start": start["rss_mb"], "rss_mb_after_warmup": warm["rss_mb"], "after_warmup_at_s": warm["t_s"],
            "rss_mb_end": end["rss_mb"], "rss_mb_max": max(s["rss_mb"] for s in samples),
            "growth_pct": round(100 * grew / warm["rss_mb"], 2) if warm["rss_mb"] else None,
            "growth_mb_per_10k_questions": round(10_000 * grew / asked, 2) if asked else None,
            "processes": per_process(start, warm, end),
            "fds_start": start["fds"], "fds_end": end["fds"], "threads_start": start["threads"],
            "threads_end": end["threads"], "cache_bytes_end": end["cache_bytes"],
            "usage_bytes_end": end.get("usage_bytes"), "usage_bytes_max": max(s.get("usage_bytes", 0) for s in samples),
            "status_counts": dict(sorted(load.status.items())),
            "errors": {"5xx": fivexx, "dropped": load.dropped}, "hostile_not_4xx": load.hostile_not_4xx,
            **({"leaks": load.leaks, "checked": load.checked} if load.callers is not None else {})}


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """``out/soak-<time>.json`` and ``.png`` (RSS over requests)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"soak-{time.strftime('%Y%m%d-%H%M%S')}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = [s["requests"] for s in result["samples"]]
    ax.plot(xs, [s["rss_mb"] for s in result["samples"]], marker=".", label="server (all processes)")
    if len(pids := result["summary"].get("processes", {})) > 1:  # several server processes: each its own line
        for pid in pids:
            ax.plot(xs, [s.get("rss_mb_by_process", {}).get(pid) for s in result["samples"]], label=f"process {pid}")
        ax.legend()
    ax.set_xlabel("requests")
    ax.set_ylabel("server RSS (MB)")
    s = result["summary"]
    ax.set_title(f"declrag serve soak: {result['clients']} clients, {result['duration_s']:g} s, "
                 f"{s['distinct_questions']:,} distinct questions, growth {s['growth_pct']}%")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=100)
    plt.close(fig)
    return stem.with_suffix(".json"), stem.with_suffix(".png")


def print_report(r: dict[str, Any], console) -> None:
    s = r["summary"]
    console.print(f"soak: {r['clients']} clients, {r['duration_s']:g} s, LM {r['model']}; load average "
                  f"{r['load_average']}")
    console.print(f"distinct questions {s['distinct_questions']:,} of {s['requests']:,} requests; RSS start "
                  f"{s['rss_mb_start']} MB, after warm-up ({s['after_warmup_at_s']:g} s) {s['rss_mb_after_warmup']} "
                  f"MB, end {s['rss_mb_end']} MB: growth {s['growth_pct']}%, "
                  f"{s['growth_mb_per_10k_questions']} MB per 10,000 distinct questions")
    if len(procs := s.get("processes", {})) > 1:
        console.print("per process (RSS MB start / after warm-up / end, growth): " + "; ".join(
            f"{pid}: {p['rss_mb_start']} / {p['rss_mb_after_warmup']} / {p['rss_mb_end']}, {p['growth_pct']}%"
            for pid, p in procs.items()))
    console.print(f"fds {s['fds_start']} -> {s['fds_end']}, threads {s['threads_start']} -> {s['threads_end']}; "
                  f"cache folder bytes at the end {s['cache_bytes_end']}")
    if s.get("usage_rows_end") is not None:
        console.print(f"usage store: {s['usage_rows_end']:,} answers kept at the end; {s['usage_bytes_end']:,} "
                      f"bytes at the end, {s['usage_bytes_max']:,} at most")
    console.print(f"errors {s['errors']}; hostile requests not answered 4xx: {s['hostile_not_4xx']}")
    if "leaks" in s:
        console.print(f"{r['callers']} callers: {s['leaks']} documents named to a caller who may not read them, in "
                      f"{s['checked']:,} responses")
    console.print("status counts: " + ", ".join(f"{k}: {v}" for k, v in s["status_counts"].items()))

