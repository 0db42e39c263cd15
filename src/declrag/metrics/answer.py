"""Correctness against the reference answer(s), deterministic tier.

All take the best score over the references. Abstention rules, for every correctness metric: an
abstention on an unanswerable question is correct (1.0), an answer to it is wrong (0.0), and an abstention
on an answerable question is wrong (0.0).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ..text.normalize import squad_normalize, strip_citations, token_f1, token_recall
from ._embedding import shared_embedder
from .base import Case, FnMetric, Score, register

MATCH_THRESHOLD = 0.8  # token_match: the answer holds at least 80% of a reference's tokens


def with_abstention(fn: Callable[[str, list[str]], float]) -> Callable[[Case], Score]:
    def score(case: Case) -> Score:
        if not case.answerable:
            return Score(1.0 if case.abstained else 0.0,
                         {"rule": "abstained on an unanswerable question" if case.abstained
                          else "answered an unanswerable question"})
        if case.abstained:
            return Score(0.0, {"rule": "abstained on an answerable question"})
        if not case.references:
            return Score(None, {"rule": "no reference answer"})
        return Score(fn(strip_citations(case.answer), case.references))
    return score


def exact_match(answer: str, refs: list[str]) -> float:
    return float(any(squad_normalize(answer) == squad_normalize(r) for r in refs))


def f1(answer: str, refs: list[str]) -> float:
    return max(token_f1(answer, r) for r in refs)


def token_match(answer: str, refs: list[str]) -> float:
    return float(max(token_recall(answer, r) for r in refs) >= MATCH_THRESHOLD)


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def rouge(kind: str, part: str = "fmeasure") -> Callable[[str, list[str]], float]:
    def fn(answer: str, refs: list[str]) -> float:
        return max(getattr(_rouge().score(r, answer)[kind], part) for r in refs)
    return fn


def semantic_similarity(answer: str, refs: list[str]) -> float:
    e = shared_embedder()
    vecs = e.embed_documents([answer, *refs])
    return float(np.clip(np.max(vecs[1:] @ vecs[0]), 0.0, 1.0))


for name, fn, desc in [
    ("em", exact_match, "exact match after SQuAD normalisation"),
    ("f1", f1, "token F1 after SQuAD normalisation"),
    ("rouge1", rouge("rouge1"), "ROUGE-1 F"), ("rouge2", rouge("rouge2"), "ROUGE-2 F"),
    ("rougeL", rouge("rougeL"), "ROUGE-L F"),
    ("rouge1_recall", rouge("rouge1", "recall"), "ROUGE-1 recall of the reference"),
    ("semantic_similarity", semantic_similarity, "cosine of answer and reference embeddings"),
    ("token_match", token_match, "1 when the answer holds >= 80% of a reference's tokens"),
]:
    register(name, (lambda n=name, f=fn, d=desc: FnMetric(n, with_abstention(f), d)))
