"""The real local model (SmolLM2-135M-Instruct, GGUF) through LiteLLM's `local/` provider, end to end over
SQuAD v2.0 paragraphs; and the same program against a real OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import litellm
import pytest

from declrag.config import IngestConfig, ProgramConfig
from declrag.errors import DeclragError
from declrag.golden import load_golden
from declrag.ingest.corpus import corpus_store
from declrag.lm import resolve_local, setup
from declrag.pipeline.program import RAGProgram

from tests.conftest import shared

EVERYTHING_ON = {
    "rewrite": {"mode": "multi-query", "n": 2},
    "retrieve": {"k": 3, "autocut": 2, "window": 1, "mmr": True, "order": "lost-in-the-middle"},
    "rerank": {"mode": "bm25", "candidates": 10},
    "judge": {"mode": "grounding", "policy": "regenerate"},
}
WRITES = {"generate": {"mode": "lm"}}  # the local model writes the answer (named: with no model named it would not)


@pytest.fixture(scope="module")
def squad(minilm):
    shared("squad-v2.0")
    gs = load_golden("squad-v2.0")
    docs = gs.documents[:30]
    store, _ = corpus_store(docs, IngestConfig(), "squad-v2.0-head", embedder=minilm, progress=False)
    ids = {d.id for d in docs}
    answerable = [e for e in gs.split("dev") if e.answerable and set(e.gold) <= ids][:3]
    return store, answerable, docs


def test_litellm_reaches_the_local_provider():
    setup()
    r = litellm.completion(model="local/smollm2", messages=[{"role": "user", "content": "Say hello."}],
                           max_tokens=8, temperature=0)
    assert r.choices[0].message.content.strip()
    assert r.usage.prompt_tokens > 5 and 0 < r.usage.completion_tokens <= 8


@pytest.mark.parametrize("stages", [{}, EVERYTHING_ON], ids=["all-off", "all-on"])
def test_local_program_end_to_end(squad, minilm, stages):
    store, examples, _ = squad
    prog = RAGProgram(ProgramConfig.model_validate({**stages, **WRITES}), store=store, embedder=minilm)
    for ex in examples[:2]:
        a = prog(question=ex.question)
        assert a.answer.strip()
        retrieved = {h.chunk.id for h in a.passages}
        for c in a.citations:  # every citation resolves to a retrieved chunk and its exact span
            assert c["chunk_id"] in retrieved
            text = store.document_texts([c["doc_id"]])[c["doc_id"]]
            assert " ".join(text[c["span"][0]:c["span"][1]].split())[:300] == c["snippet"]
        u = a.usage["total"]
        assert u["calls"] >= 1 and u["cost_usd"] == 0.0
        assert u["tokens_in"] > 0 or u["cached"] == u["calls"]
        assert a.usage["generate"]["calls"] >= 1


def test_repeated_questions_hit_the_cache(squad, minilm):
    store, examples, _ = squad
    prog = RAGProgram(ProgramConfig.model_validate(WRITES), store=store, embedder=minilm)
    first = prog(question=examples[2].question)
    again = prog(question=examples[2].question)
    assert again.answer == first.answer
    assert again.usage["total"]["cached"] == again.usage["total"]["calls"] >= 1
    assert again.usage["total"]["tokens_in"] == 0 and again.latency_ms["generate"] < first.latency_ms["generate"]


def test_an_unanswerable_question_can_abstain(squad, minilm):
    store, _, _ = squad
    cfg = ProgramConfig.model_validate({"retrieve": {"abstain_below": 0.4}})
    a = RAGProgram(cfg, store=store, embedder=minilm)(question="What is the boiling point of mercury on Jupiter?")
    assert a.abstained and a.answer == "I don't know." and all(c["nearest"] for c in a.citations)


def test_cli_ask_json_over_squad(squad, capsys):
    from declrag.cli import main

    store, examples, _ = squad
    code = main(["ask", examples[0].question, "--store", str(store.path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert set(out) >= {"answer", "abstained", "citations", "judge", "usage", "latency_ms"}
    for c in out["citations"]:
        assert set(c) >= {"n", "chunk_id", "source", "span", "snippet", "score"}


def test_transformers_gguf_backend(monkeypatch):
    """The fallback when llama-cpp-python is not installed: transformers' GGUF loader (dequantised)."""
    pytest.importorskip("gguf")
    monkeypatch.setenv("DECLRAG_LOCAL_BACKEND", "transformers")
    setup()
    r = litellm.completion(model="local/smollm2", messages=[{"role": "user", "content": "What is 2 + 2?"}],
                           max_tokens=6, temperature=0)
    assert r.choices[0].message.content.strip() and r.usage.completion_tokens <= 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def openai_server():
    """llama-cpp-python's OpenAI-compatible server on loopback, serving SmolLM2 as `smollm2`."""
    pytest.importorskip("llama_cpp.server")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(resolve_local("smollm2")),
                             "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
                             "--n_ctx", "8192"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(base + "/models", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("the llama-cpp server exited at start-up")
            time.sleep(0.5)
    yield base
    proc.terminate()
    proc.wait(timeout=30)


def test_program_through_an_openai_compatible_server(squad, minilm, openai_server):
    store, examples, _ = squad
    cfg = ProgramConfig.model_validate({"lm": {"route": "openai/smollm2", "api_base": openai_server,
                                               "adapter": "plain", "num_retries": 0}})
    a = RAGProgram(cfg, store=store, embedder=minilm)(question=examples[0].question)
    assert a.answer.strip() and a.usage["generate"]["calls"] == 1
    assert a.usage["generate"]["tokens_in"] > 0 and a.usage["generate"]["tokens_out"] > 0


def test_fallback_routes_take_over_when_the_first_fails(squad, minilm):
    store, examples, _ = squad
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    cfg = ProgramConfig.model_validate({"lm": {"route": "openai/smollm2", "api_base": dead, "adapter": "plain",
                                               "fallbacks": ["local/smollm2"], "num_retries": 0, "timeout_s": 10}})
    a = RAGProgram(cfg, store=store, embedder=minilm)(question=examples[1].question + " Answer briefly.")
    assert a.answer.strip()


def test_a_dead_server_is_named_in_the_error(squad, minilm):
    store, examples, _ = squad
    cfg = ProgramConfig.model_validate({"lm": {"route": "openai/smollm2", "api_base": f"http://127.0.0.1:{_free_port()}/v1",
                                               "num_retries": 0, "timeout_s": 5}})
    with pytest.raises(DeclragError, match="cannot reach openai/smollm2 at http://127.0.0.1"):
        RAGProgram(cfg, store=store, embedder=minilm)(question=examples[0].question)
