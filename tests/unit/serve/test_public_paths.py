"""Citations and hits that do not expose the server's disk (`declrag.payloads.PublicPaths`): on every route of
`declrag serve` and both MCP tools a file is named relative to the folder that was indexed, or under the public URL
the operator gives (--source-base); a filter sent back with those names finds the same passages; the Python API keeps
the absolute path."""

from __future__ import annotations

import json
from dataclasses import replace

import anyio
import pytest
from mcp import Client

from declrag.config import ProgramConfig
from declrag.lm import using_lm
from declrag.serve.mcp import build_server
from declrag.payloads import PublicPaths
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.stores._lancedb import LanceStore
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.testing.store_contract import corpus
from tests.unit.serve.test_serve import client

Q = "What is the capital of Italy?"
ANSWER = "Rome is the capital of Italy [1]."
ROOT = "/srv/private/corpus"


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    """The contract corpus as if indexed from files under ROOT: ids and sources are the files' absolute paths."""
    docs, chunks, vectors = corpus(HashEmbedder())
    path = {d.id: f"{ROOT}/{'europe/' if d.id != 'tokyo' else ''}{d.id}.txt" for d in docs}
    docs = [replace(d, id=path[d.id], source=path[d.id]) for d in docs]
    chunks = [replace(c, doc_id=path[c.doc_id], source=path[c.doc_id], id=f"{path[c.doc_id]}#{c.position}")
              for c in chunks]
    store = LanceStore(tmp_path_factory.mktemp("paths") / "store")
    store.upsert(docs, chunks, vectors)
    return RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder())


def lm():
    return ScriptedLM({}, {"answer": ANSWER})


def every_route(prog, **settings) -> list[str]:
    """The bodies of every route that carries passages: /v1/ask (JSON and streamed), the OpenAI-compatible chat
    (JSON and streamed), /v1/search, and a search filtered by a public source name."""
    app = create_app(prog, "demo", None, ServeSettings(**settings), lm_override=lm)
    chat = {"model": "demo", "messages": [{"role": "user", "content": Q}]}
    with client(app) as c:
        bodies = [c.post("/v1/ask", json={"question": Q}), c.post("/v1/ask", json={"question": Q, "stream": True}),
                  c.post("/v1/chat/completions", json=chat),
                  c.post("/v1/chat/completions", json={**chat, "stream": True}),
                  c.post("/v1/search", json={"query": Q, "k": 5})]
        assert all(r.status_code == 200 for r in bodies), [r.text for r in bodies]
        hits = bodies[-1].json()["hits"]
        one = hits[0]
        filtered = c.post("/v1/search", json={"query": Q, "where": {"source": one["source"]}}).json()["hits"]
        assert filtered and {h["doc_id"] for h in filtered} == {one["doc_id"]}
        by_id = c.post("/v1/search", json={"query": Q, "where": {"doc_id": {"$in": [one["doc_id"]]}}}).json()["hits"]
        assert {h["chunk_id"] for h in by_id} == {h["chunk_id"] for h in filtered}
    return [r.text for r in bodies] + [json.dumps(hits)]


def test_no_route_names_the_servers_folder(prog):
    texts = every_route(prog)
    assert all(ROOT not in t and "/srv/" not in t for t in texts), [t[:300] for t in texts if ROOT in t]
    hits = json.loads(texts[-1])
    assert all(not h["source"].startswith("/") and h["source"].endswith(".txt") for h in hits)
    assert hits[0]["source"] == "europe/rome.txt" and hits[0]["chunk_id"] == "europe/rome.txt#0"
    assert json.loads(texts[0])["citations"][0]["source"] == "europe/rome.txt"


def test_a_public_url_base_names_the_files(prog):
    texts = every_route(prog, source_base="https://docs.example.com/kb/")
    assert all(ROOT not in t for t in texts)
    hits = json.loads(texts[-1])
    assert hits[0]["source"] == "https://docs.example.com/kb/europe/rome.txt"
    assert hits[0]["doc_id"] == "europe/rome.txt"  # ids stay ids: relative, not URLs
    cite = json.loads(texts[0])["citations"][0]
    assert cite["source"] == "https://docs.example.com/kb/europe/rome.txt"


def test_the_mcp_tools_name_files_the_same_way(prog):
    async def go():
        async with Client(build_server(prog, "demo", source_base="https://docs.example.com/")) as c:
            return [await c.call_tool("search", {"query": Q, "k": 3}), await c.call_tool("ask", {"question": Q}),
                    await c.call_tool("search", {"query": Q, "where": {"doc_id": "europe/rome.txt"}})]

    with using_lm(lm()):
        found, asked, filtered = anyio.run(go)
    text = json.dumps([found.structured_content, asked.structured_content])
    assert ROOT not in text
    assert found.structured_content["hits"][0]["source"] == "https://docs.example.com/europe/rome.txt"
    assert asked.structured_content["citations"][0]["chunk_id"] == "europe/rome.txt#0"
    assert {h["doc_id"] for h in filtered.structured_content["hits"]} == {"europe/rome.txt"}


def test_the_python_api_keeps_the_absolute_path(prog):
    with using_lm(lm()):
        a = prog(question=Q)
    assert a.citations[0]["source"] == f"{ROOT}/europe/rome.txt"


def test_names_that_are_not_the_stores_files_are_left_alone():
    p = PublicPaths(["/a/b/x.txt", "/a/c/y.txt", "https://example.com/z", "squad:Normans"], None)
    assert p.prefix == "/a/" and p.relative("/a/b/x.txt#3") == "b/x.txt#3"
    assert p.source("https://example.com/z") == "https://example.com/z"
    assert p.relative("squad:Normans") == "squad:Normans"
    assert p.inward({"$or": [{"doc_id": "b/x.txt"}, {"id": {"$in": ["c/y.txt#0", "other#1"]}}], "page": 2}) == \
        {"$or": [{"doc_id": "/a/b/x.txt"}, {"id": {"$in": ["/a/c/y.txt#0", "other#1"]}}], "page": 2}
    assert p.inward({"doc_id": "b/unknown.txt"}) == {"doc_id": "b/unknown.txt"}  # not ours: as sent
    u = PublicPaths(["/a/b/my file.txt"], "https://h/docs")
    assert u.source("/a/b/my file.txt") == "https://h/docs/my%20file.txt"
    assert u.inward({"source": "https://h/docs/my%20file.txt"}) == {"source": "/a/b/my file.txt"}
    assert PublicPaths([], None).rewrite({"source": "/x/y"}) == {"source": "/x/y"}  # nothing indexed from files
