"""The leak suite: callers with overlapping groups ask every HTTP route (/v1/ask whole and streamed, /v1/search,
/v1/chat/completions whole and streamed) and the CLI (`declrag ask --as`) questions made of other groups' canary words, document names and authors,
with filters that try to widen their scope; no byte of a document a caller may not read comes back, and a caller
still gets ``k`` passages where their documents allow. Answers are extractive (the passages' own sentences), so a
passage a caller should not see would show in the answer itself."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from declrag.access import AccessSettings, KeysFile
from declrag.config import ProgramConfig
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.stores import child_uri, connect
from declrag.stores.base import Store, StoreMeta
from declrag.testing import HashEmbedder
from declrag.types import Chunk, Document

# each document: its readers, its author, and sentences that each hold its canary word (any piece of it holds one)
DOCS = {
    "hr-salaries": (("hr",), "Hilda Rasmussen", "QUOKKA", [
        "The QUOKKA salary band for senior engineers is capped at 180,000 euros in 2026.",
        "Bonuses in the QUOKKA plan are paid each March after the review.",
        "QUOKKA pay reviews are approved by the board every spring."]),
    "eng-deploys": (("eng",), "Edgar Nakamura", "PANGOLIN", [
        "PANGOLIN deploys run canary releases every Tuesday at noon.",
        "The PANGOLIN pipeline rolls back a release when the error rate doubles.",
        "Every PANGOLIN service is deployed from the main branch."]),
    "fin-budget": (("exec", "fin"), "Fatima Oyelaran", "NARWHAL", [
        "The NARWHAL budget for the third quarter is 4.2 million euros.",
        "NARWHAL spending on marketing rose by twelve percent in 2026.",
        "The NARWHAL forecast expects revenue of 30 million euros."]),
    "exec-plans": (("exec",), "Ezra Lindqvist", "AXOLOTL", [
        "The AXOLOTL plan is to acquire a competitor in Lisbon next year.",
        "AXOLOTL talks with the board end in June.",
        "The AXOLOTL deal is valued at 90 million euros."]),
    "handbook": (("*",), "Hana Okafor", "", [
        "The office opens at 8 am and closes at 6 pm.",
        "Visitors sign in at the front desk in the lobby.",
        "Lunch is served in the canteen at noon every day."]),
    "old-notes": ((), "Otto Brandt", "WOMBAT", [
        "WOMBAT notes from the 2019 offsite mention a budget of 3 million euros.",
        "The WOMBAT offsite was held in Porto in the spring.",
        "WOMBAT minutes were kept by the secretary."]),
}
CALLERS = {"alice": "hr", "bob": "eng,fin", "carol": "exec,fin", "dave": "ops"}  # bob and carol share fin
ROUTES = ["ask", "ask-stream", "search", "chat", "chat-stream", "cli"]  # cli: declrag ask --as CALLER


def readable(caller: str, unlabelled: str) -> set[str]:
    groups = set(CALLERS[caller].split(","))
    return {d for d, (readers, *_) in DOCS.items()
            if "*" in readers or groups & set(readers) or (not readers and unlabelled == "everyone")}


def forbidden_marks(caller: str, unlabelled: str) -> list[str]:
    """What must never reach ``caller``: each unreadable document's canary, author, id and distinctive sentences."""
    out = []
    for d in set(DOCS) - readable(caller, unlabelled):
        _, author, canary, sentences = DOCS[d]
        out += [x for x in (canary, author, d) if x] + [s[:40] for s in sentences]
    return out


def corpus_store(where: str, emb=None) -> Store:
    """The corpus in a new store: a LanceDB folder, or a Weaviate collection (``weaviate://``); embedded by ``emb``
    (default: `HashEmbedder`)."""
    emb, st_ = emb or HashEmbedder(), connect(where)
    st_.create(StoreMeta(backend=st_.backend))
    docs, chunks = [], []
    for d, (readers, author, _, sentences) in DOCS.items():
        text = f"By {author}.\n" + "\n".join(sentences)
        doc = Document(d, text, source=f"/corpus/{d}.md", title=d.replace("-", " ").title(), readers=readers)
        docs.append(doc)
        # one chunk per sentence, the author line with the first: every chunk holds the canary
        for i, s in enumerate(sentences):
            start = text.index(s) if i else 0
            chunks.append(Chunk(f"{d}#{i}", d, text[start:text.index(s) + len(s)], start, text.index(s) + len(s), i,
                                source=doc.source, title=doc.title, readers=readers))
    st_.upsert(docs, chunks, emb.embed_documents([c.text for c in chunks]))
    return st_


@pytest.fixture(scope="module", params=["lancedb", pytest.param("weaviate", marks=pytest.mark.weaviate)])
def served(request, tmp_path_factory):
    """Two servers over one store (unlabelled documents read by nobody, and by everyone), each with its callers'
    keys: ``{policy: (TestClient, {caller: key})}``; on the embedded store and on a live Weaviate."""
    folder = tmp_path_factory.mktemp("leaks")
    if request.param == "weaviate":
        base = request.getfixturevalue("weaviate_url")
        store = corpus_store(child_uri(base, f"leaks{uuid.uuid4().hex[:10]}"))
        request.addfinalizer(store.drop)
    else:
        store = corpus_store(str(folder / "store"))
    keys = KeysFile(folder / "keys.yaml")
    tokens = {name: keys.add(name, groups) for name, groups in CALLERS.items()}
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive"}, "retrieve": {"k": 3}})
    out = {}
    try:
        for policy in ("nobody", "everyone"):
            prog = RAGProgram(cfg, store=store, embedder=HashEmbedder())
            app = create_app(prog, "leaks", None, ServeSettings(access=AccessSettings(
                keys_file=folder / "keys.yaml", unlabelled=policy)))
            client = TestClient(app)
            client.__enter__()
            while client.get("/readyz").status_code != 200:
                pass
            out[policy] = (client, tokens)
            client.cli = (prog, folder / "keys.yaml", policy)  # type: ignore[attr-defined]  # `ask_as`'s
        yield out
    finally:
        for client, _ in out.values():
            client.__exit__(None, None, None)


def ask_as(client: TestClient, caller: str, question: str, where: dict | None) -> str:
    """``declrag ask QUESTION --as CALLER --keys FILE --unlabelled POLICY --json`` (its own code, in this process) on
    the server's program (the command's choice of program stood in for: the store's embedder is a test one); what it
    printed, standard output and error."""
    import contextlib
    import io
    from types import SimpleNamespace
    from unittest import mock

    from declrag.cli import main

    prog, keys, policy = client.cli  # type: ignore[attr-defined]
    args = ["ask", question, "--as", caller, "--keys", str(keys), "--unlabelled", policy, "--json",
            *(["--where", json.dumps(where)] if where else [])]
    printed, said = io.StringIO(), io.StringIO()
    with mock.patch("declrag.answering.selection.select_program", lambda *a, **k: SimpleNamespace(
            load=lambda: prog, name="leaks")), contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
        code = main(args)
    assert code in (0, 2), (code, said.getvalue()[-300:])
    return printed.getvalue() + said.getvalue()


def call(client: TestClient, route: str, key: str, question: str, where: dict | None, caller: str = "") -> str:
    """One request on ``route``; the whole response body as text (every streamed event included)."""
    h = {"Authorization": f"Bearer {key}"}
    if route == "cli":
        return ask_as(client, caller, question, where)
    if route.startswith("ask"):
        body = {"question": question, **({"options": {"where": where}} if where else {}),
                **({"stream": True} if route == "ask-stream" else {})}
        r = client.post("/v1/ask", json=body, headers=h)
    elif route == "search":
        r = client.post("/v1/search", json={"query": question, "k": 3, **({"where": where} if where else {})},
                        headers=h)
    else:
        r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": question}],
                                                      **({"stream": True} if route == "chat-stream" else {})},
                        headers=h)
    assert r.status_code in (200, 422), (route, r.status_code, r.text[:300])
    return r.text


OTHER_WORDS = [w for d in DOCS.values() for w in (d[1].split() + ([d[2]] if d[2] else [])
                                                  + re.findall(r"[A-Za-z]{5,}", " ".join(d[3])))]
NAMES = list(DOCS) + [f"/corpus/{d}.md" for d in DOCS] + [d.replace("-", " ").title() for d in DOCS]
WIDEN = st.one_of(
    st.none(), st.sampled_from(list(DOCS)).map(lambda d: {"doc_id": d}),
    st.sampled_from(list(DOCS)).map(lambda d: {"source": f"/corpus/{d}.md"}),
    st.lists(st.sampled_from(list(DOCS)), min_size=1, max_size=3).map(lambda ds: {"$or": [{"doc_id": {"$in": ds}},
                                                                                          {"page": {"$ne": 1}}]}),
    st.sampled_from(["hr", "eng", "fin", "exec", "*", "*unlabelled"]).map(lambda g: {"readers": g}),
    st.just({"$or": [{"readers": {"$nin": ["x"]}}, {"doc_id": {"$ne": ""}}]}))
QUESTIONS = st.one_of(
    st.lists(st.sampled_from(OTHER_WORDS), min_size=1, max_size=8).map(" ".join),
    st.tuples(st.sampled_from(["What does", "Who wrote", "In", "Summarise", "How much is"]),
              st.sampled_from(NAMES + OTHER_WORDS), st.sampled_from(OTHER_WORDS)).map(lambda t: " ".join(t) + "?"))
EXAMPLES = int(os.environ.get("DECLRAG_LEAK_EXAMPLES", "1000"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(policy=st.sampled_from(["nobody", "everyone"]), caller=st.sampled_from(sorted(CALLERS)),
       route=st.sampled_from(ROUTES), question=QUESTIONS, where=WIDEN)
def test_no_byte_of_an_unreadable_document_reaches_a_caller(served, policy, caller, route, question, where):
    client, keys = served[policy]
    text = call(client, route, keys[caller], question,
                where if route in ("ask", "ask-stream", "search", "cli") else None, caller)
    asked = question + json.dumps(where)  # what the caller sent may come back (the query, an error naming a field)
    leaked = [m for m in forbidden_marks(caller, policy) if m in text and m not in asked]
    assert not leaked, (policy, caller, route, question, where, leaked)


@pytest.mark.parametrize("caller", sorted(CALLERS))
@pytest.mark.parametrize("policy", ["nobody", "everyone"])
def test_callers_get_k_passages_of_their_own(served, policy, caller):
    client, keys = served[policy]
    r = client.post("/v1/search", json={"query": "budget plan euros board notes office", "k": 3},
                    headers={"Authorization": f"Bearer {keys[caller]}"})
    hits = r.json()["hits"]
    mine = readable(caller, policy)
    assert {h["doc_id"] for h in hits} <= mine
    assert len(hits) == min(3, 3 * len(mine))  # three sentences a document: k where their documents allow


def test_every_route_asks_for_a_key_and_refuses_a_wrong_one(served):
    client, keys = served["nobody"]
    for path, body in (("/v1/ask", {"question": "budget?"}), ("/v1/search", {"query": "budget"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "budget?"}]})):
        assert client.post(path, json=body).status_code == 401
        r = client.post(path, json=body, headers={"Authorization": "Bearer " + keys["alice"][:-1] + "x"})
        assert r.status_code == 401 and r.json()["error"] == "unauthorized: unknown key"
    assert client.get("/healthz").status_code == 200  # the open routes stay open


def test_the_semantic_cache_never_hands_one_callers_answer_to_another(tmp_path):
    store = corpus_store(str(tmp_path / "store"))
    keys = KeysFile(tmp_path / "keys.yaml")
    k = {n: keys.add(n, g) for n, g in CALLERS.items()}
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive"}})
    app = create_app(RAGProgram(cfg, store=store, embedder=HashEmbedder()), "x", None, ServeSettings(
        cache_threshold=0.5, access=AccessSettings(keys_file=tmp_path / "keys.yaml", unlabelled="nobody")))
    with TestClient(app) as c:
        while c.get("/readyz").status_code != 200:
            pass
        ask = lambda who: c.post("/v1/ask", json={"question": "What is the NARWHAL budget for the third quarter?"},  # noqa: E731
                                 headers={"Authorization": f"Bearer {k[who]}"}).json()
        first = ask("carol")
        assert "NARWHAL" in first["answer"]
        for who in ("alice", "dave"):
            got = ask(who)  # the search queries echo the caller's own question: the rest must not name the budget
            assert "NARWHAL" not in json.dumps({**got, "queries": []}) and not got["cache"]["hit"]
        assert ask("carol")["cache"]["hit"]  # the cache is kept per scope: the same groups, the same answers
        store.relabel({"fin-budget": ("exec",)})  # fin loses the budget while the server runs
        assert ask("carol")["cache"]["hit"]  # carol is still in exec: the cached answer is still hers
        store.relabel({"fin-budget": ("board",)})  # now a group carol is not in
        got = ask("carol")
        assert not got["cache"]["hit"] and "NARWHAL" not in json.dumps({**got, "queries": []})
