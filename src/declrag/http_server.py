"""The one uvicorn server class of declrag's HTTP servers: `declrag serve` and `declrag mcp --transport http`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn


class Server(uvicorn.Server):
    """uvicorn's server; a SIGTERM or Ctrl-C that stopped it gracefully ends `run` normally (exit status 0) instead
    of being raised again once the server is down, as uvicorn does. ``stopped_by``: the signals that stopped it."""

    stopped_by: list[int] = []

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            captured = getattr(self, "_captured_signals", [])
            self.stopped_by = list(captured)
            captured.clear()


__all__ = ["Server"]
