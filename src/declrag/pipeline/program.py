"""`RAGProgram`: the whole pipeline as one `dspy.Module`, composed from a `ProgramConfig`; and its
artifact: one versioned folder that `declrag.load` (and later `declrag serve`) turns back into the very
same program.

    prog = RAGProgram(ProgramConfig(), store="my-store")
    answer = prog(question="...")          # an Answer (a dspy.Prediction)
    prog.save("runs/x/best"); same = declrag.load("runs/x/best")
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dspy
import numpy as np
from opentelemetry import trace

from ..config import (
    LOCAL_DEFAULT_MODE,
    ProgramConfig,
    answer_mode,
    default_config,
    read_config,
    with_mode,
    with_model,
)
from ..embed.embedder import Embedder
from ..inputs import Turn, turns, user_text
from ..lm import Meter, check_lm, metering, registry
from ..payloads import Citation
from ..runtime import tracing
from ..runtime.about import versions
from ..runtime.folders import default_store
from ..stores import open_store, read_meta
from ..stores.base import Filter, Store
from ..text.languages import load_identifier, not_theirs
from ..types import Hit
from .artifact import read_saved, saved_config, with_packed_embedder, write_artifact
from .conversation import transcript, window
from .explore import Explorer
from .ranking import mmr, order
from .searching import hand_over
from .signatures import SignatureSpec, spec
from .stage import since_ms, timed
from .stages import (
    Draft,
    Generator,
    HistoryQuery,
    QueryRewriter,
    Reranker,
    Retriever,
    SelfJudge,
    embedding_time,
    pool_size,
    timing_embeddings,
)

log = logging.getLogger(__name__)
NEAREST_CITED = 3  # an abstention cites the passages nearest to the question, at most this many
NEEDED_SPECS = ("generate", "rewrite", "multi_query", "hyde", "decompose", "step_back", "rerank", "judge", "condense")


class Answer(dspy.Prediction):
    """A program's answer: ``answer`` (text), ``abstained``, ``citations`` (each with the exact ``quotes`` taken from
    it, by the extractive and verified modes), ``passages``, ``judge``, ``usage`` (by stage), ``latency_ms`` (by
    stage), ``queries``, ``stages``, ``dropped_sentences`` (the verified mode's unsupported sentences),
    ``checked`` (what the deterministic modes did, and why), ``caught`` (None, or the LM's output was an echo of
    the prompt or a copy of the passages: ``kind``, ``why`` and what replaced it, ``replaced_by``) and ``reason``
    (an abstention's, for people: "the passages never mention X"; None for an answer). An abstention cites the
    `NEAREST_CITED` passages nearest to the question (``nearest``: true), for the reader to check."""

    def to_dict(self) -> dict[str, Any]:
        return {k: self[k] for k in ("answer", "abstained", "citations", "judge", "usage", "latency_ms",
                                     "removed_citations", "dropped_sentences", "checked", "caught", "reason",
                                     "queries", "stages",
                                     "question", "history_turns")}


class RAGProgram(dspy.Module):
    """Rewrite -> retrieve -> rerank -> select and order -> generate with citations -> self-judge.

    The constructor is light: it checks the config, the LM routes (and their keys) and the store's metadata
    (so a wrong store fails at once), and loads no model. `warm_up()` loads what answering needs (the
    embedding model, the cross-encoder, in-process local LMs, the store's search snapshot); the first call
    does it implicitly, `declrag serve` and the CLI call it up front and serve is ready only after it."""

    def __init__(self, config: ProgramConfig | None = None, store: Store | str | Path | None = None,
                 embedder: Embedder | None = None, specs: dict[str, SignatureSpec] | None = None):
        super().__init__()
        self.config = c = config or ProgramConfig()
        for name in self._lm_stages():  # fail fast on unknown routes or missing keys
            check_lm(c.stage_lm(name))
        if isinstance(store, Store):
            self.store = store
        else:
            where = store or c.store
            if where is None:
                where = default_store()
            self.store, _ = open_store(where, c.ingest, create=False)
        self.store_uri = self.store.uri
        self.embedder = embedder or Embedder(c.ingest.embedder)
        given = specs or {}  # a program saved before a prompt existed gets today's file for it
        self.specs = {**{k: spec(k) for k in NEEDED_SPECS if k not in given}, **given}
        self.history_query = HistoryQuery(c.history, c.stage_lm("condense"), self.specs, self.embedder)
        self.rewrite = QueryRewriter(c.rewrite, c.stage_lm("rewrite"), self.specs)
        self.retrieve = Retriever(c.retrieve, self.store, self.embedder, pool_size(c))
        self.rerank = Reranker(c.rerank, c.stage_lm("rerank"), self.specs)
        self.generate = Generator(c.generate, c.stage_lm("generate"), self.specs)
        self.generate.embedder = self.embedder
        self.generate.document_texts = self.store.document_texts
        self.judge = SelfJudge(c.judge, c.stage_lm("judge"), self.specs)
        self.explorer: Explorer | None = None  # `declrag serve --explore`: its rankers (`Explorer.of`)

    # -- running ------------------------------------------------------------------------------------------
    def warm_up(self, lms: bool = True) -> RAGProgram:
        """Load the models and open the store's search snapshot now, not on the first question. Idempotent;
        returns the program. LMs and local models are held by `declrag.registry`; the embedder and the
        cross-encoder by this program. ``lms=False`` leaves the LMs alone (an LM set with
        `declrag.lm.using_lm` stands in for the routes)."""
        warm = getattr(self, "_warm", None)  # None: cold; False: all but the LMs; True: everything
        if warm is True or (warm is False and not lms):
            return self

        getattr(self.embedder, "model", None)
        if self.config.rerank.mode == "cross-encoder":
            getattr(self.rerank, "cross_encoder", None)
        for name in self._lm_stages() if lms else ():
            registry.warm_up(self.config.stage_lm(name))
        self.store.warm_up()  # the search snapshot and its indexes, or the server connection
        if self.retrieve.documents is not None:
            self.retrieve.documents.warm_up()  # the index over whole documents (retrieve.named, .documents)
        self.embedder.embed_query("warm-up")  # the query path of the embedding backend
        getattr(self.embedder, "calibrate", None)  # its cosines' mapping: measured once, now (embed.calibration)
        load_identifier()  # every question's language is told (keyword search, the extractive answer)
        self._warm = lms
        return self

    def check(self, question: Any, history: Any = None, where: dict | None = None) -> tuple[str, tuple[Turn, ...]]:
        """The question and history as the program reads them, or `InputError` naming the field (the one check
        every entry point shares; see `declrag.inputs` and `declrag.pipeline.conversation`)."""
        c = self.config
        question = user_text(question, "question", c.max_question_chars,
                             hint="shorten it, or raise max_question_chars in the program config")
        history = turns(history, max_turns=c.history.max_turns, max_chars=c.history.max_chars)
        Filter.of(where)  # an invalid filter fails before any LM call
        return question, history

    def _queries(self, question: str, history: tuple[Turn, ...], ms: dict[str, float] | None = None):
        """The search question of this turn (the history's, `HistoryQuery`) and the rewrite stage's queries;
        their times go to ``ms`` as ``history`` and ``rewrite``."""
        with timed(ms, "history", {"declrag.history.turns": len(history)}):
            sq = self.history_query(question=question, history=history)
        with timed(ms, "rewrite", {"declrag.rewrite.mode": self.config.rewrite.mode}) as s:
            queries = self.rewrite(question=sq.text)
            s.set_attribute("declrag.rewrite.queries", len(queries.texts))
        if sq.vector is not None and queries.vector_text is None and queries.texts[0] == sq.text:
            queries.vector = sq.vector
        return sq, queries

    def forward(self, question: str, where: dict | None = None, history: Any = None, explore: bool = False
                ) -> Answer:
        """Answer ``question``; ``history``: the conversation before it (see `declrag.pipeline.conversation`);
        ``explore``: from the passages of this program's and its neighbours' rankings multileaved (with an
        ``explorer``: `declrag.pipeline.explore`; the answer's ``explored`` then says which rankers)."""
        c = self.config
        question, history = self.check(question, history, where)
        meter, ms = Meter(), dict[str, float]()
        t_all = time.perf_counter()
        with metering(meter), timing_embeddings() as embed_ms, self._traced("answer", question, history):
            sq, queries = self._queries(question, history, ms)
            pool = self._retrieve(queries, where, ms)
            with timed(ms, "rerank", {"declrag.rerank.mode": c.rerank.mode}):
                pool = self.rerank(question=sq.text, hits=pool)
            explorer = self.explorer if explore else None
            explored = explorer.record if explorer is not None else None
            with timed(ms, "select", {"declrag.retrieve.k": c.retrieve.k, "declrag.explored": bool(explored)}) as s:
                passages = explorer.passages(sq.text, queries, where, self._chosen(queries, pool)) \
                    if explorer is not None else self._select(queries, pool)
                if s.is_recording():
                    s.set_attribute("gen_ai.retrieval.documents", tracing.documents(passages))
            gen_question = question if not queries.sub_questions else \
                question + "\n(Sub-questions: " + "; ".join(queries.sub_questions) + ")"
            said = self._said(history)
            mode = self.generate.mode()
            with timed(ms, "generate", {"declrag.generate.mode": mode}) as s:
                below = self._below_threshold(queries, passages)
                draft = Draft(c.generate.abstain_phrase, True, [], reason="no passage is close enough to the "
                              "question") if below else \
                    self.generate(question=gen_question, passages=passages, conversation=said)
                s.set_attribute("declrag.abstained", draft.abstained)
                if draft.widened:  # a quoted sentence ran past its passage: the passage grows to hold it
                    passages = [draft.widened.get(n, h) for n, h in enumerate(passages, 1)]
                if draft.caught:  # the LM's output echoed the prompt or copied the passages: what replaced it
                    s.set_attribute("declrag.generate.caught", draft.caught["kind"])
                    s.set_attribute("declrag.generate.replaced_by", draft.caught["replaced_by"])
            with timed(ms, "judge", {"declrag.judge.mode": c.judge.mode, "declrag.judge.policy": c.judge.policy}):
                draft, verdict = self._judged(question, gen_question, passages, draft, said)
                if below:
                    verdict["reason"] = f"best passage similarity below {c.retrieve.abstain_below}"
        ms["embed"] = round(embed_ms[0], 3)
        ms["total"] = since_ms(t_all)
        cites = [Citation.payload(n, passages[n - 1], False, draft.quotes) for n in draft.used] + \
                [Citation.payload(n, passages[n - 1], True, draft.quotes) for n in draft.attributed]
        if draft.abstained:  # the passages nearest to the question, for the reader to check
            cites = [Citation.payload(n, passages[n - 1], False, [], nearest=True)
                     for n in range(1, min(NEAREST_CITED, len(passages)) + 1)]
        checked = draft.checked or {"mode": mode}
        return Answer(
            question=question, answer=draft.text, abstained=draft.abstained, citations=cites,
            removed_citations=draft.removed, dropped_sentences=int(checked.get("dropped", 0)), checked=checked,
            caught=draft.caught, reason=(draft.reason + not_theirs(question, (h.chunk.language for h in passages))
                                         or None) if draft.abstained else None,
            passages=passages, judge=verdict, usage=meter.to_dict(),
            latency_ms=ms, queries=queries.texts, raw_answer=draft.raw, stages=self.stages(),
            history_turns=len(history), explored=explored)

    def _judged(self, question: str, gen_question: str, passages: list[Hit], draft: Draft,
                said: str | None) -> tuple[Draft, dict[str, Any]]:
        """The self-judge's verdict on ``draft``, and the draft its policy leaves (regenerated, abstained, kept)."""
        c = self.config
        context = self.generate.context(passages)
        verdict = self.judge(question=question, passages=passages, draft=draft, context=context)
        verdict["action"] = "none" if c.judge.mode == "off" else "passed"
        if verdict.get("supported") is False and c.judge.policy == "regenerate":
            draft = self.generate(question=gen_question, passages=passages, strict=True, conversation=said)
            again = self.judge(question=question, passages=passages, draft=draft, context=context)
            verdict = {**again, "action": "regenerated", "first": verdict}
        elif verdict.get("supported") is False and c.judge.policy == "abstain":
            draft = Draft(c.generate.abstain_phrase, True, [], raw=draft.raw,
                          reason="the self-judge found the answer unsupported by its passages")
            verdict["action"] = "abstained"
        elif verdict.get("supported") is False:
            verdict["action"] = "flagged"
        if c.judge.mode != "off":
            supported = verdict.get("supported")
            tracing.evaluation(trace.get_current_span(), f"declrag.judge.{c.judge.mode}",
                               label=None if supported is None else "supported" if supported else "unsupported",
                               score=verdict.get("score"), explanation=verdict.get("reason"))
        return draft, verdict

    def _retrieve(self, queries, where: dict | None, ms: dict[str, float] | None, depth: int | None = None
                  ) -> list[Hit]:
        attributes = {"declrag.stage": "retrieve", "gen_ai.operation.name": "retrieval",
                      "gen_ai.data_source.id": self.store_uri, "gen_ai.retrieval.top_k": self.retrieve.pool,
                      "declrag.retrieve.alpha": self.config.retrieve.alpha}
        with timed(ms, "retrieve", attributes, name=f"retrieval {self.store_uri}") as s:
            pool = self.retrieve(queries=queries, where=where, depth=depth)
            if s.is_recording():
                s.set_attribute("gen_ai.retrieval.documents", tracing.documents(pool))
            return pool

    @contextmanager
    def _traced(self, name: str, question: str, history: tuple[Turn, ...]) -> Iterator[Any]:
        """The span of one question, the parent of its stages' spans."""
        attributes = {"declrag.history.turns": len(history),
                      "declrag.question": question if tracing.content() else None}
        with tracing.span(name, attributes) as s:
            yield s

    def retrieve_only(self, question: str, where: dict | None = None, depth: int = 100,
                      history: Any = None) -> list[Hit]:
        """The ranked candidates (history, rewrite, retrieve at least ``depth`` chunks, rerank) without
        generating: what retrieval metrics such as nDCG@10 over documents, and compile's retrieval-first scoring,
        read."""
        question, history = self.check(question, history, where)
        sq, queries = self._queries(question, history)
        return self.rerank(question=sq.text, hits=self._retrieve(queries, where, None, depth))

    def search(self, question: str, history: Any = None, where: dict | None = None, k: int | None = None,
               alpha: float | None = None) -> list[Hit]:
        """The passages this program would answer ``question`` from, without generating: its compiled retrieval
        (history, rewrite, hybrid search and fusion, autocut, window, rerank, MMR and order), ``k`` of them
        (default ``retrieve.k``) with ``alpha`` (default ``retrieve.alpha``). What ``POST /v1/search`` and the
        MCP ``search`` tool serve."""
        prog = self
        r = self.config.retrieve
        if (k is not None and k != r.k) or (alpha is not None and alpha != r.alpha):
            prog = self.with_settings({k_: v for k_, v in (("retrieve.k", k), ("retrieve.alpha", alpha))
                                       if v is not None})
        question, history = prog.check(question, history, where)
        with timing_embeddings(), self._traced("search", question, history):
            sq, queries = prog._queries(question, history)
            pool = prog._retrieve(queries, where, None)
            with timed(None, "rerank", {"declrag.rerank.mode": prog.config.rerank.mode}):
                pool = prog.rerank(question=sq.text, hits=pool)
            return prog._select(queries, pool)

    def learned_from(self, other: RAGProgram) -> RAGProgram:
        """Take ``other``'s learned state (instructions, demos, the kNN demo pool, the embedder's provenance): the
        same program over another store or embedder. Returns self."""
        self.load_state(other.dump_state())
        if other.generate.knn_pool:
            self.generate.set_knn_pool(other.generate.knn_pool, other.generate.knn_k)
        self.embedder_provenance = getattr(other, "embedder_provenance", None)
        return self

    def generating(self, mode: str) -> RAGProgram:
        """This program with ``generate.mode`` = ``mode`` (``lm``, ``extractive``, ``verified``), over the same store
        and embedder, its learned state kept: what `declrag eval --modes` compares."""
        config = with_mode(self.config, mode)
        return RAGProgram(ProgramConfig.model_validate(config.model_dump()), store=self.store, embedder=self.embedder,
                          specs=self.specs).learned_from(self)

    def with_settings(self, changes: dict[str, Any]) -> RAGProgram:
        """A shallow copy of this program whose ``retrieve`` and ``rerank`` settings take ``changes`` (dotted paths:
        ``{"retrieve.alpha": 0.75}``); the rest (store, embedder, LMs, learned state) shared."""
        import copy  # imported here, not at the top: only searches with their own k or alpha, and exploring, copy

        c = self.config
        sections = {"retrieve": c.retrieve.model_dump(), "rerank": c.rerank.model_dump()}
        for path, value in changes.items():
            section, _, key = path.partition(".")
            if section not in sections or key not in sections[section]:
                raise ValueError(f"{path!r} is not a retrieve or rerank setting")
            sections[section][key] = value
        cfg = c.model_copy(update={"retrieve": type(c.retrieve).model_validate(sections["retrieve"]),
                                   "rerank": type(c.rerank).model_validate(sections["rerank"])})
        r = cfg.retrieve
        other = copy.copy(self)
        other.config, other.explorer = cfg, None
        other.retrieve = Retriever(r, self.store, self.embedder, pool_size(cfg))
        if cfg.rerank != c.rerank:
            other.rerank = Reranker(cfg.rerank, cfg.stage_lm("rerank"), self.specs)
        return other

    def _select(self, queries, pool: list[Hit]) -> list[Hit]:
        """The passages handed over: the ``retrieve.k`` best of the chosen (`_chosen`) as ``retrieve.handover`` says
        (`hand_over`: best-first by default, no character of a document twice), then ordered."""
        c = self.config.retrieve
        return order(hand_over(self.store, self._chosen(queries, pool), c.k, c.handover), c.order)

    def _chosen(self, queries, pool: list[Hit]) -> list[Hit]:
        """The (reranked) pool in its order, for ``retrieve.k`` passages to be handed over from it: MMR's pick of k
        first (the ranking kept among them), when it is on, then the rest (best-first takes its stand-ins from them)."""
        c = self.config.retrieve
        if c.mmr and len(pool) > c.k:
            with embedding_time():
                vecs = self.embedder.embed_documents([h.text for h in pool])
                qv = self.embedder.embed_query(queries.vector_text or queries.texts[0])
            picked = {h.chunk.id for h in mmr(pool, np.asarray(vecs), np.asarray(qv), c.k, c.mmr_lambda)}
            return [h for h in pool if h.chunk.id in picked] + [h for h in pool if h.chunk.id not in picked]
        return pool

    def _below_threshold(self, queries, passages: list[Hit]) -> bool:
        """The deterministic abstention: the best passage's cosine similarity to the question (chunk
        embeddings, from the cache; on the default model's scale) is below ``retrieve.abstain_below``."""
        thr = self.config.retrieve.abstain_below
        if thr is None:
            return False
        if not passages:
            return True
        with embedding_time():
            sims = (self.embedder.embed_documents([h.chunk.text for h in passages])
                    @ self.embedder.embed_query(queries.texts[0]))
        return float(np.max(self.embedder.calibrate(sims))) < thr  # on the default model's scale (embed.calibration)

    def _said(self, history: tuple[Turn, ...]) -> str | None:
        """What the generate stage reads of the conversation: every system turn (an instruction that stays in
        force however long the conversation grows), then the most recent user and assistant turns, within
        ``history.generate_turns`` turns and ``history.generate_chars`` characters for each of the two parts."""
        h = self.config.history
        system = window([t for t in history if t.role == "system"], 1_000, h.generate_chars)
        recent = window(history, h.generate_turns, h.generate_chars, roles=("user", "assistant"))
        return transcript([*system, *recent]) or None

    @property
    def answer_mode(self) -> str:
        """The generate mode this program answers in (``auto`` resolved: `declrag.config.answer_mode`)."""
        return self.generate.mode()

    def _lm_stages(self) -> list[str]:
        c = self.config
        return [n for n, on in (("rewrite", c.rewrite.mode != "off"), ("rerank", c.rerank.mode == "llm"),
                                ("generate", answer_mode(c) != "extractive"), ("judge", c.judge.mode == "llm"))
                if on]

    def stages(self) -> dict[str, Any]:
        c, mode = self.config, self.generate.mode()
        return {"rewrite": c.rewrite.mode, "retrieve": {"k": c.retrieve.k, "alpha": c.retrieve.alpha,
                "fusion": c.retrieve.fusion, "autocut": c.retrieve.autocut, "window": c.retrieve.window,
                "mmr": c.retrieve.mmr, "order": c.retrieve.order, "abstain_below": c.retrieve.abstain_below},
                "rerank": c.rerank.mode,
                "generate": c.generate.variant if mode == "lm" else
                mode if mode == "extractive" else f"verified/{c.generate.variant}",
                "judge": "off" if c.judge.mode == "off" else f"{c.judge.mode}/{c.judge.policy}"}

    # -- the artifact -------------------------------------------------------------------------------------
    def save(self, path: str | Path, **_: Any) -> Path:
        """Write the artifact (`declrag.pipeline.artifact.write_artifact`): ``program.json`` and ``dspy_state.json``
        (each predictor's instructions and demos, as DSPy saves them; no pickle)."""
        g = self.generate
        return write_artifact(Path(path), self.config, getattr(self, "embedder_provenance", None), self.store_uri,
                              self.specs, {"k": g.knn_k, "pool": g.knn_pool} if g.knn_pool else None,
                              lambda where: super(RAGProgram, self).save(where))


def load(path: str | Path, store: Store | str | Path | None = None, model: str | None = None,
         embedder: Embedder | None = None, mode: str | None = None) -> RAGProgram:
    """The program saved at ``path``: a program folder (with program.json) or a run folder that `declrag compile`
    wrote (``runs/NAME``: its ``best`` program), as the CLI accepts them. Warns when library versions differ from
    the ones it was saved with; refuses a store whose ingest settings differ. ``model`` reroutes every LM call
    (like --model); ``mode`` sets ``generate.mode`` (like --answer-mode)."""
    folder, meta, config, specs = read_saved(path)
    now = versions()
    drift = {k: (v, now.get(k)) for k, v in meta.get("versions", {}).items() if now.get(k) != v and k != "python"}
    if drift:
        warnings.warn(f"{folder} was saved with other library versions: " + ", ".join(
            f"{k} {a} (now {b})" for k, (a, b) in sorted(drift.items())), stacklevel=2)
    if model:
        config = with_model(config, model)
    if mode:
        config = with_mode(config, mode)
    config = with_packed_embedder(config, folder)
    saved = meta.get("store") or {}
    prog = RAGProgram(config, store=store if store is not None else saved.get("uri", saved.get("path")),
                      embedder=embedder, specs=specs)
    prog.load(str(folder / "dspy_state.json"))
    if meta.get("knn"):
        prog.generate.set_knn_pool(meta["knn"]["pool"], meta["knn"]["k"])
    return prog


def default_program(store: Store | str | Path | None = None, model: str | None = None) -> RAGProgram:
    """The naive baseline: fixed chunks, hybrid alpha 0.5, k 5, no rewrite, no rerank, the plain prompt,
    self-judge off, on the local model (or ``model``), over the store's own ingest settings; on the local model it
    answers in `LOCAL_DEFAULT_MODE` (`default_config`)."""
    meta = read_meta(store) if isinstance(store, (str, Path)) else None
    return RAGProgram(default_config(ProgramConfig(ingest=meta.ingest) if meta else None, model), store=store)


__all__ = ["LOCAL_DEFAULT_MODE", "Answer", "RAGProgram", "default_config", "default_program", "load", "read_config",
           "saved_config", "with_model"]
