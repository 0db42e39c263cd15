"""The RAG stages before the answer as DSPy modules: the history's search query, rewrite, retrieve, rerank (writing
the answer and checking it: `declrag.pipeline.answer`).

An LM stage owns one `dspy.Predict` per prompt it needs, built from a signature spec (signatures/*.yaml);
each call runs under the stage's own LM route and adapter and is metered under the stage's name. Stages
with a cheap deterministic counterpart offer it (BM25 reranking, the grounding judge, the retrieval-score
abstention threshold), so small local models still get a working pipeline.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import dspy
import numpy as np

from ..config import (
    HistoryConfig,
    LMConfig,
    RerankConfig,
    RetrieveConfig,
    RewriteConfig,
)
from ..embed.embedder import Embedder, resolve_model
from ..runtime import device, tracing
from ..stores.base import Filter, Store
from ..stores.bm25 import KeywordIndex
from ..types import Hit
from . import conversation as conv
from .documents import POOL as DOCUMENT_POOL
from .documents import DocumentIndex, boost
from .ranking import cut, rrf
from .searching import expand
from .signatures import SignatureSpec
from .stage import Stage

_EMBED_MS: ContextVar[list[float] | None] = ContextVar("declrag_embed_ms", default=None)


@contextmanager
def embedding_time():
    """Add the time spent in this block to the current question's embedding time (see `timing_embeddings`)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if (box := _EMBED_MS.get()) is not None:
            box[0] += 1000 * (time.perf_counter() - t0)


@contextmanager
def timing_embeddings():
    """Collect the embedding time of one question (per thread / context, so concurrent questions don't mix)."""
    box = [0.0]
    token = _EMBED_MS.set(box)
    try:
        yield box
    finally:
        _EMBED_MS.reset(token)


def _stage(name: str, spec: SignatureSpec, variant: str, lm: LMConfig) -> Stage:
    """A stage on ``spec``'s prompt ``variant`` ("default": the spec's own default)."""
    return Stage(name, spec, spec.default if variant == "default" else variant, lm)


@dataclass
class Queries:
    texts: list[str]  # searched, results fused by reciprocal rank
    vector_text: str | None = None  # HyDE: the text whose embedding replaces the question's
    sub_questions: list[str] = field(default_factory=list)
    vector: np.ndarray | None = None  # a conversation's mixed query vector: replaces the first text's embedding


@dataclass
class SearchQuestion:
    """What a conversation's last turn is searched as (`HistoryQuery`): ``text`` (what the rewrite modes, the
    keyword leg and the reranker read) and ``vector`` (the vector leg's query, when it is not ``text``'s)."""

    text: str
    vector: np.ndarray | None = None
    earlier: int = 0  # earlier user turns used


class HistoryQuery(dspy.Module):
    """The search question of a conversation's last turn, by ``history.query`` (see `declrag.pipeline.conversation`)."""

    def __init__(self, cfg: HistoryConfig, lm: LMConfig, specs: dict[str, SignatureSpec], embedder: Embedder):
        super().__init__()
        self.cfg, self.embedder = cfg, embedder
        self.stage = _stage("condense", specs["condense"], cfg.variant, lm) if cfg.query == "condense" else None

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


class QueryRewriter(dspy.Module):
    SPECS = {"rewrite": "rewrite", "multi-query": "multi_query", "hyde": "hyde", "decompose": "decompose",
             "step-back": "step_back"}

    def __init__(self, cfg: RewriteConfig, lm: LMConfig, specs: dict[str, SignatureSpec]):
        super().__init__()
        self.cfg = cfg
        self.stage = _stage("rewrite", specs[self.SPECS[cfg.mode]], cfg.variant, lm) if cfg.mode != "off" else None

    def forward(self, question: str) -> Queries:
        c = self.cfg
        if self.stage is None:
            return Queries([question])
        if c.mode == "rewrite":
            q = (self.stage.run(question=question).query or "").strip()
            return Queries([q[:500] or question])
        if c.mode == "multi-query":
            qs = self.stage.run(question=question, n=c.n).queries or []
            return Queries(_unique([question, *qs])[: c.n + 1])
        if c.mode == "hyde":
            return Queries([question], vector_text=(self.stage.run(question=question).passage or "").strip() or None)
        if c.mode == "decompose":
            subs = _unique(self.stage.run(question=question, n=c.n).sub_questions or [])[: c.n]
            return Queries(_unique([question, *subs]), sub_questions=[s for s in subs if s != question])
        general = (self.stage.run(question=question).general_question or "").strip()
        return Queries(_unique([question, general]) if general else [question])


def _unique(texts: list[str]) -> list[str]:
    seen, out = set(), []
    for t in (t.strip() for t in texts if t):
        if t and t.lower() not in seen:
            seen.add(t.lower())
            out.append(t[:500])
    return out


class Retriever(dspy.Module):
    """Hybrid search for every query, fused; autocut; context expansion. Returns a candidate pool."""

    def __init__(self, cfg: RetrieveConfig, store: Store, embedder: Embedder, pool: int):
        super().__init__()
        self.cfg, self.store, self.embedder, self.pool = cfg, store, embedder, pool
        self.documents = DocumentIndex(store) if cfg.documents > 0 or cfg.named else None

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


class Reranker(dspy.Module):
    """Reorders the candidate pool: none, BM25 over the candidates, a cross-encoder, or an LLM judge."""

    def __init__(self, cfg: RerankConfig, lm: LMConfig | None = None, specs: dict[str, SignatureSpec] | None = None):
        """``lm`` and ``specs`` (the prompt) are needed by the LLM judge only; the other modes have no prompt."""
        super().__init__()
        self.cfg = cfg
        self.stage = None
        if cfg.mode == "llm":
            if lm is None or specs is None:
                raise ValueError("an LLM reranker needs its LM config and the rerank prompt specs")
            self.stage = _stage("rerank", specs["rerank"], cfg.variant, lm)
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
