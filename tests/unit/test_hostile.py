"""What a hostile but legitimate user found (issue 15), each turned into a test: filters that pass validation
never crash a search, text inputs are checked once wherever they enter (HTTP, CLI, Python API), a missing
path or an empty config is a clear error, an API key no client can send is refused at start-up, and every
malformed request gets the project's JSON error. Fast: HashEmbedder, scripted LMs, a store of ten chunks."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

import declrag
from declrag.cli import main
from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.inputs import InputError, api_key_problem, user_text
from declrag.pipeline.program import RAGProgram, read_config
from declrag.serve import ServeSettings
from declrag.serve._app import error_response
from declrag.stores.base import MAX_DEPTH, Filter
from declrag.stores._snapshot import filter_arrow
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.testing.store_contract import corpus

from tests.conftest import filled_store

from tests.unit.serve.test_serve import ANSWER, KEY, CountingLM, Q, app_for, auth, chat_body, client

INVISIBLE = ["\x00", "\x00\x00\x00", "\u200b", "\u200b\u200c\u200d", "\x01\x02\x1b", "\ufeff\u2060", " \t\n\x00 ",
             "\u3164\u115f", "\u2800", "\u0301", "\x7f\x9f", "\u00ad\u200e\u200f"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The ten-chunk corpus in a LanceStore created with its metadata, so the CLI can open it."""
    return filled_store(tmp_path_factory.mktemp("hostile") / "store", created=True)


@pytest.fixture(scope="module")
def prog(store):
    p = RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder())
    p.retrieve_only(Q)
    return p


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def post_json(c, path: str, text: str, **headers):
    """POST a JSON text as written (json.dumps would refuse some of these bodies)."""
    return c.post(path, content=text.encode(),
                  headers={"content-type": "application/json", **headers})


# ------------------------------------------------------------------------- 1. filters never crash a search
EMPTY_LISTS = [{"source": {"$in": []}}, {"source": {"$nin": []}}, {"page": {"$in": []}}, {"page": {"$nin": []}},
               {"$or": [{"doc_id": {"$in": []}}, {"page": 1}]}, {"$and": [{"title": {"$nin": []}}, {"position": 1}]}]


@pytest.mark.parametrize("where", EMPTY_LISTS)
def test_empty_in_and_nin_mean_nothing_and_everything_on_every_kind_of_read(store, where):
    want = {c.id for c in corpus(HashEmbedder())[1] if Filter(where).matches(
        {"id": c.id, "doc_id": c.doc_id, "source": c.source, "title": c.title, "page": c.page,
         "position": c.position})}
    vec = HashEmbedder().embed_query("capital city")
    assert store.count(where) == len(want)
    assert {h.chunk.id for h in store.vector_search(vec, 100, where)} == want
    assert {h.chunk.id for h in store.hybrid_search("capital", vec, 100, 0.5, where=where)} <= want
    assert {h.chunk.id for h in store.keyword_search("capital", 100, where)} <= want
    assert filter_arrow(Filter(where)) is not None  # the Arrow translation (searches) holds no empty IN ()


def test_empty_lists_mean_the_same_on_weaviate():
    from declrag.stores.weaviate._wire import translate

    assert translate(Filter({"source": {"$in": []}})) is False and translate(Filter({"page": {"$nin": []}})) is True
    assert translate(Filter({"$or": [{"doc_id": {"$in": []}}, {"page": {"$nin": []}}]})) is True
    assert translate(Filter({"$and": [{"doc_id": {"$in": []}}, {"page": 1}]})) is False


@pytest.mark.parametrize("where, words", [
    ({"page": {"$gt": 9223372036854775808}}, "between -2147483648 and 2147483647"),
    ({"page": {"$in": [2 ** 64]}}, "between -2147483648 and 2147483647"),
    ({"position": {"$nin": [-(2 ** 40)]}}, "between"),
    ({"$nin": []}, "unknown field '$nin'"),
    ({"source": "\ud800"}, "not valid Unicode"),
    ({"doc_id": {"$in": ["rome", "\udcff"]}}, "not valid Unicode"),
    ({"doc_id": " berlin"}, "begins or ends with whitespace"),  # the fuzzer found Weaviate trims, LanceDB not
    ({"title": {"$gt": "\rc"}}, "begins or ends with whitespace"),
    ({"source": "a\x00b"}, "NUL"),
])
def test_filters_the_stores_cannot_hold_are_refused_before_any_work(store, where, words):
    with pytest.raises(DeclragError, match=words.replace("$", r"\$")):
        store.count(where)


def test_filters_nest_at_most_max_depth_and_deeper_is_refused_not_a_recursion_error(store):
    def nested(n: int) -> dict:
        w: dict = {"page": 1}
        for _ in range(n):
            w = {"$and": [w]}
        return w

    assert store.count(nested(MAX_DEPTH)) == store.count({"page": 1}) > 0
    for n in (MAX_DEPTH + 1, 5000):
        with pytest.raises(DeclragError, match="nest more than"):
            Filter(nested(n))


@pytest.mark.parametrize("where, status, cited", [
    ({"source": {"$in": []}}, 200, set()),
    ({"page": {"$in": []}}, 200, set()),
    ({"source": {"$nin": []}}, 200, None),
    ({"page": {"$nin": []}}, 200, None),
    ({"page": {"$gt": 9223372036854775808}}, 422, None),
    ({"page": {"$in": [2 ** 64]}}, 422, None),
    ({"$nin": []}, 422, None),
    ({"source": "\ud800"}, 422, None),
])
def test_http_filters_are_an_answer_or_a_422_never_a_500(prog, where, status, cited):
    body = {"question": Q, "options": {"where": where}}  # json.dumps writes "\ud800" as the \u escape
    with client(app_for(prog), raise_server_exceptions=False) as c:
        r = post_json(c, "/v1/ask", json.dumps(body))
        streamed = post_json(c, "/v1/ask", json.dumps({**body, "stream": True}))
    assert r.status_code == status == streamed.status_code, r.text
    if status == 422:
        assert r.json()["field"] == "options.where" and r.json()["error"].startswith("invalid filter")
        assert streamed.json() == r.json()
    elif cited is not None:  # matches nothing: no passage, so the program abstains without an LM call
        assert r.json()["abstained"] is True and {c["chunk_id"] for c in r.json()["citations"]} == cited
    else:  # matches everything
        assert r.json()["answer"] == ANSWER and r.json()["citations"]


def test_http_filter_nested_too_deep_is_a_422(prog):
    where = '{"$or": [' * 40 + '{"page": 1}' + "]}" * 40
    with client(app_for(prog)) as c:
        r = post_json(c, "/v1/ask", '{"question": "x", "options": {"where": ' + where + "}}")
    assert r.status_code == 422 and r.json()["field"] == "options.where" and "nest" in r.json()["error"]


@pytest.mark.parametrize("where, message", [
    ('{"page": {"$gt": 9223372036854775808}}', "values must lie between"),
    ('{"page": {"$in": [18446744073709551616]}}', "values must lie between"),
    ('{"$nin": []}', "unknown field '$nin'"),
    ('{"source": "\\ud800"}', "not valid Unicode"),
    ('{"$and": []}', "non-empty list"),
])
def test_cli_search_with_a_bad_filter_exits_2_with_a_message(capsys, store, where, message):
    code, out, err = run(capsys, "search", "capital", "--store", store.uri, "--mode", "keyword", "--where", where)
    assert code == 2 and err.startswith("error: invalid filter") and message in err and "Traceback" not in out + err


def test_cli_search_with_empty_lists_finds_nothing_or_everything(capsys, store):
    code, out, err = run(capsys, "search", "capital", "--store", store.uri, "--mode", "keyword", "--json",
                         "--where", '{"source": {"$in": []}}')
    assert code == 0 and json.loads(out) == [], err
    code, out, err = run(capsys, "search", "capital", "--store", store.uri, "--mode", "keyword", "--json",
                         "--where", '{"page": {"$nin": []}}')
    assert code == 0 and len(json.loads(out)) == 4, err  # the four "... is the capital of ..." chunks


# -------------------------------------------------------------------- 2. text inputs, checked in one place
@pytest.mark.parametrize("text", INVISIBLE)
def test_text_of_nothing_visible_is_empty(text):
    with pytest.raises(InputError, match="question is empty") as e:
        user_text(text)
    assert e.value.field == "question"


@pytest.mark.parametrize("text, clean", [
    ("  \ufeffWho\x00 is\u200b \n", "Who is"),  # NUL dropped; BOM, zero-width space and whitespace trimmed
    ("e\u0301te\u0301", "\u00e9t\u00e9"),  # NFC
    ("cafe\x00\u0301", "caf\u00e9"),  # controls go before NFC, so the result is stable
    ("a\u200db \u05d0\u200c\u05d1", "a\u200db \u05d0\u200c\u05d1"),  # joiners inside the text are kept
    ("line one\nline\ttwo", "line one\nline\ttwo"),
    ("?", "?"),
    ("\U0001f600", "\U0001f600"),
])
def test_text_is_normalized_once_and_stays_so(text, clean):
    assert user_text(text) == clean and user_text(clean) == clean


@pytest.mark.parametrize("text, words", [
    ("\ud800 who", "lone surrogate (U+D800)"),
    ("who \udfff", "lone surrogate (U+DFFF)"),
    ("caf\udce9", "lone surrogate (U+DCE9)"),  # an undecodable command-line byte
    (b"who", "must be a string"),
    (None, "must be a string"),
])
def test_invalid_text_is_refused_naming_the_field(text, words):
    with pytest.raises(InputError, match=re.escape(words)) as e:
        user_text(text, "query")
    assert e.value.field == "query" and str(e.value).startswith("query ")


def test_the_limit_counts_the_normalized_text():
    assert user_text("\x00" * 50 + "abc", limit=3) == "abc"
    with pytest.raises(InputError, match="4 characters long; the limit is 3"):
        user_text("abcd", limit=3)


@pytest.mark.parametrize("question", ["\ud800 who", *INVISIBLE])
def test_http_bad_questions_are_422_json_and_reach_no_lm(prog, question):
    lm = CountingLM()
    parts = [{"type": "text", "text": question}]
    bodies = [("/v1/ask", {"question": question}), ("/v1/ask", {"question": question, "stream": True}),
              ("/v1/chat/completions", {"model": "demo", "messages": [{"role": "user", "content": question}]}),
              ("/v1/chat/completions", {"model": "demo", "stream": True, "messages": [{"role": "user",
                                                                                      "content": parts}]})]
    with client(app_for(prog, lm=lm)) as c:  # json.dumps writes "\ud800" as JSON's \u escape, as a client sends it
        replies = [post_json(c, path, json.dumps(body)) for path, body in bodies]
        metrics = c.get("/metrics").text
    for r, field in zip(replies, ("question", "question", "messages", "messages"), strict=True):
        assert r.status_code == 422 and r.json()["field"] == field, r.text
        want = f"{field} is empty" if question in INVISIBLE else f"{field} is not valid Unicode"
        assert r.json()["error"].startswith(want), r.json()
    assert lm.calls == 0 and "internal" not in metrics
    assert 'declrag_errors_total{kind="invalid",route="/v1/ask"} 2.0' in metrics


def test_http_question_is_normalized_before_the_program_and_the_cache(prog):
    lm = CountingLM()
    with client(app_for(prog, lm=lm, cache_threshold=0.999)) as c:
        first = post_json(c, "/v1/ask", json.dumps({"question": "\u200b " + Q + "\x00"})).json()
        again = c.post("/v1/ask", json={"question": Q}).json()
    assert first["answer"] == ANSWER and again["cache"]["hit"] is True and lm.calls == 1


def test_python_api_refuses_bad_questions_before_any_lm_call(prog):
    lm = ScriptedLM({}, {"answer": ANSWER})
    from declrag.lm import using_lm

    with using_lm(lm):
        for bad, words in (("\ud800 who", "lone surrogate"), ("\x00\u200b", "question is empty")):
            with pytest.raises(InputError, match=words):
                prog(question=bad)
        with pytest.raises(DeclragError, match="values must lie between"):
            prog(question=Q, where={"page": {"$gt": 2 ** 63}})
        assert not lm.history  # none of these reached the LM
        assert prog(question="\ufeff" + Q + "\x00").question == Q
    assert lm.history


def test_declrag_search_checks_the_query(store):
    for bad, words in (("\ud800", "lone surrogate"), ("\u200b\x00", "query is empty")):
        with pytest.raises(InputError, match=words):
            declrag.search(bad, store.uri, embedder=HashEmbedder())
    assert declrag.search("\x00capital\u200b", store.uri, embedder=HashEmbedder())


def test_cli_bad_text_exits_2_before_any_model_loads(capsys, tmp_path, store):
    code, out, err = run(capsys, "search", "caf\udce9", "--store", store.uri, "--mode", "keyword")
    assert code == 2 and "query is not valid Unicode" in err and "Traceback" not in out + err
    code, out, err = run(capsys, "search", "\u200b\x00", "--store", store.uri, "--mode", "keyword")
    assert code == 2 and "query is empty" in err
    # ask checks the question before it even looks for a store or loads a model
    code, out, err = run(capsys, "ask", "\x00\u200b", "--store", str(tmp_path / "no-store"))
    assert code == 2 and "question is empty" in err and "no declrag store" not in err


# ------------------------------------------------------------------ 3. missing paths and empty configs
def test_index_of_a_missing_path_exits_2_and_creates_no_store(capsys, tmp_path):
    target = tmp_path / "store"
    (tmp_path / "real.txt").write_text("Real text.")
    for args in (["missing.txt"], [str(tmp_path / "real.txt"), str(tmp_path / "nope" / "x.md")]):
        code, out, err = run(capsys, "index", *args, "--store", str(target), "-q")
        assert code == 2 and "no such file or folder" in err and args[-1] in err, err
        assert "Traceback" not in out + err and not target.exists()


def test_index_still_skips_files_that_exist_but_cannot_be_loaded(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.txt").write_text("Wind turbines turn moving air into electricity.")
    (docs / "junk.pdf").write_bytes(b"not a pdf at all")
    (docs / "empty.txt").write_text("")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 4)
    report = declrag.index([docs / "ok.txt", docs / "junk.pdf", docs / "empty.txt", docs / "binary.txt"],
                           store=tmp_path / "store", embedder=HashEmbedder(), progress=False)
    assert report.added == 1
    assert {s.path.rsplit("/", 1)[-1] for s in report.skipped} == {"junk.pdf", "empty.txt", "binary.txt"}
    assert all(s.reason for s in report.skipped)


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n", "---\n"])
def test_an_empty_config_file_is_an_error_not_the_default(tmp_path, content):
    f = tmp_path / "program.yaml"
    f.write_text(content)
    with pytest.raises(DeclragError, match="is empty") as e:
        read_config(f)
    assert str(f) in str(e.value) and e.value.hint


def test_config_files_that_are_not_text_or_not_a_mapping_are_clear_errors(tmp_path, capsys):
    (tmp_path / "explicit.yaml").write_text("{}\n")
    assert read_config(tmp_path / "explicit.yaml") == ProgramConfig()  # {} says "the defaults" on purpose
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00k: 1")
    with pytest.raises(DeclragError, match="not UTF-8"):
        read_config(tmp_path / "binary.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(DeclragError, match="top level"):
        read_config(tmp_path / "list.yaml")
    (tmp_path / "empty.yaml").write_text("")
    code, out, err = run(capsys, "ask", Q, "--config", str(tmp_path / "empty.yaml"))
    assert code == 2 and "is empty" in err and "Traceback" not in out + err


# ------------------------------------------------------------------------ 4. API keys no client can send
@pytest.mark.parametrize("key, words", [("clé-secret", "U+00E9"), ("s3cret key", "a space"), ("tab\tkey", "U+0009"),
                                        ("k\udcff", "byte 0xFF"), ("", "is empty")])
def test_a_key_no_header_can_carry_is_refused_at_start_up(key, words):
    assert words in (api_key_problem(key) or "")
    with pytest.raises(ValidationError) as e:
        ServeSettings(api_key=key)
    assert words in str(e.value) and (not key or key not in str(e.value))  # the key itself is never shown


def test_cli_serve_refuses_such_a_key_from_the_file_or_the_environment(capsys, tmp_path, monkeypatch, store):
    f = tmp_path / "key.txt"
    f.write_text("clé-secrète\n", encoding="utf-8")
    code, out, err = run(capsys, "serve", "--store", store.uri, "--api-key-file", str(f))
    assert code == 2 and str(f) in err and "visible ASCII" in err and "clé" not in err
    f.write_bytes(b"\xffkey")
    code, out, err = run(capsys, "serve", "--store", store.uri, "--api-key-file", str(f))
    assert code == 2 and "not UTF-8" in err and "Traceback" not in out + err
    monkeypatch.setenv("DECLRAG_API_KEY", "naïve")
    code, out, err = run(capsys, "serve", "--store", store.uri)
    assert code == 2 and "$DECLRAG_API_KEY" in err and "naïve" not in err


def test_an_ascii_key_authenticates_and_a_non_ascii_header_does_not(prog):
    with client(app_for(prog, api_key=KEY)) as c:
        assert c.post("/v1/ask", json={"question": Q}, headers=auth()).status_code == 200
        r = c.post("/v1/ask", json={"question": Q},
                   headers=[(b"authorization", "Bearer clé".encode("latin-1"))])
        assert r.status_code == 401 and r.json() == {"error": "unauthorized"}


# ---------------------------------------------------------------- 5. every malformed request: JSON errors
@pytest.mark.parametrize("body, words", [
    (b'{"question": "x", "options": {"where": ' + b"[" * 5000 + b"]" * 5000 + b"}}", "nested too deeply"),
    (b"[" * 20000 + b"]" * 20000, "nested too deeply"),
    (b'{"question": "\xff\xfe who"}', "not UTF-8"),
    (b'\xef\xbb\xbf{"question": "x"}' + b"\x80", "not UTF-8"),
    (b'{"question": "x", "options": {"where": {"page": ' + b"9" * 5000 + b"}}}", "number is too long"),
])
def test_bodies_json_cannot_read_get_the_json_error_format(prog, body, words):
    with client(app_for(prog, max_body_bytes=100_000)) as c:
        replies = [c.post(path, content=body, headers={"content-type": "application/json"})
                   for path in ("/v1/ask", "/v1/chat/completions")]
        metrics = c.get("/metrics").text
    for r in replies:
        assert r.status_code == 422 and r.json() == {"error": r.json()["error"], "field": "body"}, r.text
        assert words in r.json()["error"]
    assert 'declrag_errors_total{kind="invalid",route="/v1/ask"} 1.0' in metrics and 'kind="http"' not in metrics


def test_a_wrong_chat_model_is_404_counted_as_its_own_kind(prog):
    with client(app_for(prog)) as c:
        r = c.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": Q}]})
        metrics = c.get("/metrics").text
    assert r.status_code == 404 and r.json()["field"] == "model" and "'demo'" in r.json()["error"]
    assert 'declrag_errors_total{kind="unknown_model",route="/v1/chat/completions"} 1.0' in metrics
    assert 'kind="invalid"' not in metrics


@pytest.mark.parametrize("change, field, words", [
    ({"stream": "yes"}, "stream", "valid boolean"),
    ({"stream": 1}, "stream", "valid boolean"),
    ({"model": 5}, "model", "valid string"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": {"value": Q}}]}]}, "messages.content",
     "text part's text must be a string"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages.content",
     "text part's text must be a string"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages.content", "must be a string"),
    ({"messages": [{"role": "user", "content": [{"text": Q}]}]}, "messages.content", "string type"),
    ({"messages": [{"role": "user", "content": [Q]}]}, "messages.content", "string type"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages.content", "a string or a list of content parts"),
])
def test_chat_requests_are_as_strict_as_openai(prog, change, field, words):
    with client(app_for(prog)) as c:
        r = c.post("/v1/chat/completions", json={"model": "demo", "messages": [{"role": "user", "content": Q}],
                                                 **change})
    assert r.status_code == 422 and r.json()["field"] == field and words in r.json()["error"], r.text


def test_chat_accepts_what_openai_accepts(prog):
    lm = CountingLM()
    with client(app_for(prog, lm=lm)) as c:
        null_stream = c.post("/v1/chat/completions", json=chat_body(stream=None))
        parts = c.post("/v1/chat/completions", json=chat_body(content=[
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}, {"type": "text", "text": Q}]))
        ask = c.post("/v1/ask", json={"question": Q, "stream": "true"})
    assert null_stream.status_code == 200 and null_stream.json()["object"] == "chat.completion"
    assert parts.status_code == 200 and parts.json()["choices"][0]["message"]["content"] == ANSWER
    assert ask.status_code == 422 and ask.json()["field"] == "stream"  # /v1/ask's stream is a boolean too
    assert lm.calls == 2


def test_an_error_message_that_echoes_a_lone_surrogate_still_encodes():
    r = error_response(422, "unknown field \ud800", "options.\udfff")
    assert json.loads(r.body) == {"error": "unknown field \\ud800", "field": "options.\\udfff"}
