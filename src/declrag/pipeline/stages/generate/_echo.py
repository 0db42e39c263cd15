"""What an LM's output must not be to pass as an answer: the prompt handed back, or the passages copied wholesale.

Small models do both. Asked through the plain-text prompt (`declrag.lm.prompts.PlainTextAdapter`), SmolLM2
often answers ``"Question:\\nWhat baselines do they compare to?\\n\\nContext:\\n[1] we use hand-crafted ..."``: every
sentence is copied from the context, so a support check passes it, and the user reads their own question and the raw
passages. `caught` finds such an output before it is passed on; `declrag.pipeline.stages.generate.Generator` puts the
extractive answer, a retry or the abstention in its place (``generate.caught``) and says so in the answer's
``checked``, the trace and ``/metrics``.

An **echo** repeats the prompt's scaffolding:

- a line opening with one of the prompt's input labels (``Question:``, ``Context:``, ``Conversation:``);
- the question word for word (five words or more), or quoted: `QUESTION_RUN` of its words running inside quotation
  marks (``The answer to the question "..." is ...``); an answer that restates the question's words to say its
  answer ("The only variety ... that has official status is Modern Standard Arabic") is an answer;
- a passage as the prompt numbers it (``[2]`` and the first words of passage 2) or labels it (``[2]`` and a
  passage's document title and section in parentheses, as the prompt shows them);
- ten words running of the instructions.

An output with no words of its own (only citation markers and punctuation: ``[1] ```) is not an answer either
(**empty**).

A **copy** is mostly the passages pasted: at least `COPY_SHARE` of its words lie in runs of `RUN` words or more
that occur in the passages, and there are at least `COPY_WORDS` of them (more than the extractive answer's three
sentences would quote). A short answer that quotes one sentence with its citation is an answer, not a copy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ....text.normalize import strip_citations

RUN = 8  # words in a row that count as copied
COPY_SHARE = 0.8  # of the output's words, copied, for a copy ...
COPY_WORDS = 40  # ... and at least this many of them
QUESTION_WORDS = 5  # a question this long (or longer) repeated word for word is an echo
QUESTION_RUN = 8  # and so is this many of its words in a row inside quotes ("The answer to the question "..."")
INSTRUCTION_WORDS = 10  # words of the instructions in a row that make an echo
LABELS = ("question", "context", "conversation", "passages")
_LABEL = re.compile(rf"^\s*(?:{'|'.join(LABELS)})\s*:", re.I | re.M)
_WORD = re.compile(r"\w+")
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|\'([^\']{20,})\'')


@dataclass(frozen=True)
class Caught:
    """Why an output is not an answer: ``kind`` (``echo``, ``copy`` or ``empty``) and ``why`` (one line, for
    people)."""

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


def copied(output: Sequence[str], copyable: set[tuple[str, ...]], run: int = RUN) -> int:
    """How many words of ``output`` lie in runs of ``run`` words found in ``copyable`` (the source's runs of ``run``
    words, `_runs`)."""
    covered = [False] * len(output)
    for i in range(len(output) - run + 1):
        if tuple(output[i:i + run]) in copyable:
            covered[i:i + run] = [True] * run
    return sum(covered)


class Prompt:
    """What an LM was asked: the ``question``, the ``passages`` as the prompt showed them (numbered from 1, each with
    its ``labels``: the document's title and section) and the ``instructions``; with what an echo of them or a copy
    would hold worked out once (`caught` reads it once per output, `EchoGate` once per streamed piece)."""

    def __init__(self, question: str, passages: Sequence[str], instructions: str = "", labels: Sequence[str] = ()):
        self.asked, self.told = words(question), words(instructions)
        self.asked_runs = _runs(self.asked, QUESTION_RUN) if len(self.asked) > QUESTION_RUN else set()
        self.told_runs = _runs(self.told, INSTRUCTION_WORDS) if len(self.told) >= INSTRUCTION_WORDS else set()
        self.openings = [words(p)[:5] for p in passages]
        self.numbered = [re.compile(rf"\[{n}\]\s*(?:\([^)]*\)\s*)?" + r"\W+".join(map(re.escape, opening)), re.I)
                         for n, opening in enumerate(self.openings, 1) if len(opening) >= 3]
        self.labelled = [(n, re.compile(rf"\[\d+\]\s*\({re.escape(label)}\)")) for n, label in enumerate(labels, 1)
                         if label]
        self.copyable = _runs([w for p in passages for w in [*words(p), "\x00"]], RUN)

    def caught(self, output: str) -> Caught | None:
        """Whether ``output`` (the LM's raw answer) echoes this prompt, copies its passages or has no words of its
        own; None when it is an answer."""
        if m := _LABEL.search(output):
            return Caught("echo", f"repeats the prompt's {m.group().strip()!r} label")
        said = words(strip_citations(output))
        if not said:
            return Caught("empty", "has no words of its own")
        if len(self.asked) >= QUESTION_WORDS and _holds(said, self.asked):
            return Caught("echo", "repeats the question")
        quoted = [w for groups in _QUOTED.findall(output) for q in groups if q for w in [*words(q), "\x00"]]
        if self.asked_runs and _runs(quoted, QUESTION_RUN) & self.asked_runs:
            return Caught("echo", f"quotes {QUESTION_RUN} or more words of the question")
        for n, label in self.labelled:  # "[2] (Title — Section)", as the prompt shows a passage
            if label.search(output):
                return Caught("echo", f"repeats passage [{n}]'s label as the prompt shows it")
        for pattern in self.numbered:
            if m := pattern.search(output):
                return Caught("echo", f"repeats passage {m.group().split()[0]} as the prompt numbers it")
        if self.told_runs and _runs(said, INSTRUCTION_WORDS) & self.told_runs:
            return Caught("echo", "repeats the instructions")
        if len(said) >= COPY_WORDS:
            got = copied(said, self.copyable)
            if got >= COPY_WORDS and got >= COPY_SHARE * len(said):
                return Caught("copy", f"{got} of its {len(said)} words are the passages' own, copied in runs")
        return None


def caught(output: str, question: str, passages: Sequence[str], instructions: str = "",
           labels: Sequence[str] = ()) -> Caught | None:
    """`Prompt.caught` for one output: whether it echoes the prompt (``question``, ``passages`` as shown, numbered
    from 1, their ``labels``, ``instructions``), copies the passages or has no words; None when it is an answer."""
    return Prompt(question, passages, instructions, labels).caught(output)


class EchoGate:
    """What of an LM answer still being written may be streamed: nothing that could still turn into an echo, so
    nothing of an echo is ever sent. Held back, as the answer grows: a last line that may become one of the prompt's
    labels (``Quest``...), trailing words that begin the question, a ``[n]`` that may go on with passage n's first
    words, three or more trailing words running in the instructions, and everything from the first run of `RUN`
    words copied from the passages (a copy is known only at its end: its first few words may have been sent). Once
    an echo shows, nothing more is sent; what was held comes with the final answer, or the one that replaced it."""

    def __init__(self, prompt: Prompt):
        self.prompt, self.blocked = prompt, False

    def safe(self, text: str) -> int:
        """How many characters of ``text`` (the answer so far) can be sent whatever follows."""
        p = self.prompt
        if self.blocked:
            return 0
        got = p.caught(text)
        if got is not None and got.kind == "echo":
            self.blocked = True
            return 0
        found = list(_WORD.finditer(text))
        said = [m.group().lower() for m in found]
        cut = len(text)
        line_at = text.rfind("\n") + 1
        line = text[line_at:].strip().lower()
        if line and any(label.startswith(line.rstrip(":")) for label in LABELS):
            cut = min(cut, line_at)
        for m in range(min(len(p.asked), len(said)), 0, -1):  # the question's first words
            if said[-m:] == p.asked[:m]:
                cut = min(cut, found[-m].start())
                break
        if (mark := text.rfind("[")) >= 0 and (n := re.match(r"\[(\d+)\]?", text[mark:])) and n.group(1).isdigit():
            rest = text[mark + n.end():]
            after, k = words(rest), int(n.group(1))
            cited = rest.lstrip()[:1] in tuple(".,;:!?")  # "[1]." cites; it does not begin a passage
            opening = p.openings[k - 1] if 0 < k <= len(p.openings) else []
            if not cited and opening and len(after) < 5 and after == opening[:len(after)]:
                cut = min(cut, mark)
        for m in range(min(INSTRUCTION_WORDS - 1, len(said)), 2, -1):  # a run of the instructions
            if _holds(p.told, said[-m:]):
                cut = min(cut, found[-m].start())
                break
        for i in range(len(said) - RUN + 1):  # from the first copied run on
            if tuple(said[i:i + RUN]) in p.copyable:
                cut = min(cut, found[i].start())
                break
        return cut


__all__ = ["COPY_SHARE", "COPY_WORDS", "RUN", "Caught", "EchoGate", "Prompt", "caught", "copied", "words"]
