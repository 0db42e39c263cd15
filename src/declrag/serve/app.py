"""The HTTP face of a `RAGProgram`: ``create_app(program, name, run, settings)`` returns a FastAPI app:
``POST /v1/ask``, OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models``, ``/healthz``, ``/readyz``
(503 until loaded), ``/metrics`` (Prometheus), ``/`` (a web page). Errors are JSON
``{"error": ..., "field": ...}``. The program loads on a thread once the server is up; each program call
runs on one of ``workers`` threads. At most ``max_in_flight`` calls are admitted at once (beyond: 503 +
Retry-After, no queue); with fewer workers than that, admitted calls wait for a free worker (within their
timeout). A call that outlives ``request_timeout_s`` is answered 504 and keeps its slot until its thread
ends, so the limit holds for real work. ``stream: true`` (both POST routes) sends the answer's tokens as the
LM generates them, as server-sent events (`declrag.streaming`); anything that fails before the first event
is still an ordinary JSON error."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, nullcontext
from http import HTTPStatus
from importlib.resources import files
from typing import Any

import dspy
import dspy.utils.exceptions
import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictBool, field_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import DeclragError
from ..inputs import InputError, api_key_problem, user_text
from ..program import DEFAULT_NAME
from ..stores.base import Filter
from ..streaming import Done, astream
from . import openai_compat as oai
from .jsonenc import FastJSONResponse, plain

log = logging.getLogger("declrag.serve")
ROUTES = ("/", "/healthz", "/readyz", "/metrics", "/v1/ask", "/v1/chat/completions", "/v1/models")
OPEN_ROUTES = ("/", "/healthz", "/readyz")  # the web page holds no data: it asks for the key and sends it itself


class ServeSettings(BaseModel):
    """Server settings; every limit has a CLI flag on ``declrag serve``."""
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # errors never show the API key
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    api_key: SecretStr | None = None  # when set, every route but /, /healthz and /readyz needs "Bearer <key>"
    max_body_bytes: int = Field(64 * 1024, ge=1)
    max_question_chars: int | None = Field(None, ge=1)  # None: the program's config.max_question_chars
    request_timeout_s: float = Field(120.0, gt=0)
    max_in_flight: int = Field(8, ge=1)
    # threads that run program calls (None: max_in_flight). Calls that wait on a remote LM want one thread each;
    # CPU-bound calls (retrieval only, an in-process model) run faster on a few threads than on many sharing the GIL
    workers: int | None = Field(None, ge=1)
    retry_after_s: int = Field(1, ge=1)
    cache_threshold: float | None = Field(None, gt=0, le=1)  # None: the semantic answer cache is off
    cache_size: int = Field(1024, ge=1)
    cors_origins: list[str] = []

    @field_validator("api_key")
    @classmethod
    def _sendable_key(cls, key: SecretStr | None) -> SecretStr | None:
        """A key clients can send in a header (visible ASCII), refused at start-up otherwise: the server
        compares it with the header's bytes, so another key could never authenticate."""
        if key is not None and (problem := api_key_problem(key.get_secret_value())):
            raise ValueError(f"the API key {problem}")
        return key


class ApiError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None, kind: str = "invalid",
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.field, self.kind, self.headers = status, message, field, kind, headers


def _sendable(text: str) -> str:
    """``text`` with any lone surrogate (from a client's input, e.g. a field name) escaped, so it encodes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(status: int, message: str, field: str | None = None,
                   headers: dict | None = None) -> FastJSONResponse:
    body = {"error": _sendable(message)} | ({"field": _sendable(field)} if field else {})
    return FastJSONResponse(body, status_code=status, headers=headers)


class AskOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    where: dict[str, Any] | None = None  # a metadata filter, as `declrag search --where`


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
    options: AskOptions | None = None
    stream: StrictBool = False  # server-sent events: the answer's tokens as generated, then the whole response


class SemanticCache:
    """Answers by question embedding: a question whose cosine similarity with an answered one (same filter)
    is >= ``threshold`` gets that answer. Bounded LRU; safe across threads."""

    def __init__(self, threshold: float, size: int):
        self.threshold, self.size = threshold, size
        self.entries: OrderedDict[int, tuple[str, np.ndarray, dict]] = OrderedDict()
        self.serial = 0
        self.lock = threading.Lock()

    def get(self, key: str, vec: np.ndarray) -> tuple[dict, float] | None:
        with self.lock:
            ids = [i for i, e in self.entries.items() if e[0] == key]
            if not ids:
                return None
            sims = np.stack([self.entries[i][1] for i in ids]) @ (vec / (np.linalg.norm(vec) or 1.0))
            if sims[best := int(np.argmax(sims))] < self.threshold:
                return None
            self.entries.move_to_end(ids[best])
            return self.entries[ids[best]][2], float(sims[best])

    def put(self, key: str, vec: np.ndarray, payload: dict) -> None:
        with self.lock:
            self.serial += 1
            self.entries[self.serial] = (key, vec / (np.linalg.norm(vec) or 1.0), payload)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


class Metrics:  # one registry per app, so several apps can live in one process
    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("declrag_requests", "HTTP requests by route and status", ["route", "status"],
                                registry=r)
        self.latency = Histogram("declrag_request_seconds", "HTTP request latency by route", ["route"], registry=r,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120))
        self.program = Histogram("declrag_program_seconds", "time inside the program per answered question",
                                 registry=r, buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120))
        self.in_flight = Gauge("declrag_in_flight", "program calls running now", registry=r)
        self.tokens = Counter("declrag_lm_tokens", "LM tokens by direction (in, out)", ["direction"], registry=r)
        self.cost = Counter("declrag_lm_cost_usd", "LM cost in USD (LiteLLM's price table)", registry=r)
        self.abstentions = Counter("declrag_abstentions", "answers that abstained", registry=r)
        self.errors = Counter("declrag_errors", "error responses by route and kind", ["route", "kind"], registry=r)
        self.cache_hits = Counter("declrag_cache_hits", "answers served from the semantic cache", registry=r)


NO_USAGE = {"total": {"calls": 0, "cached": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "lm_ms": 0.0}}


class Guard:
    """Pure ASGI middleware: API key, body-size limit, request metrics (count, latency, errors)."""

    def __init__(self, app, key: str | None, max_body: int, metrics: Metrics):
        self.app, self.key, self.max_body, self.metrics = app, key, max_body, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"] if scope["path"] in ROUTES else "other"
        status, t0 = [500], time.perf_counter()

        async def send_(msg):
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
            await send(msg)

        auth, length = b"", b""  # the two headers read here (the last of each, if sent twice)
        for k, v in scope.get("headers", ()):
            if (k := k.lower()) == b"authorization":
                auth = v
            elif k == b"content-length":
                length = v
        try:
            too_big = f"request body is larger than {self.max_body} bytes"
            # "Bearer <key>", compared in constant time
            scheme, _, given = auth.decode("latin-1").partition(" ")
            authorized = scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(),
                                                                            (self.key or "").encode())
            if self.key and route not in OPEN_ROUTES and not authorized:
                self.metrics.errors.labels(route, "unauthorized").inc()
                return await error_response(401, "unauthorized",
                                            headers={"WWW-Authenticate": "Bearer"})(scope, receive, send_)
            if (n := length.decode("latin-1")).isdigit() and int(n) > self.max_body:
                self.metrics.errors.labels(route, "too_large").inc()
                return await error_response(413, too_big)(scope, receive, send_)
            seen = [0]

            async def receive_():
                msg = await receive()
                if msg["type"] == "http.request":
                    seen[0] += len(msg.get("body", b""))
                    if seen[0] > self.max_body:  # a chunked body with no Content-Length
                        self.metrics.errors.labels(route, "too_large").inc()
                        raise HTTPException(413, too_big)
                return msg

            await self.app(scope, receive_, send_)
        finally:
            self.metrics.requests.labels(route, str(status[0])).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - t0)


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def _ask_events(events: AsyncIterator[tuple[str, Any]]) -> AsyncIterator[str]:
    """``/v1/ask``'s server-sent events: ``delta`` {"text"}, then ``answer`` (the response) or ``error``."""
    async for kind, value in events:
        if kind == "delta":
            yield _sse("delta", {"text": value})
        elif kind == "done":
            payload, replaced = value
            yield _sse("answer", {**payload, "replaced": replaced})
        else:
            yield _sse("error", {"error": value.message, "status": value.status})


def _validation_message(err: dict) -> tuple[str, str]:
    field = ".".join(str(p) for p in err.get("loc", ()) if p != "body" and not isinstance(p, int)) or "body"
    kind = err.get("type", "")
    return ("body is not valid JSON" if kind == "json_invalid"
            else f"unknown field {field}" if kind == "extra_forbidden"
            else f"{field} is required" if kind == "missing" else "body must be a JSON object" if field == "body"
            else f"{field}: {err.get('msg', 'invalid value')}"), field


def _unparsable(cause: BaseException | None) -> str | None:
    """Why a request body could not be parsed, from the error FastAPI's JSON parsing raised (which it answers
    with a generic 400), or None when the error is not one of those."""
    if isinstance(cause, RecursionError):
        return "body is nested too deeply"
    if isinstance(cause, UnicodeDecodeError):
        return "body is not valid JSON: it is not UTF-8 text"
    if isinstance(cause, ValueError):  # an integer of more digits than Python converts (4300)
        return "body is not valid JSON: a number is too long"
    return None


def create_app(program: Any | Callable[[], Any], name: str = DEFAULT_NAME, run: str | None = None,
               settings: ServeSettings | None = None, *, lm_override: Any = None,
               on_load: Callable[[BaseException | None], None] | None = None) -> FastAPI:
    """A FastAPI app serving ``program``: a `RAGProgram`, or a zero-argument callable returning one (called on
    a thread after start-up; ``/readyz`` is 503 until it returns). ``name`` is the served model id, ``run``
    the artifact it came from; ``on_load(error or None)`` is told when loading ends. ``lm_override`` is a
    testing hook: an LM (e.g. `declrag.testing.ScriptedLM`) applied with `declrag.lm.using_lm` around every
    program call, or a zero-argument callable returning one per call (for LMs unsafe to share by threads)."""
    s = settings or ServeSettings()
    metrics = Metrics()
    cache = SemanticCache(s.cache_threshold, s.cache_size) if s.cache_threshold else None
    state: dict[str, Any] = {"program": None, "error": None, "in_flight": 0, "executor": None,
                             "started": int(time.time())}
    info = {"name": name, "run": run}

    def lm_scope():
        if lm_override is None:
            return nullcontext()
        from ..lm import using_lm

        return using_lm(lm_override if isinstance(lm_override, dspy.BaseLM) or not callable(lm_override)
                        else lm_override())

    def load() -> Any:  # models load now, not on the first question
        prog = program if isinstance(program, dspy.Module) or not callable(program) else program()
        if hasattr(prog, "warm_up"):  # ready means warmed up
            prog.warm_up(lms=lm_override is None)
        return prog

    async def load_in_background():
        t0 = time.perf_counter()
        try:
            state["program"] = await asyncio.to_thread(load)
            log.info("ready: %s loaded in %.1f s", name, time.perf_counter() - t0)
        except Exception as e:  # reported on /readyz and to on_load
            state["error"] = e
            log.error("could not load the program: %s", e)
            return on_load and on_load(e)
        return on_load and on_load(None)

    @asynccontextmanager
    async def lifespan(_app):
        state["executor"] = ThreadPoolExecutor(max_workers=min(s.workers or s.max_in_flight, s.max_in_flight),
                                               thread_name_prefix="declrag-serve")
        task = asyncio.create_task(load_in_background())
        try:
            yield
        finally:
            task.cancel()  # and requests in flight finish before the process ends
            await asyncio.to_thread(state["executor"].shutdown, wait=True)

    app = FastAPI(title="declrag", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings, app.state.metrics, app.state.cache, app.state.serving = s, metrics, cache, state

    def work(question: str, where: dict | None) -> tuple[dict, bool]:
        """On a worker thread: the cache, else the program. Returns (payload, cache hit)."""
        prog = state["program"]
        key = json.dumps(where, sort_keys=True) if where else ""
        vec = np.asarray(prog.embedder.embed_query(question), dtype=np.float32) if cache else None
        if cache and vec is not None and (found := cache.get(key, vec)):
            return {**found[0], "usage": NO_USAGE, "cache": {"hit": True, "similarity": round(found[1], 4)}}, True
        with lm_scope():
            t0 = time.perf_counter()
            a = prog(question=question, where=where)
            metrics.program.observe(time.perf_counter() - t0)
        payload = plain({"answer": a.answer, "abstained": bool(a.abstained), "citations": a.citations,
                          "judge": a.judge, "usage": a.usage, "latency_ms": a.latency_ms,
                          "program": dict(info), "cache": {"hit": False}})
        if cache and vec is not None:
            cache.put(key, vec, payload)
        return payload, False

    def done(fut: asyncio.Future) -> None:  # on the loop, when the worker thread ends (even after a 504)
        state["in_flight"] -= 1
        metrics.in_flight.dec()
        if fut.cancelled() or fut.exception() is not None:
            return
        payload, hit = fut.result()
        total = payload["usage"]["total"]
        metrics.cache_hits.inc(hit)
        metrics.tokens.labels("in").inc(total["tokens_in"])
        metrics.tokens.labels("out").inc(total["tokens_out"])
        metrics.cost.inc(total["cost_usd"])
        metrics.abstentions.inc(payload["abstained"])

    def admit(question: str, where: dict | None, field: str) -> str:
        """Checks that need no program call (422s, 503s); then takes an in-flight slot. Returns the question as
        `declrag.inputs.user_text` normalizes it (what the program and the semantic cache see)."""
        retry = {"Retry-After": str(s.retry_after_s)}
        prog = state["program"]
        if prog is None:
            raise ApiError(503, "not ready: the program is loading" if state["error"] is None else
                           "the program failed to load", kind="not_ready", headers=retry)
        try:
            question = user_text(question, field, s.max_question_chars or prog.config.max_question_chars)
        except InputError as e:
            raise ApiError(422, e.message, field) from None
        try:
            Filter.of(where)
        except DeclragError as e:
            raise ApiError(422, e.message, "options.where") from None
        if state["in_flight"] >= s.max_in_flight:
            raise ApiError(503, f"busy: {state['in_flight']} requests in flight; retry later", kind="busy",
                           headers=retry)
        state["in_flight"] += 1
        metrics.in_flight.inc()
        return question

    def failure(e: BaseException, question: str) -> ApiError:
        """The error response for a failed program call."""
        if isinstance(e, ApiError):
            return e
        if isinstance(e, InputError):
            return ApiError(422, e.message, e.field)
        if isinstance(e, DeclragError):
            upstream = isinstance(e.__cause__, dspy.utils.exceptions.LMError)  # the model's server failed
            return ApiError(502 if upstream else 400, e.message, kind="upstream" if upstream else "bad_request")
        log.error("the program failed on %r", question[:200], exc_info=e)
        return ApiError(500, "internal error", kind="internal")

    def timed_out() -> ApiError:
        return ApiError(504, f"no answer within {s.request_timeout_s:g} s", kind="timeout")

    async def answer(question: str, where: dict | None, field: str = "question") -> dict:
        question = admit(question, where, field)
        fut = asyncio.get_running_loop().run_in_executor(state["executor"], work, question, where)
        fut.add_done_callback(done)
        t0 = time.perf_counter()
        try:
            payload, hit = await asyncio.wait_for(asyncio.shield(fut), s.request_timeout_s)
        except TimeoutError:
            raise timed_out() from None
        except Exception as e:
            raise failure(e, question) from None
        if hit:
            payload = {**payload, "latency_ms": {"total": round(1000 * (time.perf_counter() - t0), 3)}}
        return payload

    async def answer_stream(question: str, where: dict | None, route: str,
                            field: str = "question") -> AsyncIterator[tuple[str, Any]]:
        """The answer as events: ``("delta", text)`` as the generate stage's LM produces it (see
        `declrag.streaming`), then ``("done", (payload, replaced))``, or ``("error", ApiError)`` once events
        have begun. Everything up to the first event (admission, retrieval, the first token) fails as an
        ordinary JSON error, raised here before any event. ``replaced``: post-processing replaced the words
        streamed (an abstention recognised, citations attributed, the self-judge), so the final answer is not
        the streamed text; when it only extends it, the rest comes as one more delta. A cache hit (the
        semantic cache, or DSPy's) has no tokens to stream: its answer is one delta. ``request_timeout_s``
        bounds the whole stream; a stream cut off (timeout, or the client left) is cancelled: the LM stops at its
        next token and the slot is freed when the program's thread has ended."""
        question = admit(question, where, field)
        loop, prog = asyncio.get_running_loop(), state["program"]
        queue: asyncio.Queue[str | Done | BaseException] = asyncio.Queue()
        deadline, t0 = loop.time() + s.request_timeout_s, time.perf_counter()

        async def pump() -> tuple[dict, bool]:
            result = None
            async for item in astream(prog, lambda: work(question, where)):
                queue.put_nowait(item)
                result = item.result if isinstance(item, Done) else result
            assert result is not None  # astream ends with Done or raises
            return result

        def ended(task: asyncio.Task) -> None:
            if not task.cancelled() and (error := task.exception()) is not None:
                queue.put_nowait(error)

        task = asyncio.create_task(pump())
        task.add_done_callback(done)  # the slot is freed and the metrics counted when the program's thread ends
        task.add_done_callback(ended)

        async def next_item() -> str | Done:
            try:
                async with asyncio.timeout_at(deadline):
                    item = await queue.get()
            except TimeoutError:
                raise timed_out() from None
            if isinstance(item, BaseException):
                raise failure(item, question)
            return item

        try:
            first = await next_item()
        except BaseException:
            task.cancel()
            raise

        async def events() -> AsyncIterator[tuple[str, Any]]:
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
                metrics.errors.labels(route, e.kind).inc()
                yield "error", e
            finally:
                if not task.done():  # a timeout, or the client went away
                    task.cancel()

        return events()

    def event_stream(events: AsyncIterator[str]) -> StreamingResponse:
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.post("/v1/ask")
    async def ask(body: AskRequest) -> Response:
        """Answer a question: ``{question, options: {where}}`` -> answer, citations, judge, usage, ...
        With ``stream``: server-sent events ``delta`` ``{"text"}`` as the answer is generated, then ``answer``
        (this same response, plus ``replaced``: the final text is not the streamed one) or ``error``."""
        where = body.options.where if body.options else None
        if body.stream:
            return event_stream(_ask_events(await answer_stream(body.question, where, "/v1/ask")))
        return FastJSONResponse(await answer(body.question, where))

    @app.post("/v1/chat/completions")
    async def chat(body: oai.ChatRequest) -> Response:
        """OpenAI-compatible chat completions (the last user message is the question); ``stream`` for SSE."""
        if body.model and body.model != name:
            raise ApiError(404, f"unknown model {body.model!r}; this server serves {name!r}", "model",
                           kind="unknown_model")
        question = oai.last_user_text(body)
        if question is None:
            raise ApiError(422, "messages: no user message (the last user message is the question)", "messages")
        if body.stream:
            return event_stream(oai.stream(await answer_stream(question, None, "/v1/chat/completions", "messages"),
                                           name))
        return FastJSONResponse(oai.completion(await answer(question, None, field="messages"), name))

    @app.get("/v1/models")
    async def list_models() -> FastJSONResponse:
        return FastJSONResponse(oai.models(name, state["started"]))

    @app.get("/healthz")
    async def healthz() -> FastJSONResponse:
        return FastJSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> FastJSONResponse:
        if state["program"] is not None:
            return FastJSONResponse({"status": "ready"})
        if state["error"] is not None:  # open route: the reason goes to the server's log only
            return error_response(503, "the program failed to load (see the server log)")
        return error_response(503, "not ready: loading the program", headers={"Retry-After": str(s.retry_after_s)})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    page = files(__package__).joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers={
            "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                       "connect-src 'self'; base-uri 'none'; form-action 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    def route_of(request: Request) -> str:  # errors: always JSON, never a stack trace
        return request.url.path if request.url.path in ROUTES else "other"

    @app.exception_handler(ApiError)
    @app.exception_handler(DeclragError)
    async def on_api_error(request: Request, e: ApiError | DeclragError):
        if isinstance(e, DeclragError):
            e = ApiError(400, e.message, kind="bad_request")
        metrics.errors.labels(route_of(request), e.kind).inc()
        return error_response(e.status, e.message, e.field, e.headers)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, e: RequestValidationError):
        metrics.errors.labels(route_of(request), "invalid").inc()
        return error_response(422, *_validation_message(e.errors()[0]))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, e: StarletteHTTPException):
        if e.status_code == 400 and (why := _unparsable(e.__cause__)):  # FastAPI's "error parsing the body"
            metrics.errors.labels(route_of(request), "invalid").inc()
            return error_response(422, why, "body")
        if e.status_code != 413:  # the body guard counted its own
            metrics.errors.labels(route_of(request), {404: "not_found", 405: "method"}.get(e.status_code, "http")).inc()
        message = e.detail if isinstance(e.detail, str) else "request failed"
        message = message.lower() if message == HTTPStatus(e.status_code).phrase else message
        return error_response(e.status_code, message, headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def on_crash(request: Request, e: Exception):
        log.error("unhandled error on %s", request.url.path, exc_info=e)
        metrics.errors.labels(route_of(request), "internal").inc()
        return error_response(500, "internal error")

    app.add_middleware(Guard, key=s.api_key.get_secret_value() if s.api_key else None, max_body=s.max_body_bytes,
                       metrics=metrics)
    if s.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=s.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    return app
