"""What the answering service needs of a program, typed: `Program`, which `declrag.pipeline.RAGProgram` is."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..config import ProgramConfig
from ..embed.embedder import Embedder
from ..pipeline.program import Answer
from ..pipeline.stages.generate import Generator
from ..pipeline.stages.select import Explorer
from ..stores.base import Store
from ..types import Hit


@runtime_checkable
class Program(Protocol):
    """A loaded program as the service calls it (`declrag.pipeline.program.RAGProgram`): its config, store and
    embedder (the semantic cache embeds questions with it), the generate stage (streaming listens to its LM), its
    explorer (`declrag serve --explore`; None: off), and three calls: `warm_up`, an answer, a search."""

    config: ProgramConfig
    store: Store
    embedder: Embedder
    generate: Generator
    explorer: Explorer | None

    def warm_up(self, lms: bool = True) -> Any:
        """Load the models and the store's search snapshot now; ``lms=False`` leaves the LMs alone."""

    def __call__(self, question: str, where: dict | None = None, history: Any = None,
                 explore: bool = False) -> Answer:
        """The answer to ``question`` (`Answer`: text, citations, passages, usage, latency by stage)."""

    def search(self, question: str, history: Any = None, where: dict | None = None, k: int | None = None,
               alpha: float | None = None) -> list[Hit]:
        """The passages the program would answer ``question`` from, best first."""
