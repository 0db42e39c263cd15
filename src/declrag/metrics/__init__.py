"""Metrics. Each is a DSPy metric, ``metric(example, prediction, trace=None) -> float``, and scores a `Case`
into a `Score` standalone. Deterministic metrics register in `base.REGISTRY` (from `answer`, `context`,
`grounding`); LLM-judge metrics live in `judges`; `catalog.get_metrics` finds either by name."""

from .base import REGISTRY, Case, Metric, Passage, Score, to_case
from .catalog import get_metrics  # imports every metric module, so the registry is full
from .retrieval import (
    RETRIEVAL_METRICS,
    doc_ranking,
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    retrieval_scores,
)

__all__ = ["REGISTRY", "RETRIEVAL_METRICS", "Case", "Metric", "Passage", "Score", "doc_ranking", "get_metrics",
           "hit_at_k", "mrr_at_k", "ndcg_at_k", "precision_at_k", "recall_at_k", "retrieval_scores", "to_case"]
