"""`declrag bench handover`: the passages handed over best-first, joined, merged or as found
(`declrag_bench.handover`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from declrag.errors import DeclragError

from .common import bench_app, bench_out, check_sets


@bench_app.command("handover")
def bench_handover(
    dataset: Annotated[list[str] | None, typer.Option(
        help="a golden set (repeat it; default: nq-long, squad-v1.1-articles, cmu-qa, mtrag-un)")] = None,
    limit: Annotated[int, typer.Option(help="questions of the test split at most (a seeded sample)")] = 300,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 13,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/handover.json)")] = None,
):
    """How the passages are handed over (best-first, joined, merged, as found): hit@1, hit@5, hit and nDCG within the
    first 1,500 characters, characters handed over; paired intervals against merged."""
    from .handover import print_report, run

    if limit < 1:
        raise DeclragError(f"--limit must be at least 1, not {limit}", hint="e.g. --limit 300")
    check_sets(dataset)
    bench_out(run(dataset, limit, seed), print_report, as_json or Path("runs/bench/handover.json"))
