"""`declrag bench loco` (leave one corpus out, over bench nolabels' JSON) and `declrag bench usage`'s simulated
user, on made-up results: the rule is chosen without the corpus it is reported on."""

from __future__ import annotations

import json

import pytest

from declrag.errors import DeclragError
from declrag.golden import Example
from declrag.types import GoldSpan
from declrag_bench.loco import ALONE, run
from declrag_bench.nolabels import RULES
from declrag_bench.usage import _holds


def gain(lo: float) -> dict:
    return {"diff": lo + 0.02, "ci95": [lo, lo + 0.04], "n": 100}


def corpus(name: str, lows: dict[str, float]) -> dict:
    return {"dataset": name, "checks": {r: {"gain_all": gain(lows[r])} for r in RULES},
            "transfer": {"alone": {"real": gain(lows[ALONE])}, "changes": [
                {"change": "alpha=0.0", "agrees": name != "c", "real": {"diff": -0.1}}]},
            "real_compile": {"minus_default_test": gain(0.0)}}


def test_each_corpus_reports_the_rule_chosen_on_the_others(tmp_path):
    safe = {RULES[0]: -0.2, RULES[1]: -0.05, RULES[2]: -0.01, RULES[3]: 0.0, ALONE: -0.02}
    risky = {**safe, RULES[0]: 0.05}  # on one corpus the search's best was a gain
    files = []
    for name, lows in (("a", safe), ("b", safe), ("c", {**safe, RULES[1]: 0.1})):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps({"corpora": [corpus(name, lows)]}))
    (tmp_path / "d.json").write_text(json.dumps({"corpora": [corpus("d", risky)]}))
    r = run([*files, tmp_path / "d.json"])
    by = {row["left_out"]: row for row in r["loco"]}
    assert by["a"]["rule"] == RULES[3] and by["a"]["not_worse"]  # the others' worst case decides
    assert by["c"]["rule"] == RULES[3] and by["c"]["gain"]["ci95"][0] == 0.0  # c's own gain (+.1) is not looked at
    assert r["transfer"]["alpha=0.0"]["same_sign"] == 3 and r["transfer"]["alpha=0.0"]["not"] == ["c"]
    with pytest.raises(DeclragError, match="two corpora or more"):
        run([files[0]])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DeclragError, match="not a `declrag bench nolabels --json` file"):
        run([files[0], tmp_path / "bad.json"])


def test_the_simulated_user_finds_the_reference_in_a_citation_or_the_answer():
    e = Example(id="q", question="Who?", answers=("Ada Lovelace",), gold={"d": 1}, spans=(GoldSpan("d", 100, 120),))
    cite = {"answer": "It was Ada Lovelace [2].", "abstained": False,
            "citations": [{"n": 1, "doc_id": "d", "span": [0, 90]}, {"n": 2, "doc_id": "d", "span": [90, 200]}]}
    assert _holds(e, cite) == 2  # the citation whose span covers the reference
    words = {**cite, "citations": [{"n": 1, "doc_id": "x", "span": [0, 50]}]}
    assert _holds(e, words) == 0  # only the answer's words hold it
    assert _holds(e, {**words, "answer": "I don't know.", "abstained": True}) is None
    docs_only = Example(id="s", question="Claim", gold={"d": 1})  # SciFact: documents, no spans
    assert _holds(docs_only, {"answer": "x", "citations": [{"n": 3, "doc_id": "d", "span": [0, 5]}]}) == 3


def test_the_ceiling_scores_each_ranker_the_server_explored_with(tmp_path):
    """`bench usage` reports each explored ranker's gain on the real test: usage chooses among them, so none of its
    compiles can ship more than the best of them."""
    from types import SimpleNamespace

    from declrag.optimize._space import apply, read_space
    from declrag.pipeline.stages.select._explore import settings
    from declrag_bench.usage import _ceiling

    (tmp_path / "s.yaml").write_text(
        "name: u\nobjective: {metrics: {ndcg@budget: 1.0}}\nsplit: {fractions: {dev: 1.0}, seed: 1}\nparams:\n"
        "  alpha: {path: retrieve.alpha, type: float, low: 0.0, high: 1.0, step: 0.05}\n"
        "  window: {path: retrieve.window, type: int, low: 0, high: 1}\n")
    space = read_space(tmp_path / "s.yaml")
    base = space.baseline_values()
    served = settings(apply(space.base, base, space.params))
    records = [{"explored": None}, {"explored": {"served": served, "changes": [
        {"retrieve.alpha": 0.75}, {"retrieve.window": 1}, {"retrieve.named": True}]}}]
    lift = {0.75: 0.1}

    def scored(params):
        return [0.5 + lift.get(params["alpha"], 0.0) - 0.2 * params["window"] + i / 100 for i in range(10)]

    rows = _ceiling(SimpleNamespace(space=space), base, records, scored, scored(base))
    assert [r["ranker"] for r in rows] == ["retrieve.alpha=0.75", "retrieve.window=1"]  # named: no parameter
    assert rows[0]["gain"]["diff"] == pytest.approx(0.1) and rows[1]["gain"]["diff"] == pytest.approx(-0.2)
    assert _ceiling(SimpleNamespace(space=space), base, records[:1], scored, scored(base)) == []  # none explored
