"""`declrag mcp`: a program as Model Context Protocol tools, called through the official SDK's own clients.

In process (fast: HashEmbedder, scripted LM, the SDK's in-memory client): the tools' schemas, search equal to
`RAGProgram.search`, ask with citations, and every kind of bad argument answered as a one-line tool error after
which the next call still works. End to end (the `declrag mcp` command as a subprocess, the real embedder, an
OpenAI-compatible stand-in for the LM on loopback): over stdio and over streamable HTTP, the hits equal the
same program's in-process search (ids and order). And the command's bad input: one clear line, exit status 2."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import declrag
from declrag.cli import main
from declrag.config import ProgramConfig
from declrag.lm import using_lm
from declrag.serve.mcp import MAX_K, CallLimits, build_server, stdout_to_stderr
from declrag.payloads import PublicPaths
from declrag.pipeline.program import RAGProgram
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.testing.store_contract import TEXTS

from tests.conftest import filled_store

SCRIPT = Path(sys.executable).parent / "declrag"
Q = "What is the capital of Italy?"
ANSWER = "Rome is the capital of Italy [1]."
KEY = "mcp-s3cret"

# (arguments of `search`, what its one-line error says)
BAD_SEARCH = [
    ({"query": "capital", "k": 0}, "k: Input should be greater than or equal to 1 (got 0)"),
    ({"query": "capital", "k": MAX_K + 1}, f"k: Input should be less than or equal to {MAX_K}"),
    ({"query": "capital", "k": "many"}, "k: Input should be a valid integer"),
    ({"query": "capital", "alpha": 1.5}, "alpha: Input should be less than or equal to 1"),
    ({"query": ""}, "query is empty"),
    ({"query": "\u200b\x00"}, "query is empty"),
    ({"query": "capital " * 400}, "query is 3199 characters long; the limit is 2000 (fix: shorten it"),
    ({}, "query: Field required"),
    ({"query": "capital", "history": [{"role": "robot", "content": "hi"}]}, "history[0].role must be one of"),
    ({"query": "capital", "history": [{"role": "user", "content": ""}]}, "history[0].content is empty"),
    ({"query": "capital", "history": "hello"}, "history: Input should be a valid list"),
    ({"query": "capital", "where": {"colour": "red"}}, "where: invalid filter: unknown field 'colour'"),
    ({"query": "capital", "where": {"page": {"$near": 2}}}, "where: invalid filter: unknown operator '$near'"),
    ({"query": "capital", "where": "page 2"}, "where: Input should be a valid dictionary"),
]


def ids(result) -> list[str]:
    return [h["chunk_id"] for h in result.structured_content["hits"]]


def text_of(result) -> str:
    return " ".join(c.text for c in result.content)


# ------------------------------------------------------------------------------- in process: the tools
@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    store = filled_store(tmp_path_factory.mktemp("mcp") / "store")
    return RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder()).warm_up(lms=False)


def call(server, *calls: tuple[str, dict]) -> list:
    """Each ``(tool, arguments)`` in turn over one in-memory session, with the scripted LM."""
    async def go():
        async with Client(server) as c:
            return [await c.call_tool(name, args) for name, args in calls]

    with using_lm(ScriptedLM({}, {"answer": ANSWER})):
        return anyio.run(go)


def test_the_tools_and_their_schemas(prog):
    async def go():
        async with Client(build_server(prog, "demo")) as c:
            return {t.name: t for t in (await c.list_tools()).tools}

    tools = anyio.run(go)
    assert set(tools) == {"search", "ask"}
    s = tools["search"].input_schema
    assert s["required"] == ["query"] and set(s["properties"]) == {"query", "history", "where", "k", "alpha"}
    k = next(o for o in s["properties"]["k"]["anyOf"] if o.get("type") == "integer")
    assert (k["minimum"], k["maximum"]) == (1, MAX_K)
    assert tools["ask"].input_schema["required"] == ["question"]
    assert set(tools["ask"].input_schema["properties"]) == {"question", "history", "where"}
    assert tools["search"].annotations.read_only_hint and tools["search"].output_schema
    assert "citations" in tools["ask"].output_schema["properties"]


def test_search_is_the_programs_search(prog):
    server = build_server(prog, "demo")
    where = {"page": {"$gte": 2}}
    history = [{"role": "user", "content": "Tell me about Italy."}, {"role": "assistant", "content": "Gladly."}]
    default, custom, filtered, talk = call(
        server, ("search", {"query": Q}), ("search", {"query": Q, "k": 3, "alpha": 0.2}),
        ("search", {"query": Q, "where": where}), ("search", {"query": "its capital?", "history": history}))
    assert not any(r.is_error for r in (default, custom, filtered, talk))
    assert ids(default) == [h.chunk.id for h in prog.search(Q)] and len(ids(default)) == prog.config.retrieve.k
    assert ids(custom) == [h.chunk.id for h in prog.search(Q, k=3, alpha=0.2)]
    assert ids(filtered) == [h.chunk.id for h in prog.search(Q, where=where)]
    assert ids(talk) == [h.chunk.id for h in prog.search("its capital?", history=history)]
    first, hit = default.structured_content["hits"][0], prog.search(Q)[0]
    assert hit.chunk.source == "/data/rome.txt"  # served relative to the indexed folder (test_public_paths.py)
    assert first == {"rank": 1, "chunk_id": hit.chunk.id, "doc_id": hit.doc_id, "source": "rome.txt",
                     "title": hit.chunk.title, "section": hit.chunk.section, "page": hit.chunk.page,
                     "span": [hit.start, hit.end], "text": hit.text, "score": pytest.approx(hit.score, abs=1e-6)}
    assert json.loads(text_of(default)) == default.structured_content  # the same, as text for older clients


def test_ask_answers_with_citations(prog):
    (r,) = call(build_server(prog, "demo"), ("ask", {"question": Q}))
    assert not r.is_error, text_of(r)
    a = r.structured_content
    assert a["answer"] == ANSWER and a["abstained"] is False and a["history_turns"] == 0
    assert a["citations"][0]["n"] == 1 and a["citations"][0]["chunk_id"] == prog.search(Q)[0].chunk.id


def test_each_call_is_recorded_in_the_usage_store_as_serve_records_its_routes(prog, tmp_path):
    from declrag.usage import Recorder, RecordSettings, UsageStore

    recorder = Recorder(RecordSettings(target=str(tmp_path / "u.sqlite3")))
    asked, searched = call(build_server(prog, "demo", recorder=recorder), ("ask", {"question": Q}),
                           ("search", {"query": "capital", "k": 2, "history": [{"role": "user", "content": "hi"}]}))
    recorder.close()
    rows = list(UsageStore(tmp_path / "u.sqlite3", create=False).records())
    assert [r["route"] for r in rows] == ["mcp ask", "mcp search"]
    ask, search = rows
    assert ask["question"] == Q and ask["answer"] == ANSWER and ask["abstained"] is False
    assert ask["citations"][0]["chunk_id"] == asked.structured_content["citations"][0]["chunk_id"]
    assert ask["program"] == "demo" and ask["version"] == prog.config.digest() and len(ask["id"]) == 32
    assert search["answer"] is None and [p["chunk_id"] for p in search["passages"]] == ids(searched)
    assert search["history"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("args, says", BAD_SEARCH, ids=[s for _, s in BAD_SEARCH])
def test_a_bad_argument_is_a_one_line_tool_error_and_the_server_goes_on(prog, args, says):
    bad, good = call(build_server(prog, "demo"), ("search", args), ("search", {"query": Q, "k": 2}))
    assert bad.is_error and says in text_of(bad), text_of(bad)
    assert "\n" not in text_of(bad) and "Traceback" not in text_of(bad) and "errors.pydantic.dev" not in text_of(bad)
    assert not good.is_error and len(ids(good)) == 2


def test_ask_checks_its_arguments_too(prog):
    server = build_server(prog, "demo")
    empty, bad_turn, bad_filter, unknown = call(
        server, ("ask", {"question": " \t"}), ("ask", {"question": Q, "history": [{"role": "user"}]}),
        ("ask", {"question": Q, "where": {"page": "two"}}), ("nope", {}))
    assert empty.is_error and "question is empty" in text_of(empty)
    assert bad_turn.is_error and "history[0].content" in text_of(bad_turn)
    assert bad_filter.is_error and text_of(bad_filter).startswith("Error executing tool ask: where: invalid filter")
    assert unknown.is_error and "Unknown tool: nope" in text_of(unknown)


def test_a_call_past_its_timeout_is_a_timeout_error_and_the_server_goes_on(prog):
    server = build_server(prog, "demo", CallLimits(timeout_s=0.3))

    async def go():
        async with Client(server) as c:
            with using_lm(ScriptedLM({}, {"answer": ANSWER}, delay=1.5)):
                slow = await c.call_tool("ask", {"question": Q})
            with using_lm(ScriptedLM({}, {"answer": ANSWER})):
                fast = await c.call_tool("ask", {"question": Q})
            return slow, fast

    slow, fast = anyio.run(go)
    assert slow.is_error and "no answer within 0.3 s" in text_of(slow)
    assert not fast.is_error and fast.structured_content["answer"] == ANSWER


def test_calls_beyond_the_limit_are_refused_busy_at_once(prog):
    server = build_server(prog, "demo", CallLimits(max_in_flight=1))
    results: dict[str, object] = {}

    async def go():
        async with Client(server) as c:
            async def slow():
                results["slow"] = await c.call_tool("ask", {"question": Q})

            with using_lm(ScriptedLM({}, {"answer": ANSWER}, delay=1.5)):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    await anyio.sleep(0.5)  # the slow call holds the one place
                    t0 = time.monotonic()
                    results["busy"] = await c.call_tool("search", {"query": Q})
                    results["busy_s"] = time.monotonic() - t0
            results["after"] = await c.call_tool("search", {"query": Q})

    anyio.run(go)
    assert results["busy"].is_error and "busy: 1 requests in flight (the limit is 1)" in text_of(results["busy"])
    assert results["busy_s"] < 0.5  # refused at once, not queued
    assert not results["slow"].is_error and not results["after"].is_error


def test_an_api_key_over_stdio_is_refused_in_one_line(capsys, tmp_path):
    (tmp_path / "key").write_text(KEY)
    code = main(["mcp", "--api-key-file", str(tmp_path / "key")])
    out, err = capsys.readouterr()
    assert code == 2 and "--api-key-file guards --transport http" in err and "Traceback" not in err


def test_load_time_output_goes_to_stderr(capfd):
    with stdout_to_stderr():
        print("from python")
        os.write(1, b"from native code\n")
    print("after")
    out, err = capfd.readouterr()
    assert out == "after\n" and "from python" in err and "from native code" in err


# ------------------------------------------------------------------------------- the command's bad input
def test_a_missing_program_folder_is_one_clear_line_and_exit_2(capsys, tmp_path):
    code = main(["mcp", str(tmp_path / "runs" / "nope")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", out  # nothing on stdout: on stdio that is the protocol
    assert err.startswith(f"error: {tmp_path / 'runs' / 'nope'} is neither a run folder") and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [err.splitlines()[0]]


def test_a_missing_store_or_bad_option_is_exit_2(capsys, tmp_path):
    code = main(["mcp", "--store", str(tmp_path / "no-store")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith(f"error: no declrag store at {tmp_path / 'no-store'}")
    code = main(["mcp", "--transport", "carrier-pigeon"])
    out, err = capsys.readouterr()
    assert code == 2 and "carrier-pigeon" in err and len(err.strip().splitlines()) == 1


def test_a_program_whose_store_is_gone_fails_before_serving(capsys, tmp_path):
    store = filled_store(tmp_path / "store", created=True)
    RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder()).save(tmp_path / "runs" / "gone" / "best")
    import shutil

    shutil.rmtree(tmp_path / "store")
    code = main(["mcp", str(tmp_path / "runs" / "gone")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith("error: ") and "Traceback" not in err, err


# ------------------------------------------------------------------------------- end to end: the command
class _StubLM(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that always answers ANSWER (the LM of the served program)."""

    def do_POST(self):  # noqa: N802 (the handler's name)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": ANSWER}}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def saved(tmp_path_factory, minilm):
    """A run folder (runs/demo/best) over a real store of the contract corpus, its LM a stand-in on loopback."""
    lm = ThreadingHTTPServer(("127.0.0.1", 0), _StubLM)
    threading.Thread(target=lm.serve_forever, daemon=True).start()
    root = tmp_path_factory.mktemp("mcp-e2e")
    (root / "docs").mkdir()
    for name, sents in TEXTS.items():
        (root / "docs" / f"{name}.txt").write_text(" ".join(sents))
    declrag.index([root / "docs"], store=root / "store", embedder=minilm, progress=False)
    cfg = ProgramConfig.model_validate({"lm": {"route": "openai/stub", "num_retries": 0, "adapter": "plain",
                                               "api_base": f"http://127.0.0.1:{lm.server_address[1]}/v1"}})
    RAGProgram(cfg, store=str(root / "store"), embedder=minilm).save(root / "runs" / "demo" / "best")
    yield root / "runs" / "demo", declrag.load(root / "runs" / "demo" / "best", embedder=minilm)
    lm.shutdown()


async def _session_calls(session: ClientSession, calls: list[tuple[str, dict]]) -> list:
    await session.initialize()
    return [await session.call_tool(name, args) for name, args in calls]


E2E_CALLS = [("search", {"query": Q}), ("search", {"query": "wind power", "k": 2, "alpha": 0.0}),
             ("search", {"query": Q, "k": 0}), ("ask", {"question": Q}),
             ("search", {"query": Q, "history": [{"role": "robot", "content": "x"}]}), ("search", {"query": "energy"})]


def _check_e2e(results, program) -> None:
    """The tools' results against the program's own calls; files are named relative to the indexed folder."""
    public = PublicPaths.of_store(program.store)

    def chunk_ids(hits) -> list[str]:
        return [public.relative(h.chunk.id) for h in hits]

    default, custom, bad_k, asked, bad_turn, after = results
    assert ids(default) == chunk_ids(program.search(Q))
    assert ids(custom) == chunk_ids(program.search("wind power", k=2, alpha=0.0))
    assert bad_k.is_error and "k: Input should be greater than or equal to 1" in text_of(bad_k)
    assert not asked.is_error, text_of(asked)
    a = asked.structured_content
    assert a["answer"] == ANSWER and not a["abstained"] and a["citations"] and a["citations"][0]["n"] == 1
    assert a["citations"][0]["chunk_id"] == chunk_ids(program.search(Q))[0]
    assert bad_turn.is_error and "history[0].role must be one of" in text_of(bad_turn)
    assert ids(after) == chunk_ids(program.search("energy"))


def test_over_stdio_through_the_sdks_client(saved, tmp_path):
    run, program = saved
    params = StdioServerParameters(command=str(SCRIPT), args=["mcp", str(run), "--record", str(tmp_path / "u.db")],
                                   env=dict(os.environ))

    async def go():
        with open(tmp_path / "stderr.txt", "w") as errlog, anyio.fail_after(240):
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                return await _session_calls(s, E2E_CALLS)

    _check_e2e(anyio.run(go), program)
    log = (tmp_path / "stderr.txt").read_text()
    assert "ready: demo loaded in" in log and "over stdio (tools: search, ask)" in log and "Traceback" not in log
    assert f"records: each question, its passages, answer and rating to {tmp_path / 'u.db'}" in log
    from declrag.usage import UsageStore  # what the calls were: recorded before the process exited

    assert {r["route"] for r in UsageStore(tmp_path / "u.db", create=False).records()} == {"mcp ask", "mcp search"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_over_streamable_http_behind_the_api_key(saved, tmp_path):
    import httpx2

    run, program = saved
    port = _free_port()
    env = {**os.environ, "DECLRAG_API_KEY": KEY}
    with open(tmp_path / "log.txt", "w") as log:
        proc = subprocess.Popen([str(SCRIPT), "mcp", str(run), "--transport", "http", "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 180
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "log.txt").read_text()
            time.sleep(0.3)

        url = f"http://127.0.0.1:{port}/mcp"

        async def go(key: str | None):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            with anyio.fail_after(240):
                async with httpx2.AsyncClient(headers=headers, timeout=240) as http, \
                        streamable_http_client(url, http_client=http) as (r, w), ClientSession(r, w) as s:
                    return await _session_calls(s, E2E_CALLS)

        refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                              headers={"Authorization": "Bearer wrong-key"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == -32001 and "unauthorized" in refused.json()["error"]["message"]
        for key in (None, "wrong-key"):  # the SDK's client, without the key or with a wrong one, gets no session
            with pytest.raises(Exception) as e:  # noqa: B017 (an ExceptionGroup of the SDK's task groups)
                anyio.run(go, key)
            assert "MCPError(-32001" in repr(e.value) and "unauthorized" in repr(e.value), repr(e.value)
        _check_e2e(anyio.run(go, KEY), program)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    text = (tmp_path / "log.txt").read_text()
    assert code == 0 and f"on http://127.0.0.1:{port}/mcp (streamable HTTP" in text and "Traceback" not in text, text
    assert "API key required" in text
    assert text.rstrip().endswith("stopped"), text
