"""`declrag serve`: the HTTP API over a program on the tiny corpus (HashEmbedder, scripted LMs), with
FastAPI's TestClient and against real uvicorn servers on loopback: the official OpenAI client, LiteLLM
routing, the limits, graceful shutdown, and the web page in a real headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.pipeline.program import RAGProgram
from declrag.answering.selection import ProgramChoice
from declrag.serve import DEFAULT_NAME, ServeSettings, create_app, resolve
from declrag.testing import HashEmbedder, ScriptedLM, StreamingLM

Q = "What is the capital of Italy?"
ANSWER = "Rome is the capital of Italy [1]."
KEY = "s3cret-key"
CHROMIUM = "/usr/bin/chromium"


def scripted(answer: str = ANSWER, delay: float = 0.0):
    """One scripted LM per program call (the testing hook of create_app), so concurrent calls do not share one."""
    return lambda: ScriptedLM({}, {"answer": answer}, delay=delay)


class CountingLM:
    """A per-call scripted LM factory that counts the program calls that reached the LM."""

    def __init__(self, answer: str = ANSWER):
        self.answer, self.calls, self.lock = answer, 0, threading.Lock()

    def __call__(self):
        with self.lock:
            self.calls += 1
        return ScriptedLM({}, {"answer": self.answer})



@pytest.fixture(scope="module")
def prog(store):
    p = RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder())
    p.retrieve_only(Q)  # the store's snapshot is loaded once for the whole module
    return p


def app_for(prog, lm=None, name="demo", run="runs/demo/best", **settings):
    return create_app(prog, name, run, ServeSettings(**settings), lm_override=lm or scripted())


def wait_ready(get, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the program never became ready"
        time.sleep(0.02)


@contextmanager
def client(app, **kw):
    with TestClient(app, **kw) as c:
        wait_ready(c.get)
        yield c


@contextmanager
def real_server(app):
    """The app under a real uvicorn server on a free loopback port, in a thread; yields (base URL, server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=30))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        wait_ready(lambda p: httpx.get(base + p, timeout=10))
        yield base, server
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def auth(key=KEY) -> dict:
    return {"Authorization": f"Bearer {key}"}


# ------------------------------------------------------------------------------------------ the API
def test_ask_answers_with_citations_program_and_cache_fields(prog):
    with client(app_for(prog)) as c:
        r = c.post("/v1/ask", json={"question": Q})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["answer"] == ANSWER and a["abstained"] is False
    cite = a["citations"][0]
    assert {"n", "chunk_id", "source", "span", "snippet", "score", "attributed"} <= set(cite)
    assert cite["n"] == 1 and cite["chunk_id"] == "rome#0" and cite["source"] == "rome.txt"
    assert cite["snippet"] == "Rome is the capital of Italy." and cite["span"] == [0, 29] and cite["attributed"] is False
    assert a["program"] == {"name": "demo", "run": "runs/demo/best"} and a["cache"] == {"hit": False}
    assert a["judge"]["mode"] == "off" and "total" in a["usage"] and a["latency_ms"]["total"] > 0


def test_ask_takes_a_metadata_filter(prog):
    with client(app_for(prog)) as c:
        r = c.post("/v1/ask", json={"question": Q, "options": {"where": {"doc_id": "paris"}}})
    assert r.status_code == 200, r.text
    assert r.json()["citations"][0]["chunk_id"].startswith("paris#")


@pytest.mark.parametrize("body, headers, field, words", [
    (b"not json", {"content-type": "application/json"}, "body", "not valid JSON"),
    (b'{"question": ', {"content-type": "application/json"}, "body", "not valid JSON"),
    (b"[1, 2]", {"content-type": "application/json"}, "body", "JSON object"),
    (b'{"question": "x"}', {"content-type": "text/plain"}, "body", "JSON object"),
    (b'{"question": 5}', {"content-type": "application/json"}, "question", "valid string"),
    (b'{"question": "x", "options": {"where": "paris"}}', {"content-type": "application/json"}, "options.where", "dictionary"),
    (b'{"question": "   "}', {"content-type": "application/json"}, "question", "empty"),
    (b'{"question": ""}', {"content-type": "application/json"}, "question", "empty"),
    (b"{}", {"content-type": "application/json"}, "question", "required"),
    (b'{"question": "x", "temperature": 1}', {"content-type": "application/json"}, "temperature", "unknown field"),
    (b'{"question": "x", "options": {"k": 3}}', {"content-type": "application/json"}, "options.k", "unknown field"),
    (b'{"question": "x", "options": {"where": {"colour": "red"}}}', {"content-type": "application/json"},
     "options.where", "unknown field 'colour'"),
])
def test_bad_input_is_a_4xx_naming_the_field(prog, body, headers, field, words):
    with client(app_for(prog)) as c:
        r = c.post("/v1/ask", content=body, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and words in r.json()["error"], r.json()
    assert set(r.json()) == {"error", "field"} and "Traceback" not in r.text


def test_unknown_routes_and_methods_are_json_errors(prog):
    with client(app_for(prog)) as c:
        assert c.get("/nope").status_code == 404 and c.get("/nope").json() == {"error": "not found"}
        assert c.get("/v1/ask").status_code == 405 and c.get("/v1/ask").json() == {"error": "method not allowed"}


def test_long_question_is_422_at_the_programs_limit_or_the_flag(store, prog):
    small = RAGProgram(ProgramConfig(max_question_chars=40), store=store, embedder=HashEmbedder())
    with client(app_for(small)) as c:
        assert c.post("/v1/ask", json={"question": "x" * 40}).status_code == 200
        r = c.post("/v1/ask", json={"question": "x" * 41})
    assert r.status_code == 422 and r.json()["field"] == "question" and "41 characters" in r.json()["error"]
    with client(app_for(prog, max_question_chars=20)) as c:
        r = c.post("/v1/ask", json={"question": "y" * 21})
    assert r.status_code == 422 and "limit is 20" in r.json()["error"]


def test_body_over_the_limit_is_413_with_or_without_content_length(prog):
    with client(app_for(prog, max_body_bytes=1024)) as c:
        big = json.dumps({"question": "x" * 2000})
        r = c.post("/v1/ask", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json() == {"error": "request body is larger than 1024 bytes"}

        def chunks():  # streamed: no Content-Length, so the limit is counted while reading
            yield big[:600].encode()
            yield big[600:].encode()

        r = c.post("/v1/ask", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text
        assert c.post("/v1/ask", json={"question": Q}).status_code == 200


def test_a_slow_program_is_504_and_the_error_is_json(prog):
    # the 504 must not wait for the program: its LM takes 4 s, the answer comes well before (a busy CI machine
    # has made a 0.2 s timeout take 1 s, so the bound is loose; a 504 sent after the program ends takes >= 4 s)
    with client(app_for(prog, lm=scripted(delay=4.0), request_timeout_s=0.2)) as c:
        t0 = time.monotonic()
        r = c.post("/v1/ask", json={"question": Q})
        assert r.status_code == 504 and time.monotonic() - t0 < 2.5
    assert r.json() == {"error": "no answer within 0.2 s"}


def test_a_crash_is_500_internal_error_without_details(prog):
    def broken():
        raise RuntimeError("secret internals")

    with client(app_for(prog, lm=broken), raise_server_exceptions=False) as c:
        r = c.post("/v1/ask", json={"question": Q})
    assert r.status_code == 500 and r.json() == {"error": "internal error"}


def test_readyz_is_503_until_the_program_is_loaded(prog):
    gate = threading.Event()

    def slow_loader():
        gate.wait(10)
        return prog

    with TestClient(create_app(slow_loader, "slow", settings=ServeSettings(), lm_override=scripted())) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        r = c.get("/readyz")
        assert r.status_code == 503 and "loading" in r.json()["error"] and r.headers["retry-after"] == "1"
        r = c.post("/v1/ask", json={"question": Q})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        gate.set()
        wait_ready(c.get)
        assert c.get("/readyz").json() == {"status": "ready"}
        assert c.post("/v1/ask", json={"question": Q}).status_code == 200


def test_a_program_that_fails_to_load_keeps_readyz_503_and_reports(prog):
    told = []

    def bad_loader():
        raise DeclragError("no declrag store at nowhere")

    app = create_app(bad_loader, "bad", settings=ServeSettings(), on_load=told.append)
    with TestClient(app) as c:
        deadline = time.monotonic() + 10
        while not told and time.monotonic() < deadline:
            time.sleep(0.02)
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json() == {"error": "the program failed to load (see the server log)"}
        assert c.get("/healthz").status_code == 200
    assert isinstance(told[0], DeclragError) and "no declrag store" in str(told[0])


def test_models_lists_the_served_program(prog):
    with client(app_for(prog, name="first")) as c:
        m = c.get("/v1/models").json()
    assert m["object"] == "list" and [d["id"] for d in m["data"]] == ["first"]


def test_resolve_names_what_it_serves(tmp_path, store, prog):
    prog.save(tmp_path / "runs" / "first" / "best")
    name, run, _, _, _ = resolve(tmp_path / "runs" / "first", store=store)
    assert name == "first" and run.endswith("best")
    assert resolve(tmp_path / "runs" / "first" / "best", store=store)[0] == "first"
    with pytest.raises(DeclragError, match="neither a run folder"):
        resolve(tmp_path / "runs")
    with pytest.raises(DeclragError, match="no declrag store"):
        resolve(store=tmp_path / "nothing-here")
    assert DEFAULT_NAME == "declrag-default"


# ------------------------------------------------------------------------------ OpenAI compatibility
def chat_body(content=Q, **kw):
    return {"model": "demo", "messages": [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": "earlier question"},
                                          {"role": "assistant", "content": "earlier answer"},
                                          {"role": "user", "content": content}], **kw}


def test_chat_completions_non_streaming(prog):
    lm = CountingLM()
    with client(app_for(prog, lm=lm)) as c:
        r = c.post("/v1/chat/completions", json=chat_body(temperature=0.3, max_tokens=50, user="u1"))
        parts = c.post("/v1/chat/completions",
                       json=chat_body(content=[{"type": "text", "text": Q}])).json()
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["object"] == "chat.completion" and b["model"] == "demo" and b["id"].startswith("chatcmpl-")
    assert b["choices"][0]["message"] == {"role": "assistant", "content": ANSWER}
    assert b["choices"][0]["finish_reason"] == "stop"
    assert set(b["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert b["citations"][0]["chunk_id"] == "rome#0"
    assert parts["choices"][0]["message"]["content"] == ANSWER and lm.calls == 2


def sse_events(text: str) -> list:
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_chat_completions_streaming(prog):
    with client(app_for(prog)) as c:
        r = c.post("/v1/chat/completions", json=chat_body(stream=True))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = sse_events(r.text)
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks) == ANSWER
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop" and last["citations"][0]["n"] == 1
    assert set(last["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert all("citations" not in ch for ch in chunks[:-1])


@pytest.mark.parametrize("body, status, field", [
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": Q}]}, 404, "model"),
    ({"model": "demo", "messages": [{"role": "system", "content": "hi"}]}, 422, "messages"),
    ({"model": "demo", "messages": []}, 422, "messages"),
    ({"model": "demo", "messages": [{"role": "user", "content": "  "}]}, 422, "messages"),
    ({"model": "demo", "messages": "hello"}, 422, "messages"),
    ({"model": "demo"}, 422, "messages"),
])
def test_chat_completions_bad_input(prog, body, status, field):
    with client(app_for(prog)) as c:
        r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == status and r.json()["field"] == field, r.text


# ------------------------------------------------------------------------------------- token streaming
def ask_events(text: str) -> list[tuple[str, dict]]:
    """``/v1/ask``'s server-sent events as (event, data)."""
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def contents(chunks: list) -> list[str]:
    return [ch["choices"][0]["delta"]["content"] for ch in chunks if ch["choices"][0]["delta"].get("content")]


def test_stream_sends_the_tokens_as_the_lm_generates_them(prog):
    """The LM holds its last token until the client has read a content chunk, so the stream can only finish if
    tokens leave while the LM is still generating (otherwise the gate times out and the test fails). The chunks
    are the LM's tokens, they make up the non-streamed answer, and citations and usage come on the last one."""
    gate = threading.Event()
    lm = StreamingLM(ANSWER, gate=gate, gate_timeout=20)
    n_tokens = len(ANSWER.split())
    with real_server(app_for(prog, lm=lm)) as (base, _):
        plain = httpx.post(base + "/v1/chat/completions", json=chat_body(), timeout=30).json()
        before, seen_at_first, chunks = lm.produced, None, []
        with httpx.stream("POST", base + "/v1/chat/completions", json=chat_body(stream=True), timeout=30) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
            for line in s.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[len("data: "):]))
                    if seen_at_first is None and contents(chunks):
                        seen_at_first = lm.produced - before  # tokens the LM had made when the first arrived
                        gate.set()
    assert lm.gate_opened is True and seen_at_first < n_tokens
    assert contents(chunks) == ["Rome", " is", " the", " capital", " of", " Italy", " [1]."]  # one per token
    assert "".join(contents(chunks)) == plain["choices"][0]["message"]["content"] == ANSWER
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop" and last["answer"] == ANSWER and last["replaced"] is False
    assert last["citations"] == plain["citations"] and last["citations"][0]["chunk_id"] == "rome#0"
    assert last["usage"] == plain["usage"] and last["usage"]["completion_tokens"] == n_tokens
    assert all("citations" not in ch and "usage" not in ch for ch in chunks[:-1])


def test_ask_streams_deltas_then_the_whole_response(prog):
    lm = StreamingLM(ANSWER)
    with client(app_for(prog, lm=lm)) as c:
        plain = c.post("/v1/ask", json={"question": Q}).json()
        r = c.post("/v1/ask", json={"question": Q, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = ask_events(r.text)
    assert [k for k, _ in events] == ["delta"] * 7 + ["answer"] and lm.streamed_calls == 1
    final = events[-1][1]
    assert "".join(d["text"] for _, d in events[:-1]) == final["answer"] == plain["answer"] == ANSWER
    assert final["replaced"] is False and final["citations"] == plain["citations"] and final["cache"] == {"hit": False}
    assert final["usage"]["total"]["tokens_out"] == plain["usage"]["total"]["tokens_out"] == 7
    assert set(plain) | {"replaced"} == set(final) and final["program"] == plain["program"]


@pytest.mark.parametrize("raw, final, replaced", [
    ("Rome is the capital of Italy [1] [7] .", ANSWER, False),  # a marker to no passage dropped, spacing fixed
    ("Rome is the capital of Italy.", "Rome is the capital of Italy. [1]", False),  # attributed: the rest follows
    ("The passages do not say, sorry.", "I don't know.", True),  # an abstention recognised: the words replaced
])
def test_streamed_text_and_final_answer_follow_post_processing(prog, raw, final, replaced):
    """The final answer is the non-streamed one; the streamed text is its prefix (the rest is sent at the end)
    unless post-processing replaced the words, which the last event says."""
    lm = StreamingLM(raw)
    with client(app_for(prog, lm=lm)) as c:
        plain = c.post("/v1/ask", json={"question": Q}).json()
        events = ask_events(c.post("/v1/ask", json={"question": Q, "stream": True}).text)
        chunks = sse_events(c.post("/v1/chat/completions", json=chat_body(stream=True)).text)
    streamed, last = "".join(d["text"] for k, d in events if k == "delta"), events[-1][1]
    assert last["answer"] == plain["answer"] == final and last["replaced"] is replaced
    assert last["abstained"] == plain["abstained"] and last["citations"] == plain["citations"]
    assert (streamed == final) is not replaced and len(events) > 3
    said = final if not plain["abstained"] else "I don't know. The LM found no answer in the passages."
    assert chunks[-1]["answer"] == said and chunks[-1]["replaced"] is replaced  # an abstention says why
    assert "".join(contents(chunks)) == (streamed if replaced else said)


def test_a_cached_answer_streams_as_one_chunk(prog):
    lm = StreamingLM(ANSWER)
    with client(app_for(prog, lm=lm, cache_threshold=0.95)) as c:
        first = ask_events(c.post("/v1/ask", json={"question": Q, "stream": True}).text)
        again = ask_events(c.post("/v1/ask", json={"question": Q, "stream": True}).text)
        alone = {"model": "demo", "messages": [{"role": "user", "content": Q}], "stream": True}  # no history
        chat = sse_events(c.post("/v1/chat/completions", json=alone).text)
        hits = c.get("/metrics").text
    assert len(first) == 8 and first[-1][1]["cache"] == {"hit": False}
    assert [k for k, _ in again] == ["delta", "answer"] and again[0][1] == {"text": ANSWER}
    assert again[-1][1]["cache"]["hit"] is True and again[-1][1]["answer"] == ANSWER
    assert contents(chat) == [ANSWER] and chat[-1]["citations"] == first[-1][1]["citations"]
    assert lm.streamed_calls == 1 and "declrag_cache_hits_total 2.0" in hits


def test_stream_errors_are_json_before_the_first_token_and_a_last_event_after(prog):
    def broken():
        raise RuntimeError("secret internals")

    with client(app_for(prog, lm=StreamingLM(ANSWER))) as c:
        r = c.post("/v1/ask", json={"question": " ", "stream": True})
        assert r.status_code == 422 and r.json() == {"error": "question is empty", "field": "question"}
    with client(app_for(prog, lm=broken), raise_server_exceptions=False) as c:
        r = c.post("/v1/chat/completions", json=chat_body(stream=True))
        assert r.status_code == 500 and r.json() == {"error": "internal error"}
    slow_start = StreamingLM(ANSWER, delay=2.0)
    with client(app_for(prog, lm=slow_start, request_timeout_s=0.3)) as c:
        r = c.post("/v1/ask", json={"question": Q, "stream": True})
        assert r.status_code == 504 and r.json() == {"error": "no answer within 0.3 s"}
    stuck = StreamingLM(ANSWER, gate=threading.Event(), gate_timeout=4)  # the last token waits 4 s
    app = app_for(prog, lm=stuck, request_timeout_s=2)
    with client(app) as c:
        events = ask_events(c.post("/v1/ask", json={"question": Q, "stream": True}).text)
        assert events[0][0] == "delta" and events[-1] == ("error", {"error": "no answer within 2 s", "status": 504})
        # the cut-off stream is cancelled down to the program's thread: its slot is free long before the
        # stuck token's 4 s would have ended the generation
        deadline = time.monotonic() + 3
        while app.state.service.in_flight:
            assert time.monotonic() < deadline, "the cut-off call was not cancelled"
            time.sleep(0.05)
        assert 'declrag_errors_total{kind="timeout",route="/v1/ask"} 1.0' in c.get("/metrics").text


def test_a_client_that_leaves_stops_the_generation(prog):
    words = " ".join(f"word{i}" for i in range(40)) + " [1]."
    lm = StreamingLM(words, delay=0.1)
    app = app_for(prog, lm=lm)
    with real_server(app) as (base, _):
        with httpx.stream("POST", base + "/v1/chat/completions", json=chat_body(stream=True), timeout=30) as s:
            for line in s.iter_lines():
                if line.startswith("data: ") and '"content": "word0"' in line:
                    break  # leave after the first token
        deadline = time.monotonic() + 20
        while app.state.service.in_flight:
            assert time.monotonic() < deadline, "the slot of the abandoned stream was never freed"
            time.sleep(0.05)
    assert lm.produced < 41  # the LM was stopped well before the end of its answer


def test_stream_with_the_real_local_model(store):
    """SmolLM2 in-process, through LiteLLM streaming and the real server: several content chunks, then the
    final answer, which is the non-streamed answer (asked next; DSPy's cache gives the same completion)."""
    prog = RAGProgram(ProgramConfig.model_validate({"generate": {"mode": "lm"}}), store=store,
                      embedder=HashEmbedder())  # local/smollm2, the default route, named to write
    question = f"In one sentence, what is the capital of Italy? (request {time.time_ns()})"  # no cached answer
    with real_server(create_app(prog, "local")) as (base, _):
        with httpx.stream("POST", base + "/v1/chat/completions", timeout=300,
                          json={"messages": [{"role": "user", "content": question}], "stream": True}) as s:
            assert s.status_code == 200, s.read()
            chunks = [json.loads(line[len("data: "):]) for line in s.iter_lines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
        plain = httpx.post(base + "/v1/ask", json={"question": question}, timeout=300).json()
    assert len(contents(chunks)) > 1, chunks
    last = chunks[-1]
    assert last["answer"] == plain["answer"] and last["citations"] == plain["citations"]
    assert "".join(contents(chunks)) == last["answer"] or last["replaced"] is True
    assert last["usage"]["completion_tokens"] > 1 and last["usage"]["prompt_tokens"] > 10
    assert plain["usage"]["total"]["cached"] == plain["usage"]["total"]["calls"]  # the streamed reply was cached


# ------------------------------------------------------------------------------ operations and security
def test_metrics_count_requests_tokens_abstentions_errors_and_cache(prog):
    with client(app_for(prog, lm=scripted("I don't know."), cache_threshold=0.95)) as c:
        assert c.post("/v1/ask", json={"question": Q}).json()["abstained"] is True
        assert c.post("/v1/ask", json={"question": Q}).json()["cache"]["hit"] is True
        c.post("/v1/ask", json={"question": ""})
        text = c.get("/metrics").text
    for line in ('declrag_requests_total{route="/v1/ask",status="200"} 2.0',
                 'declrag_requests_total{route="/v1/ask",status="422"} 1.0',
                 'declrag_errors_total{kind="invalid",route="/v1/ask"} 1.0',
                 "declrag_abstentions_total 2.0", "declrag_cache_hits_total 1.0", "declrag_in_flight 0.0",
                 'declrag_lm_tokens_total{direction="in"}', 'declrag_lm_tokens_total{direction="out"}',
                 "declrag_lm_cost_usd_total", 'declrag_request_seconds_bucket{le="0.5",route="/v1/ask"}',
                 "declrag_program_seconds_count 1.0"):
        assert line in text, line


def test_api_key_guards_every_route_but_the_page_and_the_health_checks(prog):
    with client(app_for(prog, api_key=KEY)) as c:
        for path in ("/metrics", "/v1/models"):
            assert c.get(path).status_code == 401
        r = c.get("/")  # the page holds no data; it asks for the key and sends it on its API calls
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        r = c.post("/v1/ask", json={"question": Q, "stream": True})
        assert r.status_code == 401 and r.json() == {"error": "unauthorized"}
        for headers in ({}, auth("wrong"), {"Authorization": KEY}, {"Authorization": f"Basic {KEY}"}):
            r = c.post("/v1/ask", json={"question": Q}, headers=headers)
            assert r.status_code == 401 and r.json() == {"error": "unauthorized"}, headers
        r = c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 401 and r.json() == {"error": "unauthorized"}
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
        assert c.post("/v1/ask", json={"question": Q}, headers=auth()).status_code == 200
        assert c.get("/metrics", headers=auth()).status_code == 200
        assert c.get("/", headers=auth()).status_code == 200


def test_cors_is_off_unless_an_origin_is_given(prog):
    origin = {"Origin": "https://app.example"}
    preflight = {**origin, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    with client(app_for(prog)) as c:
        r = c.post("/v1/ask", json={"question": Q}, headers=origin)
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        assert "access-control-allow-origin" not in c.options("/v1/ask", headers=preflight).headers
    with client(app_for(prog, cors_origins=["https://app.example"], api_key=KEY)) as c:
        r = c.options("/v1/ask", headers=preflight)
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        r = c.post("/v1/ask", json={"question": Q}, headers={**origin, **auth()})
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        r = c.post("/v1/ask", json={"question": Q}, headers={"Origin": "https://evil.example", **auth()})
        assert "access-control-allow-origin" not in r.headers


def test_semantic_cache_serves_near_duplicates(prog):
    lm = CountingLM()
    with client(app_for(prog, lm=lm, cache_threshold=0.95)) as c:
        first = c.post("/v1/ask", json={"question": Q}).json()
        again = c.post("/v1/ask", json={"question": "what is the capital of italy"}).json()  # same words
        other = c.post("/v1/ask", json={"question": "Where is the Eiffel Tower?"}).json()
        filtered = c.post("/v1/ask", json={"question": Q, "options": {"where": {"doc_id": "rome"}}}).json()
        alone = {"model": "demo", "messages": [{"role": "user", "content": Q}]}  # no history: the cache applies
        chat = c.post("/v1/chat/completions", json=alone).json()
    assert first["cache"] == {"hit": False} and other["cache"] == {"hit": False} and filtered["cache"]["hit"] is False
    assert again["cache"]["hit"] is True and again["cache"]["similarity"] >= 0.95
    assert again["answer"] == first["answer"] and again["citations"] == first["citations"]
    assert again["usage"]["total"]["calls"] == 0 and chat["choices"][0]["message"]["content"] == ANSWER
    assert lm.calls == 3  # first, other, filtered; the near-duplicate and the chat question came from the cache
    with client(app_for(prog, lm=(off := CountingLM()))) as c:  # off by default
        assert c.post("/v1/ask", json={"question": Q}).json()["cache"] == {"hit": False}
        assert c.post("/v1/ask", json={"question": Q}).json()["cache"] == {"hit": False}
    assert off.calls == 2


def test_web_page_is_self_contained(prog):
    with client(app_for(prog)) as c:
        r = c.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert 'id="question"' in r.text and 'id="ask"' in r.text and "v1/ask" in r.text
    assert "http://" not in r.text and "https://" not in r.text  # no CDN, nothing fetched from elsewhere
    assert "default-src 'none'" in r.headers["content-security-policy"]


# ----------------------------------------------------------------------------------- real servers
@pytest.fixture(scope="module")
def server(prog):
    with real_server(app_for(prog, name="demo", api_key=KEY)) as (base, srv):
        yield base


def test_real_server_answers_and_streams(server):
    r = httpx.post(server + "/v1/ask", json={"question": Q}, headers=auth(), timeout=30)
    assert r.status_code == 200 and r.json()["answer"] == ANSWER
    with httpx.stream("POST", server + "/v1/chat/completions", json=chat_body(stream=True), headers=auth(),
                      timeout=30) as s:
        assert s.status_code == 200
        chunks = sse_events("".join(s.iter_text()))
    assert "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks) == ANSWER
    assert httpx.get(server + "/v1/ask", timeout=10).json() == {"error": "unauthorized"}
    assert httpx.get(server + "/healthz", timeout=10).status_code == 200


def test_openai_client_against_the_real_server(server):
    from openai import OpenAI

    oc = OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0, timeout=30)
    assert [m.id for m in oc.models.list().data] == ["demo"]
    resp = oc.chat.completions.create(model="demo", messages=[{"role": "user", "content": Q}])
    assert resp.choices[0].message.content == ANSWER
    assert resp.model_extra["citations"][0]["chunk_id"] == "rome#0"
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    text, last = "", None
    for chunk in oc.chat.completions.create(model="demo", messages=[{"role": "user", "content": Q}], stream=True):
        text += chunk.choices[0].delta.content or "" if chunk.choices else ""
        last = chunk
    assert text == ANSWER and last.choices[0].finish_reason == "stop"
    assert last.model_extra["citations"][0]["n"] == 1
    bad = OpenAI(base_url=server + "/v1", api_key="wrong", max_retries=0, timeout=30)
    with pytest.raises(Exception) as e:
        bad.chat.completions.create(model="demo", messages=[{"role": "user", "content": Q}])
    assert getattr(e.value, "status_code", None) == 401


def test_litellm_routes_openai_name_to_the_server(server):
    import litellm

    resp = litellm.completion(model="openai/demo", api_base=server + "/v1", api_key=KEY,
                              messages=[{"role": "user", "content": Q}], num_retries=0, timeout=30)
    assert resp.choices[0].message.content == ANSWER
    text = ""
    for chunk in litellm.completion(model="openai/demo", api_base=server + "/v1", api_key=KEY, stream=True,
                                    messages=[{"role": "user", "content": Q}], num_retries=0, timeout=30):
        text += chunk.choices[0].delta.content or ""
    assert text == ANSWER


def _post_in_thread(url, json_body, out, **kw):
    t = threading.Thread(target=lambda: out.append(httpx.post(url, json=json_body, timeout=30, **kw)))
    t.start()
    return t


def test_real_server_limits_in_flight_and_times_out(prog):
    app = app_for(prog, lm=scripted(delay=1.5), max_in_flight=1, request_timeout_s=5, retry_after_s=2)
    with real_server(app) as (base, _):
        results: list = []
        t = _post_in_thread(base + "/v1/ask", {"question": Q}, results)
        deadline = time.monotonic() + 10
        while app.state.service.in_flight < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        t0 = time.monotonic()
        r = httpx.post(base + "/v1/ask", json={"question": "Where is the Eiffel Tower?"}, timeout=30)
        assert r.status_code == 503 and r.headers["retry-after"] == "2" and "busy" in r.json()["error"]
        assert time.monotonic() - t0 < 1.0  # answered at once, not queued
        assert httpx.get(base + "/healthz", timeout=5).status_code == 200  # the loop stays responsive
        t.join(30)
        assert results[0].status_code == 200
    slow = app_for(prog, lm=scripted(delay=1.0), request_timeout_s=0.3)
    with real_server(slow) as (base, _):
        r = httpx.post(base + "/v1/ask", json={"question": Q}, timeout=30)
        assert r.status_code == 504 and r.json()["error"].startswith("no answer within")
        assert 'declrag_errors_total{kind="timeout",route="/v1/ask"} 1.0' in httpx.get(base + "/metrics").text


def test_shutdown_lets_requests_in_flight_finish(prog):
    app = app_for(prog, lm=scripted(delay=1.0))
    results: list = []
    with real_server(app) as (base, server):
        t = _post_in_thread(base + "/v1/ask", {"question": Q}, results)
        deadline = time.monotonic() + 10
        while app.state.service.in_flight < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        server.should_exit = True  # what uvicorn's SIGTERM handler does
        t.join(30)
    assert results and results[0].status_code == 200 and results[0].json()["answer"] == ANSWER


@contextmanager
def browser_page():
    """A page in headless Chromium. Waits use selectors: the page's CSP forbids the eval that Playwright's
    ``wait_for_function`` polls with."""
    pw = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield browser.new_page()
        finally:
            browser.close()


def check_answer_and_passage(page) -> None:
    page.wait_for_selector("#answer .cite", timeout=15000)
    assert page.inner_text("#answer") == ANSWER
    assert "demo" in page.inner_text("#meta") and "runs/demo/best" in page.inner_text("#meta")
    assert not page.is_visible("#passage")
    page.click("#answer .cite[data-n='1']")
    page.wait_for_selector("#passage", state="visible", timeout=5000)
    assert page.inner_text("#passage-text") == "Rome is the capital of Italy."
    where = page.inner_text("#passage-where")
    assert "rome.txt" in where and "/data/" not in where and "0–29" in where


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_web_page_in_a_real_browser(prog):
    """No API key: the page streams the answer, showing the tokens as they arrive (the LM holds its last
    token until the page shows the first ones), then renders the citations."""
    gate = threading.Event()
    lm = StreamingLM(ANSWER, gate=gate, gate_timeout=30)
    with real_server(app_for(prog, lm=lm, name="demo")) as (base, _), browser_page() as page:
        page.goto(base + "/")
        page.wait_for_selector("#serving:has-text('demo')", timeout=15000)
        assert not page.is_visible("#key-form")
        page.fill("#question", Q)
        page.click("#ask")
        page.wait_for_selector("#answer:has-text('Rome is')", timeout=15000)
        partial = page.inner_text("#answer")
        assert partial != ANSWER and ANSWER.startswith(partial) and page.query_selector("#answer .cite") is None
        gate.set()
        check_answer_and_passage(page)
    assert lm.gate_opened is True


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_web_page_says_why_it_abstained_and_links_the_nearest_passages(prog):
    with real_server(app_for(prog, lm=StreamingLM("The passages do not say, sorry."), name="demo")) as (base, _), \
            browser_page() as page:
        page.goto(base + "/")
        page.wait_for_selector("#serving:has-text('demo')", timeout=15000)
        page.fill("#question", Q)
        page.click("#ask")
        page.wait_for_selector("#answer .nearest .cite", timeout=15000)
        shown = page.inner_text("#answer")
        assert "The LM found no answer in the passages." in shown and "Nearest passages, for you to check" in shown
        page.click("#answer .nearest .cite[data-n='1']")
        page.wait_for_selector("#passage", state="visible", timeout=5000)
        assert page.inner_text("#passage-text") == "Rome is the capital of Italy."
        assert "nearest to the question" in page.inner_text("#passage-where")


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_web_page_rates_an_answer_with_the_citation_the_reader_opened(prog, tmp_path):
    from declrag.usage import RecordSettings, UsageStore

    record = RecordSettings(target=str(tmp_path / "usage.sqlite3"))
    with real_server(app_for(prog, name="demo", record=record)) as (base, _), browser_page() as page:
        page.goto(base + "/")
        page.wait_for_selector("#serving:has-text('demo')", timeout=15000)
        page.fill("#question", Q)
        page.click("#ask")
        check_answer_and_passage(page)  # opens passage [1]
        page.click(".rate button.helpful")
        page.wait_for_selector(".rate:has-text('your rating is recorded')", timeout=10000)
        page.screenshot(path=str(tmp_path / "rated.png"))
    (rated,) = [r for r in UsageStore(record.target, create=False).records()]
    assert rated["question"] == Q and rated["feedback"] == {"helpful": True, "citation": 1, "correction": None}


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_web_page_with_an_api_key_in_a_real_browser(prog):
    """With a key: the page loads without it and asks for it; a wrong key is asked for again, the right one
    answers. The key travels only in the Authorization header of API calls, never in a URL."""
    with real_server(app_for(prog, lm=StreamingLM(ANSWER), name="demo", api_key=KEY)) as (base, _), \
            browser_page() as page:
        sent: list[tuple[str, str | None]] = []
        page.on("request", lambda r: sent.append((r.url, r.headers.get("authorization"))))
        assert page.goto(base + "/").status == 200
        page.wait_for_selector("#key-form", state="visible", timeout=15000)
        assert "needs an API key" in page.inner_text("#key-message")
        page.fill("#key", "wrong-key")
        page.click("#key-submit")
        page.wait_for_selector("#key-message:has-text('not accepted')", timeout=15000)
        assert page.is_visible("#key-form")
        page.fill("#key", KEY)
        page.click("#key-submit")
        page.wait_for_selector("#serving:has-text('demo')", timeout=15000)
        assert not page.is_visible("#key-form")
        page.fill("#question", Q)
        page.click("#ask")
        check_answer_and_passage(page)
        page.reload()  # the key lasts for this tab's session: no second prompt
        page.wait_for_selector("#serving:has-text('demo')", timeout=15000)
        assert not page.is_visible("#key-form")
    assert all(KEY not in url for url, _ in sent)
    api = [(url.removeprefix(base), key) for url, key in sent if "/v1/" in url]
    assert ("/v1/models", "Bearer wrong-key") in api and ("/v1/ask", f"Bearer {KEY}") in api
    assert [key for url, key in sent if url.rstrip("/") == base] == [None, None]  # the page itself: no key


# ------------------------------------------------------------------- the real thing, as `declrag serve` runs it
@pytest.mark.slow
def test_serve_runs_the_default_program_and_drains_on_sigterm(serve_process):
    """`serve()` in its own process: the default program over a real store on the real local model; it prints
    what it serves, /readyz flips, and SIGTERM lets the question in flight finish before the process exits."""
    import signal

    proc, base = serve_process(", model='local/smollm2'")  # the local model named: it writes the answers
    port = base.rsplit(":", 1)[1]
    try:
        deadline = time.monotonic() + 300
        results: list = []
        t = threading.Thread(target=lambda: results.append(
            httpx.post(base + "/v1/ask", json={"question": "What is the capital of Italy?"}, timeout=300)))
        t.start()
        while "declrag_in_flight 1.0" not in httpx.get(base + "/metrics", timeout=5).text:
            assert t.is_alive() and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        t.join(300)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = proc.stdout.read()
    assert f"as 'declrag-default' on http://127.0.0.1:{port}/" in out and "ready: declrag-default loaded" in out, out
    r = results[0]
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["answer"].strip() and a["program"] == {"name": "declrag-default", "run": None}
    assert a["usage"]["total"]["tokens_out"] > 0 and all(c["source"].endswith(".txt") for c in a["citations"])


def test_serve_stops_and_raises_when_the_program_cannot_load(monkeypatch):
    import declrag.serve._server as serve_mod

    def broken():
        raise DeclragError("store /x was built with other ingest settings")

    monkeypatch.setattr(serve_mod, "resolve", lambda *a: ProgramChoice("bad", None, "a broken program", broken,
                                                                         "answers: extractive"))
    said: list[str] = []
    with pytest.raises(DeclragError, match="other ingest settings"):
        serve_mod.serve(settings=ServeSettings(port=0), say=said.append, log_level="critical")
    assert "declrag serve: a broken program as 'bad'" in said[0]


# -------------------------------------------------------------------------- the JSON path and the load generator
def test_plain_and_streamed_ask_return_the_same_answer_and_hits(prog):
    """The plain JSON response (what a search client asks for) and the streamed one's final event carry the same
    answer and the same retrieved passages, with and without a filter."""
    where = {"doc_id": "rome"}
    with client(app_for(prog)) as c:
        for options in (None, {"where": where}):
            body = {"question": Q} | ({"options": options} if options else {})
            plain = c.post("/v1/ask", json=body)
            streamed = c.post("/v1/ask", json=body | {"stream": True})
            assert plain.status_code == 200 and plain.headers["content-type"] == "application/json", plain.text
            assert streamed.headers["content-type"].startswith("text/event-stream")
            a, (kind, final) = plain.json(), ask_events(streamed.text)[-1]
            assert kind == "answer" and final["answer"] == a["answer"] == ANSWER
            assert a["citations"] and final["citations"] == a["citations"]
            assert [h["chunk_id"] for h in final["citations"]] == [h["chunk_id"] for h in a["citations"]]
            if options:
                assert {h["chunk_id"].split("#")[0] for h in a["citations"]} == {"rome"}


def test_limits_and_checks_hold_on_the_json_path(prog):
    """Every check answers the plain JSON request as it answers a streamed one: same status, same error body."""
    app = app_for(prog, max_question_chars=40, max_body_bytes=300)
    with client(app) as c:
        for stream in (False, True):
            extra = {"stream": True} if stream else {}
            r = c.post("/v1/ask", json={"question": "x" * 41} | extra)
            assert r.status_code == 422 and r.json() == {
                "error": "question is 41 characters long; the limit is 40", "field": "question"}
            r = c.post("/v1/ask", json={"question": "\u200b \x00"} | extra)
            assert r.status_code == 422 and r.json() == {"error": "question is empty", "field": "question"}
            r = c.post("/v1/ask", json={"question": Q, "options": {"where": {"colour": "red"}}} | extra)
            assert r.status_code == 422 and r.json()["field"] == "options.where"
            r = c.post("/v1/ask", json={"question": Q, "pad": "y" * 400} | extra)
            assert r.status_code == 413
        metrics = c.get("/metrics").text
    assert 'declrag_errors_total{kind="invalid",route="/v1/ask"} 6.0' in metrics
    assert 'declrag_errors_total{kind="too_large",route="/v1/ask"} 2.0' in metrics
    assert 'declrag_requests_total{route="/v1/ask",status="422"} 6.0' in metrics


def test_the_key_check_reads_the_last_authorization_header(prog):
    """Sent twice, the last Authorization header is the one checked (as when headers were read into a dict)."""
    with client(app_for(prog, api_key=KEY)) as c:
        ok = c.post("/v1/ask", json={"question": Q},
                    headers=[("Authorization", "Bearer wrong"), ("Authorization", f"Bearer {KEY}")])
        refused = c.post("/v1/ask", json={"question": Q},
                         headers=[("Authorization", f"Bearer {KEY}"), ("Authorization", "Bearer wrong")])
    assert ok.status_code == 200, ok.text
    assert refused.status_code == 401 and refused.json() == {"error": "unauthorized"}


def test_json_responses_say_what_the_standard_encoder_says():
    """orjson renders the responses; where it refuses a value, the standard encoder does, so every body means
    what `JSONResponse` made of it, and what neither can encode still fails."""
    import numpy as np
    from fastapi.responses import JSONResponse

    from declrag.payloads import plain
    from declrag.serve._jsonenc import FastJSONResponse

    bodies = [{"answer": "Rome è la capitale [1].", "citations": [{"n": 1, "score": 0.8123, "span": [0, 12]}],
               "judge": None, "abstained": False, "usage": {"total": {"cost_usd": 1.5e-05, "tokens_in": 10}}},
              {1: "int key"}, {"big": 10**30}, ["a", 1, 2.5, None, True], "text", 3]
    for body in bodies:
        assert json.loads(FastJSONResponse(body).body) == json.loads(JSONResponse(body).body)
    for refused in ({"lone": "\udc80"}, {"x": object()}):  # a lone surrogate, an unknown type: errors, as before
        with pytest.raises((UnicodeEncodeError, TypeError)):
            JSONResponse(refused)
        with pytest.raises((UnicodeEncodeError, TypeError)):
            FastJSONResponse(refused)
    assert FastJSONResponse({"a": "é", "b": [1, None]}).body == JSONResponse({"a": "é", "b": [1, None]}).body
    numpy_payload = {"score": np.float32(0.3), "ids": np.arange(3), "n": np.int64(7), "k": {2: "x"}}
    standard = json.loads(json.dumps(numpy_payload, default=lambda o: o.item() if isinstance(o, np.generic)
                                     else o.tolist()))
    assert plain(numpy_payload) == standard and isinstance(plain(numpy_payload)["score"], float)
    with pytest.raises(AttributeError):
        plain({"x": object()})
