"""Metrics. Retrieval metrics here; answer, grounding and judge metrics build on the same shapes."""

from .retrieval import RETRIEVAL_METRICS, doc_ranking, hit_at_k, mrr_at_k, ndcg_at_k, precision_at_k, recall_at_k, retrieval_scores

__all__ = ["RETRIEVAL_METRICS", "doc_ranking", "hit_at_k", "mrr_at_k", "ndcg_at_k", "precision_at_k",
           "recall_at_k", "retrieval_scores"]
