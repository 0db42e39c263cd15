"""Fuzzing (issue 15): Hypothesis strategies for the filter language and for questions, and schemathesis against
the server's own OpenAPI schema, so that no input reaches a 500 or a traceback.

- Filters: any filter `Filter` accepts runs on every backend and every kind of read without an exception, and
  the chunks returned are exactly those `Filter.matches` (the reference) accepts; a filter it refuses is a
  `DeclragError` from every read. The embedded store always; Weaviate where the suite has a server (marker
  ``weaviate``), with fewer examples.
- Questions (arbitrary unicode: lone surrogates, NUL, zero-width and control characters, very long text): the
  Python API answers or raises `DeclragError`, never anything else; a question with nothing visible in it is
  refused before any LM call; ``/v1/ask`` and ``/v1/chat/completions`` answer 200 or a 4xx JSON error.
- The HTTP API: every route of ``app.openapi()``, schema-valid and schema-violating requests (schemathesis, in
  process over ASGI), and raw requests (any method, path, headers and bytes), with and without the API key: no
  5xx, and every error is a JSON object with an ``error`` message.

Bounded: each fuzzer has a fixed number of examples (``DECLRAG_FUZZ_SCALE=10`` runs ten times as many) and no
per-example deadline (the machine may be busy). Each one prints, with ``-s`` (or ``-rP``), how many cases it
ran, in how long, and the seed; ``DECLRAG_FUZZ_SEED=<seed>`` replays a run exactly (a failure says so too).
Hypothesis keeps no example database here: the tests write nothing outside their temporary folders.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.lm import using_lm
from declrag.pipeline.program import Answer, RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.stores.base import FILTER_FIELDS, INT_MAX, INT_MIN, LIST_FIELDS, Filter, StoreMeta
from declrag.stores._lancedb import LanceStore
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.testing.store_contract import corpus
from declrag.types import Chunk, Document

SEED = int(os.environ.get("DECLRAG_FUZZ_SEED") or random.SystemRandom().randrange(2 ** 32))
SCALE = float(os.environ.get("DECLRAG_FUZZ_SCALE") or 1)
ANSWER = "Rome is the capital of Italy [1]."
KEY = "fuzz-s3cret"
NAME = "demo"


@pytest.fixture(scope="module", autouse=True)
def _hypothesis_home(tmp_path_factory):
    """Hypothesis' caches (unicode tables, constants) in a temporary folder, not ./.hypothesis."""
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


def fuzz(name: str, strategy: st.SearchStrategy, examples: int, check: Callable[[Any], Any]) -> int:
    """Run ``check`` on ``examples`` (times ``DECLRAG_FUZZ_SCALE``) values of ``strategy``, seeded by SEED; print
    the count, the time, the outcomes (what ``check`` returns, e.g. a status code) and the seed. Returns the
    number of cases run (shrinking included)."""
    n, t0, outcomes = [0], time.perf_counter(), Counter()

    @seed(SEED)
    @settings(max_examples=max(1, round(examples * SCALE)), deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(value):
        n[0] += 1
        note(f"input: {value!r}"[:2000])
        outcome = check(value)
        if outcome is not None:
            outcomes[outcome] += 1

    try:
        run()
    except BaseException as e:
        e.add_note(f"fuzz {name}: replay with DECLRAG_FUZZ_SEED={SEED}")
        raise
    finally:
        seen = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1]))
        print(f"\n[fuzz] {name}: {n[0]} cases in {time.perf_counter() - t0:.1f} s{f' ({seen})' if seen else ''}, "
              f"DECLRAG_FUZZ_SEED={SEED}")
    return n[0]


# ------------------------------------------------------------------------------------------ the corpus
def build(store) -> list[dict]:
    """The contract corpus plus a chunk without a page, written into a new ``store``; returns the chunks as
    the mappings `Filter.matches` reads."""
    emb = HashEmbedder()
    store.create(StoreMeta(backend=store.backend))
    docs, chunks, vecs = corpus(emb)
    store.upsert(docs, chunks, vecs)
    doc = Document(id="nopage", text="A page-less note about capitals.", source="/data/nopage.txt", title="Note")
    c = Chunk(id="nopage#0", doc_id="nopage", text=doc.text, start=0, end=len(doc.text), position=0,
              source=doc.source, title="Note", page=None)
    store.upsert([doc], [c], emb.embed_documents([c.text]))
    return [{f: getattr(x, f) for f in FILTER_FIELDS} for x in chunks + [c]]


def stored_values(records: list[dict], field: str) -> list:
    """The values ``field`` holds among ``records``, a list field's (readers) each name of them."""
    held = [v for r in records if r[field] is not None for v in (r[field] if field in LIST_FIELDS else [r[field]])]
    return sorted(set(held)) or ["*unlabelled"]


# a query naming a word of every chunk: keyword search then returns every chunk the filter passes
QUERY = " ".join(["Paris", "Eiffel", "France", "Berlin", "Brandenburg", "Rome", "Colosseum", "fountains",
                  "Tokyo", "Fuji", "capitals"])

# ------------------------------------------------------------------------------------ filter strategies
OPS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]
EDGE_INTS = [0, -1, 1, INT_MIN, INT_MAX, INT_MIN + 1, INT_MAX - 1]
OUT_OF_RANGE = [INT_MIN - 1, INT_MAX + 1, 2 ** 53, 2 ** 63, 2 ** 63 - 1, -(2 ** 63) - 1, 2 ** 64, 10 ** 30, -(10 ** 30)]
EDGE_STRS = ["", " ", "'", "''", '"', "`", "\\", "%", "_", "*", "a' OR '1'='1", "Rome", "rome", " Rome", "ROME",
             "/data/rome.txt ", "rome#0\n", "\u200b", "é", "e\u0301", "\U0001f600", "\uffff", "x" * 300, "Paris\x01",
             "\ud800", "Rome\udfff"]  # lone surrogates: not valid Unicode, which a store cannot hold
ANY_CHAR = st.characters(codec=None, exclude_categories=())  # every code point, lone surrogates included
# values the validator refuses: another type, an integer out of range, a NUL in a string
WRONG = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                  st.sampled_from(["\x00", "Rome\x00"]), st.sampled_from(OUT_OF_RANGE),
                  st.integers().filter(lambda i: not INT_MIN <= i <= INT_MAX))


def values(field: str, records: list[dict], wrong: bool) -> st.SearchStrategy:
    """Values to compare ``field`` with: of its type (stored ones, near misses of them, edge cases, anything in
    range, odd text), and with ``wrong`` sometimes not (see WRONG)."""
    stored = st.sampled_from(stored_values(records, field))  # the most, so that filters match some chunks
    if FILTER_FIELDS[field] is int:
        right = st.one_of(stored, stored, stored, st.sampled_from(EDGE_INTS), st.integers(-5, 10),
                          st.integers(INT_MIN, INT_MAX))
    else:
        near = stored.flatmap(lambda v: st.sampled_from([f" {v}", f"{v} ", f"\t{v}", f"{v}\n", v.upper(), v[:-1]]))
        right = st.one_of(stored, stored, stored, near, st.sampled_from(EDGE_STRS), st.text(max_size=12),
                          st.text(ANY_CHAR, max_size=12)).map(lambda t: t.replace("\x00", ""))  # NUL: WRONG has it
    return st.one_of(right, right, right, WRONG) if wrong else right


def condition(field: str, records: list[dict], wrong: bool) -> st.SearchStrategy:
    """What a filter says of one field: a bare value ($eq), or operators with their values."""
    v = values(field, records, wrong)
    listed = st.lists(v, max_size=4)  # empty lists included

    def ops(names: list[str]) -> st.SearchStrategy:
        return st.fixed_dictionaries({op: listed if op in ("$in", "$nin") else v for op in names})

    names = (["$eq", "$ne"] if field in LIST_FIELDS and not wrong else OPS) + ["$in", "$nin"]  # no order on a list
    one = st.sampled_from(names).map(lambda op: [op])
    some = st.one_of(one, one, st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)).flatmap(ops)
    if not wrong:
        return st.one_of(v, some, some, some)
    odd = st.one_of(st.fixed_dictionaries({"$in": v}), st.fixed_dictionaries({"$regex": v}), st.just({}),
                    st.fixed_dictionaries({"$eq": v, "other": v}))
    return st.one_of(v, some, some, some, odd)


def filters(records: list[dict], invalid_one_in: int | None = 4) -> st.SearchStrategy:
    """Filter specs of the language: conditions on the filterable fields, nested $and/$or. About one in
    ``invalid_one_in`` (None: none) may hold something the validator must refuse (another type, an integer out
    of range, a NUL, an unknown field or operator, an empty junction); the others are meant to be valid, bar odd
    text (lone surrogates) that a validator may accept or refuse."""

    def specs(wrong: bool) -> st.SearchStrategy:
        fields = sorted(FILTER_FIELDS)
        names = st.one_of(st.sampled_from(fields).map(lambda f: [f]),
                          st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True))
        leaf = names.flatmap(lambda fs: st.fixed_dictionaries({f: condition(f, records, wrong) for f in fs}))

        def nest(children: st.SearchStrategy) -> st.SearchStrategy:
            parts = st.lists(children, min_size=1, max_size=3)  # junctions of one part included
            junction = st.one_of(st.fixed_dictionaries({"$and": parts}), st.fixed_dictionaries({"$or": parts}))
            return st.one_of(junction, junction, st.tuples(leaf, junction).map(lambda t: {**t[0], **t[1]}),
                             st.fixed_dictionaries({"$and": parts, "$or": parts}))

        tree = st.one_of(leaf, st.recursive(leaf, nest, max_leaves=6))  # small ones often: they match some chunks
        if not wrong:
            return tree
        odd = st.one_of(st.just({}), st.fixed_dictionaries({"colour": st.text(max_size=3)}),
                        st.fixed_dictionaries({"$and": st.just([])}),
                        st.fixed_dictionaries({"$or": st.text(max_size=3)}), st.fixed_dictionaries({"$not": leaf}),
                        tree.map(lambda t: [t]), st.text(max_size=5))
        return st.one_of(tree, tree, odd)

    if invalid_one_in is None:
        return specs(False)
    valid, invalid = specs(False), specs(True)
    return st.sampled_from([False] * (invalid_one_in - 1) + [True]).flatmap(lambda wrong: invalid if wrong else valid)


def valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def accepted(spec: Any) -> Filter | None:
    try:
        return Filter(spec)
    except DeclragError:
        return None


def why_refused(spec: Any) -> DeclragError:
    try:
        Filter(spec)
    except DeclragError as e:
        return e
    raise AssertionError(f"{spec!r} is accepted")


# ------------------------------------------------------------------------------------------- the stores
@pytest.fixture(scope="module", params=["lancedb", pytest.param("weaviate", marks=pytest.mark.weaviate)])
def backend(request, tmp_path_factory):
    """(name, store holding the corpus, its chunks as records, examples per fuzzer)."""
    if request.param == "lancedb":
        store = LanceStore(tmp_path_factory.mktemp("fuzz") / "store")
        yield "lancedb", store, build(store), 150
        return
    from declrag.stores import child_uri
    from declrag.stores.weaviate import WeaviateStore

    store = WeaviateStore(child_uri(request.getfixturevalue("weaviate_url"), f"fuzz{uuid.uuid4().hex[:10]}"))
    try:
        yield "weaviate", store, build(store), 50
    finally:
        store.drop()
        store.close()


def ids(hits) -> set[str]:
    return {h.chunk.id for h in hits}


SEARCH = st.fixed_dictionaries({
    "limit": st.sampled_from([1, 3, 10, 50]), "alpha": st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    "fusion": st.sampled_from(["relative", "ranked"]), "candidates": st.sampled_from([1, 5, 100]),
    "as_filter": st.booleans(), "query": st.sampled_from([QUERY, "capital", "", "the of", "\x00", "Rome\ud800"]),
})


def test_accepted_filters_run_on_every_read(backend):
    """Property A: whatever `Filter` accepts, count and every search run without an exception (and a refused
    filter is a `DeclragError` from each of them, as the `Store` protocol says)."""
    name, store, records, n = backend
    emb = HashEmbedder()

    def check(args):
        spec, how = args
        note(f"filter {spec!r}")
        f = accepted(spec)
        where = f if f is not None and how["as_filter"] else spec
        outcome = "accepted" if f is not None else refusal(why_refused(spec))
        vec = emb.embed_query(how["query"])
        reads = [lambda: store.count(where),
                 lambda: store.keyword_search(how["query"], how["limit"], where),
                 lambda: store.vector_search(vec, how["limit"], where),
                 lambda: store.hybrid_search(how["query"], vec, how["limit"], how["alpha"], how["fusion"],
                                             how["candidates"], where)]
        for i, read in enumerate(reads):
            if f is None:
                with pytest.raises(DeclragError):
                    read()
                continue
            try:
                read()
            except ValueError:
                # a query that is not valid Unicode is the caller's error (every entry point refuses it first):
                # the Store protocol's ValueError, or results
                if not (i in (1, 3) and not valid_unicode(how["query"])):
                    raise
                outcome = "accepted; the query's lone surrogate is a ValueError"
        return outcome

    fuzz(f"filters run ({name})", st.tuples(filters(records), SEARCH), n, check)


def test_filters_return_what_the_reference_matches(backend):
    """Property B: the chunks each read returns are those `Filter.matches` passes over the stored chunks ($in and
    $nin with empty lists, chunks without a page, values out of range or of odd text included)."""
    name, store, records, n = backend
    vec = HashEmbedder().embed_query("capital city")
    consistent_keyword = name == "lancedb"  # Weaviate's BM25 may miss recent writes until it settles (65 s)

    def check(args):
        spec, alpha, fusion = args
        f = accepted(spec)
        if f is None:
            return "refused"
        note(f"filter {spec!r}")
        expected = {r["id"] for r in records if f.matches(r)}
        assert store.count(spec) == len(expected)
        assert ids(store.vector_search(vec, 50, spec)) == expected
        kw = ids(store.keyword_search(QUERY, 50, spec))
        assert kw == expected if consistent_keyword else kw <= expected
        assert ids(store.hybrid_search(QUERY, vec, 50, alpha, fusion, where=spec)) == \
            (expected if alpha > 0 or consistent_keyword else kw)
        return "matches none" if not expected else "matches all" if len(expected) == len(records) else "matches some"

    fuzz(f"filters agree with Filter.matches ({name})",
         st.tuples(filters(records, None), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from(["relative", "ranked"])),
         2 * n, check)


# ------------------------------------------------------------------------------------------ questions
WEIRD = ["\x00", "\ud800", "\udfff", "\udc80", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e",
         "\u2066", "\x7f", "\x1b", "\x01", "\x85", "\r", "\n", "\t", "\x0b", "\u3000", "\u2028", "\u2029", "\xa0",
         "\U000e0001", "\U0001f600", "e\u0301", "\ufffd", "\uffff", "\U0010ffff", "\ud83d\ude00"]
WORDS = ["What is the capital of Italy?", "Rome", "Who built the Colosseum", "?", "capital", "x"]
PIECE = st.one_of(ANY_CHAR, st.sampled_from(WEIRD))  # a code point, or a short odd sequence
INVISIBLE = {"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"}


def text(max_size: int, min_size: int = 0, pieces: st.SearchStrategy = PIECE) -> st.SearchStrategy:
    return st.lists(pieces, min_size=min_size, max_size=max_size).map("".join)


def blank(text: str) -> bool:
    """Nothing to ask: only whitespace, control, format (zero-width, BOM, bidi) and surrogate code points."""
    return all(ch.isspace() or unicodedata.category(ch) in INVISIBLE for ch in text)


def questions(limit: int = 2000) -> st.SearchStrategy:
    invisible = text(30, 1, st.sampled_from([w for w in WEIRD if blank(w)] + [" "]))
    around = st.tuples(text(20), st.sampled_from(WORDS), text(20)).map("".join)
    long = st.tuples(PIECE, st.sampled_from([limit - 1, limit, limit + 1, 20 * limit])).map(lambda t: t[0] * t[1])
    return st.one_of(text(200), invisible, around, around, long)


def counting_lm():
    """A scripted LM that counts its calls (``.calls[0]``)."""
    lm = ScriptedLM({}, {"answer": ANSWER})
    calls = [0]
    base = type(lm)

    class Counting(base):  # type: ignore[misc, valid-type]
        def __call__(self, *args, **kwargs):
            calls[0] += 1
            return super().__call__(*args, **kwargs)

    lm.__class__ = Counting
    lm.calls = calls
    return lm



@pytest.fixture(scope="module")
def prog(store):
    p = RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder())
    p.retrieve_only("warm up")
    return p


def refusal(e: DeclragError) -> str:
    """A refusal as an outcome to count: its message, numbers and quoted parts left out."""
    return "refused: " + re.sub(r"\d+|U\+[0-9A-F]+|'.*'|(?<=got ).*", "N", e.message)[:50]


def ask_python(prog, q: str) -> tuple[Answer | DeclragError, int]:
    lm = counting_lm()
    with using_lm(lm):
        try:
            return prog(question=q), lm.calls[0]
        except DeclragError as e:
            return e, lm.calls[0]


def test_questions_through_the_python_api(prog):
    """Any text: an Answer or a DeclragError, never another exception."""

    def check(q):
        a, _ = ask_python(prog, q)
        assert isinstance(a, Answer | DeclragError)
        if isinstance(a, Answer):
            assert isinstance(a.answer, str) and isinstance(a.citations, list)
        return "answered" if isinstance(a, Answer) else refusal(a)

    fuzz("questions, Python API", questions(prog.config.max_question_chars), 300, check)


def test_blank_questions_are_refused_before_the_lm(prog):
    """A question of nothing but NULs, zero-width, control, format or whitespace characters is a DeclragError,
    and no LM is called for it."""
    only = text(40, 1, st.sampled_from([w for w in WEIRD if blank(w)] + [" "]))
    anything = st.text(st.characters(codec=None, categories=sorted(INVISIBLE)), min_size=1, max_size=40)

    def check(q):
        assert blank(q)
        a, calls = ask_python(prog, q)
        assert isinstance(a, DeclragError), f"answered {a.answer!r} to a blank question" if isinstance(a, Answer) \
            else a
        assert calls == 0
        return "refused"

    fuzz("blank questions refused", st.one_of(only, anything), 100, check)


@pytest.mark.slow
def test_questions_through_the_python_api_with_the_real_embedder(minilm, tmp_path):
    """As above with the default embedding model, whose tokenizer sees the raw text."""
    s = LanceStore(tmp_path / "store")
    s.upsert(*corpus(minilm))
    p = RAGProgram(ProgramConfig(), store=s, embedder=minilm)

    def check(q):
        a, _ = ask_python(p, q)
        assert isinstance(a, Answer | DeclragError)
        return "answered" if isinstance(a, Answer) else refusal(a)

    fuzz("questions, Python API, MiniLM", questions(p.config.max_question_chars), 40, check)


# ------------------------------------------------------------------------------------------------ HTTP
def scripted():
    return lambda: ScriptedLM({}, {"answer": ANSWER})


@contextmanager
def serving(prog, **settings):
    app = create_app(prog, NAME, "runs/demo/best", ServeSettings(**settings), lm_override=scripted())
    with TestClient(app) as c:
        deadline = time.monotonic() + 30
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the program never became ready"
            time.sleep(0.02)
        yield c


def post_json(c, path: str, body: Any, headers: dict | None = None):
    """``body`` as JSON with ASCII escapes (so lone surrogates travel, as ``\\ud800``)."""
    return c.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json",
                                                                   **(headers or {})})


def assert_well_answered(r, method: str = "POST") -> str | int:
    """No 5xx; an error is a JSON object with an ``error`` message; a stream ends with its answer (or a 4xx
    error event), never a 5xx error event. Returns the outcome to count (the status, and the error message)."""
    kind = r.headers.get("content-type") or ""
    kind = kind[0] if isinstance(kind, list) else kind  # schemathesis' Response: header -> list of values
    note(f"{r.status_code} {kind} {r.text[:300]!r}")
    assert r.status_code < 500, r.text[:500]
    if r.status_code >= 400 and method != "HEAD":
        assert kind.startswith("application/json"), kind
        body = r.json()
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
        return f"{r.status_code} " + re.sub(r"\d+|U\+[0-9A-F]+|'.*'", "N", body["error"])[:50]
    if r.status_code == 200 and kind.startswith("text/event-stream"):
        data = [json.loads(line[6:]) for line in r.text.splitlines()
                if line.startswith("data: ") and line != "data: [DONE]"]
        errors = [d for d in data if "error" in d]  # /v1/ask: {error, status}; chat: {error: {message, code}}
        assert all((e["error"]["code"] if isinstance(e["error"], dict) else e["status"]) < 500 for e in errors), errors
        assert errors or "[DONE]" in r.text or "event: answer" in r.text, r.text[-300:]
        return "200 stream" if not errors else "200 stream, error event"
    return r.status_code


@pytest.fixture(scope="module")
def http(prog):
    """A TestClient on the app. (Without the semantic cache: an answer cached for one example would hide what
    the program does with the next, and make failures unreproducible.)"""
    with serving(prog) as c:
        yield c


def test_questions_through_ask(http):
    """Any text as ``/v1/ask``'s question, streamed or not: 200 with an answer, or a 4xx JSON error."""

    def check(args):
        q, stream = args
        r = post_json(http, "/v1/ask", {"question": q, "stream": stream})
        outcome = assert_well_answered(r)
        if r.status_code == 200 and not stream:
            assert isinstance(r.json()["answer"], str) and isinstance(r.json()["citations"], list), r.text
        return outcome

    fuzz("questions, /v1/ask", st.tuples(questions(), st.booleans()), 200, check)


def test_questions_through_chat_completions(http):
    """Any text as the user message (a string, or a text part), streamed or not: 200 or a 4xx JSON error."""
    content = st.one_of(questions(), questions().map(lambda q: [{"type": "text", "text": q}]))

    def check(args):
        q, stream = args
        body = {"model": NAME, "messages": [{"role": "user", "content": q}], "stream": stream}
        r = post_json(http, "/v1/chat/completions", body)
        outcome = assert_well_answered(r)
        if r.status_code == 200 and not stream:
            assert isinstance(r.json()["choices"][0]["message"]["content"], str), r.text
        return outcome

    fuzz("questions, /v1/chat/completions", st.tuples(content, st.booleans()), 200, check)


def test_filters_through_ask(http):
    """A filter the validator refuses is a 422 naming options.where; one it accepts is answered."""
    records = [{f: getattr(c, f) for f in FILTER_FIELDS} for c in corpus(HashEmbedder())[1]]

    def check(spec):
        r = post_json(http, "/v1/ask", {"question": "What is the capital of Italy?", "options": {"where": spec}})
        assert_well_answered(r)
        if accepted(spec) is None:
            assert r.status_code == 422 and r.json().get("field") == "options.where", r.text
        else:
            assert r.status_code == 200, r.text
        return r.status_code

    fuzz("filters, /v1/ask", filters(records), 100, check)


# ----------------------------------------------------------------------------- the API: schema and raw
HEADER_TEXT = st.text(st.characters(codec="latin-1", exclude_categories=("Cc",)), max_size=40).map(str.strip)
# no Authorization header, or a wrong or malformed one
WRONG_AUTH = st.one_of(st.just({}), HEADER_TEXT.map(lambda v: {"Authorization": v}),
                       HEADER_TEXT.map(lambda v: {"Authorization": f"Bearer {v}"}))


def right_auth(key: str) -> st.SearchStrategy:
    """The right key: ``Bearer`` in any case, spaces around the key."""
    return st.sampled_from([f"Bearer {key}", f"bearer {key}", f"BEARER  {key} "]).map(lambda v: {"Authorization": v})


@pytest.fixture(scope="module", params=[None, KEY], ids=["open", "with-key"])
def key(request) -> str | None:
    return request.param


@pytest.fixture(scope="module")
def asgi_app(key, prog):
    """An app for schemathesis' in-process ASGI transport (which runs the app's lifespan itself), ready."""
    from schemathesis.python import asgi

    app = create_app(prog, NAME, "runs/demo/best", ServeSettings(api_key=key), lm_override=scripted())
    with asgi.get_client(app) as c:
        deadline = time.monotonic() + 30
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the program never became ready"
            time.sleep(0.02)
    yield app
    asgi.shutdown_lifespans()


def test_every_route_of_the_openapi_schema(asgi_app, key):
    """schemathesis, positive (schema-valid) and negative (schema-violating) requests for every operation of
    the app's own OpenAPI schema, on an app with and one without a key: no 5xx, errors are JSON, and with a key
    every route but the open ones answers 401 exactly when the right key is missing."""
    import schemathesis
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_asgi("/openapi.json", asgi_app,
                                            headers={"Authorization": f"Bearer {key}"} if key else {})
    ops = [r.ok() for r in schema.get_all_operations()]
    assert {op.path for op in ops} >= {"/v1/ask", "/v1/chat/completions", "/v1/models", "/healthz", "/readyz",
                                       "/metrics", "/"}
    total = 0

    def call(case, headers: dict, served: bool):
        if served and isinstance(case.body, dict) and "model" in case.body:
            case.body["model"] = NAME  # else /v1/chat/completions is mostly a 404 for another model
        note(f"{case.method} {case.path} body={case.body!r} headers={headers!r}")
        return case.call(headers=headers)

    for op in ops:  # with the right key, if there is one (and without or with a junk header, if not)
        for mode in [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if op.body else []):
            def check(args):
                case, headers, served = args
                r = call(case, headers, served)
                assert r.status_code != 401, r.text[:200]
                return assert_well_answered(r, case.method)

            total += fuzz(f"schemathesis {mode.value} {op.method.upper()} {op.path} (key={bool(key)})",
                          st.tuples(op.as_strategy(generation_mode=mode), right_auth(key) if key else WRONG_AUTH,
                                    st.booleans()), 50 if op.body else 5, check)
    if key:  # every operation, without the key or with a wrong one: 401 but on the open routes
        def refused(args):
            case, headers, served = args
            r = call(case, headers, served)
            assert (r.status_code == 401) is (case.path not in ("/", "/healthz", "/readyz")), r.text[:200]
            return assert_well_answered(r, case.method)

        total += fuzz("schemathesis, every operation without the right key",
                      st.tuples(schema.as_strategy(generation_mode=GenerationMode.POSITIVE), WRONG_AUTH,
                                st.booleans()), 40, refused)
    print(f"[fuzz] schemathesis, every operation (key={bool(key)}): {total} cases")


PATHS = ["/", "/healthz", "/readyz", "/metrics", "/v1/ask", "/v1/chat/completions", "/v1/models", "/openapi.json",
         "/docs", "/nope", "/v1/ask/", "//v1/ask", "/v1/%00", "/v1/ask?x=1", "/%ff"]


KEYS = st.one_of(text(6), st.sampled_from(["question", "options", "where", "stream", "model", "messages", "role",
                                             "content", "type", "text", "user", "page", "$in"]))
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text(30)),
                    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(KEYS, c, max_size=4)), max_leaves=12)


def json_bodies() -> st.SearchStrategy:
    """JSON documents for the two POST routes: near-valid requests with odd members, and anything at all."""
    ask = st.fixed_dictionaries({"question": st.one_of(text(40), JSON)},
                                optional={"options": st.one_of(JSON, st.fixed_dictionaries({"where": JSON})),
                                          "stream": JSON, "extra": JSON})
    message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", ""]),
                                     "content": st.one_of(text(40), JSON, st.lists(st.fixed_dictionaries(
                                         {"type": st.sampled_from(["text", "image_url", ""]), "text": JSON})))})
    chat = st.fixed_dictionaries({"messages": st.one_of(st.lists(message, max_size=3), JSON)},
                                 optional={"model": st.sampled_from([NAME, "", "gpt-4o"]), "stream": JSON,
                                           "temperature": JSON})
    return st.tuples(st.one_of(ask, chat, JSON), st.booleans()).map(
        lambda t: json.dumps(t[0], ensure_ascii=t[1]).encode("utf-8", "surrogatepass"))


def raw_bodies() -> st.SearchStrategy:
    depth = st.integers(1, 200_000)
    return st.one_of(
        json_bodies(), json_bodies(), json_bodies(), st.binary(max_size=200),
        text(100).map(lambda s: s.encode("utf-8", "surrogatepass")),
        depth.map(lambda n: b"[" * n + b"]" * n), depth.map(lambda n: b'{"question": ' + b"[" * n),
        depth.map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
        st.sampled_from([b'{"question": "\\ud800 who"}', b'{"question": "\xff\xfe"}', b'{"question": "x"}' * 2,
                         b'{"question": 1e999}', b'{"question": NaN}', b'\xef\xbb\xbf{"question": "x"}',
                         b'{"model": "demo", "messages": [{"role": "user", "content": {"text": "x"}}]}',
                         b'{"model": "demo", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
                         b'{"question": "x", "options": {"where": {"page": {"$gt": 9223372036854775808}}}}',
                         b'{"question": "x", "options": {"where": {"source": {"$in": []}}}}']))


def test_raw_requests(prog, key):
    """Any method, path, content type and body bytes (not JSON, not UTF-8, deeply nested, huge numbers), with
    any Authorization header: no 5xx, errors are JSON."""
    anything = st.tuples(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]),
                         st.sampled_from(PATHS))
    posts = st.tuples(st.just("POST"), st.sampled_from(["/v1/ask", "/v1/chat/completions"]))
    target = st.sampled_from([True] * 3 + [False]).flatmap(lambda post: posts if post else anything)
    auth = st.sampled_from([True] * 3 + [False]).flatmap(lambda ok: right_auth(key) if key and ok else WRONG_AUTH)
    ctype = st.sampled_from(["application/json"] * 6 + [
        "text/plain", "application/x-www-form-urlencoded", "", "application/json; charset=latin-1",
        "application/json; charset=utf-16", "multipart/form-data; boundary=x"])
    with serving(prog, api_key=key, max_body_bytes=4 << 20) as c:
        def check(args):
            (method, path), content_type, body, headers = args
            note(f"{method} {path} {content_type!r} {body[:200]!r} {headers!r}")
            hs = {k: v.encode("latin-1") for k, v in headers.items()}
            if content_type:
                hs["content-type"] = content_type.encode()
            return assert_well_answered(c.request(method, path, content=body, headers=hs), method)

        fuzz(f"raw requests (key={bool(key)})",
             st.tuples(target, ctype, raw_bodies(), auth), 300, check)


def test_an_accepted_api_key_authenticates(prog):
    """Any API key the server accepts at start-up lets a client in that sends it (as UTF-8, as curl and the
    OpenAI client do); a key no client could send is refused at start-up."""

    def check(k):
        try:
            app = create_app(prog, NAME, settings=ServeSettings(api_key=k), lm_override=scripted())
        except (DeclragError, ValueError):  # pydantic's ValidationError is a ValueError
            return "refused at start-up"
        with TestClient(app) as c:
            r = c.get("/v1/models", headers={"Authorization": b"Bearer " + k.encode("utf-8", "surrogatepass")})
            assert r.status_code == 200, (k, r.status_code, r.text)
        return "authenticates"

    keys = st.one_of(st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=1, max_size=20),
                     text(20, min_size=1),
                     st.sampled_from(["clé-secrète", "ключ", "🔑", " k ", "k\n"]))
    fuzz("API keys", keys, 40, check)
