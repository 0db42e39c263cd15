"""Grounding in the retrieved context, deterministic tier: faithfulness, hallucination rate and SIA.

- faithfulness: the share of answer sentences supported by the passages. A sentence is supported when
  most of its content words occur in one passage (lexical), or when it is close in meaning to one
  passage sentence and shares a good part of its words with it (embedding + lexical). An abstention claims
  nothing: it is fully faithful.
- hallucination: the share of answer sentences that are not supported (0 for an abstention).
- sia (specific information accuracy): every specific detail of the answer (numbers, dates, quantities,
  names, quoted strings) occurs in the passages, allowing other formats; answering an unanswerable question
  fails; abstaining there succeeds; abstaining on an answerable question whose answer was retrieved fails.
"""

from __future__ import annotations

from functools import lru_cache

from ..pipeline.stages.generate import check  # the verified mode's support rule, which faithfulness shares
from ..text.normalize import Detail, detail_supported, details, norm_phrase, numbers, squad_normalize
from ._embedding import shared_embedder
from .base import Case, FnMetric, Score, register


def sentence_support(case: Case) -> list[tuple[str, bool, float, float]]:
    """(sentence, supported, lexical support, semantic support) for each sentence of the answer, by the one rule
    the verified generate mode also applies (`declrag.pipeline.stages.generate.check`): a sentence with a specific
    detail (number, name, quote) that the passages lack is never supported."""
    found = check(case.answer, [p.text for p in case.passages], shared_embedder().embed_documents, case.context)
    return [(f.sentence, f.supported, f.lexical, f.semantic) for f in found]


def faithfulness(case: Case) -> Score:
    if case.abstained:
        return Score(1.0, {"rule": "abstention: no claims"})
    rows = sentence_support(case)
    if not rows:
        return Score(0.0, {"rule": "empty answer"})
    bad = [s for s, ok, *_ in rows if not ok]
    return Score(1 - len(bad) / len(rows), {"unsupported": bad, "sentences": len(rows)})


def hallucination(case: Case) -> Score:
    f = faithfulness(case)
    return Score(None if f.value is None else 1 - f.value, f.details)


def answer_retrieved(case: Case) -> bool:
    ctx = f" {squad_normalize(case.context)} "
    return any(f" {squad_normalize(r)} " in ctx for r in case.references if squad_normalize(r))


@lru_cache(maxsize=4096)
def _context_keys(context: str) -> tuple[frozenset[str], str]:
    return frozenset(numbers(context)), norm_phrase(context)


def unsupported_details(answer: str, context: str) -> tuple[list[Detail], list[Detail]]:
    found = details(answer)
    nums, norm = _context_keys(context)
    return found, [d for d in found if not detail_supported(d, context, set(nums), norm)]


def sia(case: Case) -> Score:
    if not case.answerable:
        if case.abstained:
            return Score(1.0, {"rule": "abstained on an unanswerable question"})
        return Score(0.0, {"rule": "answered an unanswerable question"})
    if case.abstained:
        if answer_retrieved(case):
            return Score(0.0, {"rule": "abstained although the answer was retrieved"})
        return Score(1.0, {"rule": "abstained; the answer was not retrieved"})
    if not case.answer.strip():
        return Score(0.0, {"rule": "empty answer"})
    found, bad = unsupported_details(case.answer, case.context)
    return Score(0.0 if bad else 1.0, {"details": [d.text for d in found], "unsupported": [d.text for d in bad]})


register("faithfulness", lambda: FnMetric("faithfulness", faithfulness,
                                          "share of answer sentences supported by the passages"))
register("hallucination", lambda: FnMetric("hallucination", hallucination, "share of answer sentences not supported",
                                           higher_is_better=False))
register("sia", lambda: FnMetric("sia", sia, "every number, date, name and quote of the answer is in the passages; "
                                             "abstention rules for (un)answerable questions"))
