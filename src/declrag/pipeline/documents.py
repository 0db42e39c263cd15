"""A document-level signal beside chunk-level hybrid search (``retrieve.documents``, a weight; 0 is off).

A question that names a document ("in the TU Wien thesis, ...") names it by words its answering chunk seldom holds:
the title page, the author line, a running footer hold them. BM25 over whole documents finds that document, since a
name that one document holds has a high idf among documents. `DocumentIndex` keeps that index over the store's
documents (built on first use, again when the store's chunk count changes); `boost` deepens the chunk-level pool to
`POOL` hits and mixes each hit's score (scaled to 0-1 over the pool) with its document's (BM25 over documents,
divided by the best document's) at ``weight``, then keeps the best ``limit``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

from ..stores.base import Store
from ..stores.bm25 import KeywordIndex
from ..types import Hit

log = logging.getLogger(__name__)
POOL = 50  # chunk-level hits re-scored with their document's score
MAX_DOCUMENTS = 50_000  # beyond this many documents the signal is left out (said once): its index lives in memory


class DocumentIndex:
    """BM25 over the whole texts of a store's documents (`declrag.stores.bm25.KeywordIndex`)."""

    def __init__(self, store: Store):
        self.store = store
        self._lock = threading.Lock()
        self._built: tuple[int, list[str], KeywordIndex] | None = None  # (chunk count, doc ids, index)
        self._warned = False

    def _index(self) -> tuple[list[str], KeywordIndex] | None:
        stamp = self.store.count()
        with self._lock:
            if self._built is None or self._built[0] != stamp:
                ids = sorted(self.store.documents())
                if len(ids) > MAX_DOCUMENTS:
                    if not self._warned:
                        log.warning("retrieve.documents: %d documents, more than %d; the document-level signal "
                                    "is left out", len(ids), MAX_DOCUMENTS)
                        self._warned = True
                    return None
                texts = self.store.document_texts(ids)
                self._built = (stamp, ids, KeywordIndex([texts.get(d, "") for d in ids]))
            return self._built[1], self._built[2]

    def scores(self, query: str) -> dict[str, float]:
        """Each document's BM25 score for ``query``, divided by the best one's (0 to 1); {} when none matches."""
        got = self._index()
        if got is None:
            return {}
        ids, index = got
        if not ids:
            return {}
        raw = [float(s) for s in index.scores(query)]
        top = max(raw, default=0.0)
        return {d: s / top for d, s in zip(ids, raw) if s > 0} if top > 0 else {}


def boost(hits: list[Hit], doc_scores: dict[str, float], weight: float, limit: int) -> list[Hit]:
    """``hits`` re-scored, (1 - ``weight``) x their score scaled to 0-1 over ``hits`` (the chunk-level scores:
    hybrid or fused, each its own scale) + ``weight`` x their document's score; the best ``limit``."""
    if not hits:
        return hits
    lo, hi = min(h.score for h in hits), max(h.score for h in hits)
    span = (hi - lo) or 1.0
    scored = [replace(h, score=(1 - weight) * (h.score - lo) / span + weight * doc_scores.get(h.doc_id, 0.0),
                      scores={**h.scores, "document": round(doc_scores.get(h.doc_id, 0.0), 6)}) for h in hits]
    return sorted(scored, key=lambda h: -h.score)[:limit]
