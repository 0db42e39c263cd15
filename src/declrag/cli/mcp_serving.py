"""declrag mcp: a program as Model Context Protocol tools (`declrag.mcp_server`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from .app import app
from .common import ModelOpt, ProgramFileOpt, StoreOpt, TargetArg, err


class McpTransport(StrEnum):
    stdio = "stdio"
    http = "http"


@app.command()
def mcp(
    target: TargetArg = None,
    config: ProgramFileOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    transport: Annotated[McpTransport, typer.Option(
        help="stdio: the MCP client starts this command and talks over its stdin/stdout; "
             "http: streamable HTTP on --host/--port, path /mcp")] = McpTransport.stdio,
    host: Annotated[str, typer.Option(help="with --transport http: address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="with --transport http: port to listen on")] = 8000,
):
    """Serve a program as Model Context Protocol tools: search (ranked passages) and ask (answer with citations)."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..mcp_server import run

    run(target, config=config, store=store, model=model, transport=transport.value, host=host, port=port,
        say=lambda m: err.print(m, markup=False, highlight=False))
