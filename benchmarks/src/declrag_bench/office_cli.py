"""`declrag bench office`: the same documents as text and as the office files of real writers
(`declrag_bench.officefiles`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from declrag.errors import DeclragError

from .common import bench_app, bench_out


@bench_app.command("office")
def bench_office(
    arm: Annotated[list[str] | None, typer.Option(
        help="an arm (repeat it): text, docx, odt, epub, slides, pptx, odp, split, xlsx, ods (default: all; a deck "
             "or a workbook brings its twin: slides, split)")] = None,
    corpus: Annotated[Path | None, typer.Option(
        help="where the corpus is made and kept (default: declrag's cache, bench-office/nq-long)")] = None,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/office.json)")] = None,
):
    """The same documents as text and as Word, OpenDocument, EPUB, PowerPoint and workbook files written by
    LibreOffice, python-pptx and openpyxl (nq-long's pages), the same real questions, the default program: hit@1,
    hit@5, the answer within the first 1,500 characters handed over and in the default answer, paired against the
    text, table questions apart; reading and indexing speed per kind."""
    from .officefiles import ARMS, run

    for a in arm or []:
        if a not in ARMS:
            raise DeclragError(f"unknown --arm {a!r}", hint=f"one of: {', '.join(ARMS)}")
    if shutil.which("soffice") is None:
        raise DeclragError("soffice not found: LibreOffice writes the corpus's files",
                           hint="apt-get install libreoffice-writer-nogui libreoffice-calc-nogui "
                                "libreoffice-impress-nogui")
    if shutil.which("kpsewhich") is None:  # the pages' text is the PDF benchmark's: what T1 fonts can set
        raise DeclragError("kpsewhich not found: the pages are written as the PDF benchmark's (TeX's repertoire)",
                           hint="apt-get install texlive-latex-base texlive-latex-recommended "
                                "texlive-fonts-recommended lmodern")
    bench_out(run(corpus, arm), print_report, as_json or Path("runs/bench/office.json"))


def print_report(r: dict[str, Any], console: Console) -> None:
    # imported here, not at the top: `declrag --help` loads the bench commands, never the benchmarks themselves
    from .pdf import _cell

    for part, arms in r["arms"].items():
        n = next(iter(arms.values()))["n"]
        t = Table(title=f"{part} questions ({n}) over {r['pages']} nq-long pages, each kind against text, paired, "
                        "95% interval")
        for col in ("arm", *(s for s in arms["text"] if s in ("hit@1", "hit@5", "first_1500", "contains")),
                    "chars handed over"):
            t.add_column(col)
        for arm, a in arms.items():
            t.add_row(arm, *(_cell(a, s, arm == "text") for s in ("hit@1", "hit@5", "first_1500", "contains")),
                      f"{a['chars']:.0f}")
        console.print(t)
    for part, arms in r["arms"].items():
        twinned = {arm: a for arm, a in arms.items() if "vs_twin" in a}
        if not twinned:
            continue
        t = Table(title=f"{part} questions: each kind against its twin, the same layout as plain text (what its reader "
                        "loses), paired, 95% interval")
        for col in ("arm", "twin", "hit@1", "hit@5", "first_1500", "contains"):
            t.add_column(col)
        for arm, a in twinned.items():
            t.add_row(arm, r["twins"][arm], *(f"{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
                                              if (d := a["vs_twin"][s])["diff"] is not None else "-"
                                              for s in ("hit@1", "hit@5", "first_1500", "contains")))
        console.print(t)
    t = Table(title="reading and indexing (embeddings cached across arms: a passage embedded once)")
    for col in ("arm", "files", "MB", "documents", "read files/s", "chunks", "indexed chunks/s", "skipped"):
        t.add_column(col)
    for arm, c in r["indexing"].items():
        t.add_row(arm, str(c["files"]), f"{c['bytes'] / 2**20:.1f}", str(c["documents"]), str(c["files_per_s"]),
                  str(c["chunks"]), str(c["chunks_per_s"]), str(len(c["skipped"])))
    console.print(t)
    console.print(f"target: each kind within {r['target']['max_loss']} of text on hit@5 and the answer; "
                  f"{r['wall_s']} s in all")
