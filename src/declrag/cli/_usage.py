"""declrag usage: what a served program was asked, and the golden set it makes (`declrag.usage`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ._app import app
from ._common import out

usage_app = typer.Typer(no_args_is_help=True,
                        help="What `declrag serve` recorded: its questions, answers and ratings, and the golden set "
                             "they make.")
app.add_typer(usage_app, name="usage")
StoreArg = Annotated[str, typer.Argument(
    help="the usage store: the SQLite file or postgresql+psycopg:// URI `declrag serve` named at start-up")]


@usage_app.command("stats")
def usage_stats(store: StoreArg):
    """How many questions were answered and rated, by route and program version."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..usage import UsageStore, golden_rows

    s = UsageStore(store, create=False)
    try:
        records = list(s.records())
        counts = s.counts()
    finally:
        s.close()
    rows = golden_rows(records)
    t = Table(title=f"usage recorded in {store}")
    for col in ("", "count"):
        t.add_column(col, justify="left" if not col else "right")
    t.add_row("answers and searches recorded", f"{counts['answers']:,}")
    for (route, version), n in sorted(Counter((r["route"], r["version"]) for r in records).items()):
        t.add_row(f"  {route}, program {version}", f"{n:,}")
    for group, n in sorted(Counter(g for r in records for g in r.get("groups") or ()).items()):
        t.add_row(f"  asked by callers of group {group}", f"{n:,}")
    t.add_row("distinct questions answered", f"{len(rows):,}")
    t.add_row("rated helpful / not helpful", f"{counts['helpful']:,} / {counts['not_helpful']:,}")
    out.print(t)


@usage_app.command("export")
def usage_export(
    store: StoreArg,
    out_path: Annotated[Path, typer.Option("--out", help="a JSONL golden file, or a folder (questions.jsonl in it)")],
):
    """Write the questions as a golden set: rated helpful become gold (the citation that answered), not helpful keep
    their passages as hard negatives, unrated stay real questions without labels; each question once."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..usage import UsageStore, export

    s = UsageStore(store, create=False)
    try:
        n = export(s.records(), out_path)
    finally:
        s.close()
    out.print(f"wrote {n['questions']} questions to {out_path}: {n['gold']} with gold from a helpful rating, "
              f"{n['not_helpful']} rated not helpful (hard negatives), {n['unrated']} unrated", markup=False,
              highlight=False)


@usage_app.command("forget")
def usage_forget(
    store: StoreArg,
    principal: Annotated[str, typer.Option("--principal", help="the caller whose records go (their name)")],
):
    """Delete every question, answer and rating of one caller (as people may ask by law); prints how many went."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..usage import UsageStore

    s = UsageStore(store, create=False)
    try:
        n = s.forget(principal)
    finally:
        s.close()
    out.print(f"deleted {n} answers (and their ratings) of {principal} from {store}", markup=False, highlight=False)
