"""`declrag bench nolabels` (`declrag_bench.nolabels`) and `declrag bench loco` over its results
(`declrag_bench.loco`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from declrag.errors import DeclragError

from .common import bench_app, bench_out


@bench_app.command("nolabels")
def bench_nolabels(
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="a golden set with real questions (repeat it; default: squad-v1.1-articles nq-long "
                          "scifact cmu-qa mtrag-un)")] = None,
    n: Annotated[int, typer.Option("--n", help="synthetic questions (declrag synth's default writer)")] = 1000,
    seed: Annotated[int, typer.Option(help="seed of the synthetic set and the real sample")] = 13,
    trials: Annotated[int, typer.Option(help="trials of each compile")] = 20,
    real_limit: Annotated[int, typer.Option(help="real questions scored at most (a seeded sample)")] = 1000,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Per corpus: the default program, compile on a synthetic set (no labels, as shipped) and compile on the real
    questions, all scored on real questions with paired intervals; what each check would have shipped; how much of
    their passage's words each writer's questions share, beside real questions'."""
    from .nolabels import print_report, run

    if n < 1 or real_limit < 1 or trials < 1:
        raise DeclragError("--n, --real-limit and --trials must be at least 1",
                           hint="e.g. --n 1000 --real-limit 1000 --trials 20")
    from declrag.golden import load_golden

    sets = dataset or ["squad-v1.1-articles", "nq-long", "scifact", "cmu-qa", "mtrag-un"]
    for d in sets:
        load_golden(d)  # a typo is one error before any work
    bench_out(run(sets, n, seed, trials, real_limit), print_report, as_json)


@bench_app.command("loco")
def bench_loco(
    results: Annotated[list[Path], typer.Argument(help="JSON files of `declrag bench nolabels --json`, one per run")],
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Leave one corpus out: the no-labels rule chosen on the other corpora, and what it ships on the one left out;
    which single changes' synthetic gains carry over to real questions, per corpus."""
    from .loco import print_report, run

    for p in results:
        if not p.is_file():
            raise DeclragError(f"{p}: no such file", hint="pass the files that `declrag bench nolabels --json` wrote")
    bench_out(run(results), print_report, as_json)
