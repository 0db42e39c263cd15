"""Retrieval metrics over passages, independent of chunking: one truth, whatever the chunk size (the units and
the metrics are defined in docs/guides/eval.md, "Retrieval over passages").

A question's truth is one unit, the most precise it has (`unit_of`): ``span`` (gold spans, `GoldSpan`: a passage
**covers** one when it contains it, or at least half of it and the answer string the span carries), ``answer``
(short reference answers and no gold document: a passage holding one is relevant; one credit) or ``document``
(the gold documents, ranked by their best passage). Over passages each credit counts once; spans that overlap one
another (SQuAD's several annotators marking the same answer) are one credit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..text.normalize import squad_normalize
from ..types import GoldSpan
from .retrieval import RETRIEVAL_METRICS, at_k, doc_ranking, split_at

Unit = Literal["span", "answer", "document"]
# how each unit reads in a report
UNIT_WORDS = {"span": "passages covering the gold spans", "answer": "passages holding a reference answer",
              "document": "gold documents"}
SHORT_ANSWER_TOKENS = 12  # longer reference answers are free text (MTRAG's), not strings a passage would contain


def _short(answers: Iterable[str]) -> list[str]:
    norm = [squad_normalize(a) for a in answers]
    norm = [a for a in norm if a]
    return norm if norm and all(len(a.split()) <= SHORT_ANSWER_TOKENS for a in norm) else []


def unit_of(spans: Sequence[GoldSpan], answers: Iterable[str], gold: dict[str, int]) -> Unit | None:
    """The unit a question is scored in (see the module's docstring); None: no truth to score against."""
    if spans:
        return "span"
    if any(g > 0 for g in gold.values()):
        return "document"  # answers that occur in their gold documents were made spans when the set was loaded
    return "answer" if _short(answers) else None


def credits(spans: Sequence[GoldSpan]) -> list[tuple[list[GoldSpan], int]]:
    """The spans grouped into credits: spans that share a ``credit`` (an answer's occurrences) are one, and so are
    spans of one document that overlap one another (grade: the highest of them)."""
    shared: dict[str, list[GoldSpan]] = {}
    groups: list[list[GoldSpan]] = []
    for s in sorted(spans, key=lambda s: (s.doc, s.start, s.end)):
        if s.credit:
            shared.setdefault(s.credit, []).append(s)
        elif groups and groups[-1][0].doc == s.doc and s.start < max(x.end for x in groups[-1]):
            groups[-1].append(s)
        else:
            groups.append([s])
    return [(g, max(x.grade for x in g)) for g in [*groups, *shared.values()]]


def covers(doc: str, start: int, end: int, text: str, span: GoldSpan) -> bool:
    """The declared rule: the passage contains the span, or at least half of it and the span's answer string."""
    if doc != span.doc or span.end <= span.start:
        return False
    if start <= span.start and span.end <= end:
        return True
    overlap = min(end, span.end) - max(start, span.start)
    if overlap * 2 < span.end - span.start:
        return False
    answer = squad_normalize(span.answer)
    return not answer or f" {answer} " in f" {squad_normalize(text)} "


def coverage(passages: Sequence[Any], spans: Sequence[GoldSpan]) -> tuple[list[set[int]], list[int]]:
    """Per passage (in rank order), the credits it covers; and each credit's grade."""
    groups = credits(spans)
    out = []
    for p in passages:
        doc, start, end, text = _fields(p)
        out.append({i for i, (members, _) in enumerate(groups) if any(covers(doc, start, end, text, s)
                                                                        for s in members)})
    return out, [g for _, g in groups]


def answer_coverage(passages: Sequence[Any], answers: Iterable[str], gold: dict[str, int]
                    ) -> tuple[list[set[int]], list[int]]:
    """The ``answer`` unit: one credit, covered by a passage (of a gold document, when any is named) that holds a
    normalized reference answer."""
    refs = _short(answers)
    docs = {d for d, g in gold.items() if g > 0}
    out = []
    for p in passages:
        doc, _, _, text = _fields(p)
        hay = f" {squad_normalize(text)} "
        out.append({0} if (not docs or doc in docs) and any(f" {r} " in hay for r in refs) else set())
    return out, [1]


def _fields(p: Any) -> tuple[str, int, int, str]:
    if isinstance(p, tuple):
        return p[0], p[1], p[2], p[3]
    return p.doc_id, p.start, p.end, p.text


def credit_scores(covered: Sequence[set[int]], grades: Sequence[int], names: Iterable[str]) -> dict[str, float]:
    """Each metric ``kind@k`` over passages whose credits are ``covered`` (rank order), each credit once."""
    out = {}
    for name in names:
        kind, k = split_at(name)
        seen: set[int] = set()
        first: list[set[int]] = []  # per rank: the credits covered here for the first time
        for c in covered[:k]:
            first.append(c - seen)
            seen |= c
        if kind == "hit":
            out[name] = float(bool(seen))
        elif kind == "recall":
            out[name] = len(seen) / len(grades) if grades else 0.0
        elif kind == "precision":
            out[name] = sum(bool(c) for c in covered[:k]) / k
        elif kind == "mrr":
            out[name] = next((1.0 / (i + 1) for i, c in enumerate(covered[:k]) if c), 0.0)
        elif kind == "ndcg":
            dcg = sum(sum(grades[j] for j in new) / math.log2(i + 2) for i, new in enumerate(first))
            ideal = sorted((g for g in grades if g > 0), reverse=True)[:k]
            idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
            out[name] = min(1.0, dcg / idcg) if idcg else 0.0
        else:
            raise KeyError(name)
    return out


def passage_scores(passages: Sequence[Any], spans: Sequence[GoldSpan], answers: Iterable[str], gold: dict[str, int],
                   names: Iterable[str] | None = None) -> tuple[dict[str, float], Unit] | None:
    """Every retrieval metric of ``passages`` (rank order: `Passage`s, or ``(doc, start, end, text)`` tuples) in the
    question's unit, and the unit; None when the question has no truth to score against."""
    names = list(names) if names is not None else list(RETRIEVAL_METRICS)
    answers = list(answers)
    unit = unit_of(spans, answers, gold)
    if unit is None:
        return None
    if unit == "document":
        ranked = doc_ranking(_fields(p)[0] for p in passages)
        return {n: at_k(n, ranked, gold) for n in names}, unit
    covered, grades = coverage(passages, spans) if unit == "span" else answer_coverage(passages, answers, gold)
    return credit_scores(covered, grades, names), unit

