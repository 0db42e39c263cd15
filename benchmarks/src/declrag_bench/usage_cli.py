"""`declrag bench usage`: compile from a served program's recorded and rated questions (`declrag_bench.usage`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from declrag.errors import DeclragError

from .common import bench_app, bench_out

DEFAULT_SETS = ["nq-long", "mtrag-un", "scifact", "cmu-qa", "squad-v1.1-articles"]


@bench_app.command("usage")
def bench_usage(
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="a golden set with real questions (repeat it; default: " + " ".join(DEFAULT_SETS) + ")")
    ] = None,
    sizes: Annotated[str, typer.Option(help="recorded questions compiled from, comma-separated")] = "25,50,100,200",
    rated: Annotated[float, typer.Option(help="share of the answers the simulated user rates")] = 0.3,
    flip: Annotated[float, typer.Option(help="share of the ratings flipped (misclicks)")] = 0.1,
    correct: Annotated[float, typer.Option(help="share of 'not helpful' ratings that type the right answer")] = 0.5,
    explore: Annotated[float, typer.Option(help="share of the questions the server explores (serve --explore)")
                       ] = 0.5,
    n: Annotated[int, typer.Option("--n", help="synthetic questions of the compile the server starts from")] = 1000,
    seed: Annotated[int, typer.Option(help="seed of the synthetic set, the replay order and the user")] = 13,
    trials: Annotated[int, typer.Option(help="trials of each compile")] = 20,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Per corpus: serve the no-labels compile, replay real questions over HTTP with a simulated user rating a share
    of the answers, compile again from the usage store at each size, and score all on real test questions the
    replay never asked, beside the default program and a compile on real labels."""
    # imported here, not at the top: `declrag bench --help` starts without loading the benchmark
    from declrag.golden import load_golden

    from .usage import print_report, run

    try:
        counts = sorted({int(s) for s in sizes.replace("_", "").split(",") if s.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise DeclragError(f"--sizes {sizes!r}: positive whole numbers, comma-separated", hint="e.g. --sizes 25,50,100")
    if not all(0 <= x <= 1 for x in (rated, flip, correct, explore)):
        raise DeclragError("--rated, --flip, --correct and --explore are shares between 0 and 1",
                           hint="e.g. --rated 0.3")
    sets = dataset or DEFAULT_SETS
    for d in sets:
        load_golden(d)  # a typo is one error before any work
    bench_out(run(sets, counts, rated, flip, correct, n, seed, trials, explore=explore), print_report, as_json)
