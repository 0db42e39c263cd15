"""The HTTP face of a `RAGProgram`: ``create_app(program, name, run, settings)`` returns a FastAPI app with the
routes docs/guides/serve.md lists (``/v1/ask``, ``/v1/search``, the OpenAI-compatible ones, the health checks,
``/metrics`` and the web page ``/``). Errors are JSON ``{"error": ..., "field": ...}``. The routes are thin:
loading, admission, the worker threads, answering, ratings and failures are the answering service's
(`declrag.answering.AnswerService`)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from http import HTTPStatus
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi import Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..access import Callers, Principal, Refused
from ..answering import CHAT_FIELDS, AnswerService, ApiError, Metrics, Program, Request
from ..answering.selection import DEFAULT_NAME
from ..errors import DeclragError
from ..runtime import tracing
from ..usage import Recorder
from . import _openai_compat as oai
from ._http_server import bearer_ok
from ._jsonenc import FastJSONResponse
from ._schemas import AskRequest, FeedbackRequest, SearchRequest, SearchResponse
from ._settings import ServeSettings

__all__ = ["ApiError", "AnswerService", "ServeSettings", "create_app", "error_response"]

log = logging.getLogger("declrag.serve")
ROUTES = ("/", "/healthz", "/readyz", "/metrics", "/v1/ask", "/v1/search", "/v1/chat/completions", "/v1/models")
OPEN_ROUTES = ("/", "/healthz", "/readyz")  # the web page holds no data: it asks for the key and sends it itself


def _sendable(text: str) -> str:
    """``text`` with any lone surrogate (from a client's input, e.g. a field name) escaped, so it encodes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def caller(request: HttpRequest) -> Principal | None:
    """Who sent ``request``, as `Guard` told from its credentials; None where the server has no callers."""
    return request.scope.get("state", {}).get("principal")


def error_response(status: int, message: str, field: str | None = None,
                   headers: dict | None = None) -> FastJSONResponse:
    body = {"error": _sendable(message)} | ({"field": _sendable(field)} if field else {})
    return FastJSONResponse(body, status_code=status, headers=headers)


class Guard:
    """Pure ASGI middleware: API key or callers (each request's `Principal`, for the routes in its ``state``),
    body-size limit, request metrics (count, latency, errors)."""

    def __init__(self, app, key: str | None, max_body: int, metrics: Metrics, callers: Callers | None = None):
        self.app, self.key, self.max_body, self.metrics, self.callers = app, key, max_body, metrics, callers

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
            if self.key and route not in OPEN_ROUTES and not bearer_ok(auth, self.key):
                self.metrics.errors.labels(route, "unauthorized").inc()
                return await error_response(401, "unauthorized",
                                            headers={"WWW-Authenticate": "Bearer"})(scope, receive, send_)
            if self.callers is not None and route not in OPEN_ROUTES:
                try:
                    scope.setdefault("state", {})["principal"] = await self.callers.aprincipal(auth)
                except Refused as r:
                    self.metrics.errors.labels(route, "unauthorized" if r.status == 401 else "forbidden").inc()
                    return await error_response(r.status, r.reason, headers={"WWW-Authenticate": "Bearer"} if
                                                r.status == 401 else None)(scope, receive, send_)
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

            if tracing.enabled():
                await self._traced(scope, receive_, send_, route, status)
            else:
                await self.app(scope, receive_, send_)
        finally:
            self.metrics.requests.labels(route, str(status[0])).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - t0)

    async def _traced(self, scope, receive, send, route: str, status: list[int]) -> None:
        """The request under a server span (``POST /v1/ask``), the child of the caller's ``traceparent``."""
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        method = scope.get("method", "GET")
        with tracing.incoming(headers, f"{method} {route}", {"http.request.method": method, "url.path": route,
                                                            "http.route": route}) as span:
            await self.app(scope, receive, send)
            span.set_attribute("http.response.status_code", status[0])
            if status[0] >= 500:
                tracing.failed(span, str(status[0]))


def event_stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


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


def create_app(program: Program | Callable[[], Program], name: str = DEFAULT_NAME, run: str | None = None,
               settings: ServeSettings | None = None, *, lm_override: Any = None,
               on_load: Callable[[BaseException | None], None] | None = None) -> FastAPI:
    """A FastAPI app serving ``program``: thin routes over one `declrag.answering.AnswerService` (see there for
    ``program``, ``lm_override`` and ``on_load``), which is ``app.state.service``."""
    s = settings or ServeSettings()
    recorder = Recorder(s.record) if s.record is not None else None  # a bad store: an error now, at start-up
    access = s.access.build() if s.access is not None else None  # a bad keys file: an error now
    service = AnswerService(program, name, run, s, lm_override=lm_override, on_load=on_load,
                            recorder=recorder, access=access)
    metrics = service.metrics

    @asynccontextmanager
    async def lifespan(_app):
        loading = await service.start()
        try:
            yield
        finally:
            loading.cancel()  # and requests in flight finish before the process ends
            await service.stop()
            if recorder is not None:
                await asyncio.to_thread(recorder.close)  # what is queued is written

    app = FastAPI(title="declrag", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings, app.state.metrics, app.state.cache, app.state.service = s, metrics, service.cache, service

    @app.post("/v1/ask")
    async def ask(body: AskRequest, request: HttpRequest) -> Response:
        """Answer a question: ``{question, history, options: {where}}`` -> answer, citations, judge, usage, ...
        ``history``: the conversation before the question, ``[{role, content}]`` (user, assistant, system).
        With ``stream``: server-sent events ``delta`` ``{"text"}`` as the answer is generated, then ``answer``
        (this same response, plus ``replaced``: the final text is not the streamed one) or ``error``."""
        req = Request(body.question, body.options.where if body.options else None, body.history,
                      principal=caller(request))
        if body.stream:
            return event_stream(_ask_events(await service.answer_stream(req)))
        return FastJSONResponse(await service.answer(req))

    @app.post("/v1/search", response_model=SearchResponse)
    async def search(body: SearchRequest, request: HttpRequest) -> Response:
        """The passages the program would answer from, without generating (its compiled retrieval: history,
        rewrite, hybrid search, rerank, selection): ``{query, history}`` or ``{messages}`` (the last, the user's,
        is the query), with ``where``, ``k`` and ``alpha`` -> ``{hits: [{rank, chunk_id, doc_id, source, title,
        page, span, text, score}], query, k, alpha, latency_ms}``."""
        req = replace(body.request(), principal=caller(request))
        return FastJSONResponse(await service.search(req, body.k, body.alpha))

    @app.post("/v1/chat/completions")
    async def chat(body: oai.ChatRequest, request: HttpRequest) -> Response:
        """OpenAI-compatible chat completions: the last message (the user's) is the question, the earlier ones
        the history (a system or developer message an instruction to the generate stage); ``stream`` for SSE."""
        if body.model and body.model != name:
            raise ApiError(404, f"unknown model {body.model!r}; this server serves {name!r}", "model",
                           kind="unknown_model")
        question, history = oai.conversation(body.messages)
        req = Request(question, None, history, "/v1/chat/completions", CHAT_FIELDS, principal=caller(request))
        if body.stream:
            return event_stream(oai.stream(await service.answer_stream(req), name, req.id))
        return FastJSONResponse(oai.completion(await service.answer(req), name))

    @app.get("/v1/models")
    async def list_models() -> FastJSONResponse:
        return FastJSONResponse(oai.models(name, service.state.started))

    _feedback(app, service)
    _operations(app, service)
    _answer_errors_as_json(app, metrics)
    app.add_middleware(Guard, key=s.api_key.get_secret_value() if s.api_key else None, max_body=s.max_body_bytes,
                       metrics=metrics, callers=access.callers if access is not None else None)
    if s.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=s.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    return app


def _feedback(app: FastAPI, service: AnswerService) -> None:
    @app.post("/v1/feedback", status_code=204)
    async def feedback(body: FeedbackRequest, request: HttpRequest) -> Response:
        """Rate an answer: ``{id, helpful, citation, correction}``; ``id`` is the answer's (``/v1/ask``'s ``id``, or
        the chat completion's ``chatcmpl-...``). A second rating of the same answer replaces the first. 404: no
        answer recorded with that id (or recording is off); 403: the answer was given to another caller; 204:
        recorded."""
        await asyncio.to_thread(service.rate, body.answer_id(), body.helpful, body.citation, body.correction,
                                caller(request))
        return Response(status_code=204)


def _operations(app: FastAPI, service: AnswerService) -> None:
    """The routes that answer no question: the health checks, the metrics and the web page."""

    @app.get("/healthz")
    async def healthz() -> FastJSONResponse:
        return FastJSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> FastJSONResponse:
        if service.ready:
            return FastJSONResponse({"status": "ready"})
        if service.state.error is not None:  # open route: the reason goes to the server's log only
            return error_response(503, "the program failed to load (see the server log)")
        return error_response(503, "not ready: loading the program",
                              headers={"Retry-After": str(service.settings.retry_after_s)})

    @app.get("/metrics")
    async def prometheus() -> Response:
        await asyncio.to_thread(service.measure_caches)
        return Response(generate_latest(service.metrics.exposition()), media_type=CONTENT_TYPE_LATEST)

    page = files(__package__).joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers={
            "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                       "connect-src 'self'; base-uri 'none'; form-action 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})


def _answer_errors_as_json(app: FastAPI, metrics: Metrics) -> None:
    """Every error a JSON body ``{"error", "field"}`` with its status, counted by route and kind; never a stack
    trace (an unexpected one is logged and answered 500)."""

    def route_of(request: HttpRequest) -> str:  # errors: always JSON, never a stack trace
        return request.url.path if request.url.path in ROUTES else "other"

    @app.exception_handler(ApiError)
    @app.exception_handler(DeclragError)
    async def on_api_error(request: HttpRequest, e: ApiError | DeclragError):
        if isinstance(e, DeclragError):
            e = ApiError(400, e.message, kind="bad_request")
        metrics.errors.labels(route_of(request), e.kind).inc()
        return error_response(e.status, e.message, e.field, e.headers)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: HttpRequest, e: RequestValidationError):
        metrics.errors.labels(route_of(request), "invalid").inc()
        return error_response(422, *_validation_message(e.errors()[0]))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: HttpRequest, e: StarletteHTTPException):
        if e.status_code == 400 and (why := _unparsable(e.__cause__)):  # FastAPI's "error parsing the body"
            metrics.errors.labels(route_of(request), "invalid").inc()
            return error_response(422, why, "body")
        if e.status_code != 413:  # the body guard counted its own
            metrics.errors.labels(route_of(request), {404: "not_found", 405: "method"}.get(e.status_code, "http")).inc()
        message = e.detail if isinstance(e.detail, str) else "request failed"
        message = message.lower() if message == HTTPStatus(e.status_code).phrase else message
        return error_response(e.status_code, message, headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def on_crash(request: HttpRequest, e: Exception):
        log.error("unhandled error on %s", request.url.path, exc_info=e)
        metrics.errors.labels(route_of(request), "internal").inc()
        return error_response(500, "internal error")
