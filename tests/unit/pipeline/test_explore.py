"""Exploration (`declrag.pipeline.stages.select`): the served program's neighbours, team-draft multileaving, and an
explored answer's passages and record."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from declrag.config import ProgramConfig
from declrag.lm import using_lm
from declrag.pipeline.stages.select._explore import Explorer, multileave, neighbours, settings
from declrag.pipeline.program import RAGProgram
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.types import Chunk, Hit

from tests.conftest import filled_store

Q = "What is the capital of Italy?"


def hits(*ids: str) -> list[Hit]:
    return [Hit.of(Chunk(id=i, doc_id=i.split("#")[0], text=i, start=0, end=len(i), position=0), 1.0) for i in ids]


def test_neighbours_are_the_single_changes_that_share_the_index():
    got = neighbours(ProgramConfig.model_validate({"retrieve": {"alpha": 0.1, "window": 1, "named": True}}))
    assert {"retrieve.alpha": 0.0} in got and {"retrieve.alpha": 0.35} in got  # a step either way, within 0..1
    assert {"retrieve.window": 0} in got and {"retrieve.named": False} in got and {"rerank.mode": "bm25"} in got
    assert all(len(c) == 1 for c in got) and not any(k.startswith("ingest") for c in got for k in c)
    cross = neighbours(ProgramConfig.model_validate({"rerank": {"mode": "cross-encoder"}}))
    assert not any("rerank.mode" in c for c in cross)  # a model-backed rerank is not swapped for another


def test_multileaving_takes_each_rankers_best_in_turn_and_never_a_chunk_twice():
    a, b, c = hits("a#1", "a#2", "a#3"), hits("b#1", "a#1", "b#2"), hits("a#1", "c#1")
    out, teams = multileave([a, b, c], 5, random.Random(3))
    ids = [h.chunk.id for h in out]
    assert len(ids) == len(set(ids)) == 5
    assert "a#1" in ids[:3] and sorted(teams[:3]) == [0, 1, 2]  # one pick per ranker a round, the shared best once
    same, _ = multileave([a, list(a), list(a)], 2, random.Random(0))  # rankers that agree: their own top k
    assert [h.chunk.id for h in same] == ["a#1", "a#2"]
    short, _ = multileave([hits("x#1"), hits("x#1")], 5, random.Random(0))  # fewer than k in all: what there is
    assert [h.chunk.id for h in short] == ["x#1"]


def test_no_ranker_is_favoured_for_the_first_pick():
    rankings = [hits(f"r{i}#1", f"r{i}#2") for i in range(4)]
    rng = random.Random(7)
    first = Counter(multileave(rankings, 3, rng)[1][0] for _ in range(4000))
    assert all(abs(n / 4000 - 0.25) < 0.03 for n in first.values()) and len(first) == 4


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    store = filled_store(tmp_path_factory.mktemp("explore") / "store")
    return RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder()).warm_up(lms=False)


def test_an_explored_answer_comes_from_the_rankers_and_says_which(prog):
    assert prog.explorer is None
    explorer = Explorer.of(prog, 1.0, seed=5)
    try:
        assert prog.explorer is explorer and len(explorer.rankers) == 1 + len(explorer.changes)
        with using_lm(ScriptedLM({}, {"answer": "Rome is the capital of Italy [1]."})):
            explored = prog(question=Q, explore=True)
            plain = prog(question=Q)
        assert plain.explored is None and explored.explored == explorer.record
        assert explored.explored["served"] == settings(prog.config) and explored.explored["served"]["retrieve.k"] == 5
        pooled = {h.chunk.id for r in explorer.rankers for h in r.search(Q)}
        assert {h.chunk.id for h in explored.passages} <= pooled
        assert len(explored.passages) <= prog.config.retrieve.k
        assert explorer.draw() and not Explorer(prog, 0.0).draw()
        alpha = next(r for r, c in zip(explorer.rankers[1:], explorer.changes) if c == {"retrieve.alpha": 0.75})
        assert alpha.config.retrieve.alpha == 0.75 and alpha.store is prog.store and prog.config.retrieve.alpha == 0.5
    finally:
        prog.explorer = None


def test_with_settings_takes_retrieve_and_rerank_paths_only(prog):
    other = prog.with_settings({"rerank.mode": "bm25", "retrieve.k": 2})
    assert other.config.rerank.mode == "bm25" and len(other.search(Q)) <= 2 and prog.config.rerank.mode == "none"
    with pytest.raises(ValueError, match="generate.mode"):
        prog.with_settings({"generate.mode": "lm"})
