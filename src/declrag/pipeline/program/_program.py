"""`RAGProgram`, the ordered list of its stages run over one state per question, and its `Answer`."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import dspy

from ...config import (
    ProgramConfig,
    with_mode,
)
from ...embed.embedder import Embedder
from ...inputs import Turn, turns, user_text
from ...lm import Meter, check_lm, metering, registry
from ...lm.prompts import SignatureSpec, spec
from ...payloads import Citation
from ...runtime import tracing
from ...runtime.folders import default_store
from ...stores import open_store
from ...stores.base import Filter, Store
from ...text.languages import load_identifier, not_theirs
from ...types import Hit
from ..saved import write_artifact
from ..stage_list import lm_stages, needed_specs, resolved
from ..stages import (
    PHASES,
    Generator,
    Phase,
    PipelineStage,
    Retriever,
    Selector,
    State,
    since_ms,
    timed,
    timing_embeddings,
)
from ..stages.select import Explorer

log = logging.getLogger(__name__)
NEAREST_CITED = 3  # an abstention cites the passages nearest to the question, at most this many


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
    """The ordered list of its stages (`declrag.pipeline.stage_list.STAGES`: history, rewrite, retrieve, rerank,
    select, generate with citations, self-judge) run over one `State` per question.

    The constructor is light: it checks the config, the LM routes (and their keys) and the store's metadata (so a
    wrong store fails at once), and loads no model. `warm_up()` loads what answering needs (the embedding model, the
    cross-encoder, in-process local LMs, the store's search snapshot); the first call does it implicitly, `declrag
    serve` and the CLI call it up front and serve is ready only after it.

    Args:
        config: the program's settings; None: the defaults.
        store: the store searched (an open `Store`, a folder or a URI); None: ``config.store``, else the default
            store.
        embedder: the embedding model; None: the one the config's ingest settings name (loaded by `warm_up`).
        specs: the prompts by name (a saved program's); a prompt not given is read from ``signatures/``.
        stages: the stage classes, or their names as an artifact records them; None: `STAGES` as it is now.

    Raises:
        DeclragError: an unknown LM route or a missing key, a store that does not exist or was built with other
            ingest settings.
        ValueError: stages out of phase order or named twice, or a stage whose name would hide a method.
    """

    retrieve: Retriever  # the stages that code outside the program reads by name (exploration, streaming, tests)
    select: Selector
    generate: Generator

    def __init__(self, config: ProgramConfig | None = None, store: Store | str | Path | None = None,
                 embedder: Embedder | None = None, specs: dict[str, SignatureSpec] | None = None,
                 stages: Sequence[type[PipelineStage] | str] | None = None):
        super().__init__()
        self.config = c = config or ProgramConfig()
        self.kinds = kinds = resolved(stages)
        for name in lm_stages(c, kinds):  # fail fast on unknown routes or missing keys
            check_lm(c.stage_lm(name))
        if isinstance(store, Store):
            self.store = store
        else:
            self.store, _ = open_store(store or c.store or default_store(), c.ingest, create=False)
        self.store_uri = self.store.uri
        self.embedder = embedder or Embedder(c.ingest.embedder)
        given = specs or {}  # a program saved before a prompt existed gets today's file for it
        self.specs = {**{k: spec(k) for k in needed_specs(kinds) if k not in given}, **given}
        for kind in kinds:  # each stage an attribute (its predictors' keys in dspy_state.json), in `kinds`' order
            if hasattr(type(self), _held(kind)):
                raise ValueError(f"stage {kind.name!r} would hide RAGProgram.{_held(kind)}: give it another name")
            setattr(self, _held(kind), kind.build(self))
        self.explorer: Explorer | None = None  # `declrag serve --explore`: its rankers (`Explorer.of`)

    @property
    def stage_list(self) -> list[PipelineStage]:
        """The program's stages, in order."""
        return [getattr(self, _held(kind)) for kind in self.kinds]

    def stage(self, name: str) -> PipelineStage:
        """The stage named ``name``.

        Args:
            name: a stage's name (``retrieve``, ``generate``, ...).

        Returns:
            The stage.

        Raises:
            KeyError: the program has no stage of that name (the message names those it has).
        """
        for s in self.stage_list:
            if s.name == name:
                return s
        raise KeyError(f"this program has no stage {name!r} (it has: {', '.join(k.name for k in self.kinds)})")

    # -- running ------------------------------------------------------------------------------------------
    def warm_up(self, lms: bool = True) -> RAGProgram:
        """Load the models and open the store's search snapshot now, not on the first question. Idempotent.

        LMs and local models are held by `declrag.registry`; the embedder and the cross-encoder by this program.

        Args:
            lms: warm the LM routes too; False leaves them alone (an LM set with `declrag.lm.using_lm` stands in for
                them).

        Returns:
            The program.
        """
        warm = getattr(self, "_warm", None)  # None: cold; False: all but the LMs; True: everything
        if warm is True or (warm is False and not lms):
            return self

        getattr(self.embedder, "model", None)
        for name in lm_stages(self.config, self.kinds) if lms else ():
            registry.warm_up(self.config.stage_lm(name))
        self.store.warm_up()  # the search snapshot and its indexes, or the server connection
        for s in self.stage_list:  # each stage's own: the cross-encoder, the index over whole documents
            s.warm_up()
        self.embedder.embed_query("warm-up")  # the query path of the embedding backend
        getattr(self.embedder, "calibrate", None)  # its cosines' mapping: measured once, now (embed.calibration)
        load_identifier()  # every question's language is told (keyword search, the extractive answer)
        self._warm = lms
        return self

    def check(self, question: Any, history: Any = None, where: dict | None = None) -> tuple[str, tuple[Turn, ...]]:
        """The question and history as the program reads them: the one check every entry point shares.

        Args:
            question: the question (a string within ``max_question_chars``).
            history: the conversation before it (`declrag.inputs.turns`: a list of ``{"role", "content"}``), or None.
            where: a metadata filter (`declrag.stores.base.Filter`), or None.

        Returns:
            The question, normalized, and the history as turns.

        Raises:
            InputError: the field that is wrong (a `DeclragError`), before any LM call.
        """
        c = self.config
        question = user_text(question, "question", c.max_question_chars,
                             hint="shorten it, or raise max_question_chars in the program config")
        history = turns(history, max_turns=c.history.max_turns, max_chars=c.history.max_chars)
        Filter.of(where)  # an invalid filter fails before any LM call
        return question, history

    def run_stages(self, state: State, until: Phase = "answer", since: Phase = "queries",
                   ms: dict[str, float] | None = None) -> State:
        """Run the stages whose phase lies from ``since`` to ``until`` over ``state``, each in its span.

        Args:
            state: the question's state; the stages read it and write their parts.
            until: the last phase run (`PHASES`).
            since: the first phase run.
            ms: where each stage's time goes, in milliseconds by its name; None: not kept.

        Returns:
            ``state``.
        """
        lo, hi = PHASES.index(since), PHASES.index(until)
        for s in self.stage_list:
            if lo <= PHASES.index(s.phase) <= hi:
                with timed(ms, s.name, s.attributes(state), name=s.span_name()) as span:
                    s.run(state, span)
        return state

    def forward(self, question: str, where: dict | None = None, history: Any = None, explore: bool = False
                ) -> Answer:
        """Answer a question: every stage, in order.

        Args:
            question: the question.
            where: a metadata filter the search keeps to (`declrag.stores.base.Filter`), or None.
            history: the conversation before it (see `declrag.pipeline.stages.history`), or None.
            explore: answer from this program's and its neighbours' rankings multileaved (needs an ``explorer``:
                `declrag.pipeline.stages.select.Explorer`; the answer's ``explored`` then says which rankers).

        Returns:
            The `Answer`: its text, citations, passages, the judge's verdict, usage and latency (ms) by stage.

        Raises:
            DeclragError: a bad question, history or filter (`check`), an LM that cannot be reached.
        """
        question, history = self.check(question, history, where)
        state = State(question, history, where, explorer=self.explorer if explore else None)
        meter, ms = Meter(), dict[str, float]()
        t_all = time.perf_counter()
        with metering(meter), timing_embeddings() as embed_ms, self._traced("answer", question, history):
            self.run_stages(state, ms=ms)
        ms["embed"] = round(embed_ms[0], 3)
        ms["total"] = since_ms(t_all)
        return self._answer(state, meter, ms)

    def _answer(self, state: State, meter: Meter, ms: dict[str, float]) -> Answer:
        """The `Answer` of a state the stages have run over: its citations (the passages nearest to the question for
        an abstention), what the checks did, the abstention's reason."""
        draft, passages, question = state.draft, state.passages, state.question
        assert draft is not None  # written by the generate stage
        cites = [Citation.payload(n, passages[n - 1], False, draft.quotes) for n in draft.used] + \
                [Citation.payload(n, passages[n - 1], True, draft.quotes) for n in draft.attributed]
        if draft.abstained:  # the passages nearest to the question, for the reader to check
            cites = [Citation.payload(n, passages[n - 1], False, [], nearest=True)
                     for n in range(1, min(NEAREST_CITED, len(passages)) + 1)]
        checked = draft.checked or {"mode": self.answer_mode}
        explorer = state.explorer
        return Answer(
            question=question, answer=draft.text, abstained=draft.abstained, citations=cites,
            removed_citations=draft.removed, dropped_sentences=int(checked.get("dropped", 0)), checked=checked,
            caught=draft.caught, reason=(draft.reason + not_theirs(question, (h.chunk.language for h in passages))
                                         or None) if draft.abstained else None,
            passages=passages, judge=state.verdict, usage=meter.to_dict(), latency_ms=ms,
            queries=state.queries.texts if state.queries is not None else [question], raw_answer=draft.raw,
            stages=self.stages(), history_turns=len(state.history),
            explored=explorer.record if explorer is not None else None)

    @contextmanager
    def _traced(self, name: str, question: str, history: tuple[Turn, ...]) -> Iterator[Any]:
        """The span of one question, the parent of its stages' spans."""
        attributes = {"declrag.history.turns": len(history),
                      "declrag.question": question if tracing.content() else None}
        with tracing.span(name, attributes) as s:
            yield s

    def retrieve_only(self, question: str, where: dict | None = None, depth: int = 100,
                      history: Any = None) -> list[Hit]:
        """The ranked candidates without generating: the stages up to the ``candidates`` phase (history, rewrite,
        retrieve, rerank). What retrieval metrics such as nDCG@10 over documents, and compile's retrieval-first
        scoring, read.

        Args:
            question: the question.
            where: a metadata filter, or None.
            depth: the candidates retrieved at least (more than the program's own pool, for metrics at depth).
            history: the conversation before it, or None.

        Returns:
            The candidate pool, best first.

        Raises:
            DeclragError: a bad question, history or filter.
        """
        question, history = self.check(question, history, where)
        return self.run_stages(State(question, history, where, depth=depth), until="candidates").pool

    def search(self, question: str, history: Any = None, where: dict | None = None, k: int | None = None,
               alpha: float | None = None) -> list[Hit]:
        """The passages this program would answer a question from, without generating: the stages up to the
        ``passages`` phase (history, rewrite, hybrid search and fusion, autocut, window, rerank, MMR and order). What
        ``POST /v1/search`` and the MCP ``search`` tool serve.

        Args:
            question: the question.
            history: the conversation before it, or None.
            where: a metadata filter, or None.
            k: the passages handed over; None: ``retrieve.k``.
            alpha: the vector leg's weight in the fusion (0 keyword only, 1 vector only); None: ``retrieve.alpha``.

        Returns:
            Up to ``k`` passages, in the order the program hands them over.

        Raises:
            DeclragError: a bad question, history or filter.
        """
        prog = self
        r = self.config.retrieve
        if (k is not None and k != r.k) or (alpha is not None and alpha != r.alpha):
            prog = self.with_settings({k_: v for k_, v in (("retrieve.k", k), ("retrieve.alpha", alpha))
                                       if v is not None})
        question, history = prog.check(question, history, where)
        with timing_embeddings(), self._traced("search", question, history):
            return prog.run_stages(State(question, history, where), until="passages").passages

    def rank(self, state: State) -> list[Hit]:
        """This program's ranking for ``state``'s queries (made already, by another program's stages): its
        ``candidates`` stages run over a copy of ``state``, in the order its select stage hands passages over from
        (`Selector.chosen`). What exploration multileaves (`declrag.pipeline.stages.select`).

        Args:
            state: a question's state, its queries made.

        Returns:
            The candidates, in this program's order.
        """
        own = self.run_stages(replace(state, pool=[], passages=[], explorer=None), "candidates", "candidates")
        assert own.queries is not None  # made by the queries phase, before
        return self.select.chosen(own.queries, own.pool)

    def learned_from(self, other: RAGProgram) -> RAGProgram:
        """Take another program's learned state: the same program over another store or embedder.

        Args:
            other: the program whose instructions, demos, kNN demo pool and embedder provenance are taken.

        Returns:
            This program.
        """
        self.load_state(other.dump_state())
        if other.generate.knn_pool:
            self.generate.set_knn_pool(other.generate.knn_pool, other.generate.knn_k)
        self.embedder_provenance = getattr(other, "embedder_provenance", None)
        return self

    def generating(self, mode: str) -> RAGProgram:
        """This program answering in another generate mode, over the same store and embedder, its learned state kept:
        what `declrag eval --modes` compares.

        Args:
            mode: ``lm``, ``extractive`` or ``verified`` (``generate.mode``).

        Returns:
            A new program.
        """
        config = with_mode(self.config, mode)
        return RAGProgram(ProgramConfig.model_validate(config.model_dump()), store=self.store, embedder=self.embedder,
                          specs=self.specs, stages=self.kinds).learned_from(self)

    def with_settings(self, changes: dict[str, Any]) -> RAGProgram:
        """A shallow copy of this program with other ``retrieve`` and ``rerank`` settings; the rest (store, embedder,
        LMs, learned state) shared. The stages built from a changed section are built again (`PipelineStage.reads`),
        their learned state kept.

        Args:
            changes: dotted paths and their values (``{"retrieve.alpha": 0.75}``).

        Returns:
            The copy.

        Raises:
            ValueError: a path that is not a retrieve or rerank setting, or a value it does not take.
        """
        c = self.config
        sections = {"retrieve": c.retrieve.model_dump(), "rerank": c.rerank.model_dump()}
        for path, value in changes.items():
            section, _, key = path.partition(".")
            if section not in sections or key not in sections[section]:
                raise ValueError(f"{path!r} is not a retrieve or rerank setting")
            sections[section][key] = value
        cfg = c.model_copy(update={"retrieve": type(c.retrieve).model_validate(sections["retrieve"]),
                                   "rerank": type(c.rerank).model_validate(sections["rerank"])})
        changed = {name for name in sections if cfg.section(name) != c.section(name)}
        other = copy.copy(self)
        other.config, other.explorer = cfg, None
        for kind in self.kinds:
            if changed & set(kind.reads or (kind.section,)):
                setattr(other, _held(kind), rebuilt := kind.build(other))
                if rebuilt.named_parameters():  # an LM stage's learned prompt (an LLM reranker's) kept
                    rebuilt.load_state(getattr(self, _held(kind)).dump_state())
        return other

    @property
    def answer_mode(self) -> str:
        """The generate mode this program answers in (``auto`` resolved: `declrag.config.answer_mode`)."""
        return self.generate.mode()

    def lm_stages(self) -> list[str]:
        """The LM stages this program has on, in stage order.

        Returns:
            Their names (routes by `ProgramConfig.stage_lm`): ``condense``, ``rewrite``, ``rerank``, ``generate``,
            ``judge``.
        """
        return lm_stages(self.config, self.kinds)

    def stages(self) -> dict[str, Any]:
        """Each stage as an answer shows it (`PipelineStage.describe`); stages that show nothing left out.

        Returns:
            The stages' descriptions, by name, in stage order.
        """
        return {s.name: d for s in self.stage_list if (d := s.describe()) is not None}

    # -- the artifact -------------------------------------------------------------------------------------
    def save(self, path: str | Path, **_: Any) -> Path:
        """Write the artifact (`declrag.pipeline.saved.write_artifact`): ``program.json`` (settings, prompts, versions,
        store reference, stages by name) and ``dspy_state.json`` (each predictor's instructions and demos, as DSPy saves
        them; no pickle). It loads with its stages whatever the default list has become.

        Args:
            path: the folder, made if needed.

        Returns:
            The folder.
        """
        g = self.generate
        return write_artifact(Path(path), self.config, getattr(self, "embedder_provenance", None), self.store_uri,
                              self.specs, {"k": g.knn_k, "pool": g.knn_pool} if g.knn_pool else None,
                              lambda where: super(RAGProgram, self).save(where), [k.name for k in self.kinds])


def _held(kind: type[PipelineStage]) -> str:
    """The program's attribute that holds a stage of ``kind`` (``kind.attribute``, else its name)."""
    return kind.attribute or kind.name
