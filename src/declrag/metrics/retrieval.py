"""Retrieval metrics over a ranked list of document ids and graded gold judgements.

Conventions follow trec_eval / BEIR: nDCG uses linear gain (the grade itself) and the log2(rank + 1)
discount, the ideal ranking being the gold grades sorted; recall@k is the share of relevant documents in
the top k; MRR@k is 1/rank of the first relevant document within k (0 if none); a query with no relevant
documents scores 0 everywhere (callers should not include such queries).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial


def doc_ranking(doc_ids: Iterable[str]) -> list[str]:
    """Documents in the order of their best-ranked chunk (a document counts once)."""
    return list(dict.fromkeys(doc_ids))


def hit_at_k(ranked: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    return float(any(gold.get(d, 0) > 0 for d in ranked[:k]))


def precision_at_k(ranked: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    return sum(gold.get(d, 0) > 0 for d in ranked[:k]) / k


def recall_at_k(ranked: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    relevant = sum(1 for g in gold.values() if g > 0)
    return sum(gold.get(d, 0) > 0 for d in ranked[:k]) / relevant if relevant else 0.0


def mrr_at_k(ranked: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if gold.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def ndcg_at_k(ranked: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    dcg = sum(gold.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in gold.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


AtK = Callable[[Sequence[str], Mapping[str, int], int], float]
#: The kinds of retrieval metric, each ``kind@k`` for any depth k: ``fn(ranked, gold, k) -> float`` (`register_at_k`).
AT_K: dict[str, AtK] = {"hit": hit_at_k, "recall": recall_at_k, "precision": precision_at_k, "mrr": mrr_at_k,
                        "ndcg": ndcg_at_k}


def register_at_k(kind: str, fn: AtK) -> None:
    """Make ``kind@k`` a retrieval metric at every depth k, registered once and known everywhere a metric is named:
    `declrag eval --metrics`, compile's objectives, retrieval-first scoring (`is_retrieval`) and the passages' scoring
    over gold spans (`declrag.metrics.passages`).

    Args:
        kind: the metric's name before ``@`` (a plain name, not taken).
        fn: ``fn(ranked document ids, gold grades by id, k) -> float``.

    Raises:
        ValueError: ``kind`` is not a plain name, or is taken.
    """
    if not kind.isidentifier() or kind in AT_K:
        raise ValueError(f"{kind!r} is not a free retrieval metric name (taken: {', '.join(AT_K)})")
    AT_K[kind] = fn


def is_retrieval(name: str) -> bool:
    """Whether a metric scores retrieval alone: what compile's retrieval-first scoring runs without the LM.

    Args:
        name: a metric's name (``ndcg@10``, ``ndcg@5000c``, ``sia``).

    Returns:
        True for ``kind@...`` of a kind in `AT_K`, at a depth or a context budget.
    """
    kind, at, _ = name.partition("@")
    return bool(at) and kind in AT_K


def split_at(name: str) -> tuple[str, int]:
    """A metric's name as its kind and depth: ``ndcg@10`` -> ``("ndcg", 10)``."""
    kind, _, k = name.partition("@")
    return kind, int(k)


def at_k(name: str, ranked: Sequence[str], gold: Mapping[str, int]) -> float:
    """The metric ``name`` (``kind@k``, a kind of `AT_K`) of a ranking."""
    kind, k = split_at(name)
    return AT_K[kind](ranked, gold, k)


RETRIEVAL_METRICS = {name: partial(at_k, name)
                     for name in ("ndcg@10", "recall@5", "recall@10", "mrr@10", "hit@1", "hit@5", "hit@20")}


def retrieval_scores(ranked: Sequence[str], gold: Mapping[str, int],
                     metrics: Iterable[str] | None = None) -> dict[str, float]:
    names = list(metrics) if metrics is not None else list(RETRIEVAL_METRICS)
    return {m: RETRIEVAL_METRICS[m](ranked, gold) for m in names}
