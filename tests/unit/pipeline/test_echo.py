"""An LM answer that is an answer (`declrag.pipeline.stages.generate`): an output that echoes the prompt or copies the passages
is caught and never passed on, whatever the mode (lm, verified), the path (the program, the stream, HTTP) or the
check after it; and one default answer everywhere (``generate.mode: auto``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import anyio
import pytest
from dspy.utils.dummies import DummyLM

from declrag.config import ProgramConfig, answer_mode, default_config, with_model
from declrag.lm import using_lm
from declrag.lm.prompts._adapters import PlainTextAdapter
from declrag.pipeline.stages.generate._echo import COPY_WORDS, EchoGate, Prompt, caught
from declrag.pipeline.program import LOCAL_DEFAULT_MODE, RAGProgram, load
from declrag.answering.selection import answers_line, select_program
from declrag.pipeline.stages.generate._streaming import Done, astream
from declrag.testing import HashEmbedder, StreamingLM
from tests.conftest import asked_plain_and_streamed

Q = "What is the capital of Italy?"
LOW = {"min_score": 0.0, "require_details": False}  # HashEmbedder's cosines are low: tests set the threshold
LONG = ("The committee met in the spring of that year to review the budget of the northern district and to decide "
        "which of the three bridges would be repaired first. After a long debate the members agreed that the oldest "
        "bridge, built of stone in the previous century, carried the most traffic and should come first.")
# what SmolLM2 answered on the README's path: the prompt handed back
ECHO = "Question:\nWhat is the capital of Italy?\n\nContext:\n[1] Rome is the capital of Italy."



def make(store, mode: str = "lm", **generate) -> RAGProgram:
    cfg = ProgramConfig.model_validate({"generate": {"mode": mode, "extract": LOW, **generate}})
    return RAGProgram(cfg, store=store, embedder=HashEmbedder())


def ask(prog, *answers: str, question: str = Q):
    lm = DummyLM([{"answer": a} for a in answers] or [{"answer": "unused"}], adapter=PlainTextAdapter())
    with using_lm(lm):
        return prog(question=question)


# ------------------------------------------------------------------------------------------- what is caught
@pytest.mark.parametrize("output, kind", [
    (ECHO, "echo"),
    ("context: [1] Rome is the capital of Italy.", "echo"),  # a label, in any case
    ("Rome. What is the capital of the Republic of Italy today", "echo"),  # the question, word for word
    ("As [2] The Colosseum is an amphitheatre in Rome says, Rome [1].", "echo"),  # a passage as the prompt numbers it
    ("Sure. Answer the question using the passages. Cite the passages you use as numbers.", "echo"),
    (LONG, "copy"),
    (LONG + " [1]", "copy"),
    ('The answer to the question "which three bridges would the committee repair first" is the stone one.', "echo"),
    ("[2] (Bridges — Repairs) the members agreed", "echo"),  # a passage's label as the prompt shows it
    ("[1]\n```", "empty"),
])
def test_echoes_and_copies_are_caught(output, kind):
    passages = ["Rome is the capital of Italy.", "The Colosseum is an amphitheatre in Rome.", LONG]
    question = Q if "Republic" not in output else "What is the capital of the Republic of Italy today"
    if "bridges" in output:
        question = "In the minutes, which three bridges would the committee repair first this year?"
    got = caught(output, question, passages, "Answer the question using the passages. Cite the passages you use "
                 "as numbers in brackets.", ["", "Bridges — Repairs", ""])
    assert got is not None and got.kind == kind, got


@pytest.mark.parametrize("output", [
    "Rome is the capital of Italy [1].",  # one sentence quoted with its citation is an answer
    "Rome [1].",
    "The capital is Rome [1]; the Colosseum, an amphitheatre, stands there [2].",
    # long, mostly its own words, one phrase of the passage among them
    "The members chose the stone bridge because, in their view, it carried the most traffic and should come first; "
    "the other two bridges were left for a later budget, when the district would have more money to spend on them, "
    "and nobody at the meeting objected to waiting [3].",
    "What is the capital? Rome [1].",  # a short question's words are not an echo
    # an answer that restates the question's words to give its answer (what a capable LM writes)
    "The three bridges the committee would repair first this year were the stone ones [3].",
])
def test_answers_are_not_caught(output):
    passages = ["Rome is the capital of Italy.", "The Colosseum is an amphitheatre in Rome.", LONG]
    question = "In the minutes, which three bridges would the committee repair first this year?"
    assert caught(output, question if "bridges" in output else Q, passages,
                  "Answer the question using the passages.") is None


def test_a_copy_needs_enough_copied_words():
    short = " ".join(LONG.split()[:COPY_WORDS - 5])
    assert caught(short, Q, [LONG]) is None
    assert caught(" ".join(LONG.split()[:COPY_WORDS + 5]), Q, [LONG]).kind == "copy"
    # runs copied from two passages count alike; words across the seam of two passages do not form a run
    halves = [" ".join(LONG.split()[:30]), " ".join(LONG.split()[30:])]
    assert caught(LONG, Q, halves).kind == "copy"


def test_the_gate_sends_nothing_of_an_echo_and_all_of_an_answer_in_the_end():
    gate = EchoGate(Prompt(Q, ["Rome is the capital of Italy."]))
    assert gate.safe(ECHO[:9]) == 0 and gate.safe(ECHO) == 0 and gate.blocked
    assert gate.safe(ECHO + " And more words of an answer that go on and on for a while.") == 0
    answer = "The city that the passages name as the capital of Italy is Rome, and it has been so since 1871 [1]."
    free = EchoGate(Prompt(Q, ["Rome is the capital of Italy."], "Answer the question using the passages."))
    assert free.safe(answer) == len(answer)  # nothing in it can become an echo: all of it goes at once
    for start in ("What is the", "Quest", "Rome [1] Rome is", "Sure: answer the question using"):
        held = EchoGate(Prompt(Q, ["Rome is the capital of Italy."], "Answer the question using the passages."))
        assert held.safe(start) < len(start) and not held.blocked, start  # it may yet become an echo: wait
    copy = EchoGate(Prompt(Q, [LONG]))
    lead = "In short, the record says this: "
    assert copy.safe(lead + LONG) <= len(lead)  # nothing from the first copied run on


# ------------------------------------------------------------------------------------------- the program
def test_an_echo_is_replaced_by_the_extractive_answer_and_says_so(store):
    a = ask(make(store), ECHO)
    assert "Question:" not in a.answer and "Context:" not in a.answer and not a.abstained
    assert a.caught == {"kind": "echo", "why": "repeats the prompt's 'Question:' label", "replaced_by": "extractive"}
    assert a.checked["caught"] == "echo" and a.checked["replaced_by"] == "extractive"
    assert any(c.get("quotes") for c in a.citations)  # the stand-in is cited with its exact spans
    assert a.to_dict()["caught"]["kind"] == "echo"
    good = ask(make(store), "Rome is the capital [1].")
    assert good.caught is None and good.answer.startswith("Rome is the capital")


def test_caught_abstain_and_retry(store):
    a = ask(make(store, caught="abstain"), ECHO)
    assert a.abstained and a.answer == "I don't know." and a.caught["replaced_by"] == "abstention"
    r = ask(make(store, caught="retry"), ECHO, "Rome [1].")
    assert r.answer == "Rome [1]." and r.caught["replaced_by"] == "retry"  # the strict prompt's answer
    twice = ask(make(store, caught="retry"), ECHO, ECHO)  # the retry echoes too: the extractive answer
    assert "Question:" not in twice.answer and twice.caught["replaced_by"] == "extractive" and "retry" in twice.caught


def test_verified_does_not_count_a_copied_prompt_as_support(store):
    """Every sentence of the echo is the passages' own; the sentence check would keep them."""
    a = ask(make(store, "verified"), ECHO)
    assert "Question:" not in a.answer and "Context:" not in a.answer
    assert a.caught["kind"] == "echo" and a.dropped_sentences == 0


def test_the_grounding_judge_regenerates_through_the_same_catch(store):
    cfg = ProgramConfig.model_validate({"generate": {"mode": "lm", "extract": LOW},
                                        "judge": {"mode": "grounding", "policy": "regenerate"}})
    a = ask(RAGProgram(cfg, store=store, embedder=HashEmbedder()), "Bananas grow on the moon [1].", ECHO)
    assert "Question:" not in a.answer and a.judge["action"] == "regenerated"


def test_no_word_of_an_echo_is_streamed(store):
    prog = make(store)

    async def go():
        with using_lm(StreamingLM(ECHO + " Rome is the capital of Italy [1] and so the answer is Rome.")):
            return [item async for item in astream(prog, lambda: prog(question=Q))]

    items = anyio.run(go)
    done = items[-1]
    assert isinstance(done, Done) and done.result.caught["kind"] == "echo"
    sent = "".join(i for i in items if isinstance(i, str))
    assert "Question" not in sent and "Context" not in sent and Q not in sent


def test_serve_counts_what_it_caught(store):
    from declrag.serve import ServeSettings, create_app
    from declrag.testing import ScriptedLM

    app = create_app(make(store), "e", None, ServeSettings(), lm_override=lambda: ScriptedLM({}, {"answer": ECHO}))
    r, streamed, metrics = asked_plain_and_streamed(app, Q)
    assert "Question:" not in r["answer"] and r["caught"]["kind"] == "echo"
    assert 'declrag_lm_answers_caught_total{kind="echo",replaced_by="extractive"} 2.0' in metrics
    last = json.loads(streamed.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert "Question:" not in last["answer"] and last["caught"]["kind"] == "echo"


# ------------------------------------------------------------------------------------------- one default answer
def test_auto_writes_with_a_named_model_and_answers_extractively_without_one():
    assert ProgramConfig().generate.mode == "auto" and answer_mode(ProgramConfig()) == LOCAL_DEFAULT_MODE
    assert answer_mode(default_config(model="openai/gpt-4o-mini")) == "lm"
    assert answer_mode(default_config(model="local/smollm2")) == "lm"  # a model named is a model to write with
    assert answer_mode(ProgramConfig.model_validate({"lm": {"route": "ollama/llama3"}})) == "lm"  # named in the config
    assert answer_mode(ProgramConfig(), lm_set=True) == "lm"  # set in code (using_lm)
    chosen = ProgramConfig.model_validate({"generate": {"mode": "verified"}})
    assert answer_mode(with_model(chosen, "openai/x")) == "verified"  # a mode set by the user stands
    assert "extractive" in answers_line(ProgramConfig()) and "--model" in answers_line(ProgramConfig())


def test_a_program_saved_without_a_model_answers_as_ask_does_and_takes_one_at_serve(store, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # checked when the program is made; no call is made
    RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder()).save(tmp_path / "p")
    assert json.loads((tmp_path / "p" / "program.json").read_text())["config"]["generate"]["mode"] == "auto"
    prog = load(tmp_path / "p", store=store, embedder=HashEmbedder())
    assert prog.answer_mode == "extractive" and "generate" not in prog.lm_stages()
    assert load(tmp_path / "p", store=store, model="openai/gpt-4o-mini").answer_mode == "lm"
    choice = select_program(tmp_path / "p", store=store)
    assert choice.answers.startswith("answers: extractive")
    assert select_program(tmp_path / "p", store=store, model="openai/gpt-4o-mini").answers.startswith(
        "answers: written by openai/gpt-4o-mini")


def test_a_program_saved_to_write_with_the_local_model_still_does_and_says_so(store):
    """tests/data/artifact-c0696d8 was saved with generate.mode verified on local/smollm2; an lm one alike."""
    old = Path(__file__).parents[2] / "data" / "artifact-c0696d8"
    choice = select_program(old, store=store)
    assert "verified" in choice.answers and "Note: local/smollm2 is a small model" in choice.answers
    assert "--answer-mode extractive" in choice.answers
    assert load(old, store=store, embedder=HashEmbedder()).answer_mode == "verified"
    moved = select_program(old, store=store, answer_mode="extractive")
    assert moved.answers.startswith("answers: extractive")


def test_a_program_saved_before_modes_writes_with_its_lm_as_it_did(store):
    """tests/data/artifact-0.1.0 (format 1) has no generate.mode: it wrote with local/smollm2, and still does."""
    old = Path(__file__).parents[2] / "data" / "artifact-0.1.0"
    with warnings.catch_warnings():  # library versions may have moved since it was saved
        warnings.simplefilter("ignore")
        prog = load(old, store=store, embedder=HashEmbedder())
    assert prog.config.generate.mode == "lm" and prog.answer_mode == "lm"
    assert "written by local/smollm2" in select_program(old, store=store).answers


def test_restating_the_question_answers_it_and_quoting_it_does_not():
    asked = "What is the only variety of modern Arabic that has acquired official language status?"
    said = "The only variety of modern Arabic that has acquired official language status is Modern Standard Arabic [1]."
    assert caught(said, asked, ["Modern Standard Arabic is the official language."]) is None
    quoted = 'The answer to the question "the only variety of modern Arabic that has acquired official" is 1 [1].'
    assert caught(quoted, asked, ["Modern Standard Arabic is the official language."]).kind == "echo"
