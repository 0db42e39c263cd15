"""Search as a user asks for it: a query string and `SearchParams`, over a store, with context expansion.

Expansion widens what a hit shows and cites, never what matched:
- parent-child chunks return their parent's span;
- ``window = k`` returns the span from the chunk ``k`` positions before to ``k`` positions after.
Hits that expand to the same span are merged, keeping the best score; what is handed over (`search`'s results, a
program's passages) has passages of one document that overlap or meet merged into one (`merge_overlaps`), so no
character of a document is handed over twice.
"""

from __future__ import annotations

from dataclasses import replace

from ..config import SearchParams
from ..embed.embedder import Embedder
from ..stores.base import Filter, Store
from ..types import Hit, chunk_id


def search(store: Store, embedder: Embedder | None, query: str, params: SearchParams | None = None) -> list[Hit]:
    p = params or SearchParams()
    where = Filter.of(p.where)
    if p.mode == "keyword" or (p.mode == "hybrid" and p.alpha == 0.0):
        hits = store.keyword_search(query, p.limit, where) if p.mode == "keyword" else \
            store.hybrid_search(query, None, p.limit, 0.0, p.fusion, p.candidates, where)
    else:
        if embedder is None:
            raise ValueError(f"{p.mode} search needs an embedder (only keyword search does without)")
        vec = embedder.embed_query(query)
        hits = store.vector_search(vec, p.limit, where, p.ann) if p.mode == "vector" else \
            store.hybrid_search(query, vec, p.limit, p.alpha, p.fusion, p.candidates, where, p.ann)
    return merge_overlaps(store, expand(store, hits, p.window))


def expand(store: Store, hits: list[Hit], window: int = 0) -> list[Hit]:
    """Apply parent-child and context-window expansion (see the module docstring)."""
    if not hits or (window == 0 and all(h.chunk.parent_start is None for h in hits)):
        return hits
    texts = store.document_texts([h.doc_id for h in hits])
    spans: list[tuple[int, int]] = []
    for h in hits:
        c = h.chunk
        if c.parent_start is not None and c.parent_end is not None:
            spans.append((c.parent_start, c.parent_end))
        elif window:
            lo, hi = max(0, c.position - window), c.position + window
            near = store.get([chunk_id(c.doc_id, i) for i in range(lo, hi + 1)])
            spans.append((min(n.start for n in near), max(n.end for n in near)) if near else (c.start, c.end))
        else:
            spans.append((c.start, c.end))
    out: dict[tuple[str, int, int], Hit] = {}
    for h, (s, e) in zip(hits, spans):
        key = (h.doc_id, s, e)
        if key not in out:
            text = texts.get(h.doc_id)
            out[key] = h if text is None else replace(h, text=text[s:e], start=s, end=e)
    return list(out.values())


def merge_overlaps(store: Store, hits: list[Hit]) -> list[Hit]:
    """``hits`` (rank order) with the passages of one document that overlap or meet (a window around a neighbour, two
    chunks cut with overlap) made one: at the rank of the best of them, spanning their union (one citation span,
    the document's own text), its scores the best one's. Unchanged when nothing overlaps (no store call)."""
    groups: list[list[int]] = []
    for i, h in enumerate(hits):
        near = [g for g in groups
                if any(hits[j].doc_id == h.doc_id and hits[j].start <= h.end and h.start <= hits[j].end for j in g)]
        if not near:
            groups.append([i])
            continue
        near[0].append(i)
        for g in near[1:]:  # a passage that bridges two earlier ones joins them
            near[0].extend(g)
            groups.remove(g)
    if all(len(g) == 1 for g in groups):
        return hits
    texts = store.document_texts(list({hits[g[0]].doc_id for g in groups if len(g) > 1}))
    out: list[Hit] = []
    for g in sorted(groups, key=min):
        lead, text = hits[min(g)], texts.get(hits[g[0]].doc_id)
        if len(g) == 1 or text is None:  # a document whose text the store cannot give stays as it was found
            out.extend(hits[j] for j in sorted(g))
            continue
        start, end = min(hits[j].start for j in g), max(hits[j].end for j in g)
        out.append(replace(lead, text=text[start:end], start=start, end=end))
    return out
