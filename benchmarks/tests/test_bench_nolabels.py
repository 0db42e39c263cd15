"""`declrag bench nolabels`: what each check would have shipped, and how much of their passage's words questions
share (the measurements that decide the check a compile with no labels uses)."""

from __future__ import annotations

from declrag.golden import Example
from declrag.types import GoldSpan


def test_word_overlap_counts_the_words_near_the_gold_span_and_falls_back_to_the_document():
    from declrag_bench.nolabels import NEAR, overlap

    text = "filler " * 100 + "The Normans conquered England in 1066. " + "filler " * 100 + "Far away: dukes."
    at = text.index("The Normans")
    near = Example(id="a", question="When did the Normans conquer dukes?", gold={"d": 1},
                   spans=(GoldSpan("d", at, at + 38),))
    assert overlap([near], {"d": text}) == {"questions": 1, "share": 0.667}  # normans, conquer(ed) near; dukes far
    assert text.index("dukes") - (at + 38) > NEAR
    whole = Example(id="b", question="Which dukes?", gold={"d": 1})  # no span: its gold document
    assert overlap([whole], {"d": text})["share"] == 1.0
    assert overlap([Example(id="c", question="Who?", gold={"x": 1})], {"d": text})["questions"] == 0


def test_each_check_is_read_off_the_compiles_selection():
    from declrag_bench.nolabels import RULES, _params_of

    summary = {"baseline": {"params": {"alpha": 0.5}}, "best": {"params": {"alpha": 0.9}}, "shipped": "best",
               "selection": {"search_best": 7, "candidates": [
                   {"trial": 7, "params": {"alpha": 0.1}, "lower": -0.02},  # the luckiest: does not hold
                   {"trial": 3, "params": {"alpha": 0.2}, "lower": 0.03, "by_writer": {"ict": -0.01}},  # a writer loses
                   {"trial": 5, "params": {"alpha": 0.3}, "lower": 0.02, "by_writer": {"ict": 0.01}},  # within noise
                   {"trial": 9, "params": {"alpha": 0.9}, "lower": 0.01, "by_writer": {"ict": 0.05}}]}}
    got = _params_of(summary)
    assert got == {RULES[0]: {"alpha": 0.1}, RULES[1]: {"alpha": 0.2}, RULES[2]: {"alpha": 0.3},
                   RULES[3]: {"alpha": 0.9}}
    summary.update(shipped="baseline", selection={"search_best": 7, "candidates": [
        {"trial": 7, "params": {"alpha": 0.1}, "lower": -0.02}]})
    got = _params_of(summary)
    assert got[RULES[1]] == got[RULES[2]] == got[RULES[3]] == {"alpha": 0.5}  # nothing holds: the baseline
