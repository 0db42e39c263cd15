"""The one embedding model every embedding-based metric uses (context relevance, answer relevancy, the
semantic half of faithfulness), loaded once per process."""

from __future__ import annotations

import threading

from ..embed import Embedder

_EMBEDDER: Embedder | None = None
_LOCK = threading.Lock()


def shared_embedder() -> Embedder:
    """The embedding model of the metrics (all-MiniLM-L6-v2): fixed, so scores compare across programs."""
    global _EMBEDDER
    with _LOCK:
        if _EMBEDDER is None:
            _EMBEDDER = Embedder()
        return _EMBEDDER
