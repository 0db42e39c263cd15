"""Operations on ranked hits, between the store and the generator: fusion of several queries' results,
Weaviate's autocut, maximal marginal relevance, and context ordering."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ....stores.fusion import RANK_CONSTANT
from ....types import Hit


def rrf(lists: Sequence[Sequence[Hit]]) -> list[Hit]:
    """Reciprocal-rank fusion of several result lists (one per query), equal weights, rank from 0:
    a chunk scores sum(1 / (rank + 60)); ties break by chunk id."""
    if len(lists) == 1:
        return list(lists[0])
    score: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits in lists:
        for rank, h in enumerate(hits):
            score[h.chunk.id] = score.get(h.chunk.id, 0.0) + 1.0 / (rank + RANK_CONSTANT)
            first.setdefault(h.chunk.id, h)
    order = sorted(score, key=lambda cid: (-score[cid], cid))
    return [replace(first[cid], score=score[cid]) for cid in order]


def autocut(scores: Sequence[float], jumps: int) -> int:
    """How many results to keep: Weaviate's autocut. Scores (best first) are normalised to [0, 1] and
    compared with a straight line from first to last; the results are cut before the ``jumps``-th local
    maximum of that difference."""
    n = len(scores)
    if n <= 1 or jumps <= 0 or scores[-1] == scores[0]:
        return n
    y = np.asarray(scores, dtype=np.float64)
    diff = (y - y[0]) / (y[-1] - y[0]) - np.arange(n) / (n - 1)
    found = 0
    for i in range(1, n):
        peak = diff[i] > diff[i - 1] and (diff[i] > diff[i - 2] if i == n - 1 else diff[i] > diff[i + 1])
        if peak:
            found += 1
            if found >= jumps:
                return i
    return n


def mmr(hits: Sequence[Hit], vectors: np.ndarray, query: np.ndarray, k: int, lam: float) -> list[Hit]:
    """Maximal marginal relevance: pick ``k`` hits, each maximising
    ``lam * sim(query, hit) - (1 - lam) * max sim(hit, already picked)`` (cosine on unit vectors)."""
    if len(hits) <= 1 or k <= 0:
        return list(hits)[:k]
    rel = vectors @ query
    chosen: list[int] = []
    left = list(range(len(hits)))
    while left and len(chosen) < k:
        if chosen:
            red = (vectors[left] @ vectors[chosen].T).max(axis=1)
        else:
            red = np.zeros(len(left))
        best = left[int(np.argmax(lam * rel[left] - (1 - lam) * red))]
        chosen.append(best)
        left.remove(best)
    return [hits[i] for i in chosen]


def lost_in_the_middle(hits: Sequence[Hit]) -> list[Hit]:
    """Best passages at both ends of the context: ranks 1, 3, 5, ... then ..., 6, 4, 2."""
    return list(hits[0::2]) + list(hits[1::2])[::-1]


def order(hits: Sequence[Hit], how: str) -> list[Hit]:
    return lost_in_the_middle(hits) if how == "lost-in-the-middle" else list(hits)


def cut(hits: Sequence[Hit], jumps: int, key: Callable[[Hit], float] = lambda h: h.score) -> list[Hit]:
    return list(hits)[: autocut([key(h) for h in hits], jumps)] if jumps else list(hits)
