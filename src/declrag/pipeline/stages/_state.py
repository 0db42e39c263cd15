"""What the stages of one question hand each other: the one `State` they run over, and the values in it (the
history's `SearchQuestion`, the rewrite's `Queries`, the generate stage's `Draft`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...inputs import Turn
from ...types import Hit


class Rankers(Protocol):
    """Rankers whose choices an explored question's passages are multileaved from (`declrag.pipeline.stages.select.
    Explorer`): ``record`` says which, ``passages`` hands them over for a state whose queries are made."""

    record: dict[str, Any]

    def passages(self, state: State, served: list[Hit]) -> list[Hit]: ...


@dataclass
class SearchQuestion:
    """What a conversation's last turn is searched as (`HistoryQuery`): ``text`` (what the rewrite modes, the
    keyword leg and the reranker read) and ``vector`` (the vector leg's query, when it is not ``text``'s)."""

    text: str
    vector: np.ndarray | None = None
    earlier: int = 0  # earlier user turns used


@dataclass
class Queries:
    """What the rewrite stage searches with: ``texts`` (each searched, their results fused), the text whose embedding
    replaces the question's (HyDE), the sub-questions (decompose) and a conversation's mixed query vector."""

    texts: list[str]  # searched, results fused by reciprocal rank
    vector_text: str | None = None  # HyDE: the text whose embedding replaces the question's
    sub_questions: list[str] = field(default_factory=list)
    vector: np.ndarray | None = None  # a conversation's mixed query vector: replaces the first text's embedding


@dataclass
class Draft:
    """The generate stage's answer before the self-judge: its ``text``, whether it ``abstained``, the passages it cites
    (``used``, by number from 1) or was attributed to after the fact, what it quotes (``quotes``: passage, start, end),
    what the deterministic checks did (``checked``), an echo or a copy caught (``caught``) and an abstention's
    ``reason``."""

    text: str
    abstained: bool
    used: list[int]  # passage numbers cited
    attributed: list[int] = field(default_factory=list)  # passage numbers attributed after the fact
    removed: int = 0
    raw: str = ""
    quotes: list[tuple[int, int, int]] = field(default_factory=list)  # (passage, start, end): the words taken from it
    checked: dict[str, Any] | None = None  # extractive / verified: what was dropped, replaced, re-cited, and why
    # lm / verified: the LM's output was an echo or a copy (`declrag.pipeline.stages.generate`): its kind, why, what
    # replaced it
    caught: dict[str, str] | None = None
    reason: str = ""  # an abstention's, for people: "the passages never mention X"
    widened: dict[int, Hit] = field(default_factory=dict)  # passages grown to hold a whole quoted sentence, by number


@dataclass
class State:
    """What one question's stages read and write, in the order they fill it: the ``question`` and ``history`` (as
    checked), ``where`` (the filter), the search question (``search``: the history stage's), ``queries`` (the
    rewrite's), the candidate ``pool`` (retrieve, rerank), the ``passages`` handed over (select), the ``draft``
    answer (generate) and the self-judge's ``verdict``. ``depth``: the candidates asked for beyond the program's
    own (retrieval metrics); ``explorer``: the rankers to multileave from (`declrag.pipeline.stages.select`). What the
    generate stage leaves for the judge: ``said`` (the conversation as it read it), ``context`` (the passages as its
    prompt showed them), ``rewrite`` (the draft written again with the strict prompt) and ``below_reason`` (why it
    abstained without asking: no passage close enough). ``abstain_below``: the similarity to the question the best
    passage must reach for the generate stage to answer (``retrieve.abstain_below``, set by the select stage)."""

    question: str
    history: tuple[Turn, ...] = ()
    where: dict | None = None
    depth: int | None = None
    explorer: Rankers | None = None
    search: SearchQuestion | None = None
    queries: Queries | None = None
    pool: list[Hit] = field(default_factory=list)
    passages: list[Hit] = field(default_factory=list)
    draft: Draft | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    said: str | None = None
    context: str | None = None
    rewrite: Callable[[], Draft] | None = None
    below_reason: str | None = None
    abstain_below: float | None = None

    @property
    def search_text(self) -> str:
        """The text the stages after the history stage search with: its search question, else the question."""
        return self.search.text if self.search is not None else self.question
