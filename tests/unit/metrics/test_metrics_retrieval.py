"""Retrieval metrics against values computed by hand."""

import math

import pytest

from declrag.metrics import doc_ranking, hit_at_k, mrr_at_k, ndcg_at_k, precision_at_k, recall_at_k, retrieval_scores

RANKED = ["d3", "d1", "d7", "d2", "d9"]
GOLD = {"d1": 1, "d2": 2, "d5": 1}


def test_by_hand():
    assert hit_at_k(RANKED, GOLD, 1) == 0.0 and hit_at_k(RANKED, GOLD, 2) == 1.0
    assert precision_at_k(RANKED, GOLD, 4) == 0.5
    assert recall_at_k(RANKED, GOLD, 5) == pytest.approx(2 / 3)
    assert mrr_at_k(RANKED, GOLD, 5) == 0.5 and mrr_at_k(RANKED, GOLD, 1) == 0.0
    dcg = 1 / math.log2(3) + 2 / math.log2(5)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKED, GOLD, 5) == pytest.approx(dcg / idcg)


def test_perfect_and_empty():
    assert ndcg_at_k(["d2", "d1", "d5"], GOLD, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], GOLD, 10) == 0.0 and recall_at_k(RANKED, {}, 10) == 0.0
    assert retrieval_scores(["d2"], {"d2": 1})["hit@1"] == 1.0


def test_doc_ranking_keeps_each_documents_best_chunk():
    assert doc_ranking(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
