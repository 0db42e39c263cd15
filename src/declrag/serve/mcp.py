"""`declrag mcp`: a program served as Model Context Protocol tools, on the official SDK (``mcp``, its 2.x
`MCPServer`), over stdio (the default) or streamable HTTP: ``search`` (the ranked passages, `RAGProgram.search`)
and ``ask`` (the answer with its citations), on the program `declrag serve` would run (docs/guides/mcp.md).

A bad argument is a tool error (``isError``) of one line naming the argument and the fix. On stdio, standard
output is the protocol: whatever is written to it while loading goes to standard error (`stdout_to_stderr`).

No ``from __future__ import annotations`` here: the SDK reads the tools' signatures, whose annotations name
the loaded program's defaults, when they are registered."""

import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from ..access import Access, AccessSettings, Principal, Refused
from ..answering import SEARCH_FIELDS, TOOL_FIELDS, AnswerService, ApiError, Program, Request, ServiceSettings
from ..answering.selection import ProgramChoice, select_program
from ..errors import DeclragError
from ..payloads import Citation, SearchHit
from ..runtime.about import package_version
from ..stores.base import FILTER_FIELDS
from ..usage import Recorder, RecordSettings
from ..usage.recorder import said
from ._http_server import Server, bearer_ok
from ._server import record_beside

MAX_K = 50
Transport = Literal["stdio", "http"]
HTTP_PATH = "/mcp"

# -- the tools' results (their output schemas) ---------------------------------------------------------------


class SearchResult(BaseModel):
    hits: list[SearchHit] = Field(description="best first")


class AskResult(BaseModel):
    answer: str
    abstained: bool = Field(description="true: the program declined to answer from the passages it found")
    reason: str | None = Field(None, description="why it abstained, e.g. 'the passages never mention X'")
    citations: list[Citation]
    judge: dict[str, Any] = Field(description="the self-judge's verdict ({} or mode off when it is off)")
    dropped_sentences: int = Field(0, description="the verified generate mode: sentences of the LM's answer that "
                                                  "its passages did not support, left out")
    caught: dict[str, str] | None = Field(None, description="the LM's output echoed the prompt or copied the "
                                          "passages and was not passed on: kind (echo, copy), why, and replaced_by "
                                          "(extractive, retry, abstention)")
    history_turns: int


# -- the tools' arguments (their input schemas) --------------------------------------------------------------

History = Annotated[list[dict[str, Any]] | None, Field(
    description='the conversation before this turn, oldest first: [{"role": "user" | "assistant" | "system", '
                '"content": "..."}]; the search query is made from it and the question as the program is set up to')]
Where = Annotated[dict[str, Any] | None, Field(
    description='a metadata filter, e.g. {"source": "a.pdf"} or {"page": {"$gte": 2}}, on the fields '
                f'{", ".join(sorted(FILTER_FIELDS))}; operators $eq $ne $gt $gte $lt $lte $in $nin, and $and / $or '
                'over lists of filters')]


class _Server(MCPServer):
    """The SDK's server; an argument that fails the tool's input schema is answered in one line (the argument,
    what is wrong, the value sent) instead of pydantic's multi-line report."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e, UnexpectedToolError) or not isinstance(e.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {schema_problem(e.__cause__)}") from e.__cause__


def schema_problem(e: ValidationError) -> str:
    """The first problem of a tool's arguments, on one line: ``k: Input should be ... (got 0)``."""
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "arguments"
    got = "" if first["type"] == "missing" else f" (got {_short(first.get('input'))})"
    return f"{where}: {first['msg']}{got}"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class CallLimits:
    """How the tools' calls are admitted: at most ``max_in_flight`` at once (one more is refused at once with a
    "busy" tool error), each answered within ``timeout_s`` (else a "no answer within" tool error; the call's thread
    still counts until it ends). Per server process, as `declrag serve`'s (`ServiceSettings`)."""

    timeout_s: float = 120.0
    max_in_flight: int = 8


async def _caller(access: Access | None, caller: Principal | None, ctx: Context) -> Principal | None:
    """Who makes a tool call: ``caller`` (stdio: the one user), else the one `KeyGuard` told from its HTTP request,
    else the one the request's ``Authorization`` names (a tool error without one); None without ``access``."""
    if access is None or caller is not None:
        return caller
    request = ctx.request_context.request
    if isinstance(told := getattr(request, "scope", {}).get("state", {}).get("principal"), Principal):
        return told  # checked once, by the guard
    try:
        return await access.callers.aprincipal((ctx.headers or {}).get("authorization", ""))
    except Refused as r:
        raise ToolError(r.reason) from None


@contextlib.asynccontextmanager
async def _tool_errors() -> AsyncIterator[None]:
    """The service's refusals (`ApiError`: a bad argument, busy, a timeout, a failed LM) as the tool's error, on one
    line."""
    try:
        yield
    except ApiError as e:
        raise ToolError(e.line()) from None


def _service(program: Program, name: str, limits: CallLimits | None, source_base: str | None,
             recorder: Recorder | None, access: Access | None, record: RecordSettings | None) -> AnswerService:
    lim = limits or CallLimits()
    return AnswerService(program, name, settings=ServiceSettings(
        request_timeout_s=lim.timeout_s, max_in_flight=lim.max_in_flight, max_search_k=MAX_K,
        source_base=source_base, record=record), recorder=recorder, access=access)


def build_server(program: Program | AnswerService, name: str = "declrag", limits: CallLimits | None = None,
                 source_base: str | None = None, recorder: Recorder | None = None, access: Access | None = None,
                 caller: Principal | None = None, record: RecordSettings | None = None) -> MCPServer:
    """An `MCPServer` whose ``search`` and ``ask`` tools are answered by the answering service
    (`declrag.answering.AnswerService`: ``program``, opened, or one made over a loaded program), as `declrag serve`'s
    routes are: within ``limits``, files named as `declrag serve` names them (``source_base``), each call recorded by
    ``recorder`` (the usage store, `declrag.usage`; ``record``: its settings, e.g. exploration). With ``access``,
    each call searches only what its caller may read: ``caller`` (stdio: the one user), else the caller its HTTP
    request's ``Authorization`` header names (a tool error without one)."""
    if not isinstance(program, AnswerService):
        program = _service(program, name, limits, source_base, recorder, access, record).open()
    service, access = program, program.access
    config = service.config
    server = _Server(name="declrag", title=f"declrag: {name}", version=package_version("declrag"),
                     instructions=f"Search and question the documents of the declrag program {name!r}. `search` "
                                  "returns the ranked passages; `ask` answers with citations to them.")

    async def search(
        query: Annotated[str, Field(description="what to look for (a question or keywords)")],
        history: History = None,
        where: Where = None,
        k: Annotated[int | None, Field(ge=1, le=MAX_K, description="passages to return (default: the "
                                       f"program's retrieve.k, {config.retrieve.k})")] = None,
        alpha: Annotated[float | None, Field(ge=0.0, le=1.0, description="hybrid weight of the vector search (1: "
                                             "vector only, 0: keywords only; default: the program's, "
                                             f"{config.retrieve.alpha})")] = None,
        ctx: Context = None,  # type: ignore[assignment]  # the SDK passes the call's context
    ) -> SearchResult:
        req = Request(query, where, history, "mcp search", SEARCH_FIELDS, principal=await _caller(access, caller, ctx))
        async with _tool_errors():
            found = await service.search(req, k, alpha)
        return SearchResult(hits=[SearchHit(**h) for h in found["hits"]])

    async def ask(
        question: Annotated[str, Field(description="the question")],
        history: History = None,
        where: Where = None,
        ctx: Context = None,  # type: ignore[assignment]  # the SDK passes the call's context
    ) -> AskResult:
        req = Request(question, where, history, "mcp ask", TOOL_FIELDS, principal=await _caller(access, caller, ctx))
        async with _tool_errors():
            a = await service.answer(req)
        return AskResult.model_validate({k: a[k] for k in AskResult.model_fields})

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    server.add_tool(search, title="Search the documents", annotations=read_only, description=(
        "The passages the program would answer from, best first, without generating an answer: its compiled "
        "retrieval (hybrid keyword + vector search, fusion, reranking). Each hit has its source document, "
        "character span and text."))
    server.add_tool(ask, title="Ask the documents", annotations=read_only, description=(
        "An answer to the question from the documents, with numbered citations ([n] in the answer) to the "
        "passages it used; abstained is true when the documents do not hold the answer."))
    return server


def load_choice(choice: ProgramChoice, say: Callable[[str], None] = print, *, limits: CallLimits | None = None,
                source_base: str | None = None, recorder: Recorder | None = None, access: Access | None = None,
                record: RecordSettings | None = None) -> tuple[str, str, AnswerService]:
    """``(name, what, service)``: the answering service over the program chosen as `declrag serve` chooses it
    (`select_program`), loaded and warmed up, or a one-line `DeclragError` when it cannot be. ``say`` gets how it
    answers and when it is ready; the other arguments are `build_server`'s."""
    name, what, loader = choice.name, choice.what, choice.load
    t0 = time.perf_counter()
    try:
        service = _service(loader(), name, limits, source_base, recorder, access, record).open()
    except DeclragError:
        raise
    except Exception as e:  # a store or model that does not open: its first line, not a traceback
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise DeclragError(f"could not load {what}: {first}",
                           hint="check the program folder and its store (declrag ask runs the same program)") from e
    say(f"ready: {name} loaded in {time.perf_counter() - t0:.1f} s")
    say(choice.answers)
    return name, what, service


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Meanwhile, ``sys.stdout`` (print, rich, tqdm) and file descriptor 1 (native code) write to standard error."""
    sys.stdout.flush()
    with contextlib.redirect_stdout(sys.stderr):
        try:
            saved = os.dup(1)
            os.dup2(2, 1)
        except OSError:  # no usable descriptors (an embedding host): Python's own stdout is diverted all the same
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 1)
            os.close(saved)


class KeyGuard:
    """Pure ASGI middleware of the HTTP transport: a request without ``Authorization: Bearer <key>`` (the server's
    ``key``, compared in constant time as `declrag serve` does, or a caller's key or token of ``callers``) is answered
    401 (403: a token without groups) with a JSON-RPC error, before the MCP app sees it."""

    BODY = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": -32001, "message": "unauthorized: send the server's API key as 'Authorization: Bearer <key>'"}})

    def __init__(self, app: Any, key: str | None = None, callers: Any = None):
        self.app, self.key, self.callers = app, key, callers

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            auth = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), b"")
            refused = None if self.key is None or bearer_ok(auth, self.key) else (401, self.BODY)
            if self.callers is not None:
                try:  # the tools read the caller from here (`_caller`): one check per request
                    scope.setdefault("state", {})["principal"] = await self.callers.aprincipal(auth)
                except Refused as r:
                    refused = (r.status, json.dumps({"jsonrpc": "2.0", "id": None,
                                                     "error": {"code": -32001, "message": r.reason}}))
            if refused is not None:
                await send({"type": "http.response.start", "status": refused[0], "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": refused[1].encode()})
                return
        await self.app(scope, receive, send)


def run(target: str | Path | None = None, *, config: str | Path | None = None, store: str | Path | None = None,
        model: str | None = None, answer_mode: str | None = None, transport: Transport = "stdio",
        host: str = "127.0.0.1", port: int = 8000,
        api_key: str | None = None, limits: CallLimits | None = None, source_base: str | None = None,
        record: RecordSettings | None = None, say: Callable[[str], None] = print,
        access: AccessSettings | None = None, caller: str | None = None) -> None:
    """Load the program, then serve its tools until the client disconnects (stdio) or SIGTERM / Ctrl-C (HTTP).
    ``api_key``: the key HTTP clients must send (none: no check); ``record``: where the calls are recorded (a
    target of None: where `declrag serve` records by default; ``record`` None: nothing); ``say`` gets the start-up
    lines (write them to standard error for stdio). ``access``: callers who each see only what their groups may read
    (`declrag.access`); over stdio, ``caller`` names the one who asks (a name in the keys file)."""
    guard = access.build() if access is not None else None  # a bad keys file: said before the program loads
    who = _stdio_caller(guard, caller, transport)
    protect = stdout_to_stderr() if transport == "stdio" else contextlib.nullcontext()
    with protect:
        choice = select_program(target, config, store, model, answer_mode=answer_mode)
        if record is not None and record.target is None:
            record = record.model_copy(update={"target": str(record_beside(choice.run, store))})
        recorder = Recorder(record) if record is not None else None
        name, what, service = load_choice(choice, say, limits=limits, source_base=source_base, recorder=recorder,
                                          access=guard, record=record)
        server = build_server(service, name, caller=who)
    say(said(record))
    if guard is not None:
        say(guard.describe() + (f"; over stdio, as {who.name}" if who is not None else ""))
    try:
        _run(server, transport, host, port, api_key, name, what, say, guard)
    finally:
        service.close()  # calls in flight end first
        if recorder is not None:
            recorder.close()  # what is queued is written before the process exits


def _stdio_caller(access: Access | None, caller: str | None, transport: Transport) -> Principal | None:
    """The one caller of a stdio server with callers (``--as NAME``); None over HTTP (each request names its own).
    Raises `DeclragError` where that does not fit the transport or the keys file."""
    if caller is not None and (access is None or transport != "stdio"):
        raise DeclragError("--as names the one caller of a stdio server with callers (--keys)",
                           hint="over HTTP each request's key names its caller; leave out --as")
    if access is None or transport != "stdio":
        return None
    keys = access.callers.keys
    if caller is None or keys is None:
        raise DeclragError("over stdio there is no request to name a caller: say who asks",
                           hint="add --as NAME (a caller of --keys FILE)")
    who = keys.named(caller)
    if who is None:
        raise DeclragError(f"{keys.path} has no caller named {caller!r}", hint=f"see `declrag keys list --file "
                                                                               f"{keys.path}`")
    return who


def _run(server: MCPServer, transport: Transport, host: str, port: int, api_key: str | None, name: str, what: str,
         say: Callable[[str], None], access: Access | None = None) -> None:
    if transport == "stdio":
        say(f"declrag mcp: {what} as {name!r} over stdio (tools: search, ask)")
        server.run("stdio")
        return
    where = f"[{host}]" if ":" in host else host
    say(f"declrag mcp: {what} as {name!r} on http://{where}:{port}{HTTP_PATH} (streamable HTTP; tools: search, ask; "
        + ("API key required)" if api_key else "each caller's key or token)" if access is not None
           else "no API key: any client on the network may call it)"))
    app: Any = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)  # host: DNS-rebinding guard
    if api_key or access is not None:
        app = KeyGuard(app, api_key, access.callers if access is not None else None)
    http = Server(uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=30))
    http.run()
    if http.stopped_by:
        say("stopped")


__all__ = ["AskResult", "CallLimits", "KeyGuard", "MAX_K", "SearchResult", "build_server", "load_choice", "run",
           "stdout_to_stderr"]
