"""The leak suite's MCP half: the ``search`` and ``ask`` tools, in process (as over stdio: one caller, `--as`) and
over streamable HTTP behind callers' keys (each request's key names its caller), asked questions made of other
groups' canaries, names and authors with widening filters; no byte of an unreadable document comes back."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import anyio
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from declrag.access import Access, Callers, KeysFile
from declrag.config import ProgramConfig
from declrag.pipeline.program import RAGProgram
from declrag.serve.mcp import HTTP_PATH, KeyGuard, build_server
from declrag.testing import HashEmbedder

from tests.unit.access.test_leaks import CALLERS, QUESTIONS, WIDEN, corpus_store, forbidden_marks, readable

EXAMPLES = int(os.environ.get("DECLRAG_LEAK_EXAMPLES", "1000"))


@pytest.fixture(scope="module")
def mcp_setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mcp-leaks")
    store = corpus_store(str(folder / "store"))
    keys = KeysFile(folder / "keys.yaml")
    tokens = {name: keys.add(name, groups) for name, groups in CALLERS.items()}
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive"}, "retrieve": {"k": 3}})
    prog = RAGProgram(cfg, store=store, embedder=HashEmbedder()).warm_up(lms=False)
    return prog, Access(Callers(KeysFile.load(folder / "keys.yaml")), "nobody"), tokens


def tool_call(tool: str, question: str, where: dict | None) -> tuple[str, dict]:
    args = {"query" if tool == "search" else "question": question, **({"where": where} if where else {})}
    return tool, args


def result_text(r) -> str:
    return json.dumps(r.structured_content) + " ".join(getattr(c, "text", "") for c in r.content)


def assert_no_leak(text: str, caller: str, question: str, where: dict | None) -> None:
    asked = question + json.dumps(where)
    leaked = [m for m in forbidden_marks(caller, "nobody") if m in text and m not in asked]
    assert not leaked, (caller, question, where, leaked)


# half of the questions in process (as over stdio), half over HTTP (ten a session): EXAMPLES questions in all
@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(caller=st.sampled_from(sorted(CALLERS)), tool=st.sampled_from(["search", "ask"]), question=QUESTIONS,
       where=WIDEN)
def test_no_byte_leaks_through_the_tools_of_a_one_caller_server(mcp_setup, caller, tool, question, where):
    prog, access, _ = mcp_setup
    server = build_server(prog, "leaks", access=access, caller=access.callers.keys.named(caller))

    async def go():
        async with Client(server) as c:
            return await c.call_tool(*tool_call(tool, question, where))

    assert_no_leak(result_text(anyio.run(go)), caller, question, where)


@pytest.fixture(scope="module")
def http_url(mcp_setup):
    prog, access, _ = mcp_setup
    app = KeyGuard(build_server(prog, "leaks", access=access).streamable_http_app(streamable_http_path=HTTP_PATH,
                                                                                 host="127.0.0.1"),
                   callers=access.callers)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}{HTTP_PATH}"
    server.should_exit = True
    thread.join(timeout=10)


def http_calls(url: str, key: str, calls: list[tuple[str, dict]]) -> list:
    import httpx2

    async def go():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http, \
                streamable_http_client(url, http_client=http) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return [await s.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


@settings(max_examples=max(EXAMPLES // 20, 5), deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(caller=st.sampled_from(sorted(CALLERS)),
       calls=st.lists(st.tuples(st.sampled_from(["search", "ask"]), QUESTIONS, WIDEN), min_size=10, max_size=10))
def test_no_byte_leaks_over_streamable_http(mcp_setup, http_url, caller, calls):
    """Ten calls a session (the session's start dominates a call's cost), each checked."""
    _, _, tokens = mcp_setup
    results = http_calls(http_url, tokens[caller], [tool_call(t, q, w) for t, q, w in calls])
    for (_, q, w), r in zip(calls, results):
        assert_no_leak(result_text(r), caller, q, w)


def test_http_callers_get_their_own_k_and_strangers_get_401(mcp_setup, http_url):
    import httpx2

    _, _, tokens = mcp_setup
    for caller in CALLERS:
        (r,) = http_calls(http_url, tokens[caller], [("search", {"query": "budget plan euros board office",
                                                                   "k": 3})])
        hits = r.structured_content["hits"]
        assert {h["doc_id"] for h in hits} <= readable(caller, "nobody") and len(hits) == 3, (caller, hits)
    refused = httpx2.post(http_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                          headers={"Authorization": "Bearer " + "x" * 40})
    assert refused.status_code == 401 and refused.json()["error"]["message"] == "unauthorized: unknown key"
