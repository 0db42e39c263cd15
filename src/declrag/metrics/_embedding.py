"""The one embedding model every embedding-based metric uses (context relevance, answer relevancy, the
semantic half of faithfulness), loaded once per process."""

from __future__ import annotations

from ..embed.embedder import Embedder
from ..lm import registry


def shared_embedder() -> Embedder:
    """The embedding model of the metrics (all-MiniLM-L6-v2): fixed, so scores compare across programs. Held by
    `declrag.lm.registry` (``registry.clear()`` lets it go)."""
    return registry.shared("embedder", "metrics", Embedder)
