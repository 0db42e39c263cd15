"""declrag mcp: a program as Model Context Protocol tools (`declrag.serve.mcp`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ..errors import DeclragError
from ._access import (
    CallersKeysOpt,
    GroupsClaimOpt,
    JwksOpt,
    JwtAudienceOpt,
    JwtIssuerOpt,
    JwtSecretFileOpt,
    UnlabelledOpt,
    access_settings,
)
from ._app import app
from ._common import (
    AnswerModeOpt,
    ApiKeyFileOpt,
    ModelOpt,
    NoRecordOpt,
    ProgramFileOpt,
    RecordDaysOpt,
    RecordOpt,
    RecordRowsOpt,
    SourceBaseOpt,
    StoreOpt,
    TargetArg,
    api_key_from,
    err,
    record_settings,
)


class McpTransport(StrEnum):
    stdio = "stdio"
    http = "http"


@app.command()
def mcp(
    target: TargetArg = None,
    config: ProgramFileOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    answer_mode: AnswerModeOpt = None,
    transport: Annotated[McpTransport, typer.Option(
        help="stdio: the MCP client starts this command and talks over its stdin/stdout; "
             "http: streamable HTTP on --host/--port, path /mcp")] = McpTransport.stdio,
    host: Annotated[str, typer.Option(help="with --transport http: address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="with --transport http: port to listen on")] = 8000,
    api_key_file: ApiKeyFileOpt = None,
    source_base: SourceBaseOpt = None,
    timeout: Annotated[float, typer.Option(
        help="seconds a tool call may take (a 'timeout' tool error beyond)")] = 120.0,
    max_in_flight: Annotated[int, typer.Option(
        help="tool calls run at once; one more gets a 'busy' tool error at once")] = 8,
    record: RecordOpt = None,
    no_record: NoRecordOpt = False,
    record_rows: RecordRowsOpt = 100_000,
    record_days: RecordDaysOpt = 90.0,
    keys: CallersKeysOpt = None,
    jwks: JwksOpt = None,
    jwt_secret_file: JwtSecretFileOpt = None,
    jwt_issuer: JwtIssuerOpt = None,
    jwt_audience: JwtAudienceOpt = None,
    groups_claim: GroupsClaimOpt = "groups",
    unlabelled: UnlabelledOpt = "everyone",
    as_: Annotated[str | None, typer.Option(
        "--as", help="over stdio with --keys: the caller who asks (their groups decide what they see)")] = None,
):
    """Serve a program as Model Context Protocol tools: search (ranked passages) and ask (answer with citations)."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..serve.mcp import CallLimits, run

    if timeout <= 0 or max_in_flight < 1:
        raise DeclragError("--timeout is seconds > 0 and --max-in-flight a whole number >= 1",
                           hint="e.g. --timeout 120 --max-in-flight 8")
    if source_base is not None and not source_base.startswith(("http://", "https://")):
        raise DeclragError(f"--source-base {source_base!r} is not an http(s) URL", hint="e.g. https://docs.example.com/")
    if api_key_file is not None and transport == McpTransport.stdio:
        raise DeclragError("--api-key-file guards --transport http; over stdio the client starts this command itself",
                           hint="drop --api-key-file, or add --transport http")
    key = api_key_from(api_key_file) if transport == McpTransport.http else None
    recording = record_settings(record, no_record, record_rows, record_days)
    callers = access_settings(keys, jwks, jwt_secret_file, jwt_issuer, jwt_audience, groups_claim, unlabelled)
    if api_key_file is not None and callers is not None:
        raise DeclragError("--api-key-file and callers (--keys, --jwks, --jwt-secret-file) do not go together",
                           hint="with callers each has their own key; drop --api-key-file")
    run(target, config=config, store=store, model=model, answer_mode=answer_mode and answer_mode.value,
        transport=transport.value, host=host, port=port,
        api_key=key, limits=CallLimits(timeout, max_in_flight), source_base=source_base, record=recording,
        say=lambda m: err.print(m, markup=False, highlight=False), access=callers, caller=as_)
