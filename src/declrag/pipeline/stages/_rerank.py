"""The candidate pool reordered (`Reranker`) by one of the scorers in `SCORERS` (``rerank.mode``): BM25 over the
candidates, a cross-encoder, or an LLM judge; ``none`` keeps the retrieval order."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, ClassVar

from ...config import LMConfig, ProgramConfig, RerankConfig
from ...embed.embedder import resolve_model
from ...lm.prompts import LMPrompt, SignatureSpec
from ...runtime import device
from ...stores.bm25 import KeywordIndex
from ...types import Hit
from ._base import Building, PipelineStage
from ._state import State


class Scorer(ABC):
    """One way to score the candidates against the question (a ``rerank.mode``): made with the stage's settings and,
    for a scorer that ``uses_lm``, its prompt; `warm_up` loads what it needs (a model) before the first question."""

    uses_lm: ClassVar[bool] = False

    def __init__(self, cfg: RerankConfig, prompt: LMPrompt | None = None):
        self.cfg, self.prompt = cfg, prompt

    def warm_up(self) -> None:  # noqa: B027 (a hook: most scorers need nothing loaded)
        """Load what scoring needs, now. Idempotent; nothing by default."""

    @abstractmethod
    def scores(self, question: str, hits: list[Hit]) -> list[float]:
        """One score per hit, higher is better (ties keep the retrieval order)."""


class BM25Scorer(Scorer):
    """BM25 over the candidates alone (no model)."""

    def scores(self, question: str, hits: list[Hit]) -> list[float]:
        return [float(s) for s in KeywordIndex([h.text for h in hits]).scores(question)]


class CrossEncoderScorer(Scorer):
    """A cross-encoder (``rerank.model``: a hub name or a folder) on the device declrag runs models on."""

    _model: Any = None

    def warm_up(self) -> None:
        if self._model is None:
            from sentence_transformers import CrossEncoder  # imported here, not at the top: only this mode needs it

            self._model = CrossEncoder(str(resolve_model(self.cfg.model)), device=device.resolve())

    def scores(self, question: str, hits: list[Hit]) -> list[float]:
        self.warm_up()
        return [float(s) for s in self._model.predict([(question, h.text) for h in hits], show_progress_bar=False)]


class LLMScorer(Scorer):
    """An LLM judge: 1 for a passage it calls relevant, else 0 (``signatures/rerank.yaml``)."""

    uses_lm = True

    def scores(self, question: str, hits: list[Hit]) -> list[float]:
        assert self.prompt is not None  # made by the stage for a scorer that uses an LM
        return [1.0 if self.prompt.run(question=question, passage=h.text).relevant else 0.0 for h in hits]


#: The rerank stage's scorers, by ``rerank.mode`` (``none``: no scorer, the retrieval order kept).
SCORERS: dict[str, type[Scorer]] = {"bm25": BM25Scorer, "cross-encoder": CrossEncoderScorer, "llm": LLMScorer}


class Reranker(PipelineStage):
    """Reorders the candidate pool by its scorer (`SCORERS`, ``rerank.mode``); ``none`` keeps it as it is."""

    name, phase, section = "rerank", "candidates", "rerank"
    prompts: ClassVar[tuple[str, ...]] = ("rerank",)
    variants: ClassVar[dict[str, tuple[str, ...]]] = {"rerank.variant": ("rerank",)}

    def __init__(self, cfg: RerankConfig, lm: LMConfig | None = None, specs: dict[str, SignatureSpec] | None = None):
        """``lm`` and ``specs`` (the prompt) are needed by a scorer that uses an LM only; `ValueError` without."""
        super().__init__()
        self.cfg = cfg
        self.stage = None  # the LM judge's prompt (its DSPy state is saved as ``rerank.stage.predict``)
        kind = SCORERS.get(cfg.mode)
        if kind is not None and kind.uses_lm:
            if lm is None or specs is None:
                raise ValueError("an LLM reranker needs its LM config and the rerank prompt specs")
            self.stage = self.stage_for(specs["rerank"], cfg.variant, lm)
        self.scorer = kind(cfg, self.stage) if kind is not None else None

    @classmethod
    def build(cls, program: Building) -> Reranker:
        return cls(program.config.rerank, program.config.stage_lm("rerank"), program.specs)

    @classmethod
    def lm_stages(cls, config: ProgramConfig) -> list[str]:
        kind = SCORERS.get(config.rerank.mode)
        return ["rerank"] if kind is not None and kind.uses_lm else []

    def warm_up(self) -> None:
        if self.scorer is not None:
            self.scorer.warm_up()

    def attributes(self, state: State) -> dict[str, Any]:
        return {"declrag.rerank.mode": self.cfg.mode}

    def run(self, state: State, span: Any) -> None:
        state.pool = self(question=state.search_text, hits=state.pool)

    def forward(self, question: str, hits: list[Hit]) -> list[Hit]:
        if self.scorer is None or len(hits) <= 1:
            return hits
        scores = self.scorer.scores(question, hits)
        ranked = sorted(range(len(hits)), key=lambda i: (-scores[i], i))  # ties keep the retrieval order
        return [replace(hits[i], scores={**hits[i].scores, "rerank": scores[i]}) for i in ranked]
