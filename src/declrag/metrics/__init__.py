"""Metrics. Each is a DSPy metric, ``metric(example, prediction, trace=None) -> float``, and scores a `Case`
into a `Score` standalone. Deterministic metrics register here; LLM-judge metrics live in `judges`."""

from . import answer, context, grounding  # noqa: F401  (registration)
from .base import REGISTRY, Case, Metric, Passage, Score, get_metrics, to_case
from .retrieval import RETRIEVAL_METRICS, doc_ranking, hit_at_k, mrr_at_k, ndcg_at_k, precision_at_k, recall_at_k, retrieval_scores

__all__ = ["REGISTRY", "RETRIEVAL_METRICS", "Case", "Metric", "Passage", "Score", "doc_ranking", "get_metrics",
           "hit_at_k", "mrr_at_k", "ndcg_at_k", "precision_at_k", "recall_at_k", "retrieval_scores", "to_case"]
