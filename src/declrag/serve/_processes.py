"""`declrag serve --processes N`: N server processes on one port, under uvicorn's supervisor (it restarts one that
dies; the kernel spreads the connections), each loading the program once: a way past one interpreter lock.

Per process, as `declrag serve` documents them: admission (``--max-in-flight``, so the server admits N times as
many), the worker threads, the semantic answer cache and the process-wide caches' bounds. The store on disk is
opened by each process and only read. ``/metrics`` answers for the whole server: prometheus_client's multiprocess
mode (``PROMETHEUS_MULTIPROC_DIR``, a folder of this run) sums the counters and histograms of every process, and
``declrag_in_flight`` over the live ones; the cache gauges keep a ``pid`` label each.

The processes read what to serve from a file only this user can read (`spec`), written before they start and removed
when the server stops: the API key never travels in an environment variable or on a command line."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import uvicorn

from ..answering.selection import select_program
from ..lm import use_cache_limits
from ..runtime import tracing
from ..runtime.process_memory import bound_allocator, trim_periodically
from ._app import ServeSettings, create_app

SPEC_ENV = "DECLRAG_SERVE_SPEC"
MALLOC_ARENAS = 2  # glibc heaps a server's threads share (see `declrag.serve.serve`)


def run(spec: dict[str, Any], settings: ServeSettings, processes: int, factory: str = "declrag.serve._processes:app",
        log_level: str = "info") -> None:
    """Serve ``factory`` (an import path to a function that returns the app; it reads `spec`) in ``processes``
    processes until SIGTERM / Ctrl-C; each drains its requests in flight first."""
    with tempfile.TemporaryDirectory(prefix="declrag-serve-") as folder:
        os.chmod(folder, 0o700)
        (Path(folder) / "metrics").mkdir()
        key = settings.api_key.get_secret_value() if settings.api_key else None
        dumped = settings.model_dump(mode="json")
        if (a := settings.access) is not None and a.jwt_secret is not None:  # secrets travel in clear, to this file
            dumped["access"]["jwt_secret"] = a.jwt_secret.get_secret_value()
        spec_file = Path(folder) / "spec.json"
        spec_file.touch(mode=0o600)
        spec_file.write_text(json.dumps({**spec, "settings": {**dumped, "api_key": key}}))
        saved = {k: os.environ.get(k) for k in (SPEC_ENV, "PROMETHEUS_MULTIPROC_DIR")}
        os.environ[SPEC_ENV], os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(spec_file), str(Path(folder) / "metrics")
        try:
            uvicorn.run(factory, factory=True, workers=processes, host=settings.host, port=settings.port,
                        log_level=log_level, timeout_graceful_shutdown=int(settings.request_timeout_s) + 10)
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def spec() -> dict[str, Any]:
    """What this server process serves, as `run` wrote it."""
    return json.loads(Path(os.environ[SPEC_ENV]).read_text())


def app() -> Any:
    """One server process of `declrag serve --processes`: its process settings, then the app over its own copy of
    the program (loaded in the background; /readyz says when)."""
    s = spec()
    settings = ServeSettings.model_validate(s["settings"])
    tracing.configure(**s.get("tracing", {}))
    if settings.cache_limits is not None:
        use_cache_limits(settings.cache_limits)
    bound_allocator(MALLOC_ARENAS)
    trim_periodically(60.0, threading.Event())  # for the process's life
    choice = select_program(s.get("target"), s.get("config"), s.get("store"), s.get("model"),
                            answer_mode=s.get("answer_mode"))
    return create_app(choice.load, choice.name, choice.run, settings)


__all__ = ["SPEC_ENV", "app", "run", "spec"]
