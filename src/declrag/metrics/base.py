"""The one shape of a metric, and the case it reads.

Every metric scores a `Case` (question, references, answerability, gold documents, the answer, its
passages) into a `Score` (a value in [0, 1] or None when it does not apply, plus what it flagged), and is
also a DSPy metric: ``metric(example, prediction, trace=None) -> float``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..types import GoldSpan


@dataclass(frozen=True)
class Passage:
    """A passage as metrics read it: the chunk it came from, its document, its text and character span in
    that document, and its search score."""

    chunk_id: str
    doc_id: str
    text: str
    start: int = 0
    end: int = 0
    score: float = 0.0

    @classmethod
    def of(cls, hit: Any) -> Passage:
        """The one conversion to a passage, from a search `declrag.types.Hit`, from a passage record as an
        evaluation writes it (a dict: ``chunk_id``, ``doc_id``, ``text``, ``span`` ``[start, end]``, ``score``;
        absent fields are empty), or from a `Passage` (returned as is)."""
        if isinstance(hit, Passage):
            return hit
        if isinstance(hit, dict):
            start, end = hit.get("span") or (0, 0)
            return cls(hit.get("chunk_id", ""), hit.get("doc_id", ""), hit.get("text", ""), start, end,
                       float(hit.get("score") or 0.0))
        return cls(hit.chunk.id, hit.doc_id, hit.text, hit.start, hit.end, float(hit.score))


@dataclass
class Case:
    question: str
    answer: str
    references: list[str] = field(default_factory=list)
    answerable: bool = True
    abstained: bool = False
    passages: list[Passage] = field(default_factory=list)
    gold: dict[str, int] = field(default_factory=dict)
    answer_starts: list[int] = field(default_factory=list)
    id: str = ""
    spans: list[GoldSpan] = field(default_factory=list)  # what retrieval is scored on (`declrag.metrics.passages`)

    @property
    def context(self) -> str:
        return "\n\n".join(p.text for p in self.passages)

    def gold_spans(self) -> list[GoldSpan]:
        """The spans retrieval is scored on: the case's own, else its answers' offsets in its one gold document."""
        return self.spans or list(GoldSpan.from_answers(self.gold, self.references, self.answer_starts))


@dataclass
class Score:
    value: float | None
    details: dict[str, Any] = field(default_factory=dict)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    try:
        value = obj[name] if hasattr(obj, "_store") else getattr(obj, name)
    except (KeyError, AttributeError):
        return default
    return default if value is None else value


def to_case(example: Any, prediction: Any) -> Case:
    """A `Case` from a golden `Example` (or dspy.Example / dict) and an `Answer` (or dspy.Prediction / dict)."""
    refs = _get(example, "answers", ()) or _get(example, "references", ())
    refs = [refs] if isinstance(refs, str) else list(refs)
    passages = [Passage.of(h) for h in _get(prediction, "passages", []) or []]
    return Case(
        id=str(_get(example, "id", "")), question=str(_get(example, "question", "")),
        answer=str(_get(prediction, "answer", "") or ""), references=[str(r) for r in refs],
        answerable=bool(_get(example, "answerable", True)), abstained=bool(_get(prediction, "abstained", False)),
        passages=passages, gold=dict(_get(example, "gold", {}) or {}),
        answer_starts=list(_get(example, "answer_starts", ()) or ()),
        spans=_spans(example),
    )


def _spans(example: Any) -> list[GoldSpan]:
    """The example's own gold spans (a golden `Example`'s, or a record's ``spans``); offsets are read by the case."""
    if hasattr(example, "gold_spans"):
        return list(example.gold_spans())
    return [GoldSpan.of(s) for s in _get(example, "spans", ()) or ()]


class Metric:
    """A named metric. Subclasses implement `score`; `tier` says whether it calls an LM."""

    name: str = ""
    tier: Literal["deterministic", "llm"] = "deterministic"
    higher_is_better: bool = True
    description: str = ""

    def score(self, case: Case) -> Score:
        raise NotImplementedError

    def __call__(self, example: Any, prediction: Any, trace: Any = None) -> float:
        value = self.score(to_case(example, prediction)).value
        return 0.0 if value is None else float(value)

    def __repr__(self) -> str:
        return f"<metric {self.name} ({self.tier})>"


class FnMetric(Metric):
    """A deterministic metric from a function of the case."""

    def __init__(self, name: str, fn: Callable[[Case], Score], description: str = "", higher_is_better: bool = True):
        self.name, self._fn, self.description, self.higher_is_better = name, fn, description, higher_is_better

    def score(self, case: Case) -> Score:
        return self._fn(case)


REGISTRY: dict[str, Callable[..., Metric]] = {}  # name -> factory, called without arguments


def register(name: str, factory: Callable[..., Metric]) -> None:
    REGISTRY[name] = factory
