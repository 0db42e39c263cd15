"""Search as a user asks for it: a query string and `SearchParams`, over a store, with context expansion.

Expansion widens what a hit shows and cites, never what matched:
- parent-child chunks return their parent's span;
- ``window = k`` returns the span from the chunk ``k`` positions before to ``k`` positions after.
Hits that expand to the same span are merged, keeping the best score. What is handed over (`search`'s results, a
program's passages) is chosen by `hand_over`: best-first by default, each passage what matched, and no character of a
document handed over twice.
"""

from __future__ import annotations

from dataclasses import replace

from ....config import Handover, SearchParams
from ....embed.embedder import Embedder
from ....stores.base import Filter, Store
from ....text.sentences import strip_span
from ....types import Hit, chunk_id


def search(store: Store, embedder: Embedder | None, query: str, params: SearchParams | None = None) -> list[Hit]:
    """The ``params.limit`` passages for ``query``, handed over as ``params.handover`` says (`hand_over`; best-first
    searches twice as deep, to hand over ``limit`` passages where the store has them)."""
    p = params or SearchParams()
    where = Filter.of(p.where)
    deep = min(2 * p.limit, 1000) if p.handover in FILLS else p.limit
    if p.mode == "keyword" or (p.mode == "hybrid" and p.alpha == 0.0):
        hits = store.keyword_search(query, deep, where) if p.mode == "keyword" else \
            store.hybrid_search(query, None, deep, 0.0, p.fusion, p.candidates, where)
    else:
        if embedder is None:
            raise ValueError(f"{p.mode} search needs an embedder (only keyword search does without)")
        vec = embedder.embed_query(query)
        hits = store.vector_search(vec, deep, where, p.ann) if p.mode == "vector" else \
            store.hybrid_search(query, vec, deep, p.alpha, p.fusion, p.candidates, where, p.ann)
    return hand_over(store, expand(store, hits, p.window), p.limit, p.handover)


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


#: The hand-overs that leave passages out and take the ones found after the first k in their place: a search for
#: them goes twice as deep.
FILLS = frozenset({"best-first", "joined"})

#: A passage that an earlier one overlaps keeps what is left of it when that is at least this share of it; less is a
#: sliver of what was already handed over, and the passage is left out.
LEFT_AT_LEAST = 0.2


def hand_over(store: Store, hits: list[Hit], k: int | None = None, how: Handover = "best-first") -> list[Hit]:
    """The passages handed over from ``hits`` (rank order), at most ``k`` (None: all):

    - ``best-first``: each passage is what matched (`best_first`): a lower-ranked one that overlaps a higher one gives
      up the shared characters and keeps the rest, or is left out when little is left; ``k`` passages where ``hits``
      hold them (the ones after the first ``k`` stand in for those left out);
    - ``joined``: best-first, and a passage's neighbour found lower appended to it (what matched first still first);
    - ``merge``: the first ``k``, a document's passages that overlap or meet made one (`merge_overlaps`);
    - ``none``: the first ``k`` as found (neighbours that overlap repeat the shared characters).
    Citations stay exact spans of the documents."""
    if how in FILLS:
        return best_first(hits, k, join=how == "joined")
    first = hits if k is None else hits[:k]
    return merge_overlaps(store, first) if how == "merge" else first


def best_first(hits: list[Hit], k: int | None = None, join: bool = False) -> list[Hit]:
    """``hits`` (rank order), each trimmed to the characters no higher-ranked one holds: a passage overlapping an
    earlier one of its document keeps its longest part outside all of them (its text cut from its own, no store
    call), when that part is at least `LEFT_AT_LEAST` of it; else it is left out. At most ``k``. ``join``: a part
    that goes on where an earlier passage ends (a neighbour found lower) is appended to that passage, what matched
    first still first, instead of being a passage of its own."""
    held: dict[str, list[tuple[int, int]]] = {}
    out: list[Hit] = []
    for h in hits:
        if k is not None and len(out) >= k:
            break
        spans = held.setdefault(h.doc_id, [])
        a, b = _longest_free(h.start, h.end, spans)
        if (a, b) != (h.start, h.end):
            trimmed = strip_span(h.text, a - h.start, b - h.start) if b > a else None
            if trimmed is None or trimmed[1] - trimmed[0] < LEFT_AT_LEAST * (h.end - h.start):
                continue
            a, b = h.start + trimmed[0], h.start + trimmed[1]
            before = next((i for i, p in enumerate(out) if join and p.doc_id == h.doc_id
                           and h.start <= p.end <= a and not h.text[p.end - h.start:a - h.start].strip()), None)
            if before is not None:  # goes on where a passage ends: appended to it
                p = out[before]
                out[before] = replace(p, text=p.text + h.text[p.end - h.start:b - h.start], end=b)
                spans.append((p.end, b))
                continue
            h = replace(h, text=h.text[a - h.start:b - h.start], start=a, end=b)
        spans.append((a, b))
        out.append(h)
    return out


def _longest_free(start: int, end: int, held: list[tuple[int, int]]) -> tuple[int, int]:
    """The longest part of ``[start, end)`` outside every span of ``held``; ``(start, start)`` when none is."""
    free, at = (start, start), start
    for a, b in sorted(s for s in held if s[0] < end and s[1] > start):
        if a > at and a - at > free[1] - free[0]:
            free = (at, a)
        at = max(at, b)
    if end > at and end - at > free[1] - free[0]:
        free = (at, end)
    return free


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
