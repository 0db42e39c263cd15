"""Retrieval over passages, independent of chunking (declrag.metrics.passages): the coverage rule, one credit per gold
span, the three units, and the truth a long-document set, a user's JSONL and `declrag synth` carry."""

from __future__ import annotations

import json
import math

import pytest

from declrag.errors import DeclragError
from declrag.golden import Example, load_golden
from declrag.metrics import get_metrics, to_case
from declrag.metrics.passages import covers, credit_scores, credits, passage_scores, unit_of
from declrag.types import GoldSpan

from tests.conftest import shared

TEXT = "Paris is the capital of France. It is on the Seine. Lyon is the third city of France by population."
CAPITAL = GoldSpan("fr", 0, 31, 1, "capital of France")  # the first sentence


def test_the_coverage_rule():
    assert covers("fr", 0, 60, TEXT[:60], CAPITAL)  # contains it
    assert not covers("de", 0, 60, TEXT[:60], CAPITAL)  # another document
    assert covers("fr", 10, 40, TEXT[10:40], CAPITAL)  # two thirds of it and the answer string
    assert not covers("fr", 20, 60, TEXT[20:60], CAPITAL)  # a third of it
    assert not covers("fr", 0, 20, TEXT[0:20], CAPITAL)  # two thirds of it, but the answer string is cut
    assert not covers("fr", 25, 90, TEXT[25:90], CAPITAL)  # a fifth of it
    bare = GoldSpan("fr", 0, 31)  # no answer string: half of the span is enough
    assert covers("fr", 15, 60, TEXT[15:60], bare) and not covers("fr", 17, 60, TEXT[17:60], bare)


def test_one_credit_per_span_whatever_the_chunking():
    """The same truth scored on two chunkings: small chunks, one of which covers it, and one big chunk."""
    spans = [CAPITAL, GoldSpan("fr", 52, 99, 2, "third city")]
    small = [("fr", 52, 99, TEXT[52:99]), ("fr", 0, 31, TEXT[0:31]), ("fr", 32, 51, TEXT[32:51])]
    big = [("fr", 0, len(TEXT), TEXT)]
    s, unit = passage_scores(small, spans, [], {"fr": 1})
    assert unit == "span"
    assert s["hit@1"] == 1.0 and s["recall@5"] == 1.0 and s["mrr@10"] == 1.0 and s["ndcg@10"] == pytest.approx(1.0)
    assert credit_scores([{1}, {0}, set()], [1, 2], ["precision@5"]) == {"precision@5": pytest.approx(0.4)}
    b, _ = passage_scores(big, spans, [], {"fr": 1})
    assert b["recall@5"] == 1.0 and b["ndcg@10"] == pytest.approx(1.0)  # capped: one passage covers both credits
    reversed_order, _ = passage_scores(small[::-1], spans, [], {"fr": 1})  # the lesser span first: lower nDCG
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert reversed_order["ndcg@10"] == pytest.approx((1 / math.log2(3) + 2 / math.log2(4)) / ideal)
    assert reversed_order["mrr@10"] == 0.5 and reversed_order["recall@5"] == 1.0


def test_overlapping_spans_are_one_credit():
    """SQuAD's annotators mark "Denver Broncos" and "The Denver Broncos": one credit, covered by either."""
    a, b = GoldSpan("d", 10, 24, 1, "Denver Broncos"), GoldSpan("d", 6, 24, 1, "The Denver Broncos")
    assert len(credits([a, b])) == 1
    covered = [{0}]
    assert credit_scores(covered, [1], ["recall@5", "ndcg@10"]) == {"recall@5": 1.0, "ndcg@10": 1.0}


def test_the_unit_of_a_question():
    assert unit_of([CAPITAL], ["capital of France"], {"fr": 1}) == "span"
    assert unit_of([], ["Paris"], {"fr": 1}) == "document"  # an answer not found in its gold document when loaded
    assert unit_of([], ["Paris"], {}) == "answer"  # no gold document: a passage holding the answer
    long_answer = "Paris is the capital and the most populous city of France, on the Seine, in the north of the country"
    assert unit_of([], [long_answer], {}) is None  # free text and nothing else: nothing to score against
    assert unit_of([], [], {}) is None
    s, unit = passage_scores([("de", 0, 10, "Berlin is"), ("fr", 0, 31, TEXT[:31])], [], ["Paris"], {})
    assert unit == "answer" and s["mrr@10"] == 0.5


def test_short_answers_without_offsets_become_spans_of_one_credit(tmp_path):
    """A set with answers but no offsets (CMU QA, a user's JSONL): where an answer occurs in its gold document, every
    occurrence is a span and all of them one credit; a yes/no answer keeps the gold document."""
    text = "Lyon is big. The Rhone flows through Lyon. Rivers: the rhone  and the Saone."
    f = _write_set(tmp_path, [{"question": "Which river?", "gold": ["ly"], "answers": ["the Rhone"]},
                              {"question": "Is Lyon big?", "gold": ["ly"], "answers": ["Yes, it is."]}],
                   corpus=({"_id": "ly", "text": text},))
    river, yes = load_golden(f).split("all")
    assert [text[s.start:s.end] for s in river.gold_spans()] == ["The Rhone", "the rhone"]
    assert {s.credit for s in river.gold_spans()} == {"answer"} and len(credits(river.gold_spans())) == 1
    assert yes.gold_spans() == () and unit_of([], yes.answers, yes.gold) == "document"
    second = [("ly", 13, 42, text[13:42])]  # the first occurrence only: the one credit is covered
    assert passage_scores(second, list(river.gold_spans()), river.answers, river.gold)[0]["recall@5"] == 1.0


def test_a_case_from_squad_offsets_is_scored_on_spans():
    """An example with answer offsets in its one gold document: the metric reads the spans (the report says so)."""
    ex = Example(id="q", question="What is the capital of France?", answers=("Paris",), gold={"fr": 1},
                 answer_starts=(0,))
    assert ex.gold_spans() == (GoldSpan("fr", 0, 5, 1, "Paris"),)
    passages = [{"chunk_id": "c2", "doc_id": "fr", "text": TEXT[32:], "span": [32, len(TEXT)]},
                {"chunk_id": "c1", "doc_id": "fr", "text": TEXT[:31], "span": [0, 31]}]
    (m,) = get_metrics(["mrr@10"])
    score = m.score(to_case(ex, {"passages": passages}))
    assert score.value == 0.5 and score.details["unit"] == "span"  # on documents it would be 1.0


def _write_set(tmp_path, lines, corpus=({"_id": "fr", "text": TEXT},)):
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus) + "\n")
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return tmp_path / "questions.jsonl"


def test_jsonl_spans_load(tmp_path):
    f = _write_set(tmp_path, [{"question": "Which city is the capital?",
                               "spans": [{"doc": "fr", "start": 0, "end": 31, "answer": "Paris"}]}])
    (ex,) = load_golden(f).split("all")
    assert ex.gold_spans() == (GoldSpan("fr", 0, 31, 1, "Paris"),) and ex.gold == {"fr": 1}


@pytest.mark.parametrize("spans, says", [
    ([{"doc": "fr", "start": 0, "end": 500}], "past the end of document 'fr'"),
    ([{"doc": "fr", "start": 9, "end": 9}], "empty or negative span"),
    ([{"doc": "xx", "start": 0, "end": 5}], "no document 'xx'"),
    ([{"doc": "fr", "start": 0, "end": 20}, {"doc": "fr", "start": 10, "end": 30}], "spans[1]: overlaps spans[0]"),
    ([{"doc": "fr", "start": 32, "end": 51, "answer": "Paris"}], "the answer 'Paris' is not inside the span"),
    ([{"start": 0, "end": 5}], "spans[0]: not a span"),
    ("fr:0-5", "`spans` is not a list"),
])
def test_bad_spans_name_the_file_line_and_field(tmp_path, spans, says):
    f = _write_set(tmp_path, [{"question": "fine?", "gold": ["fr"]}, {"question": "Which city?", "spans": spans}])
    with pytest.raises(DeclragError, match="questions.jsonl:2") as e:
        load_golden(f)
    assert says in e.value.message, e.value.message


def test_an_answer_offset_that_misses_its_answer_is_an_error(tmp_path):
    f = _write_set(tmp_path, [{"question": "Which city?", "gold": ["fr"],
                               "answers": [{"text": "Paris", "answer_start": 3}]}])
    with pytest.raises(DeclragError, match=r"questions.jsonl:1: answers\[0\] 'Paris' is not at offset 3"):
        load_golden(f)


def test_squad_articles_are_long_documents_with_exact_spans():
    shared("squad-v1.1")
    gs = load_golden("squad-v1.1-articles")
    assert len(gs.documents) == 48 and len(gs.split("dev")) == 10570
    assert min(len(d.text) for d in gs.documents) > 10_000  # long files, not paragraphs
    for ex in gs.split("dev")[::97]:
        (doc,) = ex.gold
        for s in ex.gold_spans():
            assert gs.doc(doc).text[s.start:s.end] == s.answer


def test_bench_retrieval_on_a_set_too_small_to_tune_is_one_error(tmp_path, capsys):
    """A tiny set (what a short `declrag synth` run can leave): one error and a fix, not a traceback."""
    from declrag.cli import main

    f = _write_set(tmp_path, [{"question": "Which city is the capital?", "gold": ["fr"]}])
    assert main(["bench", "retrieval", "--dataset", str(f)]) == 2
    err = capsys.readouterr().err
    assert "too few to choose the hybrid setting" in err and "fix:" in err and "Traceback" not in err


@pytest.mark.slow
def test_compile_with_no_scorable_test_question_says_so(tmp_path, capsys):
    """A set whose test questions have no gold, spans or short answers: the compile ends and says the test gain
    is none (no test question could be scored), not a TypeError."""
    from declrag.cli import main

    corpus = [{"_id": f"d{i}", "text": f"{TEXT} Document {i} tells of river number {i} and its {i * 3} bridges."}
              for i in range(12)]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus) + "\n")
    for name, rows in (("train", range(0, 6)), ("dev", range(6, 12))):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(
            {"id": f"{name}{i}", "question": f"How many bridges has river number {i}?", "gold": [f"d{i}"]})
            for i in rows) + "\n")
    (tmp_path / "test.jsonl").write_text(json.dumps({"id": "t0", "question": "Is it nice there?"}) + "\n")
    (tmp_path / "dataset.yaml").write_text("name: tiny\nformat: jsonl\npath: .\ncorpus: corpus.jsonl\n"
                                           "splits: {train: train.jsonl, dev: dev.jsonl, test: test.jsonl}\n")
    code = main(["compile", "--space", "retrieval", "--dataset", str(tmp_path), "--name", "tiny",
                 "--runs", str(tmp_path / "runs"), "--max-trials", "2", "-q"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "test gain: none (no test question could be scored" in out and "Traceback" not in err


def test_a_retrieval_metric_registered_once_is_known_to_eval_compile_and_retrieval_first_scoring(monkeypatch):
    """`register_at_k`: one kind, and ``kind@k`` at any depth is a metric `get_metrics` makes (eval, compile's
    objective), scored over the passages, and counts as retrieval for compile's retrieval-first scoring."""
    from declrag.metrics import retrieval
    from declrag.metrics.catalog import get_metrics
    from declrag.optimize._space import Objective

    monkeypatch.setattr(retrieval, "AT_K", dict(retrieval.AT_K))  # registered into a copy, put back after
    retrieval.register_at_k("first", lambda ranked, gold, k: float(bool(ranked[:k]) and gold.get(ranked[0], 0) > 0))
    with pytest.raises(ValueError, match="not a free retrieval metric name"):
        retrieval.register_at_k("ndcg", retrieval.ndcg_at_k)
    [m] = get_metrics(["first@3"])
    assert m.name == "first@3" and retrieval.is_retrieval("first@3") and not retrieval.is_retrieval("sia")
    assert Objective(metrics={"first@3": 1.0}).retrieval_only and not Objective(metrics={"first@3": 1, "sia": 1}
                                                                                 ).retrieval_only
    ranked = ["a", "b", "c"]
    assert retrieval.at_k("first@3", ranked, {"a": 1}) == 1.0 and retrieval.at_k("first@3", ranked, {"b": 1}) == 0.0
