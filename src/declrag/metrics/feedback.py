"""GEPA's feedback text: what was wrong with one answer, in plain English, from the deterministic grounding tier.

A bare score tells GEPA's reflection model that an answer was bad, not why. `findings` tells it why, with no LM
call, by the rules of the grounding metrics (`declrag.pipeline.stages.generate.check`): a wrong abstention, the names,
numbers and dates no passage mentions, unsupported sentences, citations that point at the wrong passage, and a
missed reference answer. Most telling first, each line cut short and the text stopped at ``limit`` characters,
so that a long, bad answer cannot crowd the reflection prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..pipeline.stages.generate import Finding, check, unsupported
from ..text.normalize import squad_normalize, strip_citations, token_recall
from ._embedding import shared_embedder
from .base import Case

LIMIT = 800  # characters of feedback at most
QUOTE = 110  # characters of an answer sentence quoted at most
MATCH = 0.8  # the answer holds the reference: token recall, as `token_match`
NO_PROBLEMS = "No problems found: the answer is supported by its passages and holds the reference answer."
_KIND = {"number": "numbers/dates", "name": "names", "quote": "quotes"}


def _q(text: str, limit: int = QUOTE) -> str:
    text = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split())).rstrip(" .")
    return f'"{text if len(text) <= limit else text[: limit - 1].rstrip() + "…"}"'


def _where(ref: str, case: Case) -> int | None:
    """The first passage (1-based) that holds ``ref``, SQuAD-normalised."""
    key = f" {squad_normalize(ref)} "
    if not key.strip():
        return None
    return next((n for n, p in enumerate(case.passages, 1) if key in f" {squad_normalize(p.text)} "), None)


def _retrieved(case: Case) -> tuple[str, int] | None:
    """A reference answer and the passage that holds it, if one does."""
    return next(((r, n) for r in case.references if (n := _where(r, case)) is not None), None)


def abstention(case: Case) -> str | None:
    """What was wrong with answering or abstaining, if anything."""
    if not case.answerable and not case.abstained:
        return ("Answered an unanswerable question: the passages do not hold its answer, so the answer should have "
                "been the abstention.")
    if case.answerable and case.abstained and (got := _retrieved(case)):
        return (f"Abstained although the reference answer {_q(got[0], 60)} was in passage [{got[1]}]; it should "
                "have answered from it.")
    return None


def describe(f: Finding) -> list[str]:
    """The problems of one checked answer sentence, each a line (none when it is supported as cited)."""
    out = []
    if not f.supported:
        gone = ", ".join(f'"{m}"' for m in f.missing[:3])
        why = f": {gone} {'appears' if len(f.missing) == 1 else 'appear'} in no passage" if f.missing else ""
        out.append(f"No passage supports the sentence {_q(f.sentence)}{why}.")
    if f.wrong_citation and f.by is not None:
        cites = ", ".join(f"[{n}]" for n in f.cited)
        out.append(f"The sentence {_q(f.sentence, 80)} cites {cites}, which does not support it; passage [{f.by}] "
                   "does.")
    return out


def invented(found: Sequence[Finding], case: Case) -> str | None:
    """The answer's details that its passages lack, by kind: ``names: "X"; numbers/dates: "1871"``."""
    by_kind: dict[str, list[str]] = {}
    for f in found:
        for d in unsupported(f.sentence, case.context) if f.missing else ():
            shown = by_kind.setdefault(_KIND.get(d.kind, d.kind), [])
            if f'"{d.text}"' not in shown:
                shown.append(f'"{d.text}"')
    if not by_kind:
        return None
    return "Not in any passage (invented?): " + "; ".join(f"{k}: {', '.join(v[:4])}" for k, v in by_kind.items()) + "."


def reference(case: Case) -> str | None:
    """An answer that misses the reference answer, and whether the passages held it."""
    if case.abstained or not case.answerable or not case.references:
        return None
    answer = strip_citations(case.answer)
    if max(token_recall(answer, r) for r in case.references) >= MATCH:
        return None
    got = _retrieved(case)
    where = f"it is in passage [{got[1]}]" if got else "the passages do not hold it either"
    return f"The answer does not give the reference answer {_q((got or (case.references[0],))[0], 60)}; {where}."


def lines(case: Case) -> list[str]:
    """Every finding of ``case``, most telling first (see the module docstring)."""
    out = [s for s in [abstention(case)] if s]
    if case.abstained or not case.answer.strip():
        if case.answerable and not case.abstained:
            out.append("The answer is empty.")
        return out
    found = check(case.answer, [p.text for p in case.passages], shared_embedder().embed_documents, case.context)
    out += [s for s in [invented(found, case)] if s]
    out += [s for f in found for s in describe(f)]
    out += [s for s in [reference(case)] if s]
    return out


def findings(case: Case, limit: int = LIMIT) -> str:
    """GEPA's feedback text for one answer: its findings (see the module docstring), most telling first, at most
    ``limit`` characters; `NO_PROBLEMS` when there are none."""
    found = lines(case)
    if not found:
        if not case.abstained:
            return NO_PROBLEMS
        return ("Abstained on an unanswerable question: right." if not case.answerable else
                "Abstained; the reference answer was not in the retrieved passages, so abstaining was right.")
    text = ""
    for i, line in enumerate(found):
        more = f" (+{len(found) - i} more)"
        if len(text) + 1 + len(line) > limit - len(more):
            return (text + more).strip() if text else line[: limit - 1] + "…"
        text = f"{text} {line}" if text else line
    return text
