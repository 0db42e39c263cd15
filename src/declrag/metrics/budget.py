"""Retrieval at a context budget: the evidence found within the first B characters a program hands over.

Every metric over passages credits a passage for holding the evidence, whatever its length; a search scored by
them learns to hand over more text (bigger chunks, their neighbours), and a "gain" bought with four times the input
is a cost to whoever reads it, an LM paid by the token or the extractive answer picking among more sentences. At a
budget, two programs are compared on equal terms:

- the passages are read in rank order, each adding only its characters **not already handed over** (a window
  that overlaps an earlier passage, a neighbour already read, adds what is new);
- reading stops at ``B`` characters: the passage that crosses the budget adds its first new characters up to it;
- the evidence (the question's unit, `declrag.metrics.passages`: gold spans, a short reference answer, gold
  documents) is credited at the rank where what has been handed over so far first covers it.

The metrics are named ``kind@Bc``: ``ndcg@5000c``, ``recall@1500c``, ``hit@1500c`` (characters: what a store
and a citation count; about four to a token of English). ``kind@budget`` stands for the run's own budget
(`resolve_budget`): compile's, eval's and the benches' ``--context-budget``, by default what the default program
hands over.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import DeclragError
from ..types import GoldSpan
from .passages import Unit, _fields, answer_coverage, covers, credit_scores, credits, unit_of
from .retrieval import doc_ranking, hit_at_k, ndcg_at_k, recall_at_k

BUDGET_KINDS = ("ndcg", "recall", "hit")
_NAME = re.compile(r"^(ndcg|recall|hit)@(\d+)c$")
Piece = tuple[str, int, int, str]  # (document, start, end, text)


def is_budget_metric(name: str) -> bool:
    return bool(_NAME.match(name)) or name.removesuffix("@budget") in BUDGET_KINDS and name.endswith("@budget")


def split_budget(name: str) -> tuple[str, int]:
    """``ndcg@5000c`` -> ``("ndcg", 5000)``."""
    m = _NAME.match(name)
    if m is None:
        raise KeyError(name)
    return m.group(1), int(m.group(2))


def resolve_budget(names: Iterable[str], budget: int | None) -> list[str]:
    """``names`` with ``kind@budget`` made ``kind@{budget}c``; a name that needs a budget when there is none is an
    error naming the fix."""
    out = []
    for n in names:
        if n.endswith("@budget"):
            if budget is None:
                raise DeclragError(f"metric {n!r} needs a context budget", hint="give --context-budget CHARS")
            n = f"{n.removesuffix('@budget')}@{budget}c"
        out.append(n)
    return out


def _minus(start: int, end: int, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) without the intervals of ``taken`` (sorted, disjoint)."""
    out, at = [], start
    for s, e in taken:
        if e <= at or s >= end:
            continue
        if s > at:
            out.append((at, s))
        at = max(at, e)
    if at < end:
        out.append((at, end))
    return out


def _add(taken: list[tuple[int, int]], s: int, e: int) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted([*taken, (s, e)]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def handed_over(passages: Sequence[Any], budget: int) -> list[list[Piece]]:
    """Per passage (rank order), the pieces it adds within ``budget`` characters: its characters not already handed
    over, in document order, the last cut where the budget ends; [] once it is spent (or for a passage that adds
    nothing new)."""
    left, taken = budget, dict[str, list[tuple[int, int]]]()
    out: list[list[Piece]] = []
    for p in passages:
        doc, start, end, text = _fields(p)
        pieces: list[Piece] = []
        for s, e in _minus(start, end, taken.get(doc, [])):
            if left <= 0:
                break
            e = min(e, s + left)
            pieces.append((doc, s, e, text[s - start:e - start]))
            taken[doc] = _add(taken.get(doc, []), s, e)
            left -= e - s
        out.append(pieces)
    return out


def characters(passages: Sequence[Any]) -> int:
    """The characters ``passages`` hand over, each once (what overlaps an earlier passage is not counted again)."""
    return sum(e - s for pieces in handed_over(passages, 10**12) for _, s, e, _ in pieces)


def _joined(pieces: Sequence[Piece]) -> list[Piece]:
    """Pieces of one document that meet end to start, joined (what has been handed over, as stretches of text)."""
    out: list[Piece] = []
    for doc, s, e, t in sorted(pieces, key=lambda p: (p[0], p[1])):
        if out and out[-1][0] == doc and out[-1][2] == s:
            d, s0, _, t0 = out[-1]
            out[-1] = (d, s0, e, t0 + t)
        else:
            out.append((doc, s, e, t))
    return out


def _within(passages: Sequence[Any], budget: int, unit: Unit, spans: Sequence[GoldSpan], answers: list[str],
            gold: dict[str, int]) -> tuple[list[set[int]], list[int]] | list[str]:
    """What ``budget`` characters of ``passages`` hand over, in the question's ``unit``: the documents in rank order
    (``document``), else per rank the credits covered so far and each credit's grade."""
    ranks = [pieces for pieces in handed_over(passages, budget) if pieces]  # a passage adding nothing takes no rank
    if unit == "document":
        return doc_ranking(doc for pieces in ranks for doc, *_ in pieces)
    groups = credits(spans) if unit == "span" else []
    so_far: list[Piece] = []
    covered: list[set[int]] = []
    for pieces in ranks:
        so_far.extend(pieces)
        joined = _joined(so_far)
        if unit == "span":
            covered.append({i for i, (members, _) in enumerate(groups)
                            if any(covers(d, s, e, t, m) for d, s, e, t in joined for m in members)})
        else:
            got, _ = answer_coverage(joined, answers, gold)
            covered.append(set().union(*got) if got else set())
    return covered, [g for _, g in groups] if unit == "span" else [1]


def budget_scores(passages: Sequence[Any], spans: Sequence[GoldSpan], answers: Iterable[str], gold: dict[str, int],
                  names: Iterable[str]) -> tuple[dict[str, float], Unit] | None:
    """Every ``kind@Bc`` metric of ``names`` for ``passages`` (rank order), in the question's unit; None when the
    question has no truth to score against. Each budget is read once, whatever the kinds asked at it."""
    answers = list(answers)
    unit = unit_of(spans, answers, gold)
    if unit is None:
        return None
    seen: dict[int, Any] = {}
    out: dict[str, float] = {}
    for name in names:
        kind, budget = split_budget(name)
        if budget not in seen:
            seen[budget] = _within(passages, budget, unit, spans, answers, gold)
        got = seen[budget]
        if unit == "document":
            out[name] = {"ndcg": ndcg_at_k, "recall": recall_at_k, "hit": hit_at_k}[kind](got, gold, max(len(got), 1))
        else:
            covered, grades = got
            at = f"{kind}@{max(len(covered), 1)}"
            out[name] = credit_scores(covered, grades, [at])[at]
    return out, unit


__all__ = ["BUDGET_KINDS", "budget_scores", "characters", "handed_over", "is_budget_metric", "resolve_budget",
           "split_budget"]
