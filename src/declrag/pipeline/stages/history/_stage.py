"""The search question of a conversation's last turn (`HistoryQuery`, by ``history.query``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ....config import HistoryConfig, LMConfig, ProgramConfig
from ....embed.embedder import Embedder
from ....lm.prompts import SignatureSpec
from .._base import Building, PipelineStage, embedding_time
from .._state import SearchQuestion, State
from . import _conversation as conv


class HistoryQuery(PipelineStage):
    """The search question of a conversation's last turn, by ``history.query`` (see
    `declrag.pipeline.stages.history`)."""

    name, phase, section, attribute = "history", "queries", "history", "history_query"
    prompts: ClassVar[tuple[str, ...]] = ("condense",)
    variants: ClassVar[dict[str, tuple[str, ...]]] = {"history.variant": ("condense",)}

    @classmethod
    def build(cls, program: Building) -> HistoryQuery:
        c = program.config
        return cls(c.history, c.stage_lm("condense"), program.specs, program.embedder)

    @classmethod
    def lm_stages(cls, config: ProgramConfig) -> list[str]:
        return ["condense"] if config.history.query == "condense" else []

    def describe(self) -> Any:
        return None  # not shown in an answer's stages (as before stages were declared)

    def attributes(self, state: State) -> dict[str, Any]:
        return {"declrag.history.turns": len(state.history)}

    def run(self, state: State, span: Any) -> None:
        state.search = self(question=state.question, history=state.history)

    def __init__(self, cfg: HistoryConfig, lm: LMConfig, specs: dict[str, SignatureSpec], embedder: Embedder):
        super().__init__()
        self.cfg, self.embedder = cfg, embedder
        self.stage = None
        if cfg.query == "condense":
            self.stage = self.stage_for(specs["condense"], cfg.variant, lm, name="condense")

    def forward(self, question: str, history: tuple[conv.Turn, ...] = ()) -> SearchQuestion:
        c = self.cfg
        earlier = [t.content for t in conv.window(history, c.turns, c.chars, roles=("user",))]
        if c.query == "off" or not earlier:
            return SearchQuestion(question)
        if c.query == "joined":
            return SearchQuestion(conv.joined(question, earlier), earlier=len(earlier))
        if self.stage is not None:
            context = conv.transcript(conv.window(history, c.generate_turns, c.chars, roles=("user", "assistant")))
            text = " ".join(str(self.stage.run(conversation=context, question=question).standalone or "").split())
            if text:
                return SearchQuestion(text[:1000], earlier=len(earlier))
        with embedding_time():  # deterministic (and condense's fallback); the earlier turns' vectors are cached
            vecs = self.embedder.embed_queries([question, *reversed(earlier)])
        return SearchQuestion(conv.expanded_query(question, earlier, c.terms), conv.mixed_vector(vecs, c.weight),
                              len(earlier))
