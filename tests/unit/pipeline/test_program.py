"""The RAG program with DSPy's DummyLM: every stage on and off, citations, abstention, self-judge
policies, the artifact, and clear errors on bad input. The real local model is in test_local_model.py."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.lm import using_lm
from declrag.lm.prompts._adapters import PlainTextAdapter
from declrag.pipeline.program import RAGProgram, load
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import corpus

from tests.conftest import filled_store

Q = "What is the capital of Italy?"


@pytest.fixture
def store(tmp_path):
    return filled_store(tmp_path / "store")


def make(store, **sections) -> RAGProgram:
    cfg = ProgramConfig.model_validate(sections)
    return RAGProgram(cfg, store=store, embedder=HashEmbedder())


def run(prog, answers, question=Q, adapter=None, **kw):
    lm = DummyLM(answers, adapter=adapter or PlainTextAdapter())
    with using_lm(lm):
        return prog(question=question, **kw)


def test_naive_program_answers_with_citations_that_resolve_to_retrieved_chunks(store):
    prog = make(store)
    a = run(prog, [{"answer": "Rome is the capital of Italy [1]."}])
    assert a.answer == "Rome is the capital of Italy [1]." and not a.abstained
    first = a.passages[0]
    assert a.citations[0]["chunk_id"] == first.chunk.id and a.citations[0]["attributed"] is False
    doc = store.document_texts([first.doc_id])[first.doc_id]
    s, e = a.citations[0]["span"]
    assert doc[s:e] == first.text
    assert len(a.passages) == 5 and a.queries == [Q]
    assert set(a.latency_ms) >= {"rewrite", "retrieve", "rerank", "generate", "judge", "embed", "total"}
    assert a.judge == {"mode": "off", "action": "none"}
    assert a.stages["rewrite"] == "off" and a.stages["rerank"] == "none"


def test_citations_to_nothing_are_removed_and_counted(store):
    a = run(make(store), [{"answer": "Rome [1][9]. Also Paris [12]."}])
    assert a.answer == "Rome [1]. Also Paris." and a.removed_citations == 2
    assert [c["n"] for c in a.citations] == [1]


def test_uncited_answers_are_attributed_after_the_fact(store):
    a = run(make(store), [{"answer": "Rome is the capital of Italy. Bananas are yellow."}])
    assert a.answer.startswith("Rome is the capital of Italy. [")
    assert a.citations and all(c["attributed"] for c in a.citations)
    cited = a.passages[a.citations[0]["n"] - 1]
    assert "Rome" in cited.text


def test_model_abstention_becomes_the_fixed_phrase(store):
    prog = make(store, generate={"abstain_phrase": "No answer in the documents."})
    a = run(prog, [{"answer": "I do not know, the passages don't say."}])
    assert a.abstained and a.answer == "No answer in the documents."
    assert a.citations and all(c["nearest"] and "quotes" not in c for c in a.citations)  # for the reader to check


def test_score_threshold_abstains_without_calling_the_model(store):
    prog = make(store, retrieve={"abstain_below": 0.99})
    a = run(prog, [])  # any LM call would get "No more responses"
    assert a.abstained and a.usage["total"]["calls"] == 0 and "below" in a.judge["reason"]


@pytest.mark.parametrize("mode, answers, check", [
    ("rewrite", [{"query": "capital Italy"}], lambda a: a.queries == ["capital Italy"]),
    ("multi-query", [{"queries": "1. Italian capital city\n2. Rome capital"}],
     lambda a: a.queries == [Q, "Italian capital city", "Rome capital"]),
    ("hyde", [{"passage": "Rome is the capital of Italy and has the Colosseum."}], lambda a: a.queries == [Q]),
    ("decompose", [{"queries": ""}, ], None),
    ("step-back", [{"general_question": "What are European capitals?"}],
     lambda a: a.queries == [Q, "What are European capitals?"]),
])
def test_rewrite_modes(store, mode, answers, check):
    if mode == "decompose":
        answers = [{"sub_questions": "- Which country is Italy?\n- Which city is its capital?"}]
        check = lambda a: a.queries == [Q, "Which country is Italy?", "Which city is its capital?"]  # noqa: E731
    prog = make(store, rewrite={"mode": mode, "n": 3})
    a = run(prog, [*answers, {"answer": "Rome [1]."}])
    assert check(a), a.queries
    assert a.answer == "Rome [1]." and a.stages["rewrite"] == mode


def test_multi_query_results_are_fused(store):
    prog = make(store, rewrite={"mode": "multi-query", "n": 2}, retrieve={"k": 10})
    a = run(prog, [{"queries": "Eiffel Tower\nMount Fuji"}, {"answer": "x [1]"}])
    ids = {h.chunk.id for h in a.passages}
    assert {"paris#1", "tokyo#1"} <= ids  # each variant's best hit made it into the context


def test_bm25_rerank_reorders_the_candidates(store):
    prog = make(store, rerank={"mode": "bm25", "candidates": 10}, retrieve={"k": 3})
    a = run(prog, [{"answer": "Rome [1]."}], question="Colosseum amphitheatre")
    assert a.passages[0].chunk.id == "rome#1" and "rerank" in a.passages[0].scores
    assert len(a.passages) == 3


def test_llm_rerank_keeps_what_the_judge_calls_relevant(store):
    prog = make(store, rerank={"mode": "llm", "candidates": 5}, retrieve={"k": 2})
    first = run(make(store, retrieve={"k": 5}), [{"answer": "x"}])
    ids = [h.chunk.id for h in first.passages]
    answers = [{"relevant": "no"}, {"relevant": "no"}, {"relevant": "no"}, {"relevant": "yes"}, {"relevant": "no"},
               {"answer": "Rome [1]."}]
    a = run(prog, answers)
    assert a.passages[0].chunk.id == ids[3] and a.passages[0].scores["rerank"] == 1.0


def test_cross_encoder_rerank_with_a_locally_built_model(store, tmp_path, minilm):
    torch = pytest.importorskip("torch")
    from sentence_transformers import CrossEncoder
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    torch.manual_seed(0)
    tok = BertTokenizerFast.from_pretrained(str(minilm.folder))
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=1)
    folder = tmp_path / "tiny-cross-encoder"
    BertForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    prog = make(store, rerank={"mode": "cross-encoder", "model": str(folder), "candidates": 6}, retrieve={"k": 6})
    a = run(prog, [{"answer": "Rome [1]."}])
    scores = CrossEncoder(str(folder)).predict([(Q, h.text) for h in a.passages], show_progress_bar=False)
    assert list(scores) == sorted(scores, reverse=True)
    assert [h.scores["rerank"] for h in a.passages] == pytest.approx([float(s) for s in scores], rel=1e-5)


def test_grounding_judge_with_abstain_policy(store):
    prog = make(store, judge={"mode": "grounding", "policy": "abstain"})
    a = run(prog, [{"answer": "Napoleon was crowned in Moscow in 1812 [1]."}])
    assert a.abstained and a.judge["action"] == "abstained" and a.judge["supported"] is False
    b = run(prog, [{"answer": "Rome is the capital of Italy [1]."}])
    assert not b.abstained and b.judge["supported"] is True and b.judge["action"] == "passed"


def test_llm_judge_regenerates_once_with_the_strict_prompt(store):
    prog = make(store, judge={"mode": "llm", "policy": "regenerate"})
    lm = DummyLM([{"answer": "Milan [1]."}, {"supported": "no"}, {"answer": "Rome [1]."}, {"supported": "yes"}],
                 adapter=PlainTextAdapter())
    with using_lm(lm):
        a = prog(question=Q)
    assert a.answer == "Rome [1]." and a.judge["action"] == "regenerated" and a.judge["supported"] is True
    assert a.judge["first"]["supported"] is False
    strict_prompt = lm.history[2]["messages"][0]["content"]
    assert "Every name, place, date and number" in strict_prompt


def test_everything_on(store):
    prog = make(store, rewrite={"mode": "multi-query", "n": 2},
                retrieve={"k": 3, "autocut": 2, "window": 1, "mmr": True, "order": "lost-in-the-middle"},
                rerank={"mode": "bm25", "candidates": 8}, judge={"mode": "grounding", "policy": "regenerate"})
    a = run(prog, [{"queries": "Italy capital\nRome"}, {"answer": "Rome is the capital of Italy [1]."}])
    assert a.passages[0].doc_id == "rome" and "Colosseum" in a.passages[0].text  # reranked first; window-expanded
    assert not a.abstained and a.citations[0]["n"] == 1 and 1 <= len(a.passages) <= 3
    assert a.judge["supported"] is True and a.judge["action"] == "passed"
    assert a.stages["retrieve"]["mmr"] and a.stages["judge"] == "grounding/regenerate"


def test_strong_models_use_dspys_chat_adapter(store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    prog = make(store, lm={"route": "openai/gpt-4o-mini"})
    lm = DummyLM([{"answer": "Rome [1]."}], adapter=dspy.ChatAdapter())
    with using_lm(lm):
        a = prog(question=Q)
    assert a.answer == "Rome [1]."
    assert "[[ ## answer ## ]]" in lm.history[0]["messages"][0]["content"]


def test_save_and_load_round_trip(store, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sk-secret-sentinel")
    prog = make(store, retrieve={"k": 3, "alpha": 0.3}, generate={"variant": "terse"},
                judge={"mode": "llm", "lm": {"route": "openai/judge", "api_base": "http://127.0.0.1:9/v1",
                                             "api_key_env": "TEST_KEY"}})
    prog.generate.main.predict.demos = [dspy.Example(question="q?", context="[1] c", answer="c [1]")]
    prog.save(tmp_path / "art")
    meta = json.loads((tmp_path / "art" / "program.json").read_text())
    assert meta["config"]["retrieve"]["alpha"] == 0.3 and meta["versions"]["dspy"]
    for f in (tmp_path / "art").iterdir():  # the key's name is stored, never its value
        assert "sk-secret-sentinel" not in f.read_text()
    assert meta["config"]["judge"]["lm"]["api_key_env"] == "TEST_KEY"
    again = load(tmp_path / "art", store=store, embedder=HashEmbedder())
    assert again.config == prog.config
    assert again.generate.main.predict.demos[0]["answer"] == "c [1]"
    assert again.generate.main.predict.signature.instructions == prog.generate.main.predict.signature.instructions
    assert run(again, [{"answer": "Rome [1]."}]).answer == "Rome [1]."


def test_load_takes_a_run_folder_as_the_commands_do(store, tmp_path):
    """`declrag serve runs/NAME` serves runs/NAME/best; `declrag.load("runs/NAME")` loads the same program."""
    prog = make(store, retrieve={"k": 2, "alpha": 0.7})
    prog.save(tmp_path / "runs" / "mine" / "best")
    again = load(tmp_path / "runs" / "mine", store=store, embedder=HashEmbedder())
    assert again.config == prog.config
    with pytest.raises(DeclragError, match="runs/<name> or runs/<name>/best"):
        load(tmp_path / "runs", store=store, embedder=HashEmbedder())


def test_load_warns_on_version_drift_and_refuses_other_ingest_settings(store, tmp_path):
    from declrag.config import IngestConfig
    from declrag.stores import open_store

    prog = make(store)
    prog.save(tmp_path / "art")
    meta = json.loads((tmp_path / "art" / "program.json").read_text())
    meta["versions"]["dspy"] = "0.0.1"
    (tmp_path / "art" / "program.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="dspy 0.0.1"):
        load(tmp_path / "art", store=store, embedder=HashEmbedder())
    other, _ = open_store(tmp_path / "other", IngestConfig.model_validate({"chunker": {"chunk_size": 99, "overlap": 0}}))
    other.upsert(*corpus(HashEmbedder()))
    with pytest.raises(DeclragError, match="other ingest settings"):
        load(tmp_path / "art", store=tmp_path / "other")
    with pytest.raises(DeclragError, match="not a declrag program"):
        load(tmp_path / "nothing")


@pytest.mark.parametrize("question, message", [("", "question is empty"), ("   ", "question is empty"),
                                               ("x" * 3000, "limit is 2000")])
def test_bad_questions(store, question, message):
    with pytest.raises(DeclragError, match=message):
        run(make(store), [], question=question)


def test_bad_routes_and_keys_fail_before_any_call(store, monkeypatch):
    with pytest.raises(DeclragError, match="unknown model route 'nowhere/model'"):
        make(store, lm={"route": "nowhere/model"})
    with pytest.raises(DeclragError, match="unknown model route"):  # the local model writes: its fallbacks count
        make(store, lm={"route": "local/smollm2", "fallbacks": ["bogus-provider/x"]}, generate={"mode": "lm"})
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(DeclragError, match="ANTHROPIC_API_KEY is not set"):
        make(store, lm={"route": "anthropic/claude-3-5-haiku-20241022"})
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(DeclragError, match="MY_KEY"):
        make(store, judge={"mode": "llm", "lm": {"route": "openai/x", "api_base": "http://127.0.0.1:9/v1",
                                                 "api_key_env": "MY_KEY"}})


def test_unreachable_server_is_a_clear_error(store):
    prog = make(store, lm={"route": "openai/nothing-here", "api_base": "http://127.0.0.1:9/v1", "num_retries": 0,
                           "timeout_s": 5})
    with pytest.raises(DeclragError) as e:
        prog(question=Q)
    assert "cannot reach openai/nothing-here at http://127.0.0.1:9/v1" in str(e.value) and e.value.hint


def test_unknown_local_model_is_a_clear_error(store):
    prog = make(store, lm={"route": "local/no-such-model", "num_retries": 0})
    with pytest.raises(DeclragError, match="no-such-model"):
        prog(question=Q)


def test_an_artifact_saved_by_an_earlier_declrag_still_loads_and_answers(store):
    """tests/data/artifact-0.1.0 was saved by declrag at commit 1610219 (before the house was reorganised):
    the same config, prompts and demos load now, and it answers."""
    import warnings
    from pathlib import Path

    with warnings.catch_warnings():  # library versions may have moved since (that warning is tested above)
        warnings.simplefilter("ignore")
        prog = load(Path(__file__).parents[2] / "data" / "artifact-0.1.0", store=store, embedder=HashEmbedder())
    c = prog.config
    assert (c.retrieve.k, c.retrieve.alpha, c.retrieve.fusion) == (3, 0.3, "ranked")
    assert (c.generate.variant, c.rerank.mode, c.rerank.candidates) == ("terse", "bm25", 6)
    assert prog.generate.main.predict.demos[0]["answer"] == "c [1]"
    assert run(prog, [{"answer": "Rome [1]."}]).answer == "Rome [1]."


# what declrag answered at commit 2c57cc7 from tests/data/artifact-2c57cc7 (extractive, window 1, BM25 rerank, k 3):
# (question, answer, abstained, passages, citations as (n, chunk, span))
BEFORE_THE_MOVE = [
    ("What is the capital of Italy?", "Rome is the capital of Italy. [1]", False, ["rome#0", "berlin#0"],
     [(1, "rome#0", (0, 96))]),
    ("Which river flows through Rome?", "Rome is the capital of Italy. [1] The Colosseum is an amphitheatre in Rome. [1]",
     False, ["rome#1"], [(1, "rome#1", (0, 96))]),
    ("Who designed the Eiffel Tower?", "The Eiffel Tower stands in Paris. [1]", False, ["paris#0", "rome#0"],
     [(1, "paris#0", (0, 87))]),
]


def test_an_artifact_saved_before_the_modules_moved_into_packages_answers_the_same(store):
    """tests/data/artifact-2c57cc7 was saved by declrag at commit 2c57cc7, before issue 60 moved the loose modules
    into packages and the stages one to a file; loaded now over the same store, it answers exactly as it did then."""
    import warnings
    from pathlib import Path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = load(Path(__file__).parents[2] / "data" / "artifact-2c57cc7", store=store, embedder=HashEmbedder())
    for question, answer, abstained, passages, citations in BEFORE_THE_MOVE:
        a = prog(question=question)
        assert (a.answer, bool(a.abstained), [h.chunk.id for h in a.passages]) == (answer, abstained, passages)
        assert [(c["n"], c["chunk_id"], tuple(c["span"])) for c in a.citations] == citations


def test_an_artifact_saved_before_the_house_was_layered_still_loads_and_answers(store):
    """tests/data/artifact-c0696d8 was saved by declrag at commit c0696d8 (issue 39's answer modes, before issue 40
    moved the pipeline into its own package): its verified mode, extract settings and demos load, and it answers."""
    import warnings
    from pathlib import Path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = load(Path(__file__).parents[2] / "data" / "artifact-c0696d8", store=store, embedder=HashEmbedder())
    g = prog.config.generate
    assert (g.mode, g.unsupported, g.extract.max_sentences, g.extract.min_score) == ("verified", "extract", 1, 0.3)
    # settings that came later read as the behaviour it was saved with: no headers, untyped extractive answers
    assert (prog.config.ingest.context, g.extract.type_weight) == ("none", 0.0)
    assert (prog.config.retrieve.k, prog.config.rerank.candidates) == (4, 8)
    assert prog.generate.main.predict.demos[0]["answer"] == "c [1]"
    a = run(prog, [{"answer": "Rome is the capital of Italy [1]."}])
    assert "Rome" in a.answer and not a.abstained and a.passages


def test_an_artifact_saved_before_the_pipeline_was_declared_answers_the_same(store):
    """tests/data/artifact-47fb0d4 was saved at commit 47fb0d4, before issue 72 made the program a list of stages over
    one state (history joined, multi-query rewrite, window, MMR, BM25 rerank, lost-in-the-middle, verified answers,
    the grounding judge), with what it answered then (``answers.json``, the LM's outputs included): loaded now over
    the same store, every answer, passage, citation, verdict and search result is the same."""
    import warnings
    from pathlib import Path

    folder = Path(__file__).parents[2] / "data" / "artifact-47fb0d4"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = load(folder, store=store, embedder=HashEmbedder())
    recorded = json.loads((folder / "answers.json").read_text())
    assert len(recorded) == 4
    for r in recorded:
        queries, answer = r["lm"]
        with using_lm(DummyLM([{"queries": queries}, {"answer": answer}], adapter=PlainTextAdapter())):
            a = prog(question=r["question"], history=r["history"])
        with using_lm(DummyLM([{"queries": queries}], adapter=PlainTextAdapter())):
            s = prog.search(r["question"], history=r["history"])
        got = {k: a[k] for k in ("answer", "abstained", "queries", "judge", "stages", "checked", "reason",
                                 "removed_citations")}
        got["passages"] = [h.chunk.id for h in a.passages]
        got["citations"] = [[c["n"], c["chunk_id"], list(c["span"]), bool(c.get("nearest", False))]
                            for c in a.citations]
        got["search"] = [h.chunk.id for h in s]
        assert json.loads(json.dumps(got, default=str)) == r["got"], r["question"]
