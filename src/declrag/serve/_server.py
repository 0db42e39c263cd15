"""`declrag serve`: a program (a compiled run, a saved program, a config, or the default program over a
store) answering over HTTP. ``create_app`` builds the FastAPI app; ``serve`` resolves what to serve and
runs it under uvicorn until SIGTERM / Ctrl-C (requests in flight finish first)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn

from ..access import Access
from ..answering.selection import ProgramChoice, select_program
from ..errors import DeclragError
from ..lm import use_cache_limits
from ..runtime import tracing
from ..runtime.folders import default_store
from ..runtime.process_memory import bound_allocator, trim_periodically
from ..usage.recorder import said
from ._app import ServeSettings, create_app
from ._http_server import Server
from ._processes import MALLOC_ARENAS
from ._processes import run as run_processes


def resolve(target: str | Path | None = None, config: str | Path | None = None, store: str | Path | None = None,
            model: str | None = None, answer_mode: str | None = None) -> ProgramChoice:
    """What to serve: ``(name, run, description, loader, answers)``, decided as `declrag ask` and `eval` decide it
    (see `declrag.pipeline.saved.select_program`)."""
    return select_program(target, config, store, model, answer_mode=answer_mode)


def serve(target: str | Path | None = None, *, config: str | Path | None = None, store: str | Path | None = None,
          model: str | None = None, answer_mode: str | None = None, settings: ServeSettings | None = None,
          say: Callable[[str], None] = print, log_level: str = "info") -> None:
    """Serve until stopped. Raises `DeclragError` when the program cannot be loaded (the server stops)."""
    s = settings or ServeSettings()
    if s.cache_limits is not None:
        use_cache_limits(s.cache_limits)
    # a server runs for weeks: few malloc heaps, and their free parts handed back every minute (see
    # `declrag bench soak`); before the worker threads start
    bound_allocator(MALLOC_ARENAS)
    trimming = threading.Event()
    trim_periodically(60.0, trimming)
    access = s.access.build() if s.access is not None else None  # a bad keys file or JWKS: said before loading
    choice = resolve(target, config, store, model, answer_mode)  # cheap checks first: paths, config, store
    name, run, what, loader = choice.name, choice.run, choice.what, choice.load
    if s.record is not None and s.record.target is None:
        s = s.model_copy(update={"record": s.record.model_copy(update={"target": str(record_beside(run, store))})})
    if s.processes > 1:
        _say_serving(s, what, name, say, choice.answers, access)
        spec = {"target": None if target is None else str(target), "config": None if config is None else str(config),
                "store": None if store is None else str(store), "model": model, "answer_mode": answer_mode,
                "tracing": tracing.given()}
        try:
            run_processes(spec, s, s.processes, log_level=log_level)
        finally:
            trimming.set()
        say("stopped; requests in flight were answered first")
        return
    failed: list[BaseException] = []
    t0 = time.perf_counter()

    def on_load(error: BaseException | None) -> None:
        if error is None:
            say(f"ready: {name} loaded in {time.perf_counter() - t0:.1f} s")
            return
        failed.append(error)
        server.should_exit = True  # the server stops; serve() raises the error

    app = create_app(loader, name, run, s, on_load=on_load)
    server = Server(uvicorn.Config(app, host=s.host, port=s.port, log_level=log_level,
                                    timeout_graceful_shutdown=int(s.request_timeout_s) + 10))
    _say_serving(s, what, name, say, choice.answers, access)
    try:
        server.run()
    finally:
        trimming.set()
    if server.stopped_by:
        say("stopped; requests in flight were answered first")
    if failed and isinstance(failed[0], DeclragError):
        raise failed[0]
    if failed:
        raise DeclragError(f"could not load the program: {failed[0]}", hint="see the log above") from failed[0]


def record_beside(run: str | None, store: str | Path | None) -> Path:
    """Where `declrag serve` records by default: in the compile's run folder (``runs/NAME/usage.sqlite3``), else
    beside the local store it serves (``.declrag/store.usage.sqlite3``), else in ``./.declrag``."""
    if run and Path(run).name == "best":
        return Path(run).parent / "usage.sqlite3"
    where = str(store or default_store())
    if "://" not in where:
        return Path(where).with_name(Path(where).name + ".usage.sqlite3")
    return Path(".declrag") / "usage.sqlite3"


def _say_serving(s: ServeSettings, what: str, name: str, say: Callable[[str], None], answers: str,
                 access: Access | None = None) -> None:
    host = f"[{s.host}]" if ":" in s.host else s.host
    say(f"declrag serve: {what} as {name!r} on http://{host}:{s.port}/ (web page /, POST /v1/ask, "
        f"POST /v1/search, OpenAI-compatible /v1/chat/completions and /v1/models, /healthz, /readyz, /metrics)")
    say(answers)
    say(said(s.record))
    each = f" in each of {s.processes} processes" if s.processes > 1 else ""
    if access is not None:
        say(access.describe())
    say("auth: " + ("Bearer API key required" if s.api_key else "each caller's key or token" if access is not None
                    else "none (set DECLRAG_API_KEY or --api-key-file; --keys for callers who each see their own)")
        + f"; limits: {s.max_in_flight} in flight on {s.worker_threads} worker "
        f"threads{each}, {s.request_timeout_s:g} s per request, "
        f"{s.max_body_bytes} bytes per body; semantic cache: "
        + (f"on (cosine >= {s.cache_threshold}, {s.cache_size} answers)" if s.cache_threshold else "off"))
    if (c := s.cache_limits) is not None:
        say(f"caches: LM responses {c.lm_cache_entries} in memory, {c.lm_cache_disk_mb} MiB on disk; LM history "
            f"{c.lm_history} calls; embedding cache {c.embedding_rows} vectors")


