"""benchmarks/scripts/paired.py: an arm of one `declrag bench answers` run against an arm of another, paired by
question."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "paired.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def rows(scores: dict[str, float]) -> list[dict]:
    return [{"id": i, "token_match": v, "sia": 1.0, "faithfulness": 1.0} for i, v in scores.items()]


def test_arms_of_two_runs_are_paired_by_question(tmp_path):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"sets": {"nq-long": {"rows": {"extractive": rows({"a": 0, "b": 0, "c": 1})}}}}))
    # the other run holds the questions in another order, and one more: only the shared ones pair
    after.write_text(json.dumps({"sets": {"nq-long": {"rows": {"headers": rows({"c": 1, "b": 1, "a": 1, "d": 0})}}}}))
    got = run(f"{before}:extractive", f"{after}:headers")
    assert got.returncode == 0, got.stderr
    line = next(x for x in got.stdout.splitlines() if x.startswith("| nq-long"))
    assert "| 3 | +0.67" in line  # a and b gained, c held


def test_a_wrong_argument_is_one_line(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"sets": {"x": {"rows": {"lm": []}}}}))
    for args in ([f"{tmp_path}/r.json:headers", f"{tmp_path}/r.json:lm"], ["nofile.json:lm", "x.json:lm"], ["one"]):
        got = run(*args)
        assert got.returncode != 0 and "Traceback" not in got.stderr and got.stderr.strip()
