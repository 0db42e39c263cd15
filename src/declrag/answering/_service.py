"""The answering service: what every front end does for each question, without its transport. HTTP
(`declrag.serve`), MCP (`declrag.serve.mcp`) and the CLI (`declrag ask`) are thin adapters over one
`AnswerService`: loading the program, admission (checks, the caller's scope, an in-flight slot), worker threads,
answers (whole or streamed), searches, the semantic cache, exploration, metrics, the usage recorder and ratings,
failures as `ApiError`s. The same question from the same caller gets the same answer on every route.

    service = AnswerService(program, "my-rag", settings=ServiceSettings(max_in_flight=4))
    await service.start()                      # worker threads up, the program loading on one of them
    payload = await service.answer(Request("Who ruled Normandy?"))
    hits = await service.search(Request("Normandy", route="/v1/search", fields=SEARCH_FIELDS), k=10)
    await service.stop()                       # calls in flight finish first

Without an event loop (the CLI): ``service.open()``, then ``service.answer_here(request)`` on the calling thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import dspy
import numpy as np

from ..access import Access, Principal
from ..config import ProgramConfig
from ..errors import DeclragError
from ..inputs import InputError, turns, user_text
from ..lm import Meter, metering, using_lm
from ..payloads import PublicPaths, SearchHit
from ..pipeline.stages.generate import Done, astream
from ..pipeline.stages.select import Explorer
from ..runtime.gguf import LocalModelCrash
from ..stores.base import Filter
from ..types import Hit
from ..usage import Recorder, row_of
from ._metrics import Metrics
from ._program import Program
from ._requests import NO_USAGE, ApiError, Events, Request, answer_payload, failure, timed_out
from ._semantic_cache import SemanticCache
from ._settings import ServiceSettings
from .selection import DEFAULT_NAME

log = logging.getLogger("declrag.serve")


@dataclass
class ServiceState:
    """What the service holds between requests."""

    program: Program | None = None  # the loaded program; None while loading (or after a failed load)
    paths: PublicPaths = field(default_factory=lambda: PublicPaths(()))  # the files' names clients see
    error: BaseException | None = None  # why loading failed
    in_flight: int = 0  # admitted calls whose worker thread has not ended
    executor: ThreadPoolExecutor | None = None
    started: int = field(default_factory=lambda: int(time.time()))
    version: str = ""  # the loaded program's identity (its config's digest), kept with each recorded answer


class AnswerService:
    """Answers questions with ``program``: a `RAGProgram`, or a zero-argument callable returning one (called
    on a worker thread by `start`; not `ready` until it returns). ``name`` is the served model id, ``run`` the
    artifact it came from; ``on_load(error or None)`` is told when loading ends. ``lm_override`` is a testing
    hook: an LM (e.g. `declrag.testing.ScriptedLM`) applied with `declrag.lm.using_lm` around every program
    call, or a zero-argument callable returning one per call (for LMs unsafe to share by threads).

    At most ``settings.max_in_flight`` calls are admitted at once (beyond: 503 + Retry-After, no queue); they
    run on ``settings.worker_threads`` threads, the rest waiting for one within their timeout. A call that
    outlives ``request_timeout_s`` is answered 504 and keeps its slot until its thread ends, so the limit
    holds for real work."""

    def __init__(self, program: Program | Callable[[], Program], name: str = DEFAULT_NAME, run: str | None = None,
                 settings: ServiceSettings | None = None, *, lm_override: Any = None,
                 on_load: Callable[[BaseException | None], None] | None = None, metrics: Metrics | None = None,
                 recorder: Recorder | None = None, access: Access | None = None):
        self.settings = s = settings or ServiceSettings()
        self.name, self.info = name, {"name": name, "run": run}
        self.metrics = metrics or Metrics()
        self.cache = SemanticCache(s.cache_threshold, s.cache_size) if s.cache_threshold else None
        self.state = ServiceState()
        self._program, self._lm_override, self._on_load = program, lm_override, on_load
        self.recorder = recorder  # the usage store's writer (`declrag.usage`); None: nothing is recorded
        self.access = access  # callers and what each may read (`declrag.access`); None: one user, who reads all

    def measure_caches(self) -> None:
        """Set the metrics' cache gauges (`Metrics.measure`)."""
        self.metrics.measure(self.state.program.embedder.cache if self.state.program is not None else None,
                             self.cache, self.recorder)

    # -- lifecycle ------------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.state.program is not None

    @property
    def in_flight(self) -> int:
        return self.state.in_flight

    async def start(self) -> asyncio.Task:
        """Start the worker threads and load the program in the background (models load now, not on the first
        question). Returns the loading task."""
        self.state.executor = ThreadPoolExecutor(max_workers=self.settings.worker_threads,
                                                 thread_name_prefix="declrag-serve")
        return asyncio.create_task(self._load_in_background())

    async def stop(self) -> None:
        """Wait for the calls in flight, then stop the worker threads."""
        await asyncio.to_thread(self.close)

    def _load(self, stay_up: bool) -> Program:
        p = self._program
        prog = p if isinstance(p, Program) else p()
        try:  # ready means warmed up
            prog.warm_up(lms=self._lm_override is None)
        except LocalModelCrash as e:  # ``stay_up``: search answers, questions get 503 with this
            if not stay_up:
                raise
            log.error("the local model cannot run here; questions will get 503 until it is rebuilt: %s", e)
            prog.warm_up(lms=False)
        if (r := self.settings.record) is not None and r.explore:
            # --explore: a share of questions answered from its rankers multileaved
            Explorer.of(prog, r.explore, r.explore_seed)
        return prog

    def _ready(self, stay_up: bool = True) -> None:
        """Load the program (on this thread), learn its files' public names and version; then admit requests.
        ``stay_up``: a local model that cannot run here leaves the rest serving (else it is raised)."""
        program = self._load(stay_up)
        self.state.paths = PublicPaths.of_store(program.store, self.settings.source_base)
        self.state.version = program.config.digest()
        self.state.program = program  # ready: from here on requests are admitted

    def open(self) -> AnswerService:
        """Load the program now, on this thread, and start the worker threads; then `answer` and `search` in an
        event loop (MCP), or `answer_here` without one (the CLI). Raises what loading raises (a
        local model that cannot run here too). Returns the service; `close` stops it."""
        self._ready(stay_up=False)
        self.state.executor = ThreadPoolExecutor(max_workers=self.settings.worker_threads,
                                                 thread_name_prefix="declrag-answer")
        return self

    def close(self) -> None:
        """`stop`, without an event loop: wait for the calls in flight, then stop the worker threads."""
        if self.state.executor is not None:
            self.state.executor.shutdown(wait=True)

    @property
    def config(self) -> ProgramConfig:
        """The loaded program's config (its defaults: ``retrieve.k``, ``.alpha``, the limits)."""
        return self._loaded().config

    async def _load_in_background(self) -> None:
        t0 = time.perf_counter()
        try:
            await asyncio.to_thread(self._ready)
            log.info("ready: %s loaded in %.1f s", self.name, time.perf_counter() - t0)
        except Exception as e:  # reported on /readyz and to on_load
            self.state.error = e
            log.error("could not load the program: %s", e)
            if self._on_load:
                self._on_load(e)
            return
        if self._on_load:
            self._on_load(None)

    def _loaded(self) -> Program:
        """The program, once loaded (`admit` refuses every request before)."""
        if (p := self.state.program) is None:
            raise ApiError(503, "not ready: the program is loading", kind="not_ready")
        return p

    # -- one question -----------------------------------------------------------------------------------------
    def _lm_scope(self):
        o = self._lm_override
        if o is None:
            return nullcontext()
        return using_lm(o if isinstance(o, dspy.BaseLM) or not callable(o) else o())

    def work(self, req: Request) -> tuple[dict, bool]:
        """On a worker thread: the cache, else the program, for an admitted request. Returns (payload, cache
        hit). The cache's key is the filter and the whole history: the same conversation, or none."""
        prog, cache = self._loaded(), self.cache
        key = json.dumps([req.where, [[t.role, t.content] for t in req.history]], sort_keys=True) if cache else ""
        vec = np.asarray(prog.embedder.embed_query(req.question), dtype=np.float32) if cache else None
        if cache and vec is not None and (found := cache.get(key, vec, prog.embedder.calibrate)) and (
                self.access is None or self.access.still_readable(prog.store, req.where, found[0]["_documents"])):
            hit = {k: v for k, v in found[0].items() if k != "_documents"}
            hit = {**hit, "id": req.id, "usage": NO_USAGE, "cache": {"hit": True, "similarity": round(found[1], 4)}}
            self._record(req, hit, ())
            return hit, True
        explore = {"explore": True} if (e := prog.explorer) is not None and e.draw() else {}
        with self._lm_scope():
            t0 = time.perf_counter()
            a = prog(question=req.question, where=req.where, **({"history": req.history} if req.history else {}),
                     **explore)
            self.metrics.program.observe(time.perf_counter() - t0)
        payload = answer_payload(a, self.state.paths, self.info)
        if cache and vec is not None:  # with the documents it was made from, checked again on a hit
            cache.put(key, vec, {**payload, "_documents": sorted({h.doc_id for h in a.passages})})
        payload = {"id": req.id, **payload}  # each answer its own id (feedback names it), cached or not
        self._record(req, payload, a.passages, explored=a.get("explored"))
        return payload, False

    def _record(self, req: Request, payload: dict, passages: Any, hits: bool = False,
                explored: dict | None = None) -> None:
        """Queue what was asked and answered (or searched) for the usage store (`declrag.usage`); never blocks."""
        if self.recorder is not None:
            self.recorder.record(row_of(payload, passages, route=req.route, program=self.name,
                                        version=self.state.version, question=req.question, where=req.where,
                                        history=req.history or (), searched=hits, explored=explored,
                                        principal=req.principal))

    def searching(self, req: Request, k: int, alpha: float) -> tuple[list[Hit], dict, float]:
        """On a worker thread: the program's retrieval for an admitted request. Returns (hits, LM usage: the
        condense stage's, when the history query is ``condense``, seconds in the program)."""
        meter = Meter()
        with self._lm_scope(), metering(meter):
            t0 = time.perf_counter()
            hits = self._loaded().search(req.question, history=req.history or None, where=req.where, k=k,
                                         alpha=alpha)
            took = time.perf_counter() - t0
        self.metrics.search.observe(took)
        return hits, meter.to_dict(), took

    def _done(self, count: Callable[[Any], None], fut: asyncio.Future) -> None:
        """On the loop, when a worker thread ends (even after a 504): the slot freed, the result counted."""
        self.state.in_flight -= 1
        self.metrics.in_flight.dec()
        if not fut.cancelled() and fut.exception() is None:
            count(fut.result())

    def _answered(self, req: Request, result: tuple[dict, bool]) -> None:
        payload, hit = result
        m = self.metrics
        m.cache_hits.inc(hit)
        m.usage(payload["usage"])
        m.abstentions.inc(payload["abstained"]), m.dropped_sentences.inc(0 if hit else payload["dropped_sentences"])
        if not hit and (got := payload.get("caught")):
            m.caught.labels(got["kind"], got["replaced_by"]).inc()
        if req.history and not hit and "history" in payload["latency_ms"]:
            m.history_query.observe(payload["latency_ms"]["history"] / 1000)

    def admit(self, req: Request) -> Request:
        """Checks that need no program call (401, 422s, 503s); then takes an in-flight slot. Returns the request as
        the program and the semantic cache see it: the question as `declrag.inputs.user_text` normalizes it, the
        history as `declrag.inputs.turns` checks it against the program's limits, the filter narrowed to what the
        caller may read (`declrag.access.Access.scope`: every search, the cache's key and exploration use it)."""
        s, st, f = self.settings, self.state, req.fields
        if self.access is not None and req.principal is None:  # a front end that did not say who asks
            raise ApiError(401, "unauthorized: send 'Authorization: Bearer <your key or token>'", kind="unauthorized")
        retry = {"Retry-After": str(s.retry_after_s)}
        if st.program is None:
            raise ApiError(503, "not ready: the program is loading" if st.error is None else
                           f"the program failed to load: {st.error}" if isinstance(st.error, DeclragError) else
                           "the program failed to load", kind="not_ready", headers=retry)
        c = self._loaded().config
        try:
            question = user_text(req.question, f.question, s.max_question_chars or c.max_question_chars,
                                 hint="shorten it" + (" (the server's limit: --max-question-chars)" if
                                                      s.max_question_chars else
                                                      ", or raise max_question_chars in the program config"))
            history = turns(req.history, max_turns=c.history.max_turns, max_chars=c.history.max_chars,
                            field=f.history)
        except InputError as e:
            raise ApiError(422, e.message, e.field, hint=e.hint) from None
        try:
            Filter.of(req.where)
        except DeclragError as e:
            raise ApiError(422, e.message, f.where, hint=e.hint) from None
        if st.in_flight >= s.max_in_flight:
            raise ApiError(503, f"busy: {st.in_flight} requests in flight (the limit is {s.max_in_flight}); retry "
                                "later", kind="busy", headers=retry)
        st.in_flight += 1
        self.metrics.in_flight.inc()
        self.metrics.history_turns.labels(req.route).observe(len(history))
        where = st.paths.inward(req.where)
        if self.access is not None and req.principal is not None:
            where = self.access.scope(where, req.principal)
        return replace(req, question=question, history=history, where=where)

    async def _run(self, req: Request, call: Callable[[], Any], count: Callable[[Any], None]) -> Any:
        """``call()`` on a worker thread for an admitted request, within the request's timeout; its result is
        counted by ``count`` when the thread ends."""
        # in the request's context (its trace span), as asyncio.to_thread would run it
        fut = asyncio.get_running_loop().run_in_executor(self.state.executor, contextvars.copy_context().run, call)
        fut.add_done_callback(partial(self._done, count))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.settings.request_timeout_s)
        except TimeoutError:
            raise timed_out(self.settings.request_timeout_s) from None
        except Exception as e:
            raise failure(e, req.question) from None

    async def answer(self, req: Request) -> dict:
        """The whole answer to a request (the response payload), or an `ApiError`."""
        req = self.admit(req)
        t0 = time.perf_counter()
        payload, hit = await self._run(req, partial(self.work, req), partial(self._answered, req))
        if hit:
            payload = {**payload, "latency_ms": {"total": round(1000 * (time.perf_counter() - t0), 3)}}
        return payload

    async def search(self, req: Request, k: int | None = None, alpha: float | None = None) -> dict:
        """The passages the program would answer a request from (`RAGProgram.search`): ``{id, hits, query, k,
        alpha, latency_ms: {total}}`` (the time in the program), ``k`` and ``alpha`` the ones used (by default
        the program's ``retrieve.k`` and ``.alpha``), or an `ApiError`; a ``k`` above ``settings.max_search_k``
        is a 422 naming ``k``."""
        if k is not None and k > self.settings.max_search_k:
            raise ApiError(422, f"k is {k}; the limit is {self.settings.max_search_k} (declrag serve "
                                "--max-search-k)", "k")
        req = self.admit(req)
        r = self._loaded().config.retrieve
        k, alpha = k or r.k, r.alpha if alpha is None else alpha
        hits, _, took = await self._run(req, partial(self.searching, req, k, alpha),
                                        lambda res: self.metrics.usage(res[1]))
        paths = self.state.paths
        payload = {"id": req.id,
                   "hits": [paths.rewrite(SearchHit.payload(h, i)) for i, h in enumerate(hits, 1)],
                   "query": req.question, "k": k, "alpha": alpha, "latency_ms": {"total": round(1000 * took, 3)}}
        self._record(req, payload, hits, hits=True)
        return payload

    # -- on the calling thread (no event loop: the CLI) ----------------------------------------------------------
    def _here(self, req: Request, call: Callable[[], Any], count: Callable[[Any], None]) -> Any:
        """``call()`` on this thread for an admitted request, without a timeout (Ctrl-C reaches it); the slot is
        freed and the result counted as on a worker thread. Anything but a `DeclragError` or an `InputError`
        is raised as it is (the CLI shows it as any command's failure)."""
        try:
            result = call()
        except (DeclragError, InputError) as e:
            raise failure(e, req.question) from None
        finally:
            self.state.in_flight -= 1
            self.metrics.in_flight.dec()
        count(result)
        return result

    def answer_here(self, req: Request) -> dict:
        """`answer` on the calling thread, after `open`: the same payload, or an `ApiError`."""
        req = self.admit(req)
        payload, _ = self._here(req, partial(self.work, req), partial(self._answered, req))
        return payload

    # -- ratings ----------------------------------------------------------------------------------------------
    def rate(self, answer_id: str, helpful: bool, citation: int | None = None, correction: str | None = None,
             principal: Principal | None = None) -> None:
        """Record a rating of an answer this service gave (blocking: run it off the event loop). Only the caller
        who received it may rate it. Raises `ApiError`: 404 when nothing is recorded (``record`` off) or no answer
        ``answer_id`` is, 403 when it was given to another caller."""
        if self.recorder is None:
            raise ApiError(404, "this server records nothing (declrag serve --no-record), so there is no answer to "
                                "rate", "id", kind="not_recording")
        found = self.recorder.feedback(answer_id, helpful, citation, correction,
                                       principal.name if principal is not None else None)
        if found == "forbidden":
            raise ApiError(403, "this answer was given to another caller: only the one who received it may rate it",
                           "id", kind="forbidden")
        if found == "missing":
            raise ApiError(404, f"no answer {answer_id!r} is recorded here (unknown, or past the retention bound)",
                           "id", kind="unknown_answer")

    async def answer_stream(self, req: Request) -> Events:
        """The answer as events: ``("delta", text)`` as the generate stage's LM produces it (see
        `declrag.pipeline.stages.generate`), then ``("done", (payload, replaced))``, or ``("error", ApiError)`` once
        events
        have begun; anything that fails before the first event raises an ordinary `ApiError`. When the final answer
        only extends the streamed text, the rest comes as one more delta (a cache hit's whole answer is one).
        ``request_timeout_s`` bounds the whole stream; a stream cut off is cancelled, and its slot freed when the
        program's thread has ended."""
        req = self.admit(req)
        loop, prog = asyncio.get_running_loop(), self._loaded()
        queue: asyncio.Queue[str | Done | BaseException] = asyncio.Queue()
        deadline, t0 = loop.time() + self.settings.request_timeout_s, time.perf_counter()

        async def pump() -> tuple[dict, bool]:
            result = None
            async for item in astream(prog, partial(self.work, req)):
                queue.put_nowait(item)
                result = item.result if isinstance(item, Done) else result
            assert result is not None  # astream ends with Done or raises
            return result

        def ended(task: asyncio.Task) -> None:
            if not task.cancelled() and (error := task.exception()) is not None:
                queue.put_nowait(error)

        task = asyncio.create_task(pump())
        # the slot is freed and the metrics counted when the thread ends
        task.add_done_callback(partial(self._done, partial(self._answered, req)))
        task.add_done_callback(ended)

        async def next_item() -> str | Done:
            try:
                async with asyncio.timeout_at(deadline):
                    item = await queue.get()
            except TimeoutError:
                raise timed_out(self.settings.request_timeout_s) from None
            if isinstance(item, BaseException):
                raise failure(item, req.question)
            return item

        try:
            first = await next_item()
        except BaseException:
            task.cancel()
            raise

        async def events() -> Events:
            item = first
            try:
                while not isinstance(item, Done):
                    yield "delta", item
                    item = await next_item()
                (payload, hit), streamed = item.result, item.streamed
                if hit:
                    payload = {**payload, "latency_ms": {"total": round(1000 * (time.perf_counter() - t0), 3)}}
                replaced = not payload["answer"].startswith(streamed)
                if not replaced and payload["answer"][len(streamed):]:
                    yield "delta", payload["answer"][len(streamed):]
                yield "done", (payload, replaced)
            except ApiError as e:  # the response has begun: the error is the last event
                self.metrics.errors.labels(req.route, e.kind).inc()
                yield "error", e
            finally:
                if not task.done():  # a timeout, or the client went away
                    task.cancel()

        return events()
