"""The one uvicorn server class of declrag's HTTP servers: `declrag serve` and `declrag mcp --transport http`."""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import Iterator

import uvicorn


def bearer_ok(authorization: bytes, key: str) -> bool:
    """Whether an ``Authorization`` header's value is ``Bearer <key>``, compared in constant time."""
    scheme, _, given = authorization.decode("latin-1").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), key.encode())


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


__all__ = ["Server", "bearer_ok"]
