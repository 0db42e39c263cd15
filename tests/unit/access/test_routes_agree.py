"""One caller, one question: the CLI (`ask --as`), HTTP /v1/ask, the OpenAI-compatible route and the MCP tool give the
same answer and the same cited passages; and each reaches the program only through the answering service."""

from __future__ import annotations

import json
import sys
from collections import Counter

import anyio
from fastapi.testclient import TestClient
from mcp import Client

from declrag.access import Access, AccessSettings, Callers, KeysFile
from declrag.cli import main
from declrag.config import ProgramConfig
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.serve.mcp import build_server

from tests.unit.access.test_leaks import CALLERS, corpus_store

QUESTIONS = ["What is the NARWHAL budget for the third quarter?", "When do PANGOLIN deploys run?",
             "When does the office open?", "What did the WOMBAT notes mention?"]


def cited(citations: list[dict]) -> list[tuple[str, tuple[int, int]]]:
    return [(c["doc_id"].rsplit("/", 1)[-1], tuple(c["span"])) for c in citations]


def spy_on_the_program(monkeypatch) -> Counter:
    """Counts, by the module that made it, every call into a `RAGProgram` (an answer, a search, a warm-up)."""
    calls: Counter = Counter()
    for name in ("__call__", "search", "warm_up"):
        real = getattr(RAGProgram, name)

        def spy(self, *a, _real=real, _name=name, **kw):
            calls[(_name, sys._getframe(1).f_globals["__name__"])] += 1
            return _real(self, *a, **kw)
        monkeypatch.setattr(RAGProgram, name, spy)
    return calls


def test_every_route_gives_a_caller_the_same_answer_and_citations(capsys, tmp_path, minilm, monkeypatch):
    """With the real default embedder, so that the CLI's own program (which loads it) searches the same vectors.
    Every route's calls into the program come from the answering service (`declrag.answering`), none from a front
    end (`declrag.serve`, `declrag.cli`)."""
    store_path = str(tmp_path / "store")
    store = corpus_store(store_path, minilm)
    keys = KeysFile(tmp_path / "keys.yaml")
    tokens = {n: keys.add(n, g) for n, g in CALLERS.items()}
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive"}})
    prog = RAGProgram(cfg, store=store, embedder=minilm).warm_up(lms=False)
    calls = spy_on_the_program(monkeypatch)
    app = create_app(prog, "x", None, ServeSettings(access=AccessSettings(keys_file=tmp_path / "keys.yaml")))
    access = Access(Callers(KeysFile.load(tmp_path / "keys.yaml")), "everyone")
    with TestClient(app) as c:
        while c.get("/readyz").status_code != 200:
            pass
        for who in ("carol", "bob"):
            auth = {"Authorization": f"Bearer {tokens[who]}"}
            mcp = build_server(prog, "x", access=access, caller=keys.named(who))
            for q in QUESTIONS:
                http = c.post("/v1/ask", json={"question": q}, headers=auth).json()
                chat = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": q}]},
                              headers=auth).json()

                async def tool(server=mcp, question=q):
                    async with Client(server) as m:
                        await m.call_tool("search", {"query": question})
                        return (await m.call_tool("ask", {"question": question})).structured_content

                via_mcp = anyio.run(tool)
                assert c.post("/v1/search", json={"query": q}, headers=auth).status_code == 200
                assert chat["choices"][0]["message"]["content"].startswith(http["answer"]), (who, q)
                assert via_mcp["answer"] == http["answer"] and cited(via_mcp["citations"]) == cited(http["citations"])
                assert [c_["doc_id"] for c_ in chat["citations"]] == [c_["doc_id"] for c_ in http["citations"]]
                assert main(["ask", q, "--store", store_path, "--answer-mode", "extractive", "--as", who, "--keys",
                             str(tmp_path / "keys.yaml"), "--json"]) == 0
                cli = json.loads(capsys.readouterr().out)
                assert cli["answer"] == http["answer"] and cited(cli["citations"]) == cited(http["citations"]), \
                    (who, q, cli["answer"], http["answer"])
    # the service's checks name the CLI's own flags
    assert main(["ask", "When?", "--store", store_path, "--answer-mode", "extractive", "--where", '{"page": "two"}']) == 2
    err = capsys.readouterr().err
    assert "--where: invalid filter" in err and "Traceback" not in err, err
    front_ends = {(call, module) for call, module in calls if module.startswith(("declrag.serve", "declrag.cli"))}
    assert not front_ends, f"front ends that call the program themselves: {front_ends}"
    assert {(call, m) for call, m in calls if m == "declrag.answering._service"} == {
        ("__call__", "declrag.answering._service"), ("search", "declrag.answering._service"),
        ("warm_up", "declrag.answering._service")}, calls
