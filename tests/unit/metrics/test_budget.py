"""Retrieval at a context budget (`declrag.metrics.budget`): text handed over twice is counted once, the budget cuts
the ranking, and a program that finds the evidence only by handing over more text does not score for it."""

from __future__ import annotations

import pytest

from declrag.errors import DeclragError
from declrag.metrics.budget import budget_scores, characters, handed_over, resolve_budget
from declrag.metrics.catalog import get_metrics
from declrag.types import GoldSpan

DOC = "".join(f"sentence {i:04d} of the page. " for i in range(1000))  # 27 characters a sentence
SPAN = GoldSpan(doc="d", start=DOC.index("sentence 0300"), end=DOC.index("sentence 0300") + 13, answer="sentence 0300")


def p(start: int, end: int, doc: str = "d") -> tuple[str, int, int, str]:
    return doc, start, end, DOC[start:end]


def test_overlapping_windows_are_handed_over_once():
    # the window-1 search on one page: five passages, 0-5,358 and four that overlap it and each other
    passages = [p(0, 5358), p(1531, 7094), p(0, 3449), p(3399, 8751), p(5276, 10455)]
    assert characters(passages) == 10455  # not 5,358 + 5,563 + 3,449 + 5,352 + 5,179 = 24,901
    added = handed_over(passages, 10**9)
    assert added[2] == []  # 0-3,449 lies inside the first: it adds nothing
    assert [(s, e) for _, s, e, _ in added[1]] == [(5358, 7094)]
    assert all(t == DOC[s:e] for pieces in added for _, s, e, t in pieces)


def test_the_budget_cuts_the_passage_that_crosses_it():
    added = handed_over([p(0, 1000), p(5000, 6000), p(9000, 9500)], 1500)
    assert [(s, e) for pieces in added for _, s, e, _ in pieces] == [(0, 1000), (5000, 5500)]
    assert added[2] == []


def test_evidence_beyond_the_budget_does_not_count():
    at = SPAN.start
    big = [p(at - 20000, at + 2000)]  # holds the span, 22,000 characters in
    small = [p(at - 500, at + 500)]
    names = ["ndcg@1500c", "hit@1500c", "recall@5000c", "hit@30000c"]
    got_big, unit = budget_scores(big, [SPAN], [], {}, names)
    got_small, _ = budget_scores(small, [SPAN], [], {}, names)
    assert unit == "span"
    assert got_big["hit@1500c"] == 0.0 and got_big["recall@5000c"] == 0.0 and got_big["hit@30000c"] == 1.0
    assert got_small["hit@1500c"] == got_small["ndcg@1500c"] == 1.0


def test_a_span_covered_by_two_passages_together_counts_and_rank_decides_ndcg():
    at = SPAN.start
    halves = [p(at - 400, at + 6), p(at + 6, at + 400)]  # neither holds the span alone; together they do
    got, _ = budget_scores(halves, [SPAN], [], {}, ["hit@1500c", "ndcg@1500c"])
    assert got["hit@1500c"] == 1.0 and 0.0 < got["ndcg@1500c"] < 1.0  # found at rank 2
    first, _ = budget_scores([p(at - 10, at + 20), p(0, 100)], [SPAN], [], {}, ["ndcg@1500c"])
    assert first["ndcg@1500c"] == 1.0


def test_answers_and_documents_are_units_too():
    got, unit = budget_scores([p(0, 100), p(SPAN.start - 10, SPAN.end + 10)], [], ["sentence 0300"], {}, ["hit@120c",
                                                                                                        "hit@200c"])
    assert unit == "answer" and got == {"hit@120c": 0.0, "hit@200c": 1.0}
    got, unit = budget_scores([p(0, 900, "a"), p(0, 900, "b")], [], [], {"b": 1}, ["hit@900c", "hit@2000c"])
    assert unit == "document" and got == {"hit@900c": 0.0, "hit@2000c": 1.0}
    assert budget_scores([p(0, 10)], [], [], {}, ["hit@100c"]) is None  # no truth: not scored


def test_budget_metrics_by_name_and_their_mistakes():
    (m,) = get_metrics(["ndcg@5000c"])
    assert m.name == "ndcg@5000c" and "5000 characters" in m.description
    assert resolve_budget(["ndcg@budget", "hit@5"], 4400) == ["ndcg@4400c", "hit@5"]
    with pytest.raises(DeclragError, match="needs a context budget"):
        resolve_budget(["ndcg@budget"], None)
    with pytest.raises(DeclragError, match="needs a context budget"):
        get_metrics(["ndcg@budget"])
    with pytest.raises(DeclragError, match="ndcg@Bc"):
        get_metrics(["ndcg@5000chars"])
