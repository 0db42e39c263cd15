"""GEPA's feedback text (`declrag.metrics.feedback.findings`) and the GEPA metric of prompt optimization
(`declrag.optimize._prompts.gepa_metric`): crafted answers whose faults the text must name."""

from __future__ import annotations

import typing

import dspy
import pytest

from declrag.errors import DeclragError
from declrag.metrics.base import Case, Passage
from declrag.metrics.feedback import LIMIT, NO_PROBLEMS, findings, lines
from declrag.optimize import _prompts as prompts
from declrag.optimize._prompts import Scorer, gepa_metric, objective_metric
from declrag.optimize._space import PromptOptimizer, Space

NORMANS = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
           "France. They were descended from Norse raiders and pirates led by their leader Rollo.")
EIFFEL = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It was completed in 1889 as "
          "the entrance arch to the World's Fair.")
PASSAGES = [Passage("c1", "d1", NORMANS), Passage("c2", "d2", EIFFEL)]
RAIDERS = "Who led the Norse raiders?"
BUILT = "When was the Eiffel Tower completed?"


def case(question: str, answer: str, refs: tuple[str, ...] = (), answerable: bool = True,
         abstained: bool = False) -> Case:
    return Case(question=question, answer=answer, references=list(refs), answerable=answerable, abstained=abstained,
                passages=list(PASSAGES))


def test_an_invented_name_is_named():
    text = findings(case(RAIDERS, "The Norse raiders were led by Harald Bluetooth [1].", ("Rollo",)))
    assert 'names: "Harald Bluetooth"' in text
    assert "Not in any passage" in text
    assert 'reference answer "Rollo"' in text and "passage [1]" in text  # and where the right answer was


def test_an_invented_number_is_named_and_the_true_one_is_not():
    text = findings(case(BUILT, "The Eiffel Tower was completed in 1925 [2].", ("1889",)))
    assert '"1925"' in text and "numbers/dates" in text
    assert 'reference answer "1889"' in text and "passage [2]" in text
    assert findings(case(BUILT, "The Eiffel Tower was completed in 1889 [2].", ("1889",))) == NO_PROBLEMS


def test_an_unsupported_sentence_is_quoted_and_the_supported_one_is_not():
    answer = ("The Norse raiders were led by their leader Rollo [1]. "
              "The raiders also built many wooden churches along the coastline every summer [1].")
    text = findings(case(RAIDERS, answer, ("Rollo",)))
    assert "No passage supports the sentence" in text
    assert "wooden churches along the coastline" in text
    assert "led by their leader Rollo" not in text


def test_a_wrong_citation_names_the_passage_that_does_support_it():
    text = findings(case(BUILT, "The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair [1].",
                         ("1889",)))
    assert "cites [1], which does not support it; passage [2] does" in text
    assert "No passage supports" not in text  # it is supported, by the other passage


def test_an_answered_unanswerable_question_comes_first():
    found = lines(case("What is the height of the tallest tower in Normandy?",
                       "The tallest tower in Normandy is 300 metres high [2].", answerable=False))
    assert found[0].startswith("Answered an unanswerable question")
    assert any('"300"' in line for line in found[1:])


def test_an_abstention_is_judged_by_whether_the_answer_was_retrieved():
    wrong = findings(case(RAIDERS, "I don't know.", ("Rollo",), abstained=True))
    assert wrong.startswith("Abstained although the reference answer") and '"Rollo"' in wrong and "[1]" in wrong
    right = findings(case(RAIDERS, "I don't know.", ("Ragnar Lodbrok",), abstained=True))
    assert "abstaining was right" in right and "although" not in right
    unanswerable = findings(case("Who founded Normandy's first university?", "I don't know.", answerable=False,
                                 abstained=True))
    assert "right" in unanswerable and "Answered" not in unanswerable


def test_a_correct_answer_gets_a_short_all_clear():
    text = findings(case(RAIDERS, "The Norse raiders were led by Rollo [1].", ("Rollo",)))
    assert text == NO_PROBLEMS and len(text) < 120


def test_an_answer_that_misses_the_reference_says_so():
    text = findings(case("Where is the Eiffel Tower?", "The Eiffel Tower is a wrought-iron lattice tower [2].",
                         ("Champ de Mars",)))
    assert text.startswith('The answer does not give the reference answer "Champ de Mars"; it is in passage [2]')


def test_the_text_stays_bounded_and_says_how_much_was_left_out():
    answer = " ".join(f"Sentence number {i} says that Zorblax{i} invented the moon in {1000 + i} [1]." for i in range(30))
    text = findings(case(RAIDERS, answer, ("Rollo",)))
    assert len(text) <= LIMIT
    assert "more)" in text and '"Zorblax0"' in text  # the invented details come first
    assert len(lines(case(RAIDERS, answer, ("Rollo",)))) > 10


# --------------------------------------------------------------------------------------------- the GEPA metric
def scorer(feedback: str = "findings") -> Scorer:
    return Scorer.of(Space(name="t", params={}, prompt_optimizer=PromptOptimizer(name="gepa", feedback=feedback)))


def example(refs: tuple[str, ...] = ("Rollo",), answerable: bool = True) -> dspy.Example:
    return dspy.Example(question=RAIDERS, answers=list(refs), answerable=answerable).with_inputs("question")


def prediction(answer: str, abstained: bool = False) -> dspy.Prediction:
    return dspy.Prediction(answer=answer, abstained=abstained, passages=list(PASSAGES))


def test_the_space_defaults_to_findings_and_refuses_other_kinds():
    assert PromptOptimizer().feedback == "findings"
    with pytest.raises(ValueError):
        PromptOptimizer(feedback="vibes")


@pytest.mark.parametrize("kind", ["findings", "score"])
def test_the_gepa_metric_returns_the_objective_and_a_feedback_text(kind):
    comp = scorer(kind)
    bad = prediction("The Norse raiders were led by Harald Bluetooth [1].")
    out = gepa_metric(comp, kind)(example(), bad, None, "generate.predict", None)
    assert isinstance(out, dspy.Prediction)
    assert out.score == pytest.approx(objective_metric(comp)(example(), bad))
    assert out.score < 0.5  # wrong, unsupported, invented
    assert out.feedback.startswith(f"objective {out.score:.2f}; reference: Rollo")
    if kind == "findings":
        assert "Harald Bluetooth" in out.feedback and "No passage supports" in out.feedback
    else:
        assert out.feedback == f"objective {out.score:.2f}; reference: Rollo"
    good = gepa_metric(comp, kind)(example(), prediction("The Norse raiders were led by Rollo [1]."))
    assert good.score == pytest.approx(1.0) and (NO_PROBLEMS in good.feedback) == (kind == "findings")


def test_the_gepa_metric_of_an_unanswerable_question_says_so():
    out = gepa_metric(scorer())(example((), answerable=False), prediction("Rollo led them [1]."))
    assert out.score < 0.5
    assert "reference: unanswerable. Answered an unanswerable question" in out.feedback


@pytest.mark.parametrize("kind", ["findings", "score"])
def test_prompt_optimization_hands_gepa_the_configured_feedback(monkeypatch, kind):
    seen = {}

    class FakeGEPA:
        def __init__(self, metric, **kw):
            seen["metric"], seen["kw"] = metric, kw

        def compile(self, prog, trainset, valset):
            return prog

    monkeypatch.setattr(prompts.dspy, "GEPA", FakeGEPA)
    train = [example()] * 3
    assert prompts.Gepa(scorer(kind)).evolve("program", train, train, lm=None) == "program"
    assert seen["kw"]["max_metric_calls"] == PromptOptimizer().trials * 3
    text = seen["metric"](example(), prediction("The Norse raiders were led by Harald Bluetooth [1].")).feedback
    assert ("Harald Bluetooth" in text) == (kind == "findings")


# --------------------------------------------------------------------------------------------- the optimizer table
def scorer_for(name: str) -> Scorer:
    return Scorer.of(Space(name="t", params={}, prompt_optimizer=PromptOptimizer(name="knn").model_copy(
        update={"name": name})))  # model_copy: a name the space itself would refuse


def test_every_optimizer_the_space_can_name_is_in_the_table():
    names = set(typing.get_args(PromptOptimizer.model_fields["name"].annotation)) - {"none"}
    assert set(prompts.OPTIMIZERS) == names
    assert all(prompts.OPTIMIZERS[n].name == n for n in names)


def test_the_table_refuses_an_unknown_optimizer_by_name():
    with pytest.raises(DeclragError) as e:
        prompts.optimize_prompts("program", scorer_for("simba"), [], [])
    assert "unknown prompt optimizer 'simba'" in e.value.message
    assert "bootstrap, gepa, knn, mipro" in e.value.hint


class _Program:
    def named_predictors(self):
        return [("generate", dspy.Predict("question -> answer"))]


def test_a_registered_optimizer_is_run_by_name_and_its_failure_is_reported(monkeypatch):
    seen = {}

    class Echo(prompts.Optimizer):
        name = "echo"

        def info(self):
            return {"echo": True}

        def run(self, prog, train, dev):
            seen["train"], seen["dev"] = train, dev
            if not train:
                raise RuntimeError("nothing to learn from\nsecond line")
            return prog

    monkeypatch.setitem(prompts.OPTIMIZERS, "echo", Echo)
    comp, prog = scorer_for("echo"), _Program()
    new, info = prompts.optimize_prompts(prog, comp, list(range(50)), list(range(60)))
    assert new is prog and info["echo"] and info["train_examples"] == 40 == len(seen["train"]) == len(seen["dev"])
    assert info["demos"] == {"generate": 0} and "error" not in info
    new, info = prompts.optimize_prompts(prog, comp, [], [])
    assert new is prog and info["error"] == "RuntimeError: nothing to learn from"  # reported; the program stands
