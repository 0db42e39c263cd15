"""A document-level signal beside chunk-level hybrid search (``retrieve.documents``, a weight; 0 is off).

A question that names a document ("in the TU Wien thesis, ...") names it by words its answering chunk seldom holds:
the title page, the author line, a running footer hold them. BM25 over whole documents finds that document, since a
name that one document holds has a high idf among documents. `DocumentIndex` keeps that index over the store's
documents (built on first use, again when the store's chunk count changes); `boost` deepens the chunk-level pool to
`POOL` hits and mixes each hit's score (scaled to 0-1 over the pool) with its document's (BM25 over documents,
divided by the best document's) at ``weight``, then keeps the best ``limit``.

`DocumentIndex.named` finds the documents a question names (``retrieve.named``): those that hold a name or number
the question holds ("Hackl's guide", "the 2018 guide") when fewer than every document and at most `NAMED_AT_MOST`
do (a PDF's pages count as one document). The retriever then also searches within them, so that their passages are
candidates even when the answering chunk never repeats the name.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import numpy as np

from ....stores.base import Store
from ....stores.bm25 import KeywordIndex
from ....text.normalize import details
from ....text.stopwords import query_terms
from ....types import Hit

log = logging.getLogger(__name__)
POOL = 50  # chunk-level hits re-scored with their document's score
MAX_DOCUMENTS = 50_000  # beyond this many documents the index is not built (said once): it lives in memory
NAMED_AT_MOST = 20  # a name that more documents hold does not name one


class DocumentIndex:
    """BM25 over the whole texts of a store's documents (`declrag.stores.bm25.KeywordIndex`)."""

    def __init__(self, store: Store):
        self.store = store
        self._lock = threading.Lock()
        # (chunk count, ids, index, each id's whole document: a PDF's source, else the id)
        self._built: tuple[int, list[str], KeywordIndex, list[str]] | None = None
        self._too_many: int | None = None  # the chunk count at which there were more than MAX_DOCUMENTS

    def _indexed(self) -> tuple[int, list[str], KeywordIndex, list[str]] | None:
        stamp = self.store.count()
        with self._lock:
            if self._too_many == stamp:  # counted before: not read again for every question
                return None
            if self._built is None or self._built[0] != stamp:
                records = self.store.documents()
                ids = sorted(records)
                if len(ids) > MAX_DOCUMENTS:
                    if self._too_many is None:
                        log.warning("retrieve.named and retrieve.documents: %d documents, more than %d; the index "
                                    "over whole documents is not built and both are left out", len(ids),
                                    MAX_DOCUMENTS)
                    self._too_many, self._built = stamp, None
                    return None
                texts = self.store.document_texts(ids)
                self._built = (stamp, ids, KeywordIndex([texts.get(d, "") for d in ids]),
                               [records[d].source if records[d].page is not None else d for d in ids])
            return self._built

    def warm_up(self) -> None:
        """Build the index now, not on the first question."""
        self._indexed()

    def named(self, question: str) -> list[str]:
        """The documents that ``question`` names, by id. A document here is a whole one: where a document is a page
        (``SOURCE#page=N``: a store indexed before a PDF was one document), a file's pages are one, named when any page
        holds the name (its title page does). For each of the
        question's names and numbers (`declrag.text.normalize.details`, its first word aside; a name of two joined by
        "and"
        is two) that fewer than every document and at most `NAMED_AT_MOST` hold, those documents; then the documents
        that all such details share (or, where none is shared, any of them: a question that names two documents).
        [] when it names none."""
        got = self._indexed()
        if got is None or not got[1]:
            return []
        _, ids, index, wholes = got
        every = set(wholes)
        first = question.strip().split()[:1]
        groups: list[set[str]] = []
        keys = [part for d in details(question) if not (first and d.text == first[0])
                for part in d.key.split(" and ")]  # "Berger and Keller" names two
        for key in keys:
            if not (terms := query_terms(key)):
                continue
            held = np.ones(len(ids), dtype=bool)
            for t in terms:
                held &= index.scores(t) > 0
            holders = {wholes[i] for i in np.flatnonzero(held)}
            if holders and len(holders) < len(every) and len(holders) <= NAMED_AT_MOST:
                groups.append(holders)
        if not groups:
            return []
        named = set.intersection(*groups) or set.union(*groups)
        return [d for d, w in zip(ids, wholes) if w in named]

    def scores(self, query: str) -> dict[str, float]:
        """Each document's BM25 score for ``query``, divided by the best one's (0 to 1); {} when none matches."""
        got = self._indexed()
        if got is None or not got[1]:
            return {}
        _, ids, index, _ = got
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
