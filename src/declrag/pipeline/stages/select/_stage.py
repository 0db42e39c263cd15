"""The passages handed over from the candidate pool (`Selector`): MMR's pick, best-first hand-over (no character of a
document twice), the order the generate stage reads them in; or, for an explored question, the rankers' choices
multileaved (`declrag.pipeline.stages.select`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....config import RetrieveConfig
from ....embed.embedder import Embedder
from ....runtime import tracing
from ....stores.base import Store
from ....types import Hit
from .._base import Building, PipelineStage, embedding_time
from .._state import Queries, State
from ..retrieve import hand_over, mmr, order


class Selector(PipelineStage):
    """The ``retrieve.k`` passages handed over from the (reranked) pool: MMR's pick first when ``retrieve.mmr`` is on,
    then hand-over as ``retrieve.handover`` says (`hand_over`), then ``retrieve.order``."""

    name, phase, section = "select", "passages", "retrieve"

    def __init__(self, cfg: RetrieveConfig, store: Store, embedder: Embedder):
        super().__init__()
        self.cfg, self.store, self.embedder = cfg, store, embedder

    @classmethod
    def build(cls, program: Building) -> Selector:
        return cls(program.config.retrieve, program.store, program.embedder)

    def describe(self) -> Any:
        return None  # its settings are retrieve's, shown there

    def attributes(self, state: State) -> dict[str, Any]:
        return {"declrag.retrieve.k": self.cfg.k, "declrag.explored": state.explorer is not None}

    def run(self, state: State, span: Any) -> None:
        assert state.queries is not None  # made by the queries phase
        state.abstain_below = self.cfg.abstain_below  # the similarity the passages handed over must reach
        chosen = self.chosen(state.queries, state.pool)
        state.passages = state.explorer.passages(state, chosen) if state.explorer is not None else \
            self.hand_over(chosen)
        if span.is_recording():
            span.set_attribute("gen_ai.retrieval.documents", tracing.documents(state.passages))

    def hand_over(self, hits: list[Hit]) -> list[Hit]:
        """The ``retrieve.k`` best of ``hits`` (in their order) handed over as ``retrieve.handover`` says (`hand_over`:
        best-first by default, no character of a document twice), then ordered (``retrieve.order``)."""
        c = self.cfg
        return order(hand_over(self.store, hits, c.k, c.handover), c.order)

    def chosen(self, queries: Queries, pool: list[Hit]) -> list[Hit]:
        """``pool`` in the order its passages are handed over from: MMR's pick of k first (the ranking kept among them),
        when it is on, then the rest (best-first takes its stand-ins from them)."""
        c = self.cfg
        if c.mmr and len(pool) > c.k:
            with embedding_time():
                vecs = self.embedder.embed_documents([h.text for h in pool])
                qv = self.embedder.embed_query(queries.vector_text or queries.texts[0])
            picked = {h.chunk.id for h in mmr(pool, np.asarray(vecs), np.asarray(qv), c.k, c.mmr_lambda)}
            return [h for h in pool if h.chunk.id in picked] + [h for h in pool if h.chunk.id not in picked]
        return pool
