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

import numpy as np

from ..postprocess import sentences, support
from .base import Case, FnMetric, Score, register
from .embedding import shared_embedder
from .text import Detail, detail_supported, details, norm_phrase, numbers, squad_normalize, strip_citations

# Calibrated on tests/data/grounding_cases.jsonl (85 hand-labelled SQuAD v2.0 cases; see the test there)
LEXICAL = 0.6  # share of a sentence's content words that must occur in one passage
SEMANTIC = 0.75  # or: cosine to a passage sentence ...
SEMANTIC_LEXICAL = 0.55  # ... with at least this share of words in common


def _passage_sentences(case: Case) -> list[str]:
    return [s for p in case.passages for s in sentences(p.text)]


def sentence_support(case: Case) -> list[tuple[str, bool, float, float]]:
    """(sentence, supported, lexical support, semantic support) for each sentence of the answer. A sentence
    with a specific detail (number, name, quote) that the passages lack is never supported."""
    sents = [s for s in sentences(strip_citations(case.answer)) if s.strip()]
    if not sents:
        return []
    texts = [p.text for p in case.passages]
    lexical = [max((support(s, t) for t in texts), default=0.0) for s in sents]
    semantic = [0.0] * len(sents)
    psents = _passage_sentences(case)
    if psents and any(lex < LEXICAL for lex in lexical):
        e = shared_embedder()
        a, p = e.embed_documents(sents), e.embed_documents(psents)
        semantic = [float(x) for x in np.max(a @ p.T, axis=1)]
    context = case.context
    return [(s, (lex >= LEXICAL or (sem >= SEMANTIC and lex >= SEMANTIC_LEXICAL))
             and not unsupported_details(s, context)[1], lex, sem)
            for s, lex, sem in zip(sents, lexical, semantic)]


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
