"""The candidates of `declrag synth` and its typed LM questions (generator ``lm``; docs/guides/synth.md): one
declared prompt per question type (`signatures/synth_*.yaml`, each with a demo, which a 135M model needs), then the
reference answer, checked against its passage. A reply that is not a usable question is retried, then counted as
malformed and dropped, never a crash.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

import regex

from ..config import LMConfig
from ..lm import check_lm, registry
from ..lm.prompts import LMPrompt, spec
from ..metrics.base import Case, Passage
from ..metrics.grounding import faithfulness
from ..text.keywords import STOPWORDS_EN, keyword_tokens, spaceless
from ..text.normalize import squad_normalize
from ..text.tokens import ScriptTokens

LM_KINDS = {"factoid": 0.5, "explanatory": 0.25, "unanswerable": 0.15, "multi": 0.10}  # shares of LM questions
RETRIES = 1  # more attempts at a usable question per passage
FAITHFUL = 0.5  # an explanatory answer needs at least this share of its sentences supported by its passage
_LEAD = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.)]|q\d*[:.)]|question\s*\d*\s*[:.)-])\s*", re.I)
_WH = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "much", "many"}
_ANSWER_LEAD = re.compile(r"^\s*(?:answer\s*[:.)-]|a[:.)])\s*", re.I)
_LACKS = re.compile(r"\b(not (mentioned|stated|given|provided|specified|say|said)|does(n't| not) (say|mention|"
                    r"specify|provide|state|tell)|no information|cannot be (determined|answered)|"
                    r"(i )?don'?t know|unknown|not in the (passage|text))\b", re.I)


@dataclass
class Candidate:
    """A generated question before filtering, with its provenance."""

    question: str
    kind: str  # cloze | title | factoid | explanatory | unanswerable | multi
    doc_id: str
    span: tuple[int, int]
    answers: tuple[str, ...] = ()
    answer_starts: tuple[int, ...] = ()
    answerable: bool = True
    gold: dict[str, int] = field(default_factory=dict)  # the seed document(s); judged gold is added later
    scores: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.gold and self.answerable:
            self.gold = {self.doc_id: 1}


# --------------------------------------------------------------------------------------------- no model
_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{N}\p{M}]*(?:[-'][\p{L}\p{N}][\p{L}\p{N}\p{M}]*)*")


def content_words(text: str) -> list[str]:
    """The words of ``text`` a query is made of, in order, English stop words out: a word keeps its combining marks
    (Hindi's vowel signs) and its inner hyphens and apostrophes; a run of a script without spaces counts as its
    character bigrams (`declrag.text.keywords`), so a Chinese sentence has words to count and to pick from."""
    out: list[str] = []
    for w in _WORD.findall(text):
        if spaceless(w):
            out += keyword_tokens(w)
        elif w.lower() not in STOPWORDS_EN:
            out.append(w)
    return out


# --------------------------------------------------------------------------------------------- an LM
def clean_question(text: str | None) -> str | None:
    """The question in a model's reply (its first line with a question mark; numbering, labels and lead-ins such
    as "The question is:" removed), or None when there is no usable one (4 to 40 words, ending with "?" or a
    full-width "？"; a word of a script without spaces is two characters: `ScriptTokens`)."""
    for line in (text or "").splitlines():
        line = _LEAD.sub("", line.strip()).strip()
        if not (m := re.search(r"[?？]", line)):
            continue
        q = line[: m.end()]
        if ":" in q:  # "A question for the passage: What ...?" -> "What ...?"
            q = q.rsplit(":", 1)[1]
        q = q.strip().strip('"“”').strip()
        words = sum(q[a:b].isalnum() for a, b in ScriptTokens().offsets(q)) if spaceless(q) else len(q.split())
        if 4 <= words <= 40 and re.search(r"[^\W\d_]", q):
            return q[0].upper() + q[1:]
    return None


def clean_answer(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    first = _ANSWER_LEAD.sub("", lines[0]).strip().strip('"“”') if lines else ""
    return first.rstrip(".").strip() if len(first.split()) <= 12 else first


def off_passage(question: str, passage: str, demo: str = "") -> bool:
    """Whether the question is not about its passage: none of its content words is in the passage, or more of them
    are in the prompt's demo than in the passage (a small model copies its demo)."""
    words = {w.lower() for w in content_words(question)} - _WH
    shared = words & {w.lower() for w in content_words(passage)}
    return not shared or len(words & {w.lower() for w in content_words(demo)}) > len(shared)


def answer_problem(kind: str, answer: str, passage: str, question: str = "") -> tuple[str | None, int | None]:
    """Why ``answer`` cannot be the reference answer to a ``kind`` question about ``passage`` (None: it can), and
    for a factoid answer its offset in the passage (an exact span, compared case-insensitively)."""
    if not answer:
        return "no reference answer", None
    if _LACKS.search(answer):
        return "reference answer says the passage lacks it", None
    if squad_normalize(answer) and squad_normalize(answer) in squad_normalize(question):
        return "reference answer repeats the question", None
    if kind == "factoid":
        if len(answer.split()) > 12:
            return "factoid answer longer than 12 words", None
        at = passage.lower().find(answer.lower())
        return ("factoid answer not a span of its passage", None) if at < 0 else (None, at)
    if len(content_words(re.sub(r"(?i)\bexcerpt \d\b", "", answer))) < 3:
        return "explanatory answer under 3 content words", None

    score = faithfulness(Case(question="", answer=answer, passages=[Passage("p", "p", passage)])).value or 0.0
    return (None, None) if score >= FAITHFUL else (f"answer not supported by its passage (faithfulness < {FAITHFUL})",
                                                   None)


def ready(route: str) -> str:
    """``route``, checked before any work: an unknown route or a missing key is one clear error, and a local model
    is loaded now (a missing model file says so)."""
    check_lm(LMConfig(route=route))
    if route.startswith("local/"):
        registry.local_models.get(route.removeprefix("local/"))
    return route


class LMWriter:
    """Questions and reference answers from an LM route, through the declared prompts (metered as stage
    ``synth``)."""

    calls_per_passage = 1.85  # a question, and an answer for 85% of them (not for unanswerable ones)

    def __init__(self, route: str, max_tokens: int = 96):
        self.route = ready(route)
        attempts = [LMConfig(route=route, temperature=0.0, max_tokens=max_tokens, seed=0)]
        attempts += [LMConfig(route=route, temperature=0.7, max_tokens=max_tokens, seed=i)
                     for i in range(1, RETRIES + 1)]
        a = spec("synth_answer")
        self.questions = {k: [LMPrompt("synth", spec(f"synth_{k}"), "default", cfg) for cfg in attempts]
                          for k in LM_KINDS}
        self.answers = {k: LMPrompt("synth", a, k, attempts[0]) for k in a.variants}
        self.demo_text = {k: " ".join(str(v) for d in spec(f"synth_{k}").demos for v in d.values()) for k in LM_KINDS}

    def question(self, kind: str, passage: str) -> str | None:
        for stage in self.questions[kind]:
            if (q := clean_question(stage.run(passage=passage).get("question"))) is not None:
                return q
        return None

    def answer(self, kind: str, passage: str, question: str) -> str:
        return clean_answer(self.answers[kind].run(passage=passage, question=question).get("answer"))


def lm_kind(rng: random.Random) -> str:
    """A question type for an LM passage, drawn in the shares of ``LM_KINDS``."""
    return rng.choices(list(LM_KINDS), weights=list(LM_KINDS.values()))[0]
