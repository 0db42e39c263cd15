"""One arm of a `declrag bench answers` run against an arm of another run on the same questions (same --n and
--seed: the same sample), paired, per set and metric, with the 95% bootstrap interval: e.g. today's default against
the extractive mode of an earlier commit's run.

    python benchmarks/scripts/paired.py runs/bench/answers-typed.json:extractive runs/bench/answers-49b.json:headers
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from declrag.metrics.stats import paired_difference

METRICS = ("token_match", "sia", "faithfulness")


def rows(spec: str) -> dict[str, dict[str, dict]]:
    path, _, arm = spec.rpartition(":")
    if not path or not Path(path).is_file():
        sys.exit(f"paired.py: {spec!r} is not FILE.json:ARM (a `declrag bench answers --json` file and one of its arms)")
    sets = json.loads(Path(path).read_text())["sets"]
    try:
        return {name: {r["id"]: r for r in s["rows"][arm]} for name, s in sets.items()}
    except KeyError:
        sys.exit(f"paired.py: no arm {arm!r} in {path}")


def main(before: str, after: str) -> None:
    a, b = rows(before), rows(after)
    print(f"| set | questions | {' | '.join(METRICS)} |\n|---|---|{'---|' * len(METRICS)}")
    for name in [n for n in b if n in a]:
        ids = [i for i in b[name] if i in a[name]]
        cells = []
        for m in METRICS:
            d = paired_difference([a[name][i][m] for i in ids], [b[name][i][m] for i in ids])
            cells.append(f"{d['diff']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]")
        print(f"| {name} | {len(ids)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
