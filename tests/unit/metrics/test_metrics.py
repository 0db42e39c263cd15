"""Every deterministic metric against values worked out by hand, with the edge cases: empty answers,
abstentions on answerable and unanswerable questions, numbers written differently, unicode."""

from __future__ import annotations

import pytest

from declrag.errors import DeclragError
from declrag.metrics import get_metrics, to_case
from declrag.metrics.base import Case, Passage
from declrag.text.normalize import details, numbers, squad_normalize, token_f1

P = "William the Conqueror won the Battle of Hastings in 1066. About 7,000 men fought for him."


def case(answer, refs=("William the Conqueror",), answerable=True, abstained=False, passages=(P,), **kw) -> Case:
    return Case(question="Who won the Battle of Hastings?", answer=answer, references=list(refs), answerable=answerable,
                abstained=abstained, passages=[Passage(f"d#{i}", "d", t) for i, t in enumerate(passages)], **kw)


def m(name: str):
    return get_metrics([name])[0]


def test_squad_normalisation_and_token_f1_by_hand():
    assert squad_normalize("The  Battle, of Hastings!") == "battle of hastings"
    assert squad_normalize("Ünïcödé — “quoted”") == "ünïcödé quoted"
    # "william conqueror won" vs "william conqueror": 2 shared, precision 2/3, recall 1 -> F1 0.8
    assert token_f1("William the Conqueror won", "William the Conqueror") == pytest.approx(0.8)
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0


@pytest.mark.parametrize("name, answer, expected", [
    ("em", "william the conqueror.", 1.0),
    ("em", "William [1]", 0.0),
    ("f1", "William the Conqueror won [1]", 0.8),
    ("token_match", "It was William the Conqueror, in 1066.", 1.0),  # holds all reference tokens
    ("token_match", "William won", 0.0),  # 1 of 2 reference tokens: 50% < 80%
    ("rouge1", "William the Conqueror", 1.0),
    ("rouge2", "the Conqueror William", 0.5),  # bigrams: 1 of the 2 shared each way: P = R = F = 1/2
    ("rouge1_recall", "the Conqueror", 2 / 3),
    ("rougeL", "Conqueror William the", 2 / 3),  # LCS "william the"/"the conqueror" = 2 of 3
])
def test_correctness_by_hand(name, answer, expected):
    assert m(name).score(case(answer)).value == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", ["em", "f1", "token_match", "rouge1", "rougeL", "semantic_similarity"])
def test_abstention_rules_for_correctness(name):
    metric = m(name)
    assert metric.score(case("I don't know.", refs=(), answerable=False, abstained=True)).value == 1.0
    assert metric.score(case("Harold did.", refs=(), answerable=False)).value == 0.0
    assert metric.score(case("I don't know.", abstained=True)).value == 0.0
    assert metric.score(case("", refs=())).value is None  # answerable but no reference: not scored


def test_empty_answer_scores_zero():
    for name in ("em", "f1", "token_match", "rouge1"):
        assert m(name).score(case("")).value == 0.0
    assert m("faithfulness").score(case("")).value == 0.0 and m("sia").score(case("  ")).value == 0.0


def test_numbers_written_differently():
    assert numbers("seven thousand men in 1,066 ships") == ["7000", "1066"]
    assert numbers("5% and five percent, 2.50, the fifth-largest, 3 million") == ["5", "5", "2.5", "5", "3000000"]
    sia = m("sia")
    assert sia.score(case("About seven thousand men fought [1].")).value == 1.0
    assert sia.score(case("About 7000 men fought.")).value == 1.0
    assert sia.score(case("About 8,000 men fought.")).details["unsupported"] == ["8000"]


def test_sia_details_and_rules():
    sia = m("sia")
    ok = sia.score(case("William the Conqueror won at Hastings in 1066 [1]."))
    assert ok.value == 1.0 and set(ok.details["details"]) == {"1066", "William the Conqueror", "Hastings"}
    bad = sia.score(case("Harold Godwinson won the Battle of Stamford Bridge in 1066."))
    assert bad.value == 0.0 and bad.details["unsupported"] == ["Harold Godwinson", "Battle of Stamford Bridge"]
    assert sia.score(case("He won.", refs=(), answerable=False)).value == 0.0  # answered an unanswerable question
    assert sia.score(case("I don't know.", refs=(), answerable=False, abstained=True)).value == 1.0
    assert sia.score(case("I don't know.", abstained=True)).value == 0.0  # the answer was retrieved
    assert sia.score(case("I don't know.", abstained=True, passages=("Cats purr.",))).value == 1.0  # it was not
    assert sia.score(case('They called it "the Conquest".', passages=("It is known as the Conquest.",))).value == 1.0


def test_unicode_names_match_without_accents():
    p = "Zoë Saldaña was born in São Paulo."
    assert m("sia").score(case("Zoe Saldana was born in Sao Paulo.", passages=(p,))).value == 1.0
    assert {d.key for d in details("Zoë met Renée in Zürich.")} == {"zoe", "renee", "zurich"}


def test_faithfulness_and_hallucination():
    f, h = m("faithfulness"), m("hallucination")
    two = case("William the Conqueror won the Battle of Hastings [1]. The battle was fought on the moon in 2020.")
    assert f.score(two).value == 0.5 and h.score(two).value == 0.5
    assert f.score(two).details["unsupported"] == ["The battle was fought on the moon in 2020."]
    assert f.score(case("I don't know.", abstained=True)).value == 1.0  # an abstention claims nothing
    assert h.score(case("I don't know.", abstained=True)).value == 0.0


def test_context_precision_recall_by_hand():
    passages = ("Cats purr.", P, "William the Conqueror was a Norman.")
    c = case("x", passages=passages)
    # relevant ranks 2 and 3: AP = (1/2 + 2/3) / 2
    assert m("context_precision").score(c).value == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert m("context_recall").score(case("x", refs=("William the Norman",), passages=("William was here",))).value == 0.5
    assert m("context_precision").score(case("x", refs=(), answerable=False)).value is None


def test_embedding_metrics_are_bounded_and_sensible(minilm):
    rel = m("answer_relevancy")
    on = rel.score(case("William the Conqueror won the Battle of Hastings.")).value
    off = rel.score(case("Bananas are rich in potassium.")).value
    assert 0 <= off < on <= 1
    cr = m("context_relevance").score(case("x", passages=(P, "Bananas are yellow."))).value
    cr_max = m("context_relevance:max").score(case("x", passages=(P, "Bananas are yellow."))).value
    cr_first = m("context_relevance:first").score(case("x", passages=("Bananas are yellow.", P))).value
    assert 0 <= cr_first < cr < cr_max <= 1
    sim = m("semantic_similarity")
    assert sim.score(case("William the Conqueror")).value == pytest.approx(1.0, abs=1e-5)
    triad = m("triad").score(case("William the Conqueror won the Battle of Hastings [1]."))
    assert triad.value == pytest.approx(sum(triad.details.values()) / 3)


def test_retrieval_metrics_map_chunks_to_gold_spans():
    text = "x" * 100 + "William the Conqueror" + "y" * 100
    passages = [Passage("d#0", "d", text[:90], 0, 90), Passage("d#1", "d", text[90:150], 90, 150),
                Passage("e#0", "e", "other", 0, 5)]
    c = Case(question="q", answer="a", references=["William the Conqueror"], answer_starts=[100], gold={"d": 1},
             passages=passages)
    assert m("hit@1").score(c).value == 0.0  # the first chunk is from the gold paragraph but lacks the answer span
    assert m("hit@5").score(c).value == 1.0 and m("mrr@10").score(c).value == 0.5
    doc_level = Case(question="q", answer="a", gold={"e": 2, "d": 1}, passages=passages)
    assert m("hit@1").score(doc_level).value == 1.0 and m("recall@10").score(doc_level).value == 1.0
    assert m("ndcg@10").score(Case(question="q", answer="a", passages=passages)).value is None  # no gold


def test_dspy_metric_shape_and_unknown_names():
    import dspy

    ex = dspy.Example(question="Who?", answers=["William the Conqueror"], answerable=True)
    pred = dspy.Prediction(answer="William the Conqueror [1]", abstained=False, passages=[])
    assert m("em")(ex, pred) == 1.0 and m("f1")(ex, pred, trace=None) == 1.0
    assert to_case(ex, pred).references == ["William the Conqueror"]
    with pytest.raises(DeclragError, match="unknown metric 'bleu'"):
        get_metrics(["f1", "bleu"])
    with pytest.raises(DeclragError, match="needs an LLM judge"):
        get_metrics(["faithfulness_llm"])


def test_percentiles_are_one_function_for_every_report():
    from declrag.metrics.stats import latency_ms, percentiles

    xs = list(range(1, 101))
    assert percentiles(xs) == {"p50": 50.5, "p95": 95.05}
    assert percentiles(xs, (50, 99), suffix="_ms") == {"p50_ms": 50.5, "p99_ms": 99.01}
    assert percentiles([0.001, 0.002, float("nan")], (50,), 1000.0, 1) == {"p50": 1.5}  # NaN left out
    assert percentiles([], (50, 95)) == {"p50": None, "p95": None}
    assert latency_ms([0.010, 0.020, 0.030]) == {"p50": 20.0, "p95": 29.0}
    assert latency_ms([0.010], suffix="_ms") == {"p50_ms": 10.0, "p95_ms": 10.0}
