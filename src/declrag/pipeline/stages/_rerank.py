"""The candidate pool reordered (`Reranker`): none, BM25 over the candidates, a cross-encoder, or an LLM judge."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from ...config import LMConfig, ProgramConfig, RerankConfig
from ...embed.embedder import resolve_model
from ...lm.prompts import SignatureSpec
from ...runtime import device
from ...stores.bm25 import KeywordIndex
from ...types import Hit
from ._base import Building, PipelineStage
from ._state import State


class Reranker(PipelineStage):
    """Reorders the candidate pool: none, BM25 over the candidates, a cross-encoder, or an LLM judge."""

    name, phase, section = "rerank", "candidates", "rerank"
    prompts: ClassVar[tuple[str, ...]] = ("rerank",)
    variants: ClassVar[dict[str, tuple[str, ...]]] = {"rerank.variant": ("rerank",)}

    @classmethod
    def build(cls, program: Building) -> Reranker:
        return cls(program.config.rerank, program.config.stage_lm("rerank"), program.specs)

    @classmethod
    def lm_stages(cls, config: ProgramConfig) -> list[str]:
        return ["rerank"] if config.rerank.mode == "llm" else []

    def warm_up(self) -> None:
        if self.cfg.mode == "cross-encoder":
            getattr(self, "cross_encoder", None)  # the model, loaded now

    def attributes(self, state: State) -> dict[str, Any]:
        return {"declrag.rerank.mode": self.cfg.mode}

    def run(self, state: State, span: Any) -> None:
        state.pool = self(question=state.search_text, hits=state.pool)

    def __init__(self, cfg: RerankConfig, lm: LMConfig | None = None, specs: dict[str, SignatureSpec] | None = None):
        """``lm`` and ``specs`` (the prompt) are needed by the LLM judge only; the other modes have no prompt."""
        super().__init__()
        self.cfg = cfg
        self.stage = None
        if cfg.mode == "llm":
            if lm is None or specs is None:
                raise ValueError("an LLM reranker needs its LM config and the rerank prompt specs")
            self.stage = self.stage_for(specs["rerank"], cfg.variant, lm)
        self._cross = None

    def forward(self, question: str, hits: list[Hit]) -> list[Hit]:
        mode = self.cfg.mode
        if mode == "none" or len(hits) <= 1:
            return hits
        if mode == "bm25":
            scores = [float(s) for s in KeywordIndex([h.text for h in hits]).scores(question)]
        elif mode == "cross-encoder":
            scores = [float(s) for s in self.cross_encoder.predict([(question, h.text) for h in hits],
                                                                   show_progress_bar=False)]
        else:
            assert self.stage is not None  # mode "llm": made in __init__
            scores = [1.0 if self.stage.run(question=question, passage=h.text).relevant else 0.0 for h in hits]
        ranked = sorted(range(len(hits)), key=lambda i: (-scores[i], i))  # ties keep the retrieval order
        return [replace(hits[i], scores={**hits[i].scores, "rerank": scores[i]}) for i in ranked]

    @property
    def cross_encoder(self):
        if self._cross is None:
            from sentence_transformers import CrossEncoder

            self._cross = CrossEncoder(str(resolve_model(self.cfg.model)), device=device.resolve())
        return self._cross
