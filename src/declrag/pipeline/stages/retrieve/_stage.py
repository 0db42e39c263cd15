"""Hybrid search for every query, fused, with the named-document search, the documents' signal, autocut and context
expansion (`Retriever`)."""

from __future__ import annotations

from typing import Any, ClassVar

from ....config import ProgramConfig, RetrieveConfig
from ....embed.embedder import Embedder
from ....runtime import tracing
from ....stores.base import Filter, Store
from ....types import Hit
from .._base import Building, PipelineStage, embedding_time
from .._state import Queries, State
from ._documents import POOL as DOCUMENT_POOL
from ._documents import DocumentIndex, boost
from ._ranking import cut, rrf
from ._searching import FILLS, expand


def pool_size(config: ProgramConfig) -> int:
    """The candidates a program's `Retriever` gives: at least ``retrieve.k``; the reranker's candidates when it
    reranks; three times k for MMR to choose among; twice k for best-first hand-over's stand-ins
    (`declrag.pipeline.stages.retrieve.hand_over`)."""
    r, rerank = config.retrieve, config.rerank
    return max(r.k, rerank.candidates if rerank.mode != "none" else 0, 3 * r.k if r.mmr else 0,
               2 * r.k if r.handover in FILLS else 0)


class Retriever(PipelineStage):
    """Hybrid search for every query, fused; autocut; context expansion. Returns a candidate pool."""

    name, phase, section = "retrieve", "candidates", "retrieve"
    reads: ClassVar[tuple[str, ...]] = ("retrieve", "rerank")  # the rerank's candidates size the pool

    def __init__(self, cfg: RetrieveConfig, store: Store, embedder: Embedder, pool: int):
        super().__init__()
        self.cfg, self.store, self.embedder, self.pool = cfg, store, embedder, pool
        self.documents = DocumentIndex(store) if cfg.documents > 0 or cfg.named else None

    @classmethod
    def build(cls, program: Building) -> Retriever:
        return cls(program.config.retrieve, program.store, program.embedder, pool_size(program.config))

    def describe(self) -> Any:
        c = self.cfg
        return {"k": c.k, "alpha": c.alpha, "fusion": c.fusion, "autocut": c.autocut, "window": c.window,
                "mmr": c.mmr, "order": c.order, "abstain_below": c.abstain_below}

    def warm_up(self) -> None:
        if self.documents is not None:
            self.documents.warm_up()  # the index over whole documents (retrieve.named, .documents)

    def span_name(self) -> str:
        return f"retrieval {self.store.uri}"

    def attributes(self, state: State) -> dict[str, Any]:
        return {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": self.store.uri,
                "gen_ai.retrieval.top_k": self.pool, "declrag.retrieve.alpha": self.cfg.alpha}

    def run(self, state: State, span: Any) -> None:
        assert state.queries is not None  # made by the queries phase
        state.pool = self(queries=state.queries, where=state.where, depth=state.depth)
        if span.is_recording():
            span.set_attribute("gen_ai.retrieval.documents", tracing.documents(state.pool))

    def _embed(self, texts: list[str]):
        with embedding_time():
            return self.embedder.embed_queries(texts)

    def forward(self, queries: Queries, where: dict | None = None, depth: int | None = None) -> list[Hit]:
        """The candidate pool; ``depth`` asks for more candidates than the program uses (retrieval metrics)."""
        c = self.cfg
        pool = want = max(self.pool, depth or 0)
        if c.documents > 0:
            pool = max(pool, DOCUMENT_POOL)  # deeper, then re-scored with the documents' signal
        filt = Filter.of(where if where is not None else c.where)
        given = queries.vector if queries.vector_text is None else None  # a conversation's mixed vector
        vecs: list[Any]
        if c.alpha == 0:
            vecs = [None] * len(queries.texts)
        elif given is not None:  # not embedded again: only the other queries are
            vecs = [given, *(list(self._embed(queries.texts[1:])) if len(queries.texts) > 1 else [])]
        else:
            vecs = list(self._embed([queries.vector_text or queries.texts[0], *queries.texts[1:]]))
        lists = []
        for i, (q, v) in enumerate(zip(queries.texts, vecs)):
            with tracing.span("hybrid search", {"declrag.query.index": i, "declrag.search.fusion": c.fusion,
                                                "gen_ai.retrieval.query.text": q if tracing.content() else None}) as s:
                lists.append(self.store.hybrid_search(q, v, pool, c.alpha, c.fusion, c.candidates, filt, c.ann))
                s.set_attribute("declrag.hits", len(lists[-1]))
        hits = rrf(lists)
        if c.named and self.documents is not None:
            hits = self._named(queries.texts[0], vecs[0], hits, pool, filt)
        if c.documents > 0 and self.documents is not None:
            hits = boost(hits, self.documents.scores(" ".join(queries.texts)), c.documents, want)
        hits = cut(hits, c.autocut)
        return expand(self.store, hits, c.window)

    def _named(self, question: str, vector: Any, hits: list[Hit], pool: int, filt: Filter | None) -> list[Hit]:
        """``hits``, fused with a search within the documents that ``question`` names (`DocumentIndex.named`) when
        none of the first ``k`` is theirs: the search over all has then missed the document the user means."""
        named = self.documents.named(question) if self.documents is not None else []
        if not named or not hits or not set(named).isdisjoint(h.doc_id for h in hits[: self.cfg.k]):
            return hits
        c, within = self.cfg, {"doc_id": {"$in": named}}
        with tracing.span("named search", {"declrag.named.documents": len(named)}) as s:
            found = self.store.hybrid_search(question, vector, pool, c.alpha, c.fusion, c.candidates,
                                             Filter({"$and": [filt.spec, within]} if filt else within), c.ann)
            s.set_attribute("declrag.hits", len(found))
        return rrf([hits, found])
