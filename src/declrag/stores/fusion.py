"""Weaviate's hybrid-search fusion, written once for every backend that fuses in-process.

- ``alpha`` weights the vector leg and ``1 - alpha`` the keyword leg; alpha 1 is vector only, 0 keyword only
  (the other leg is not run at all, as in Weaviate).
- Each leg brings ``max(candidates, limit)`` results (Weaviate: at least 100).
- ``relative`` (relative-score fusion, Weaviate's default since 1.24): each leg's scores are min-max
  normalised over that leg's own results, ``(s - min) / (max - min)``; when all of a leg's scores are
  equal, each of its results gets the full weight. The vector score is ``1 - distance``.
- ``ranked`` (reciprocal-rank fusion): a result at 0-based rank ``r`` in a leg adds ``weight / (r + 60)``.
- Results are ordered by fused score; ties break by the key's object UUID (`object_uuid`, UUID5 of the
  chunk id) ascending, which is what Weaviate does with the UUIDs declrag gives its objects, so both
  backends order ties alike, on every run.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Sequence
from functools import lru_cache

from ..config import Fusion

RANK_CONSTANT = 60
MIN_CANDIDATES = 100


@lru_cache(maxsize=1 << 16)
def object_uuid(key: str) -> str:
    """The UUID of the object stored for ``key`` (a chunk or document id): UUID5 in the DNS namespace, as
    the Weaviate client's ``generate_uuid5`` makes it. Ties in every ranking break by it, ascending."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, key))


def leg_size(limit: int, candidates: int = MIN_CANDIDATES) -> int:
    return max(candidates, limit)


def fuse(
    keyword: Sequence[tuple[Hashable, float]],
    vector: Sequence[tuple[Hashable, float]],
    alpha: float,
    fusion: Fusion = "relative",
    limit: int | None = None,
) -> list[tuple[Hashable, float]]:
    """Fuse two ranked legs of ``(key, score)`` (best first) into ``(key, fused score)``, best first."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if fusion not in ("relative", "ranked"):
        raise ValueError(f"unknown fusion {fusion!r}: use 'relative' or 'ranked'")
    total: dict[Hashable, float] = {}
    for leg, weight in ((keyword, 1.0 - alpha), (vector, alpha)):
        if not leg or weight == 0.0:
            continue
        if fusion == "ranked":
            for rank, (key, _) in enumerate(leg):
                total[key] = total.get(key, 0.0) + weight / (rank + RANK_CONSTANT)
        else:
            scores = [s for _, s in leg]
            lo, hi = min(scores), max(scores)
            for key, s in leg:
                norm = (s - lo) / (hi - lo) if hi > lo else 1.0
                total[key] = total.get(key, 0.0) + weight * norm
    out = sorted(total.items(), key=lambda kv: (-kv[1], object_uuid(str(kv[0]))))
    return out if limit is None else out[:limit]
