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


def test_transfer_tries_each_single_change_and_says_which_writer_predicts_the_real_sign():
    from declrag.optimize._space import read_space
    from declrag_bench.transfer import _predicts, one_changes

    space = read_space("retrieval")
    base = space.baseline_values()
    changes = dict(one_changes(space.params, base))
    assert set(changes) == {"chunker=recursive", "chunk_size=512", "alpha=0.0", "alpha=0.25", "alpha=0.75",
                            "alpha=1.0", "fusion=ranked", "candidates=200", "window=1", "rerank=bm25",
                            "documents=0.3", "named=True"}
    for label, params in changes.items():  # one parameter differs, no parameter of another's condition added
        assert set(params) == set(base) and sum(params[k] != base[k] for k in base) == 1, label
    rows = [{"synthetic": s, "by_writer": {"ict": s, "situated": t}, "real": {"diff": t}}
            for s, t in [(0.1, -0.1), (0.05, 0.02), (-0.03, -0.04), (0.2, -0.05)]]
    got = _predicts(rows)
    assert got["situated"] == {"changes": 4, "same_sign": 4, "pearson": 1.0}
    assert got["ict"]["same_sign"] == 2 and got["ict"]["pearson"] < 0
    assert got["writers together"] == got["ict"]


def test_the_changes_that_hold_alone_make_one_program():
    from declrag_bench.transfer import alone

    base = {"alpha": 0.5, "window": 0, "rerank": "none"}
    rows = [{"params": {**base, "alpha": 0.25}, "lower": 0.01, "writer_lower": {"ict": 0.02, "keywords": 0.01}},
            {"params": {**base, "alpha": 0.0}, "lower": 0.03, "writer_lower": {"ict": 0.01, "keywords": 0.05}},
            {"params": {**base, "window": 1}, "lower": 0.02, "writer_lower": {"ict": 0.03, "keywords": 0.01,
                                                                              "situated": -0.2}},  # a probe: aside
            {"params": {**base, "rerank": "bm25"}, "lower": 0.05, "writer_lower": {"ict": -0.01, "keywords": 0.2}}]
    assert alone(rows, base) == {"alpha": 0.0, "window": 1, "rerank": "none"}  # bm25: the ict questions lose
    assert alone([], base) == base
