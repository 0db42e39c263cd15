"""`declrag bench ray` (`declrag_bench.rayindex`), registered on the bench commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from declrag.errors import DeclragError

from .common import bench_app, bench_out, check_sets


@bench_app.command("ray")
def bench_ray(
    dataset: Annotated[str, typer.Option(help="the golden-set corpus to index")] = "squad-v1.1",
    workers: Annotated[int, typer.Option(help="worker nodes beside the head (scripts/ray.sh)")] = 1,
    cpus: Annotated[int, typer.Option(help="CPUs of each node (one embedder actor per CPU)")] = 1,
    store: Annotated[str | None, typer.Option(
        "--store", help="also measure this Weaviate's import rate (weaviate://...; a fresh collection, removed)")
                     ] = None,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/ray.json)")] = None,
):
    """Indexing over a real Ray cluster on this machine against one process, on the same corpus: chunks/s, CPU per
    chunk, Ray's overhead; and a Weaviate's import rate, the other bound."""
    if workers < 0 or cpus < 1:
        raise DeclragError("--workers must be at least 0 and --cpus at least 1", hint="e.g. --workers 1 --cpus 1")
    if store is not None and not store.startswith(("weaviate://", "weaviates://")):
        raise DeclragError(f"--store {store!r} is not a Weaviate URI", hint="e.g. weaviate://127.0.0.1:8080/")
    check_sets([dataset])
    from .rayindex import print_report, run

    bench_out(run(dataset, workers, cpus, store), print_report, as_json or Path("runs/bench/ray.json"))
