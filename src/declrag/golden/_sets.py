"""The golden-set types: an evaluation question (Example) and a corpus with its questions by split."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DeclragError
from ..inputs import Turn
from ..types import Document, GoldSpan

# the labels of `Example.metadata` that reports break metrics down by (MTRAG's, and any set's that carry them)
LABELS = ("answerability", "multi_turn", "question_type", "turns")


@dataclass(frozen=True, slots=True)
class Example:
    """One evaluation question with its reference answers and graded gold documents."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    gold: dict[str, int] = field(default_factory=dict)
    answerable: bool = True
    answer_starts: tuple[int, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    history: tuple[Turn, ...] = ()  # the conversation before the question (declrag.pipeline.stages.history)
    spans: tuple[GoldSpan, ...] = ()  # gold spans given by the set (else derived from answer offsets: gold_spans)

    def gold_spans(self) -> tuple[GoldSpan, ...]:
        """The spans retrieval is scored on: the set's own, else each extractive answer's span in the example's one
        gold document (SQuAD's answer offsets); () when neither is known."""
        return self.spans or GoldSpan.from_answers(self.gold, self.answers, self.answer_starts)

    def labels(self, conversational: bool = False) -> dict[str, Any]:
        """The example's `LABELS`: its metadata's, and with ``conversational`` (the set has conversations)
        ``turns``, its earlier user turns: 0, 1, 2 or 3+."""
        out = {k: self.metadata[k] for k in LABELS if k in self.metadata}
        if conversational:
            n = sum(t.role == "user" for t in self.history)
            out["turns"] = str(n) if n < 3 else "3+"
        return out


def labels_of(examples: Sequence[Example]) -> list[dict[str, Any]]:
    """Each example's labels (see `Example.labels`), ``turns`` included when any example has a history."""
    conversational = any(e.history for e in examples)
    return [e.labels(conversational) for e in examples]


@dataclass
class GoldenSet:
    """A corpus and its evaluation questions, by split."""

    name: str
    documents: list[Document]
    splits: dict[str, list[Example]]
    # the declaration's (a set made by declrag synth says so, and how it was filtered); not part of the set's identity
    description: str = field(default="", compare=False)
    _by_id: dict[str, Document] | None = field(default=None, init=False, repr=False, compare=False)

    def split(self, name: str) -> list[Example]:
        if name not in self.splits:
            raise no_split(self.name, name, self.splits)
        return self.splits[name]

    def examples(self) -> list[Example]:
        """Every question of every split once (by id, the first split's copy), in split order."""
        seen: dict[str, Example] = {}
        for split in self.splits.values():
            for e in split:
                seen.setdefault(e.id, e)
        return list(seen.values())

    def synthetic(self) -> dict[str, Any] | None:
        """How many of the questions a generator made (``metadata.synthetic``), and which generators; None: none."""
        made = [e.metadata for s in self.splits.values() for e in s if e.metadata.get("synthetic")]
        if not made:
            return None
        return {"questions": len(made), "of": sum(len(s) for s in self.splits.values()),
                "generators": sorted({str(m.get("generator")) for m in made}), "description": self.description}

    def doc(self, doc_id: str) -> Document:
        if self._by_id is None or len(self._by_id) != len(self.documents):
            self._by_id = {d.id: d for d in self.documents}
        if doc_id not in self._by_id:
            raise DeclragError(f"golden set {self.name!r} has no document {doc_id!r}",
                               hint="gold ids refer to the set's own documents; check the corpus and the qrels")
        return self._by_id[doc_id]


def no_split(name: str, split: str, available: Iterable[str]) -> DeclragError:
    return DeclragError(f"dataset {name!r} has no split {split!r}; available: {', '.join(available) or 'none'}",
                        hint="use one of the available split names")
