"""`declrag bench serve --rounds`: each arm against the first, paired round by round."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from declrag_bench.rounds import print_rounds, summary


def test_each_arm_is_paired_with_the_first_arm_of_its_scenario_round_by_round():
    # the machine drifts (100, 80, 120 requests/s with recording off); recording costs 2% in every round
    off = {1: 100.0, 2: 80.0, 3: 120.0, 4: 90.0}
    arms = {}
    for k, rps in off.items():
        arms[f"retrieval record=off round={k}"] = {"rps": rps}
        arms[f"retrieval record=on round={k}"] = {"rps": rps * 0.98}
        arms[f"retrieval/stream record=off round={k}"] = {"rps": rps / 2}
        arms[f"retrieval/stream record=on round={k}"] = {"rps": rps / 2 * (1.1 if k % 2 else 0.9)}
    r = summary(arms)
    on = r["retrieval record=on"]
    assert on["against"] == "retrieval record=off" and on["ratios"] == [0.98] * 4
    assert on["ratio"] == pytest.approx(0.98) and on["ci95"] == [pytest.approx(0.98), pytest.approx(0.98)]
    assert "ratio" not in r["retrieval record=off"] and r["retrieval record=off"]["rps"] == [100.0, 80.0, 120.0, 90.0]
    stream = r["retrieval/stream record=on"]  # paired with the streamed arm, not the JSON one
    assert stream["against"] == "retrieval/stream record=off" and stream["ci95"][0] < 1 < stream["ci95"][1]
    out = io.StringIO()
    print_rounds(r, Console(file=out, width=200))
    assert "0.980 [0.980, 0.980]" in out.getvalue()
    assert summary({"retrieval": {"rps": 5.0}}) == {}  # one round: nothing to pair
