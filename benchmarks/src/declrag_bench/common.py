"""What the `declrag bench` commands share: the ``--dataset`` check, writing a result as a table and JSON, and for
the benches that compare arms on golden sets, the seeded sample of a set's questions, the run over the sets and each
arm's means with its paired difference against the first (`test_sample`, `over_sets`, `paired_arms`)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from declrag.cli._common import out
from declrag.errors import DeclragError

# the `declrag bench` group: `cli`, `rayindex_cli` and `usage_cli` register their commands on it
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (quality and speed), printed as tables.")


def check_sets(dataset: list[str] | None) -> None:
    """Each ``--dataset`` is a named golden set or a path, checked before any work starts."""
    from declrag.golden import known_datasets

    for d in dataset or []:
        if d not in known_datasets() and not Path(d).exists():
            raise DeclragError(f"unknown --dataset {d!r}", hint="see declrag datasets")


def bench_out(result, printer, as_json: Path | None) -> None:
    printer(result, out)
    if as_json:
        as_json.parent.mkdir(parents=True, exist_ok=True)
        as_json.write_text(json.dumps(result, indent=2))
        out.print(f"wrote {as_json}")


def test_sample(gs: Any, limit: int, seed: int, keep: Callable[[Any], bool]) -> tuple[str, list[Any]]:
    """A golden set's test split (else its first) and a seeded sample of at most ``limit`` of its questions that
    ``keep`` keeps (those with something to score against)."""
    split = "test" if "test" in gs.splits else next(iter(gs.splits))
    pool = [e for e in gs.split(split) if keep(e)]
    return split, random.Random(seed).sample(pool, min(limit, len(pool)))


def over_sets(run_set: Callable[..., dict[str, Any]], sets: Sequence[str], limit: int, seed: int,
              progress: bool) -> dict[str, Any]:
    """``run_set`` on each golden set, with the run's settings and its wall time."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"limit": limit, "seed": seed,
                           "sets": {s: run_set(s, limit, seed, progress) for s in sets}}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def paired_arms(rows: dict[str, list[dict[str, Any]]], metrics: Sequence[str], lead: str,
                means_too: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Each arm's mean of ``metrics`` (and of ``means_too``) over its rows (the same questions, in order), and for
    each arm but ``lead``, under ``vs_{lead}``, its paired difference from ``lead`` with a 95% interval."""
    from declrag.metrics.stats import mean_of, paired_difference  # declrag.metrics loads DSPy: not on --help

    out: dict[str, dict[str, Any]] = {}
    for arm, mine in rows.items():
        out[arm] = {m: mean_of([r[m] for r in mine]) for m in (*metrics, *means_too)}
        if arm != lead:
            out[arm][f"vs_{lead}"] = {m: paired_difference([r[m] for r in rows[lead]], [r[m] for r in mine])
                                      for m in metrics}
    return out
