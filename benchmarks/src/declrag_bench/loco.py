"""`declrag bench loco`: leave one corpus out, over the results of `declrag bench nolabels` (its JSON files).

Each candidate rule for what a no-labels compile ships (`nolabels.RULES`: the search's best with no check, the
held-out lower bound alone, with every writer's mean gain >= 0, with every writer's lower bound > 0, which ships;
and `transfer.alone`: the default with each single change that holds on its own) has a real gain over the default
program on every corpus. For each corpus in turn, the rule is decided on the *other* corpora: the one whose worst
real gain there (the lower end of its paired 95% interval) is highest, the stricter on a tie. Then the left-out
corpus reports what that rule ships: what a new user's corpus, unseen when the rule was chosen, will see. The
real-labels compile's gain is beside it.

Per parameter of the retrieval space, on how many corpora its single changes' synthetic gain had the real gain's
sign (`transfer`): which synthetic effects carry over, and where.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.errors import DeclragError

from .nolabels import RULES

ALONE = "the default + each change that holds alone"
NOT_WORSE = -0.01  # the issue's bar: a paired 95% lower bound at least this


def _gain(c: dict[str, Any], rule: str) -> dict[str, Any] | None:
    if rule == ALONE:
        return (c.get("transfer") or {}).get("alone", {}).get("real")
    checks = c.get("checks", {})
    # a run made while the style probe was in the rule names the shipped rule without " (ships)"
    found = checks.get(rule) or checks.get(rule.removesuffix(" (ships)")) or {}
    return found.get("gain_all")


def read(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The corpora of ``paths`` (bench nolabels' JSON files), the last one of each name."""
    by: dict[str, dict[str, Any]] = {}
    for p in paths:
        try:
            for c in json.loads(Path(p).read_text())["corpora"]:
                by[c["dataset"]] = c
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DeclragError(f"{p}: not a `declrag bench nolabels --json` file ({type(e).__name__}: {e})",
                               hint="pass the files that `declrag bench nolabels --json FILE` wrote") from None
    if len(by) < 2:
        raise DeclragError(f"leaving one corpus out needs two corpora or more, not {len(by)}",
                           hint="pass the JSON of several `declrag bench nolabels --dataset X` runs")
    return list(by.values())


def run(paths: Sequence[Path]) -> dict[str, Any]:
    corpora = read(paths)
    rules = [*RULES, ALONE]
    rows = []
    for left in corpora:
        others = [c for c in corpora if c is not left]
        known = [r for r in rules if _gain(left, r)]  # a rule measured on the left-out corpus too
        worst = {r: _worst(others, r) for r in known}
        chosen = max(known, key=lambda r: (round(worst[r], 4), rules.index(r)))
        got = _gain(left, chosen) or {}
        rows.append({"left_out": left["dataset"], "rule": chosen, "worst_on_others": round(worst[chosen], 4),
                     "gain": got, "not_worse": bool(got.get("ci95")) and got["ci95"][0] >= NOT_WORSE,
                     "shipped_rule_gain": _gain(left, RULES[-1]),
                     "real_compile": left["real_compile"]["minus_default_test"]})
    return {"corpora": [c["dataset"] for c in corpora], "loco": rows, "transfer": _transfer(corpora),
            "per_corpus": {c["dataset"]: {r: _gain(c, r) for r in rules} for c in corpora}}


def _worst(corpora: list[dict[str, Any]], rule: str) -> float:
    """The lowest lower bound of ``rule``'s real gain over ``corpora`` (-inf where one has no measurement)."""
    lows = [g["ci95"][0] for c in corpora if (g := _gain(c, rule)) and g.get("ci95")]
    return min(lows) if len(lows) == len(corpora) else float("-inf")


def _transfer(corpora: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per single change: on how many corpora its synthetic gain had the real gain's sign, and where not."""
    out: dict[str, dict[str, Any]] = {}
    for c in corpora:
        for row in (c.get("transfer") or {}).get("changes", []):
            t = out.setdefault(row["change"], {"corpora": 0, "same_sign": 0, "not": [], "real": {}})
            if row["agrees"] is None:
                continue
            t["corpora"] += 1
            t["same_sign"] += bool(row["agrees"])
            t["real"][c["dataset"]] = row["real"].get("diff")
            if not row["agrees"]:
                t["not"].append(c["dataset"])
    return out


def _ci(d: dict[str, Any] | None) -> str:
    return f"{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]" if d and d.get("diff") is not None else "-"


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title="leave one corpus out: the rule chosen on the other corpora (highest worst lower bound of the "
                    "real gain), and what it ships on the corpus left out (real gain over the default, every real q)")
    for col in ("left out", "rule chosen on the others", "its worst there", "on the left-out corpus",
                f"lower bound >= {NOT_WORSE}", "the shipped rule", "real-labels compile (test)"):
        t.add_column(col, justify="left" if col in ("left out", "rule chosen on the others") else "right")
    for row in r["loco"]:
        t.add_row(row["left_out"], row["rule"], f"{row['worst_on_others']:+.3f}", _ci(row["gain"]),
                  "yes" if row["not_worse"] else "NO", _ci(row["shipped_rule_gain"]), _ci(row["real_compile"]))
    console.print(t)
    k = Table(title="per single change: corpora where its synthetic gain has the real gain's sign")
    for col in ("change", "same sign", "not on", "real gain per corpus"):
        k.add_column(col, justify="left" if col != "same sign" else "right")
    for change, v in r["transfer"].items():
        k.add_row(change, f"{v['same_sign']}/{v['corpora']}", ", ".join(v["not"]) or "-",
                  ", ".join(f"{d} {g:+.3f}" for d, g in v["real"].items() if g is not None))
    console.print(k)
