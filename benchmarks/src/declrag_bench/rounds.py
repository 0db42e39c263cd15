"""`declrag bench serve --rounds N`: the arms measured in turn, N rounds (off, on, off, on, ...), so that a drift of
the machine (another process, a warmer cache, the CPU's clock) falls on every arm alike; each arm's cost is the ratio
of its requests/s to the first arm's in the same round, paired over the rounds (the geometric mean, with a bootstrap
95% interval), not one run's difference, which on a shared machine is smaller than the spread between runs."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.metrics.stats import paired_difference

_ROUND = re.compile(r" round=(\d+)$")


def summary(scenarios: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per arm (its name without ``round=N``): requests/s of each round, and its ratio to the first arm of the same
    scenario (``retrieval``, ``retrieval/stream``...) paired by round."""
    by: dict[str, dict[int, float]] = {}
    for name, r in scenarios.items():
        m = _ROUND.search(name)
        if m is None or r.get("rps") is None:
            continue
        by.setdefault(name[:m.start()], {})[int(m.group(1))] = float(r["rps"])
    out: dict[str, dict[str, Any]] = {}
    first: dict[str, str] = {}
    for arm, rps in by.items():
        base = first.setdefault(arm.split(" ")[0], arm)
        rounds = sorted(set(rps) & set(by[base]))
        row: dict[str, Any] = {"rps": [rps[k] for k in sorted(rps)], "against": base}
        if arm != base and rounds:
            logs = paired_difference([math.log(by[base][k]) for k in rounds], [math.log(rps[k]) for k in rounds])
            lo, hi = logs["ci95"]
            row.update(ratios=[round(rps[k] / by[base][k], 4) for k in rounds],
                       ratio=round(math.exp(logs["diff"]), 4),
                       ci95=[None if lo is None else round(math.exp(lo), 4),
                             None if hi is None else round(math.exp(hi), 4)])
        out[arm] = row
    return out


def print_rounds(rounds: Mapping[str, dict[str, Any]], console: Console) -> None:
    t = Table(title="each arm against the first, round by round (requests/s ratio: geometric mean, 95% interval)")
    for col in ("arm", "requests/s by round", "against", "ratio by round", "ratio [95%]"):
        t.add_column(col, justify="left" if col in ("arm", "against") else "right")
    for arm, r in rounds.items():
        ci = r.get("ci95") or [None, None]
        t.add_row(arm, " ".join(f"{x:.1f}" for x in r["rps"]), "" if arm == r["against"] else r["against"],
                  " ".join(f"{x:.3f}" for x in r.get("ratios", [])),
                  f"{r['ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if "ratio" in r and None not in ci else "")
    console.print(t)
