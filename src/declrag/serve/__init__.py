"""`declrag serve`: a program (a compiled run, a saved program, a config, or the default program over a
store) answering over HTTP. ``create_app`` builds the FastAPI app; ``serve`` resolves what to serve and
runs it under uvicorn until SIGTERM / Ctrl-C (requests in flight finish first)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from ..errors import DeclragError
from .app import DEFAULT_NAME, ServeSettings, create_app


def resolve(target: str | Path | None = None, config: str | Path | None = None, store: str | Path | None = None,
            model: str | None = None) -> tuple[str, str | None, str, Callable[[], Any]]:
    """What to serve: ``(name, run, description, loader)``. Checks everything cheap up front (paths, config
    syntax, the store's presence) so mistakes fail before the server starts; ``loader`` does the rest.

    ``target`` is a run folder (``runs/NAME``: its ``best`` program is served, named NAME) or a program
    folder (with ``program.json``; ``runs/NAME/best`` is named NAME, another folder by its own name).
    With none, ``config`` (served under the file's name) or the default program over ``store``."""
    from ..program import RAGProgram, default_program, load, read_config, with_model

    model = model or os.environ.get("DECLRAG_MODEL")
    if target is not None and config is not None:
        raise DeclragError("give a program folder or --config, not both", hint="a saved program already has its config")
    if target is not None:
        folder = Path(target)
        if (folder / "program.json").is_file():
            name = folder.resolve().parent.name if folder.resolve().name == "best" else folder.resolve().name
        elif (folder / "best" / "program.json").is_file():
            name, folder = folder.resolve().name, folder / "best"
        else:
            raise DeclragError(f"{target} is neither a run folder (with best/program.json) nor a program folder "
                               "(with program.json)", hint="point at runs/NAME or runs/NAME/best, as written by declrag compile")
        return name, str(folder), f"program {folder}", lambda: load(folder, store=store, model=model)
    if config is not None:
        cfg = read_config(config)
        cfg = with_model(cfg, model) if model else cfg
        return Path(config).stem, None, f"config {config}", lambda: RAGProgram(cfg, store=store)
    from ..api import default_store
    from ..stores import read_meta

    where = str(store or default_store())
    if read_meta(where) is None:
        raise DeclragError(f"no declrag store at {where}", hint="index documents first (declrag index PATH --store ...) "
                                                                "or pass --store / a program folder")
    return DEFAULT_NAME, None, f"the default program over {where}", lambda: default_program(where, model=model)


class _Server(uvicorn.Server):
    """uvicorn's server; a SIGTERM or Ctrl-C that stopped it gracefully ends `serve` normally (exit status 0)
    instead of being raised again once the server is down, as uvicorn does."""

    stopped_by: list[int] = []

    @contextlib.contextmanager
    def capture_signals(self):
        with super().capture_signals():
            yield
            captured = getattr(self, "_captured_signals", [])
            self.stopped_by = list(captured)
            captured.clear()


def serve(target: str | Path | None = None, *, config: str | Path | None = None, store: str | Path | None = None,
          model: str | None = None, settings: ServeSettings | None = None, say: Callable[[str], None] = print,
          log_level: str = "info") -> None:
    """Serve until stopped. Raises `DeclragError` when the program cannot be loaded (the server stops)."""
    s = settings or ServeSettings()
    name, run, what, loader = resolve(target, config, store, model)
    failed: list[BaseException] = []
    t0 = time.perf_counter()

    def on_load(error: BaseException | None) -> None:
        if error is None:
            say(f"ready: {name} loaded in {time.perf_counter() - t0:.1f} s")
            return
        failed.append(error)
        server.should_exit = True  # the server stops; serve() raises the error

    app = create_app(loader, name, run, s, on_load=on_load)
    server = _Server(uvicorn.Config(app, host=s.host, port=s.port, log_level=log_level,
                                    timeout_graceful_shutdown=int(s.request_timeout_s) + 10))
    host = f"[{s.host}]" if ":" in s.host else s.host
    say(f"declrag serve: {what} as {name!r} on http://{host}:{s.port}/ (web page /, POST /v1/ask, "
        f"OpenAI-compatible /v1/chat/completions and /v1/models, /healthz, /readyz, /metrics)")
    say("auth: " + ("Bearer API key required" if s.api_key else "none (set DECLRAG_API_KEY or --api-key-file)")
        + f"; limits: {s.max_in_flight} in flight, {s.request_timeout_s:g} s per request, "
        f"{s.max_body_bytes} bytes per body; semantic cache: "
        + (f"on (cosine >= {s.cache_threshold})" if s.cache_threshold else "off"))
    server.run()
    if server.stopped_by:
        say("stopped; requests in flight were answered first")
    if failed and isinstance(failed[0], DeclragError):
        raise failed[0]
    if failed:
        raise DeclragError(f"could not load the program: {failed[0]}", hint="see the log above") from failed[0]


__all__ = ["DEFAULT_NAME", "ServeSettings", "create_app", "resolve", "serve"]
