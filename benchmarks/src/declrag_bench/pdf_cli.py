"""`declrag bench pdf`: the same documents as text and as typeset PDFs (`declrag_bench.pdf`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from declrag.errors import DeclragError

from .common import bench_app, bench_out


@bench_app.command("pdf")
def bench_pdf(
    arm: Annotated[list[str] | None, typer.Option(
        help="an arm (repeat it): text, pdf (the default reader), pdf-pypdf (default: all)")] = None,
    corpus: Annotated[Path | None, typer.Option(
        help="where the typeset corpus is made and kept (default: declrag's cache, bench-pdf/nq-long)")] = None,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/pdf.json)")] = None,
):
    """The same documents as text and as typeset two-column PDFs (nq-long's pages by pdfLaTeX), the same real
    questions, the default program: hit@1, hit@5, the answer within the first 1,500 characters handed over and in the
    default answer, paired against the text, table questions apart; reading speed per reader; OCR's cost a page."""
    from .pdf import ARMS, print_report, run

    for a in arm or []:
        if a not in ARMS:
            raise DeclragError(f"unknown --arm {a!r}", hint=f"one of: {', '.join(ARMS)}")
    if shutil.which("pdflatex") is None:
        raise DeclragError("pdflatex not found: the corpus is typeset with it",
                           hint="apt-get install texlive-latex-base texlive-latex-recommended "
                                "texlive-fonts-recommended lmodern")
    bench_out(run(corpus, arm), print_report, as_json or Path("runs/bench/pdf.json"))
