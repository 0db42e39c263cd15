"""`declrag bench program` (the program's own overhead per question) on this tree and on an earlier commit, run
alternately in one session so that both see the same machine, and the ratio of their medians: what a change to the
program costs per question.

    python benchmarks/scripts/program_against.py REV [--runs 6] [--questions 400] [--json FILE]

REV's tree is checked out in a temporary git worktree (removed afterwards) and imported in place of this one
(``PYTHONPATH``); both runs use this tree's benchmark code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ("import sys; import declrag; assert declrag.__file__.startswith(sys.argv[1]), declrag.__file__; "
       "from declrag.cli import main; sys.argv = ['declrag', 'bench', 'program', '--questions', sys.argv[2], "
       "'--json', sys.argv[3]]; main()")


def once(src: Path, questions: int, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, "-c", RUN, str(src), str(questions), str(out)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--questions", type=int, default=400)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), a.rev], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            rows = []
            for i in range(a.runs):
                b = once(before / "src", a.questions, Path(tmp) / f"before{i}.json")
                n = once(ROOT / "src", a.questions, Path(tmp) / f"after{i}.json")
                rows.append({"before": b["overhead_ms"]["p50"], "after": n["overhead_ms"]["p50"],
                             "before_total": b["total_ms"]["p50"], "after_total": n["total_ms"]["p50"]})
                print(f"run {i + 1}/{a.runs}: overhead p50 {rows[-1]['before']:.2f} ms at {a.rev}, "
                      f"{rows[-1]['after']:.2f} ms now", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    result = {"rev": a.rev, "runs": a.runs, "questions": a.questions, "rows": rows,
              "median_overhead_ms": {"before": med["before"], "after": med["after"]},
              "ratio": round(med["after"] / med["before"], 3),
              "ratio_total": round(med["after_total"] / med["before_total"], 3)}
    print(f"overhead p50, median of {a.runs} runs: {med['before']:.2f} ms at {a.rev}, {med['after']:.2f} ms now: "
          f"{result['ratio']:.3f}x (total {result['ratio_total']:.3f}x)")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
