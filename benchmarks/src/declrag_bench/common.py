"""What the `declrag bench` commands share: the ``--dataset`` check and writing a result as a table and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from declrag.cli.common import out
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
