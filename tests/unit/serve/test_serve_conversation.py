"""`declrag serve` and conversations: the history on `/v1/ask`, the earlier messages of `/v1/chat/completions`
(a system message kept as an instruction), `/v1/search` against `RAGProgram.search`, the limits, the semantic
cache keyed on the conversation, the metrics, the web page keeping a conversation (in a real headless
Chromium), and the serve benchmark's search scenario. On the tiny corpus with HashEmbedder and scripted LMs."""

from __future__ import annotations

import os
import threading

import httpx
import pytest

from declrag.config import HistoryConfig, ProgramConfig
from declrag.pipeline.program import RAGProgram
from declrag.testing import HashEmbedder, ScriptedLM, StreamingLM

from tests.unit.serve.test_serve import (
    ANSWER,
    CHROMIUM,
    KEY,
    CountingLM,
    Q,
    app_for,
    ask_events,
    auth,
    browser_page,
    client,
    real_server,
)

BERLIN = [{"role": "user", "content": "Tell me about Berlin"},
          {"role": "assistant", "content": "Berlin is a city in Germany."}]
FOLLOW_UP = "Is it the capital?"
PIRATE = "Answer like a pirate."


class RecordingLM:
    """A per-call scripted LM factory that keeps every LM it made, so a test can read the prompts they got."""

    def __init__(self, answer: str = ANSWER, rules: dict | None = None, cost_usd: float | None = None):
        self.answer, self.rules, self.cost_usd, self.lms = answer, rules or {}, cost_usd, []
        self.lock = threading.Lock()

    def __call__(self):
        lm = ScriptedLM(self.rules, {"answer": self.answer}, cost_usd=self.cost_usd)
        with self.lock:
            self.lms.append(lm)
        return lm

    def prompts(self) -> list[str]:
        """Every prompt sent, its messages joined."""
        return ["\n".join(m["content"] for m in h["messages"]) for lm in self.lms for h in lm.history]

    def generate_prompts(self) -> list[str]:
        return [p for p in self.prompts() if "Context:" in p]



@pytest.fixture(scope="module")
def prog(store):
    p = RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder())
    p.retrieve_only(Q)  # the store's snapshot is loaded once for the whole module
    return p


def hit_tuples(hits) -> list[tuple]:
    """What `/v1/search` and `RAGProgram.search` must agree on: id, document, span, text and score, in order."""
    return [(h["chunk_id"], h["doc_id"], tuple(h["span"]), h["text"], h["score"]) if isinstance(h, dict) else
            (h.chunk.id, h.doc_id, (h.start, h.end), h.text, float(h.score)) for h in hits]


# ------------------------------------------------------------------------------ /v1/chat/completions
def test_openai_client_sends_a_conversation_that_reaches_the_program(prog):
    """The official client against a real server: a three-message conversation (and the same streamed) is
    answered with the earlier turns in the generate stage's prompt, and the search made from them (the
    follow-up alone would not find Berlin's second passage)."""
    from openai import OpenAI

    lm = RecordingLM()
    messages = [*BERLIN, {"role": "user", "content": FOLLOW_UP}]
    with real_server(app_for(prog, lm=lm, api_key=KEY)) as (base, _):
        oc = OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=30)
        resp = oc.chat.completions.create(model="demo", messages=messages)
        text = "".join(ch.choices[0].delta.content or "" for ch in
                       oc.chat.completions.create(model="demo", messages=messages, stream=True) if ch.choices)
        searched = httpx.post(base + "/v1/search", json={"messages": messages}, headers=auth(), timeout=30).json()
    assert resp.choices[0].message.content == ANSWER and text == ANSWER
    prompts = lm.generate_prompts()
    assert len(prompts) == 2
    for p in prompts:
        assert "User: Tell me about Berlin\nAssistant: Berlin is a city in Germany." in p and FOLLOW_UP in p
    assert resp.model_extra["citations"][0]["chunk_id"] == "berlin#0"
    ids = [h["chunk_id"] for h in searched["hits"]]
    assert ids == [h.chunk.id for h in prog.search(FOLLOW_UP, history=BERLIN)] and "berlin#1" in ids[:2]
    assert ids != [h.chunk.id for h in prog.search(FOLLOW_UP)]  # the history changed the search


@pytest.mark.parametrize("role", ["system", "developer"])
def test_a_system_message_is_kept_for_the_generate_stage_only(prog, role):
    lm = RecordingLM()
    messages = [{"role": role, "content": PIRATE}, *BERLIN, {"role": "user", "content": FOLLOW_UP}]
    with client(app_for(prog, lm=lm)) as c:
        r = c.post("/v1/chat/completions", json={"model": "demo", "messages": messages})
        with_system = c.post("/v1/search", json={"messages": messages}).json()
        without = c.post("/v1/search", json={"messages": messages[1:]}).json()
    assert r.status_code == 200, r.text
    (prompt,) = lm.generate_prompts()
    assert f"System: {PIRATE}\nUser: Tell me about Berlin" in prompt
    instructions = prompt.index("Cite the passages")
    assert instructions < prompt.index(PIRATE)  # the program's own instructions come first
    assert hit_tuples(with_system["hits"]) == hit_tuples(without["hits"])  # retrieval reads the user turns only


@pytest.mark.parametrize("messages, field, words", [
    ([{"role": "user", "content": Q}, {"role": "assistant", "content": "Rome."}], "messages", "last message"),
    ([{"role": "system", "content": PIRATE}], "messages", "last message"),
    ([{"role": "tool", "content": "42", "tool_call_id": "t1"}, {"role": "user", "content": Q}],
     "messages[0].role", "'tool' is not supported"),
    ([*BERLIN, {"role": "function", "content": "x", "name": "f"}, {"role": "user", "content": Q}],
     "messages[2].role", "'function'"),
    ([{"role": "user", "content": "  "}, {"role": "user", "content": Q}], "messages[0].content", "empty"),
    ([{"role": "assistant", "content": None}, {"role": "user", "content": Q}], "messages[0].content", "empty"),
])
def test_chat_conversations_that_are_refused(prog, messages, field, words):
    lm = CountingLM()
    with client(app_for(prog, lm=lm)) as c:
        r = c.post("/v1/chat/completions", json={"model": "demo", "messages": messages})
        streamed = c.post("/v1/chat/completions", json={"model": "demo", "messages": messages, "stream": True})
    for resp in (r, streamed):
        assert resp.status_code == 422 and resp.json()["field"] == field and words in resp.json()["error"], resp.text
    assert lm.calls == 0


def test_the_openai_client_sees_the_422s(prog):
    from openai import OpenAI, UnprocessableEntityError

    with real_server(app_for(prog)) as (base, _):
        oc = OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=30)
        with pytest.raises(UnprocessableEntityError) as e:
            oc.chat.completions.create(model="demo", messages=[{"role": "user", "content": Q},
                                                               {"role": "assistant", "content": "Rome."}])
        assert e.value.response.json()["field"] == "messages"
        with pytest.raises(UnprocessableEntityError) as e:
            oc.chat.completions.create(model="demo", messages=[
                {"role": "tool", "content": "42", "tool_call_id": "t1"}, {"role": "user", "content": Q}])
        assert e.value.response.json()["field"] == "messages[0].role"


# --------------------------------------------------------------------------------------- /v1/ask
def test_ask_takes_a_history(prog):
    lm = RecordingLM()
    with client(app_for(prog, lm=lm)) as c:
        r = c.post("/v1/ask", json={"question": FOLLOW_UP, "history": BERLIN})
        plain = c.post("/v1/ask", json={"question": FOLLOW_UP})
        streamed = sse_events_of_ask(c.post("/v1/ask", json={"question": FOLLOW_UP, "history": BERLIN,
                                                              "stream": True}).text)
    assert r.status_code == 200 and plain.status_code == 200, r.text
    with_history, without, streamed_prompt = lm.generate_prompts()
    assert "User: Tell me about Berlin" in with_history and "User: Tell me about Berlin" in streamed_prompt
    assert "Conversation" not in without and "Tell me about Berlin" not in without
    assert r.json()["latency_ms"]["history"] >= 0 and streamed["answer"] == ANSWER


def sse_events_of_ask(text: str) -> dict:
    """The final ``answer`` event of a streamed `/v1/ask`."""
    events = ask_events(text)
    assert events[-1][0] == "answer", events
    return events[-1][1]


@pytest.mark.parametrize("history, field, words", [
    ([{"role": "bot", "content": "hi"}], "history[0].role", "must be one of user, assistant, system"),
    ([{"role": "user"}], "history[0].content", "must be a string"),
    ([{"role": "user", "content": "hi", "name": "x"}], "history[0]", "unknown field"),
    (["hi"], "history[0]", "must be an object"),
    ("hi", "history", "valid list"),
    ([{"role": "user", "content": "hi"}, {"role": "user", "content": "\u200b"}], "history[1].content", "empty"),
])
def test_ask_refuses_a_bad_history_naming_the_turn(prog, history, field, words):
    lm = CountingLM()
    with client(app_for(prog, lm=lm)) as c:
        r = c.post("/v1/ask", json={"question": Q, "history": history})
    assert r.status_code == 422 and r.json()["field"] == field and words in r.json()["error"], r.text
    assert set(r.json()) == {"error", "field"} and lm.calls == 0


def test_history_limits_are_the_programs_and_named(store, prog):
    small = RAGProgram(ProgramConfig(history=HistoryConfig(max_turns=2, max_chars=60)), store=store,
                       embedder=prog.embedder)
    three = [*BERLIN, {"role": "user", "content": "And Paris?"}]
    long = [{"role": "user", "content": "x" * 40}, {"role": "assistant", "content": "y" * 40}]
    lm = CountingLM()
    with client(app_for(small, lm=lm)) as c:
        too_many = c.post("/v1/ask", json={"question": Q, "history": three})
        chat = c.post("/v1/chat/completions", json={"messages": [*three, {"role": "user", "content": Q}]})
        search = c.post("/v1/search", json={"query": Q, "history": three})
        too_long = c.post("/v1/ask", json={"question": Q, "history": long})
        ok = c.post("/v1/ask", json={"question": Q, "history": BERLIN})
        metrics = c.get("/metrics").text
    assert too_many.status_code == 422 and too_many.json() == {"error": "history has 3 turns; the limit is 2",
                                                                "field": "history"}
    assert chat.status_code == 422 and chat.json() == {"error": "messages has 3 turns; the limit is 2",
                                                       "field": "messages"}
    assert search.status_code == 422 and search.json()["field"] == "history"
    assert too_long.status_code == 422 and too_long.json()["field"] == "history"
    assert "the limit is 60" in too_long.json()["error"]
    assert ok.status_code == 200 and lm.calls == 1
    assert 'declrag_errors_total{kind="invalid",route="/v1/chat/completions"} 1.0' in metrics


def test_a_history_must_fit_the_body_limit(prog):
    history = [{"role": "user", "content": "word " * 400}, {"role": "assistant", "content": "ok"}] * 3
    with client(app_for(prog, max_body_bytes=4096)) as c:
        r = c.post("/v1/ask", json={"question": Q, "history": history})
    assert r.status_code == 413 and "larger than 4096 bytes" in r.json()["error"]


# ----------------------------------------------------------------------------------- the answer cache
def test_the_semantic_cache_does_not_mix_conversations(prog):
    """The cache keys an answer on the whole history: the same last question in another conversation (or with
    none) is answered anew; in the same conversation again, it comes from the cache."""
    lm = CountingLM()
    paris = [{"role": "user", "content": "Tell me about Paris"}, {"role": "assistant", "content": "A French city."}]
    with client(app_for(prog, lm=lm, cache_threshold=0.95)) as c:
        berlin = c.post("/v1/ask", json={"question": FOLLOW_UP, "history": BERLIN}).json()
        other = c.post("/v1/ask", json={"question": FOLLOW_UP, "history": paris}).json()
        alone = c.post("/v1/ask", json={"question": FOLLOW_UP}).json()
        again = c.post("/v1/ask", json={"question": FOLLOW_UP, "history": BERLIN}).json()
        chat = c.post("/v1/chat/completions", json={"messages": [*paris, {"role": "user", "content": FOLLOW_UP}]})
        system = c.post("/v1/chat/completions", json={"messages": [{"role": "system", "content": PIRATE}, *paris,
                                                                   {"role": "user", "content": FOLLOW_UP}]})
    assert [x["cache"]["hit"] for x in (berlin, other, alone)] == [False, False, False]
    assert berlin["citations"][0]["chunk_id"].startswith("berlin#")
    assert other["citations"][0]["chunk_id"].startswith("paris#")
    assert again["cache"]["hit"] is True and again["citations"] == berlin["citations"]
    assert chat.json()["citations"] == other["citations"]  # the same conversation as /v1/ask's: a hit
    assert system.status_code == 200 and lm.calls == 4  # berlin, paris, alone, and the system-prompted one


# ------------------------------------------------------------------------------------------ metrics
def test_metrics_count_history_length_and_the_condense_stage(store, prog):
    condensing = RAGProgram(ProgramConfig(history=HistoryConfig(query="condense")), store=store,
                            embedder=prog.embedder)
    lm = RecordingLM(rules={"standalone question": {"standalone": "Is Berlin the capital of Germany?"}},
                     cost_usd=0.001)  # metered as a paid call, so the stages' usage counts it
    with client(app_for(condensing, lm=lm)) as c:
        r = c.post("/v1/ask", json={"question": FOLLOW_UP, "history": BERLIN}).json()
        c.post("/v1/ask", json={"question": Q})
        s = c.post("/v1/search", json={"query": FOLLOW_UP, "history": BERLIN})
        text = c.get("/metrics").text
    assert r["usage"]["condense"]["calls"] == 1 and s.status_code == 200
    assert s.json()["hits"][0]["chunk_id"] == "berlin#0"
    assert any("Rewrite the user's last message" in p and "User: Tell me about Berlin" in p for p in lm.prompts())
    for line in ('declrag_history_turns_count{route="/v1/ask"} 2.0', 'declrag_history_turns_sum{route="/v1/ask"} 2.0',
                 'declrag_history_turns_bucket{le="0.0",route="/v1/ask"} 1.0',
                 'declrag_history_turns_count{route="/v1/search"} 1.0',
                 'declrag_stage_lm_calls_total{stage="condense"} 2.0',  # the answer's and the search's
                 'declrag_stage_lm_calls_total{stage="generate"} 2.0',
                 'declrag_stage_lm_seconds_count{stage="condense"} 2.0',
                 "declrag_history_query_seconds_count 1.0", "declrag_search_seconds_count 1.0"):
        assert line in text, line


# -------------------------------------------------------------------------------------- /v1/search
def test_search_returns_what_the_program_searches(prog):
    """For the same settings, `/v1/search` returns `RAGProgram.search`'s hits: ids, order, spans, texts and
    scores exactly; ``query``, ``k`` and ``alpha`` say what was used (the program's by default)."""
    lm = RecordingLM()
    with client(app_for(prog, lm=lm)) as c:
        default = c.post("/v1/search", json={"query": Q}).json()
        tuned = c.post("/v1/search", json={"query": "capital city", "k": 7, "alpha": 0.2}).json()
        keyword = c.post("/v1/search", json={"query": "capital city", "k": 7, "alpha": 0.0}).json()
        filtered = c.post("/v1/search", json={"query": "capital", "where": {"doc_id": "paris"}, "k": 2}).json()
        chatty = c.post("/v1/search", json={"messages": [*BERLIN, {"role": "user", "content": [
            {"type": "text", "text": FOLLOW_UP}]}], "k": 3, "alpha": 0.7}).json()
        history = c.post("/v1/search", json={"query": FOLLOW_UP, "history": BERLIN, "k": 3, "alpha": 0.7}).json()
    r = prog.config.retrieve
    assert (default["query"], default["k"], default["alpha"]) == (Q, r.k, r.alpha) and len(default["hits"]) == r.k
    assert hit_tuples(default["hits"]) == hit_tuples(prog.search(Q))
    assert [h["rank"] for h in default["hits"]] == list(range(1, r.k + 1))
    assert set(default["hits"][0]) == {"rank", "chunk_id", "doc_id", "source", "title", "section", "page", "span",
                                       "text", "score"}
    assert default["hits"][0]["source"] == "rome.txt" and default["latency_ms"]["total"] > 0
    assert hit_tuples(tuned["hits"]) == hit_tuples(prog.search("capital city", k=7, alpha=0.2))
    assert (tuned["k"], tuned["alpha"], len(tuned["hits"])) == (7, 0.2, 7)
    assert hit_tuples(keyword["hits"]) == hit_tuples(prog.search("capital city", k=7, alpha=0.0))
    assert [h[4] for h in hit_tuples(keyword["hits"])] != [h[4] for h in hit_tuples(tuned["hits"])]
    assert {h["doc_id"] for h in filtered["hits"]} == {"paris"}
    assert hit_tuples(filtered["hits"]) == hit_tuples(prog.search("capital", where={"doc_id": "paris"}, k=2))
    expected = hit_tuples(prog.search(FOLLOW_UP, history=BERLIN, k=3, alpha=0.7))
    assert hit_tuples(chatty["hits"]) == expected == hit_tuples(history["hits"]) and chatty["query"] == FOLLOW_UP
    assert lm.prompts() == []  # no LM in the path


@pytest.mark.parametrize("body, field, words", [
    ({"query": Q, "k": 51}, "k", "k is 51; the limit is 50"),
    ({"query": Q, "k": 0}, "k", "greater than or equal to 1"),
    ({"query": Q, "k": "5"}, "k", "valid integer"),
    ({"query": Q, "k": True}, "k", "valid integer"),
    ({"query": Q, "alpha": 1.5}, "alpha", "less than or equal to 1"),
    ({"query": Q, "alpha": -0.1}, "alpha", "greater than or equal to 0"),
    ({"query": Q, "where": {"doc_id": {"$regex": "x"}}}, "where", ""),
    ({"query": ""}, "query", "empty"),
    ({"query": 5}, "query", "valid string"),
    ({}, "query", "send query or messages"),
    ({"query": Q, "messages": [{"role": "user", "content": Q}]}, "query", "send query or messages"),
    ({"messages": [{"role": "user", "content": Q}], "history": BERLIN}, "history", "with messages"),
    ({"messages": [{"role": "assistant", "content": Q}]}, "messages", "last message"),
    ({"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": Q}]}, "messages[0].role", "tool"),
    ({"messages": []}, "messages", ""),
    ({"query": Q, "history": [{"role": "robot", "content": "x"}]}, "history[0].role", "robot"),
    ({"query": Q, "top_k": 3}, "top_k", "unknown field"),
])
def test_search_refuses_bad_input_naming_the_field(prog, body, field, words):
    with client(app_for(prog)) as c:
        r = c.post("/v1/search", json=body)
    assert r.status_code == 422 and r.json()["field"] == field and words in r.json()["error"], r.text


def test_search_k_limit_is_the_servers(prog):
    with client(app_for(prog, max_search_k=3)) as c:
        over = c.post("/v1/search", json={"query": Q, "k": 4})
        at = c.post("/v1/search", json={"query": Q, "k": 3})
    assert over.status_code == 422 and over.json() == {"error": "k is 4; the limit is 3 (declrag serve "
                                                                "--max-search-k)", "field": "k"}
    assert at.status_code == 200 and len(at.json()["hits"]) == 3


def test_search_needs_the_key_and_admission(prog):
    with client(app_for(prog, api_key=KEY)) as c:
        assert c.post("/v1/search", json={"query": Q}).json() == {"error": "unauthorized"}
        assert c.post("/v1/search", json={"query": Q}, headers=auth("wrong")).status_code == 401
        assert c.post("/v1/ask", json={"question": Q, "history": BERLIN}).status_code == 401
        assert c.post("/v1/search", json={"query": Q}, headers=auth()).status_code == 200
        metrics = c.get("/metrics", headers=auth()).text
    assert 'declrag_errors_total{kind="unauthorized",route="/v1/search"} 2.0' in metrics
    assert 'declrag_requests_total{route="/v1/search",status="200"} 1.0' in metrics
    app = app_for(prog, max_in_flight=1)
    with client(app) as c:
        app.state.service.state.in_flight = 1  # a slot taken: search is admitted like the other routes
        busy = c.post("/v1/search", json={"query": Q})
        app.state.service.state.in_flight = 0
    assert busy.status_code == 503 and "busy" in busy.json()["error"] and busy.headers["retry-after"] == "1"


def test_search_is_in_the_openapi_schema(prog):
    schema = app_for(prog).openapi()
    op = schema["paths"]["/v1/search"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/SearchRequest")
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/SearchResponse")
    req = schema["components"]["schemas"]["SearchRequest"]["properties"]
    assert {"query", "history", "messages", "where", "k", "alpha"} <= set(req)
    hit = schema["components"]["schemas"]["SearchHit"]["properties"]
    assert {"rank", "chunk_id", "doc_id", "source", "title", "span", "text", "score"} <= set(hit)
    ask = schema["components"]["schemas"]["AskRequest"]["properties"]["history"]
    assert ask["anyOf"][0]["items"]["properties"]["role"]["enum"] == ["user", "assistant", "system"]


# ------------------------------------------------------------------------------------------ the page
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_web_page_keeps_the_conversation(prog):
    """A follow-up sends the earlier turns as the history; each answer keeps its own citations; "New
    conversation" clears it, and the next question goes without history."""
    def reply(messages: list) -> str:  # the question is what precedes the passages in the prompt
        asked = messages[-1]["content"].split("Context:")[0].rstrip()
        return "Berlin answer [1]." if asked.endswith("Tell me about Berlin") else ANSWER

    lm = StreamingLM(reply)
    berlin_passage = prog.search("Tell me about Berlin", history=[{"role": "user", "content": Q},
                                                                  {"role": "assistant", "content": ANSWER}])[0].text
    with real_server(app_for(prog, lm=lm, name="demo")) as (base, _), browser_page() as page:
        sent: list[dict] = []
        page.on("request", lambda r: sent.append(r.post_data_json) if r.url.endswith("/v1/ask") else None)
        page.goto(base + "/")
        page.wait_for_selector("#serving:has-text('demo')", timeout=15000)
        page.fill("#question", Q)
        page.click("#ask")
        page.wait_for_selector(".turn:nth-child(1) .meta:has-text('Answered by')", timeout=15000)
        page.fill("#question", "Tell me about Berlin")
        page.click("#ask")
        page.wait_for_selector(".turn:nth-child(2) .meta:has-text('Answered by')", timeout=15000)
        assert page.inner_text(".turn:nth-child(1) .a") == ANSWER
        assert page.inner_text(".turn:nth-child(2) .a") == "Berlin answer [1]."
        assert "2 questions" in page.inner_text("#turns")
        page.click(".turn:nth-child(1) .cite[data-n='1']")  # the first answer's [1]: its own passage
        page.wait_for_selector(".turn:nth-child(1) #passage", state="visible", timeout=5000)
        assert page.inner_text("#passage-text") == "Rome is the capital of Italy."
        page.click(".turn:nth-child(2) .cite[data-n='1']")
        page.wait_for_selector(".turn:nth-child(2) #passage", state="visible", timeout=5000)
        assert page.inner_text("#passage-text") == berlin_passage
        page.click("#new-conversation")
        assert page.query_selector(".turn") is None and not page.is_visible("#result")
        page.fill("#question", Q)
        page.click("#ask")
        page.wait_for_selector(".turn:nth-child(1) .meta:has-text('Answered by')", timeout=15000)
        assert len(page.query_selector_all(".turn")) == 1
    assert [b.get("history") for b in sent] == [None, [{"role": "user", "content": Q},
                                                       {"role": "assistant", "content": ANSWER}], None]
