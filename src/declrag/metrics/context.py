"""The context and the question: context relevance, precision and recall, answer relevancy, the RAG
triad, and retrieval metrics on the passages a program actually used.

Aggregation over passages for context relevance (and so the triad) is chosen by a suffix: ``:mean``
(default), ``:max`` or ``:first`` (the top-ranked passage), e.g. ``context_relevance:max``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..text.normalize import squad_normalize, squad_tokens, strip_citations
from ._embedding import shared_embedder
from .base import Case, FnMetric, Score, register
from .grounding import faithfulness
from .passages import answer_coverage, coverage, passage_scores, unit_of
from .retrieval import RETRIEVAL_METRICS

AGGREGATES: dict[str, Callable[..., Any]] = {"mean": np.mean, "max": np.max, "first": lambda xs: xs[0]}


def _cos(a: str, bs: list[str]) -> np.ndarray:
    vecs = shared_embedder().embed_documents([a, *bs])
    return np.clip(vecs[1:] @ vecs[0], 0.0, 1.0)


def context_relevance(agg: str = "mean"):
    def fn(case: Case) -> Score:
        if not case.passages:
            return Score(0.0, {"rule": "no passages"})
        per = _cos(case.question, [p.text for p in case.passages])
        return Score(float(AGGREGATES[agg](per)), {"per_passage": [round(float(x), 3) for x in per]})
    return fn


def answer_relevancy(case: Case) -> Score:
    if case.abstained:
        return Score(None if not case.answerable else 0.0, {"rule": "abstention"})
    answer = strip_citations(case.answer)
    if not answer:
        return Score(0.0, {"rule": "empty answer"})
    return Score(float(_cos(case.question, [answer])[0]))


def context_precision(case: Case) -> Score:
    """Average precision of the passages, a passage being relevant when it holds a reference answer."""
    refs = [squad_normalize(r) for r in case.references if squad_normalize(r)]
    if not refs:
        return Score(None, {"rule": "no reference answer"})
    rel = [any(f" {r} " in f" {squad_normalize(p.text)} " for r in refs) for p in case.passages]
    if not any(rel):
        return Score(0.0, {"relevant": rel})
    hits, total = 0, 0.0
    for i, r in enumerate(rel, 1):
        if r:
            hits += 1
            total += hits / i
    return Score(total / sum(rel), {"relevant": rel})


def context_recall(case: Case) -> Score:
    """Share of the reference answer's tokens found in the passages (best reference)."""
    if not case.references:
        return Score(None, {"rule": "no reference answer"})
    ctx = set(squad_tokens(case.context))
    best = max((sum(t in ctx for t in toks) / len(toks) for r in case.references if (toks := squad_tokens(r))),
               default=0.0)
    return Score(best)


def triad(agg: str = "mean"):
    rel = context_relevance(agg)

    def fn(case: Case) -> Score:
        parts = {"context_relevance": rel(case).value, "faithfulness": faithfulness(case).value,
                 "answer_relevancy": answer_relevancy(case).value}
        vals = [v for v in parts.values() if v is not None]
        return Score(float(np.mean(vals)) if vals else None, parts)
    return fn


def passage_is_gold(case: Case) -> list[tuple[str, bool]]:
    """(document, is gold) per passage, in the question's unit (`declrag.metrics.passages`): a passage that
    covers a gold span; else one that holds a short reference answer; else one of a gold document."""
    spans = case.gold_spans()
    unit = unit_of(spans, case.references, case.gold)
    if unit in ("span", "answer"):
        covered, _ = coverage(case.passages, spans) if unit == "span" else \
            answer_coverage(case.passages, case.references, case.gold)
        return [(p.doc_id, bool(c)) for p, c in zip(case.passages, covered)]
    return [(p.doc_id, case.gold.get(p.doc_id, 0) > 0) for p in case.passages]


def retrieval(name: str):
    def fn(case: Case) -> Score:
        scored = passage_scores(case.passages, case.gold_spans(), case.references, case.gold, [name])
        if scored is None:
            return Score(None, {"rule": "no gold spans, short answers or gold documents"})
        values, unit = scored
        return Score(values[name], {"unit": unit})
    return fn


register("answer_relevancy", lambda: FnMetric("answer_relevancy", answer_relevancy, "cosine of answer and question"))
register("context_precision", lambda: FnMetric("context_precision", context_precision,
                                               "average precision of passages holding the reference answer"))
register("context_recall", lambda: FnMetric("context_recall", context_recall, "reference tokens found in the passages"))
for agg in AGGREGATES:
    suffix = "" if agg == "mean" else f":{agg}"
    register(f"context_relevance{suffix}",
             lambda a=agg, s=suffix: FnMetric(f"context_relevance{s}", context_relevance(a),
                                              f"cosine of question and passages ({a})"))
    register(f"triad{suffix}",
             lambda a=agg, s=suffix: FnMetric(f"triad{s}", triad(a),
                                              f"mean of context relevance ({a}), faithfulness, answer relevancy"))
def passages_metric(name: str) -> FnMetric:
    """The retrieval metric ``name`` (``kind@k``) of the passages: over gold spans, short answers or gold documents."""
    return FnMetric(name, retrieval(name), f"{name} of the passages: over gold spans, short answers or gold documents "
                                           "(declrag.metrics.passages)")


for name in RETRIEVAL_METRICS:
    register(name, lambda n=name: passages_metric(n))
register("abstained", lambda: FnMetric("abstained", lambda c: Score(float(c.abstained)), "the program abstained"))
