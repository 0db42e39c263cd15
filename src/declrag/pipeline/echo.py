"""What an LM's output must not be to pass as an answer: the prompt handed back, or the passages copied wholesale.

Small models do both. Asked through the plain-text prompt (`declrag.pipeline.adapters.PlainTextAdapter`), SmolLM2
often answers ``"Question:\\nWhat baselines do they compare to?\\n\\nContext:\\n[1] we use hand-crafted ..."``: every
sentence is copied from the context, so a support check passes it, and the user reads their own question and the raw
passages. `caught` finds such an output before it is passed on; `declrag.pipeline.modules.Generator` puts the
extractive answer, a retry or the abstention in its place (``generate.caught``) and says so in the answer's
``checked``, the trace and ``/metrics``.

An **echo** repeats the prompt's scaffolding:

- a line opening with one of the prompt's input labels (``Question:``, ``Context:``, ``Conversation:``);
- the question itself, word for word (five words or more);
- a passage as the prompt numbers it (``[2]`` and the first words of passage 2);
- ten words running of the instructions.

A **copy** is mostly the passages pasted: at least `COPY_SHARE` of its words lie in runs of `RUN` words or more
that occur in the passages, and there are at least `COPY_WORDS` of them (more than the extractive answer's three
sentences would quote). A short answer that quotes one sentence with its citation is an answer, not a copy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..text import strip_citations

RUN = 8  # words in a row that count as copied
COPY_SHARE = 0.8  # of the output's words, copied, for a copy ...
COPY_WORDS = 40  # ... and at least this many of them
QUESTION_WORDS = 5  # a question this long (or longer) repeated word for word is an echo
INSTRUCTION_WORDS = 10  # words of the instructions in a row that make an echo
LABELS = ("question", "context", "conversation", "passages")
_LABEL = re.compile(rf"^\s*(?:{'|'.join(LABELS)})\s*:", re.I | re.M)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Caught:
    """Why an output is not an answer: ``kind`` (``echo`` or ``copy``) and ``why`` (one line, for people)."""

    kind: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "why": self.why}


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _runs(needle: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(needle[i:i + n]) for i in range(len(needle) - n + 1)}


def _holds(hay: Sequence[str], needle: Sequence[str]) -> bool:
    """``needle`` occurs in ``hay`` as consecutive words."""
    n = len(needle)
    return n > 0 and any(list(hay[i:i + n]) == list(needle) for i in range(len(hay) - n + 1))


def copied(output: Sequence[str], source: Sequence[str], run: int = RUN) -> int:
    """How many words of ``output`` lie in runs of ``run`` words or more that occur in ``source``."""
    if len(output) < run:
        return 0
    seen = _runs(source, run)
    covered = [False] * len(output)
    for i in range(len(output) - run + 1):
        if tuple(output[i:i + run]) in seen:
            covered[i:i + run] = [True] * run
    return sum(covered)


def caught(output: str, question: str, passages: Sequence[str], instructions: str = "") -> Caught | None:
    """Whether ``output`` (the LM's raw answer) echoes the prompt or copies ``passages`` (as the prompt showed them,
    numbered from 1), rather than answering ``question``; None when it is an answer."""
    if m := _LABEL.search(output):
        return Caught("echo", f"repeats the prompt's {m.group().strip()!r} label")
    said = words(output)
    asked = words(question)
    if len(asked) >= QUESTION_WORDS and _holds(said, asked):
        return Caught("echo", "repeats the question")
    for n, passage in enumerate(passages, 1):
        opening = words(passage)[:5]
        if len(opening) >= 3 and re.search(rf"\[{n}\]\s*(?:\([^)]*\)\s*)?" + r"\W+".join(map(re.escape, opening)),
                                           output, re.I):
            return Caught("echo", f"repeats passage [{n}] as the prompt numbers it")
    told = words(instructions)
    if len(told) >= INSTRUCTION_WORDS and _runs(said, INSTRUCTION_WORDS) & _runs(told, INSTRUCTION_WORDS):
        return Caught("echo", "repeats the instructions")
    plain = words(strip_citations(output))
    if len(plain) >= COPY_WORDS:
        got = copied(plain, [w for p in passages for w in [*words(p), "\x00"]])
        if got >= COPY_WORDS and got >= COPY_SHARE * len(plain):
            return Caught("copy", f"{got} of its {len(plain)} words are the passages' own, copied in runs")
    return None


class EchoGate:
    """What of an LM answer that is still being written may be streamed: nothing `caught` could still catch as an
    echo, and nothing from the first run copied from the passages on (a copy is known only at the end). The first
    `HOLD` words wait, and the last few (as many as the question has, at least `RUN`: they may yet become the
    question, a label or a copied run); once an echo shows, nothing more is sent. What was held comes with the
    final answer, or the answer that replaced the output."""

    HOLD = 12

    def __init__(self, question: str, passages: Sequence[str], instructions: str = ""):
        self.question, self.passages, self.instructions = question, list(passages), instructions
        self.source = [w for p in self.passages for w in [*words(p), "\x00"]]
        self.tail = max(RUN, len(words(question)))
        self.blocked = False

    def safe(self, text: str) -> int:
        """How many characters of ``text`` (the answer so far) can be sent whatever follows."""
        if self.blocked:
            return 0
        got = caught(text, self.question, self.passages, self.instructions)
        if got is not None and got.kind == "echo":
            self.blocked = True
            return 0
        found = list(_WORD.finditer(text))
        if len(found) <= max(self.HOLD, self.tail):
            return 0
        said = [m.group().lower() for m in found]
        cut = len(said) - self.tail
        seen = _runs(self.source, RUN)
        for i in range(len(said) - RUN + 1):
            if tuple(said[i:i + RUN]) in seen:
                cut = min(cut, i)
                break
        return found[cut].start() if cut > 0 else 0


__all__ = ["COPY_SHARE", "COPY_WORDS", "RUN", "Caught", "EchoGate", "caught", "copied", "words"]
