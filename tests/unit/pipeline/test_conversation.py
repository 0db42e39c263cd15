"""Conversations: the history check, the search query each history mode makes, the history through every stage
with DSPy's DummyLM, the artifact, the MTRAG loader on the shared file, user JSONL with history, conversation-
aware splits, eval's breakdown by label, and `declrag ask --history`'s errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dspy.utils.dummies import DummyLM

from declrag.cli import main
from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.evaluate.evaluation import EvalSpec, Evaluation
from declrag.golden import Example, GoldenSet, load_golden
from declrag.inputs import InputError, Turn, turns
from declrag.lm import using_lm
from declrag.optimize._space import Space
from declrag.optimize._splits import split_examples
from declrag.lm.prompts._adapters import PlainTextAdapter
from declrag.pipeline.stages.history._conversation import expanded_query, mixed_vector, window
from declrag.pipeline.program import RAGProgram, load
from declrag.testing import HashEmbedder, ScriptedLM

from tests.conftest import filled_store, shared

H = [{"role": "user", "content": "Tell me about Italy."},
     {"role": "assistant", "content": "Italy is a country in southern Europe."}]
FOLLOW_UP = "And what is its capital?"


@pytest.fixture
def store(tmp_path):
    return filled_store(tmp_path / "store")


def make(store, **sections) -> RAGProgram:
    return RAGProgram(ProgramConfig.model_validate(sections), store=store, embedder=HashEmbedder())


def ask(prog, answers, question=FOLLOW_UP, **kw):
    lm = DummyLM(answers, adapter=PlainTextAdapter())
    with using_lm(lm):
        return prog(question=question, **kw), lm


# -- the check ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("history, field, words", [
    ("hello", "history", "must be a list of turns"),
    ({"role": "user", "content": "x"}, "history", "must be a list of turns"),
    ([{"role": "bot", "content": "x"}], "history[0].role", "one of user, assistant, system"),
    ([{"role": "user"}], "history[0].content", "must be a string"),
    ([{"role": "user", "content": "  \u200b "}], "history[0].content", "empty"),
    ([{"role": "user", "content": "x", "name": "bob"}], "history[0]", "unknown field"),
    (["just text"], "history[0]", "must be an object"),
    ([{"role": "user", "content": "x"}] * 4, "history", "4 turns; the limit is 3"),
    ([{"role": "user", "content": "y" * 30}, {"role": "user", "content": "y" * 30}], "history", "the limit is 50"),
])
def test_a_bad_history_names_the_turn_and_the_limit(history, field, words):
    with pytest.raises(InputError) as e:
        turns(history, max_turns=3, max_chars=50)
    assert e.value.field == field and words in str(e.value)


def test_a_good_history_is_normalised_and_dspy_history_is_accepted():
    import dspy

    got = turns([{"role": "user", "content": "  caf\u0065\u0301 \x00"}], max_turns=5, max_chars=100)
    assert got == (Turn("user", "caf\u00e9"),)
    assert turns(dspy.History(messages=H), max_turns=5, max_chars=100)[1].role == "assistant"
    assert turns(None, max_turns=0, max_chars=0) == ()


def test_window_keeps_the_most_recent_turns_and_cuts_the_oldest_text():
    h = [Turn("user", "a" * 10), Turn("assistant", "b" * 10), Turn("user", "c" * 10)]
    assert [t.content for t in window(h, 2, 100)] == ["b" * 10, "c" * 10]
    assert [t.content for t in window(h, 5, 15)] == ["…" + "b" * 5, "c" * 10]
    assert [t.content for t in window(h, 5, 100, roles=("user",))] == ["a" * 10, "c" * 10]


def test_the_deterministic_query_adds_the_earlier_subject_and_mixes_the_vectors():
    q = expanded_query("Where is it located?", ["Tell me about the Normans.", "And the Rhine river?"], 3)
    assert q == "Where is it located? rhine river normans"  # newest turn first, stop words dropped, capped
    assert expanded_query("Where is it?", ["Thanks, ok!"], 5) == "Where is it?"
    v = mixed_vector(np.array([[1.0, 0.0], [0.0, 1.0]]), 0.5)
    assert np.allclose(v, np.array([1.0, 0.5]) / np.linalg.norm([1.0, 0.5]))


# -- through the program --------------------------------------------------------------------------------------
def test_without_history_the_program_is_unchanged(store):
    a, lm = ask(make(store), [{"answer": "Rome [1]."}], question="What is the capital of Italy?")
    assert a.queries == ["What is the capital of Italy?"] and a.history_turns == 0
    assert "Conversation" not in lm.history[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("mode, query", [
    ("off", FOLLOW_UP),
    ("joined", "Tell me about Italy. " + FOLLOW_UP),
    ("deterministic", FOLLOW_UP + " italy"),
])
def test_each_history_mode_makes_its_search_query_and_generate_reads_the_turns(store, mode, query):
    a, lm = ask(make(store, history={"query": mode}), [{"answer": "Rome [1]."}], history=H)
    assert a.queries == [query] and a.history_turns == 2 and a.answer == "Rome [1]."
    prompt = lm.history[-1]["messages"][-1]["content"]
    assert "Conversation:\nUser: Tell me about Italy.\nAssistant: Italy is a country in southern Europe." in prompt
    assert prompt.index("Conversation:") < prompt.index("Question:\n" + FOLLOW_UP)
    if mode != "off":  # the subject set a turn earlier finds its passage
        assert a.passages[0].doc_id == "rome"


def test_generate_keeps_every_system_turn_however_long_the_conversation(store):
    long = [{"role": "system", "content": "Answer in French."}] + \
        [{"role": r, "content": f"turn {i}"} for i in range(10) for r in ("user", "assistant")]
    a, lm = ask(make(store, history={"generate_turns": 2}), [{"answer": "Rome [1]."}], history=long)
    said = lm.history[-1]["messages"][-1]["content"].split("Question:")[0]
    assert "System: Answer in French.\nUser: turn 9\nAssistant: turn 9" in said and "turn 8" not in said


def test_condense_asks_the_lm_once_with_the_conversation_and_searches_its_question(store):
    prog = make(store, history={"query": "condense"})
    a, lm = ask(prog, [{"standalone": "What is the capital city of Italy?"}, {"answer": "Rome [1]."}], history=H)
    assert a.queries == ["What is the capital city of Italy?"] and a.passages[0].doc_id == "rome"
    first = lm.history[0]["messages"]
    assert "standalone question" in first[0]["content"]
    assert "User: Tell me about Italy." in first[-1]["content"] and FOLLOW_UP in first[-1]["content"]
    assert len(lm.history) == 2 and "history" in a.latency_ms


def test_condense_falls_back_to_the_deterministic_query_when_the_model_says_nothing(store):
    a, _ = ask(make(store, history={"query": "condense"}), [{"standalone": "  "}, {"answer": "Rome [1]."}], history=H)
    assert a.queries == [FOLLOW_UP + " italy"]


def test_search_is_the_compiled_retrieval_with_history_k_and_alpha(store):
    prog = make(store, retrieve={"k": 3})
    hits = prog.search(FOLLOW_UP, history=H)
    assert len(hits) == 3 and hits[0].doc_id == "rome"
    assert len(prog.search(FOLLOW_UP, history=H, k=2, alpha=0.0)) == 2
    assert prog.config.retrieve.k == 3  # the served program is not changed by one request's k
    assert [h.chunk.id for h in prog.search("Rome capital", k=3)] == \
        [h.chunk.id for h in prog.retrieve_only("Rome capital")[:3]]


def test_bad_history_fails_before_any_lm_call(store):
    prog = make(store)
    with pytest.raises(InputError, match=r"history\[1\]\.role"):
        ask(prog, [], history=[H[0], {"role": "tool", "content": "x"}])
    with pytest.raises(InputError, match="limit is 1"):
        ask(make(store, history={"max_turns": 1}), [], history=H)


def test_the_history_settings_travel_with_the_artifact(store, tmp_path):
    prog = make(store, history={"query": "condense", "turns": 3, "variant": "keywords"})
    prog.save(tmp_path / "p")
    again = load(tmp_path / "p", store=store, embedder=HashEmbedder())
    assert again.config.history == prog.config.history
    assert again.history_query.stage.variant == "keywords"


# -- golden sets ------------------------------------------------------------------------------------------------
def test_mtrag_tasks_load_as_conversations_with_their_labels():
    g = load_golden(str(shared("mtrag-un", "reference-clapnq-cloud.jsonl")))
    exs = g.split("all")
    assert len(exs) == 273 and len(g.documents) == 560
    assert sum(e.metadata["answerability"] == "UNANSWERABLE" for e in exs) == 58
    assert all(not e.answerable for e in exs if e.metadata["answerability"] == "UNANSWERABLE")
    assert sum(e.metadata["multi_turn"] == "Follow-up" for e in exs) == 174
    assert sum(bool(e.history) for e in exs) >= 247 - 1
    e = next(x for x in exs if x.history)
    assert e.history[-1].role == "assistant" and all(t.role in ("user", "assistant") for t in e.history)
    assert all(g.doc(d) for x in exs for d in x.gold)  # gold ids are the passages' own
    assert load_golden("mtrag-un").split("all")[0] == exs[0]  # the registered name is the same set


def test_a_malformed_mtrag_line_is_named(tmp_path):
    good = json.dumps({"task_id": "t1", "input": [{"speaker": "user", "text": "q?"}], "contexts": []})
    f = tmp_path / "tasks.jsonl"
    f.write_text(good + "\n" + json.dumps({"task_id": "t2", "input": [{"speaker": "user", "text": "q"}],
                                           "contexts": [{"text": "no id"}]}) + "\n")
    with pytest.raises(DeclragError, match=r"tasks.jsonl:2: contexts\[0\] needs `document_id`"):
        load_golden(str(f))
    f.write_text(good + "\n" + json.dumps({"task_id": "t3", "input": [{"speaker": "agent", "text": "hi"}],
                                           "contexts": []}) + "\n")
    with pytest.raises(DeclragError, match="tasks.jsonl:2: the last turn of `input` is not the user's"):
        load_golden(str(f))


def test_user_jsonl_takes_a_history_and_names_a_bad_one(tmp_path):
    f = tmp_path / "log.jsonl"
    f.write_text(json.dumps({"history": H, "question": FOLLOW_UP, "answer": "Rome", "gold": ["rome"]}) + "\n")
    e = load_golden(str(f)).split("all")[0]
    assert e.history == (Turn("user", H[0]["content"]), Turn("assistant", H[1]["content"])) and e.answers == ("Rome",)
    f.write_text(json.dumps({"question": "q", "history": [{"role": "user", "text": "x"}]}) + "\n")
    with pytest.raises(DeclragError, match=r"log.jsonl:1: history\[0\] has unknown field"):
        load_golden(str(f))


def _conversation_set() -> GoldenSet:
    exs = []
    for c in range(12):
        for t in range(3):
            hist = tuple(Turn("user", f"turn {i} of {c}") for i in range(t))
            exs.append(Example(id=f"c{c}t{t}", question=f"question {t} of {c}", history=hist,
                               metadata={"conversation_id": f"c{c}"}))
    return GoldenSet("convs", [], {"all": exs})


def test_compile_splits_keep_each_conversation_whole():
    space = Space.model_validate({"name": "t", "params": {}, "split": {"source": "all"}})
    parts = split_examples(_conversation_set(), space)
    where = {e.metadata["conversation_id"]: set() for p in parts.values() for e in p}
    for name, exs in parts.items():
        for e in exs:
            where[e.metadata["conversation_id"]].add(name)
    assert all(len(v) == 1 for v in where.values()) and len(parts["test"]) >= 3


def test_eval_passes_the_history_and_breaks_metrics_down_by_label(store, tmp_path):
    exs = [Example(id="a", question=FOLLOW_UP, answers=("Rome",), gold={"rome": 1}, history=turns(H, max_turns=9,
                   max_chars=999), metadata={"multi_turn": "Follow-up", "answerability": "ANSWERABLE"}),
           Example(id="b", question="What is the capital of Italy?", answers=("Rome",), gold={"rome": 1},
                   metadata={"multi_turn": "N/A", "answerability": "ANSWERABLE"})]
    golden = GoldenSet("convs", [], {"dev": exs})
    prog = make(store)
    with using_lm(ScriptedLM({}, {"answer": "Rome is the capital [1]."})):
        s = Evaluation(prog, golden, EvalSpec(dataset="convs", split="dev", metrics=["hit@1", "f1"]), tmp_path / "r",
                       progress=False).run()
    assert s["by_label"]["multi_turn"]["Follow-up"]["n"] == 1 and s["by_label"]["turns"]["0"]["n"] == 1
    assert s["by_label"]["multi_turn"]["Follow-up"]["hit@1"] == 1.0  # the history found Rome for "its capital"
    recs = [json.loads(line) for line in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert next(r for r in recs if r["id"] == "a")["history"] == H
    assert "## By multi turn" in (tmp_path / "r" / "report.md").read_text()


# -- the CLI ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content, words", [
    ("[{\"role\": \"bot\", \"content\": \"x\"}]", "history[0].role must be one of"),
    ("{not json", "not valid JSON"),
    ("\"just a string\"", "must be a list of turns"),
])
def test_ask_history_file_errors_are_one_clear_line(capsys, tmp_path, content, words):
    f = tmp_path / "h.json"
    f.write_text(content)
    code = main(["ask", FOLLOW_UP, "--history", str(f), "--store", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
    code = main(["ask", FOLLOW_UP, "--history", str(tmp_path / "missing.json")])
    assert code == 2 and "cannot read --history file" in capsys.readouterr().err
