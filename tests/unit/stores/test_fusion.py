"""Weaviate's fusion, checked against values computed by hand."""

import pytest

from declrag.stores.fusion import fuse, leg_size, object_uuid


def test_relative_score_fusion_by_hand():
    # keyword scores 1, 8, 6, 11 normalise to 0, 0.7, 0.5, 1 (Weaviate's own example)
    kw = [("d", 11.0), ("b", 8.0), ("c", 6.0), ("a", 1.0)]
    vec = [("a", 0.9), ("e", 0.5), ("b", 0.1)]  # normalise to 1, 0.5, 0
    got = dict(fuse(kw, vec, alpha=0.25))
    assert got["d"] == pytest.approx(0.75 * 1.0)
    assert got["b"] == pytest.approx(0.75 * 0.7 + 0.25 * 0.0)
    assert got["c"] == pytest.approx(0.75 * 0.5)
    assert got["a"] == pytest.approx(0.75 * 0.0 + 0.25 * 1.0)
    assert got["e"] == pytest.approx(0.25 * 0.5)
    assert [k for k, _ in fuse(kw, vec, alpha=0.25)] == ["d", "b", "c", "a", "e"]


def test_ranked_fusion_by_hand():
    kw = [("a", 3.0), ("b", 2.0)]
    vec = [("b", 0.9), ("c", 0.8)]
    got = dict(fuse(kw, vec, alpha=0.5, fusion="ranked"))
    assert got["a"] == pytest.approx(0.5 / 60)
    assert got["b"] == pytest.approx(0.5 / 61 + 0.5 / 60)
    assert got["c"] == pytest.approx(0.5 / 61)
    assert [k for k, _ in fuse(kw, vec, 0.5, "ranked")] == ["b", "a", "c"]


def test_alpha_zero_and_one_use_one_leg():
    kw = [("a", 2.0), ("b", 1.0)]
    vec = [("c", 0.9), ("b", 0.5)]
    assert fuse(kw, vec, 0.0) == [("a", 1.0), ("b", 0.0)]
    assert fuse(kw, vec, 1.0) == [("c", 1.0), ("b", 0.0)]
    assert [k for k, _ in fuse(kw, vec, 1.0, "ranked")] == ["c", "b"]


def test_equal_scores_get_the_full_weight_and_ties_break_by_object_uuid():
    kw = [("z", 4.0), ("y", 4.0), ("x", 4.0)]  # all equal: each gets weight 1 - alpha
    got = fuse(kw, [], 0.3)
    order = sorted("xyz", key=object_uuid)  # as Weaviate orders ties: by the objects' UUIDs
    assert got == [(k, pytest.approx(0.7)) for k in order]
    assert object_uuid("rome#0") == "4573aa5f-9f72-540c-9121-29a1d639b422"  # the Weaviate client's generate_uuid5
    # a single result is a leg whose scores are all equal
    assert fuse([("a", 0.2)], [("a", 0.9)], 0.5) == [("a", pytest.approx(1.0))]


def test_limit_empty_legs_and_bad_arguments():
    assert fuse([], [], 0.5) == []
    assert len(fuse([(str(i), float(i)) for i in range(10)], [], 0.5, limit=3)) == 3
    assert leg_size(10) == 100 and leg_size(250) == 250 and leg_size(5, 20) == 20
    with pytest.raises(ValueError):
        fuse([], [], 1.5)
    with pytest.raises(ValueError):
        fuse([], [], 0.5, fusion="borda")
