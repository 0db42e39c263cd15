"""A corpus of typeset two-column PDFs whose text is known.

Reading a PDF is not reading its text: a typeset page hyphenates words at line ends, sets text in two columns,
repeats a running header and a page number on every page, puts footnotes at the foot of a column and tables in
boxes. To measure what that costs a RAG pipeline, this module typesets the 21 Wikipedia pages of the ``nq-long``
golden set (Natural Questions over whole pages, read in place from ``../shared/datasets`` beside the checkout) with
pdfLaTeX as two-column papers, and writes for each page the plain text that went into the PDF (``NN.txt``) beside
the PDF (``NN.pdf``). The questions whose short answer occurs verbatim in the ``.txt`` come with them.

The pages are read into blocks, and written as plain text, by `declrag_bench.blocks` (its names are handed on here:
``typeset.page_blocks``, ``typeset.as_text`` ...). What PDF text extractors lose on the corpus is measured by
`declrag_bench.readers` (``python -m declrag_bench.readers OUT_DIR`` typesets into OUT_DIR and compares them).

The text is kept as NQ tokenised it (``April 25 , 2018``, ``Handmaid 's``) so that the answers keep occurring
verbatim; only what LaTeX needs is changed: its special characters are escaped, ``'``, `````, ``--`` and the other
T1 ligatures are set as the ASCII characters they are, and characters T1/TS1 cannot set are mapped to their base
letter or dropped, in the blocks themselves, so the ``.txt`` is exactly the text of the PDF. Hyphenation stays on.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .blocks import (
    _TAG,
    Block,
    Cell,
    Heading,
    Item,
    Paragraph,
    Row,
    Table,
    _repertoire,
    _settable,
    as_text,
    page_blocks,
    page_title,
)
from .blocks import ITEM_MARKS as ITEM_MARKS  # handed on: typeset.ITEM_MARKS, as before the split

# the checkout's root is four levels up (benchmarks/src/declrag_bench/typeset.py); datasets sit beside it
DATASET = Path(__file__).resolve().parents[3].parent / "shared" / "datasets" / "nq-long" / "natural_question.jsonl"
FOOTNOTE = "Source: Wikipedia, CC BY-SA 3.0."
PDFLATEX_TIMEOUT_S = 120
MAX_TABLE_ROWS = 30  # a longer table is split into several tabulars, the header row repeated
MAX_TABLE_LINES = 55  # ... and so is one whose rows would take more lines than about 2/3 of a column
MAX_ROW_LINES = 45  # a row taller than that is set as paragraphs (a tabular cannot break across columns)
CELL_CHARS_PER_LINE = 68  # \scriptsize characters on one line of the full column width (on the low side)
_SIZES = (("\\scriptsize", CELL_CHARS_PER_LINE), ("\\tiny", CELL_CHARS_PER_LINE * 7 // 5))  # table fonts
LONG_TOKEN = 18  # tokens longer than this (URLs) may break after / . _ = & ? : (else they run into the margin)


# ---------------------------------------------------------------------------------------------------- LaTeX

_ESCAPES = {
    "#": r"\#", "$": r"\$", "%": r"\%", "&": r"\&", "_": r"\_", "{": r"\{", "}": r"\}",
    "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
    # set as the ASCII characters they are, not as T1's curly quotes (``, '' and ' are ligatures/quotes in TeX)
    "'": r"\textquotesingle{}", "`": r"\textasciigrave{}",
    "[": "{[}", "]": "{]}",  # never an optional argument (after \\ or \item)
}
_LIGATURE_PAIRS = {"--", ",,", "<<", ">>"}  # T1 ligatures to break: en dash, low quotes, guillemets
_BREAK_AFTER = set("/._=&?:")

PREAMBLE = r"""\documentclass[10pt,twocolumn]{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{lmodern}
\usepackage{textcomp}
\usepackage{array}
\usepackage[a4paper,margin=18mm,columnsep=6mm]{geometry}
\setlength{\tabcolsep}{3pt}
\setlength{\emergencystretch}{1.5em}
\raggedbottom
\newlength{\tabavail}
\newcommand{\cellstyle}{\rightskip=0pt plus 2em\relax\hspace{0pt}}
\pagestyle{myheadings}
"""


def escape(text: str) -> str:
    """``text`` as LaTeX that prints exactly these characters (hyphenation left on)."""
    out: list[str] = []
    for token in text.split(" "):
        long = len(token) > LONG_TOKEN
        chars: list[str] = []
        for i, c in enumerate(token):
            chars.append(_ESCAPES.get(c, c))
            if i + 1 < len(token) and c + token[i + 1] in _LIGATURE_PAIRS:
                chars.append("{}")
            if long and c in _BREAK_AFTER and i + 1 < len(token):
                chars.append(r"\allowbreak{}")
        out.append("".join(chars))
    return " ".join(out)


def _column_cells(table: Table) -> list[list[Cell]]:
    """Each column's cells that span it alone."""
    cols: list[list[Cell]] = [[] for _ in range(table.columns)]
    for r in table.rows:
        j = 0
        for c in r.cells:
            if c.span == 1:
                cols[j].append(c)
            j += c.span
    return cols


def _widths(table: Table, chars_per_line: int) -> tuple[list[float], bool]:
    """Each column's share of the available width: enough for its longest word (up to 20 characters), the rest
    shared by its cells' mean length (damped); and whether the longest words fit at all."""
    cols = _column_cells(table)
    need = [max((len(w) * (1.1 if c.header else 1.0) + 1 for c in v for w in c.text.split()), default=2)
            for v in cols]
    least = [min(n, 20) / chars_per_line for n in need]
    weights = [math.sqrt(min(max(sum(len(c.text) for c in v) / len(v) if v else 6.0, 4.0), 80.0)) for v in cols]
    free = 1.0 - sum(least)
    if free <= 0:
        return [x / sum(least) for x in least], False
    return [x + free * w / sum(weights) for x, w in zip(least, weights, strict=True)], True


def _text_lines(text: str, width: int) -> int:
    """Lines ``text`` takes wrapped at ``width`` characters (greedy; a longer word hyphenated over several)."""
    lines, used = 1, 0
    for word in text.split():
        if used and used + 1 + len(word) > width:
            lines, used = lines + 1, 0
        if len(word) > width:
            lines += (len(word) - 1) // width
            used = len(word) % width or width
        else:
            used += (1 if used else 0) + len(word)
    return lines


def _row_lines(row: Row, widths: Sequence[float], chars_per_line: int) -> int:
    """Estimated lines of a row: its tallest cell's."""
    lines, j = 1, 0
    for c in row.cells:
        share = sum(widths[j:j + c.span]) or 1.0
        lines = max(lines, _text_lines(c.text, max(3, int(chars_per_line * share))))
        j += c.span
    return lines


def _tabular(rows: Sequence[Row], widths: Sequence[float], heads: int, size: str) -> str:
    n = len(widths)
    spec = "".join(rf">{{{size}\cellstyle}}p{{{w:.3f}\tabavail}}" for w in widths)
    out = [rf"\par\smallskip\setlength{{\tabavail}}{{\dimexpr\columnwidth-\tabcolsep*{2 * n}\relax}}%",
           rf"\noindent\begin{{tabular}}{{@{{}}{spec}@{{}}}}\hline"]
    for k, r in enumerate(rows):
        cells, j = [], 0
        for c in r.cells:
            text = "{}" + _cell_latex(c)
            if c.span > 1 or j + c.span > n:
                span = min(c.span, n - j)
                width = rf"\dimexpr{sum(widths[j:j + span]):.3f}\tabavail+\tabcolsep*{2 * (span - 1)}\relax"
                text = rf"\multicolumn{{{span}}}{{>{{{size}\cellstyle}}p{{{width}}}}}{{{text}}}"
            cells.append(text)
            j += c.span
        cells += ["{}"] * max(0, n - j)
        out.append(" & ".join(cells) + r" \\" + (r"\hline" if k + 1 == heads else ""))
    out.append(r"\hline\end{tabular}\par\smallskip")
    return "\n".join(out)


def _cell_latex(cell: Cell) -> str:
    return rf"\textbf{{{escape(cell.text)}}}" if cell.header and cell.text else escape(cell.text)


def _layout(table: Table) -> tuple[str, int, list[float]]:
    """The table's font, its characters per column width and the column widths: \\scriptsize, or \\tiny when the
    columns' longest words would not fit."""
    for size, cpl in _SIZES:
        widths, fits = _widths(table, cpl)
        if fits:
            return size, cpl, widths
    return size, cpl, widths


def _table_latex(table: Table) -> str:
    """A table as tabulars of at most MAX_TABLE_ROWS rows / MAX_TABLE_LINES estimated lines each, each starting
    with the table's leading header rows; a row too tall for a column is set as small paragraphs instead."""
    size, cpl, widths = _layout(table)
    heads = 0
    while heads < min(3, len(table.rows) - 1) and table.rows[heads].header:
        heads += 1
    head = list(table.rows[:heads])
    head_lines = sum(_row_lines(r, widths, cpl) for r in head)
    out: list[str] = []
    chunk: list[Row] = []
    lines = head_lines
    for r in table.rows[heads:]:
        n = _row_lines(r, widths, cpl)
        if chunk and (n > MAX_ROW_LINES or len(chunk) >= MAX_TABLE_ROWS or lines + n > MAX_TABLE_LINES):
            out.append(_tabular(head + chunk, widths, heads, size))
            chunk, lines = [], head_lines
        if n > MAX_ROW_LINES:
            out.append("\n".join(rf"{{{size}\noindent{{}}{_cell_latex(c)}\par}}" for c in r.cells if c.text))
        else:
            chunk.append(r)
            lines += n
    if chunk or not out:
        out.append(_tabular(head + chunk, widths, heads, size))
    return "\n".join(out)


def as_latex(blocks: Sequence[Block], title: str) -> str:
    """A two-column article: lmodern, T1, the title as a running header on every page with the page number,
    H2/H3/H4+ as unnumbered sections, a fixed footnote on every section (so that pages have footnotes without
    moving any of the page's text), lists as itemize, tables as tabulars of ``p{}`` columns."""
    out = [PREAMBLE, rf"\markright{{{escape(title)}}}", r"\begin{document}",
           rf"\twocolumn[{{\centering\LARGE\bfseries {escape(title)}\par\bigskip}}]"]
    depth = 0  # open itemize levels
    has_item: list[bool] = []
    for b in blocks:
        if not isinstance(b, Item):
            while depth:
                out.append(r"\end{itemize}")
                depth -= 1
                has_item.pop()
        if isinstance(b, Heading):
            if b.level == 1 and b.text == title:
                continue
            cmd = {1: "section", 2: "section", 3: "subsection"}.get(b.level, "subsubsection")
            note = rf"\protect\footnote{{{escape(FOOTNOTE)}}}" if b.level <= 2 else ""
            out.append(rf"\{cmd}*{{{escape(b.text)}{note}}}")
        elif isinstance(b, Paragraph):
            out.append(escape(b.text) + "\n")
        elif isinstance(b, Item):
            want = min(b.depth, 4)
            while depth > want:
                out.append(r"\end{itemize}")
                depth -= 1
                has_item.pop()
            while depth < want:
                if has_item and not has_item[-1]:
                    out.append(r"\item[]")
                    has_item[-1] = True
                out.append(r"\begin{itemize}")
                depth += 1
                has_item.append(False)
            out.append(r"\item {}" + escape(b.text))
            has_item[-1] = True
        else:
            out.append(_table_latex(b))
    out += [r"\end{itemize}"] * depth
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------- typesetting


def read_pages(path: Path = DATASET) -> list[dict[str, Any]]:
    """The nq-long lines, each with its ``id`` ("01" ... by line number)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the nq-long golden set is read in place from ../shared/datasets")
    with path.open(encoding="utf-8") as f:
        return [{"id": f"{k:02d}", **json.loads(line)} for k, line in enumerate(f, 1) if line.strip()]


def pdf_pages(pdf: Path) -> int:
    """The number of pages of ``pdf``."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        return len(doc)
    finally:
        doc.close()


def _overfull(log: str) -> dict[str, int]:
    return {"overfull_hbox": log.count("Overfull \\hbox"), "overfull_vbox": log.count("Overfull \\vbox")}


def _pdflatex(tex: str, pdf: Path, log: Path, page: str) -> None:
    """Run pdfLaTeX twice on ``tex`` in a temporary folder; copy the PDF and log to ``pdf`` and ``log``."""
    with tempfile.TemporaryDirectory(prefix="nqpdf-") as tmp:
        src = Path(tmp) / "page.tex"
        src.write_text(tex, encoding="utf-8")
        cmd = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "page.tex"]
        for _ in range(2):
            try:
                done = subprocess.run(cmd, cwd=tmp, capture_output=True, timeout=PDFLATEX_TIMEOUT_S)
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"pdflatex timed out after {PDFLATEX_TIMEOUT_S}s on page {page}") from e
            if done.returncode:
                text = (Path(tmp) / "page.log").read_text(encoding="latin-1", errors="replace") \
                    if (Path(tmp) / "page.log").exists() else done.stdout.decode("latin-1")
                errors = [ln for ln in text.splitlines() if ln.startswith("!")]
                tail = "\n".join(text.splitlines()[-15:])
                raise RuntimeError(f"pdflatex failed on page {page} (source: {pdf.with_suffix('.tex')}): "
                                   f"{'; '.join(errors) or 'no error line'}\n{tail}")
        shutil.copy(Path(tmp) / "page.pdf", pdf)
        shutil.copy(Path(tmp) / "page.log", log)


def typeset(out_dir: Path, *, dataset: Path = DATASET, workers: int = 2) -> list[dict[str, Any]]:
    """Write ``NN.txt``, ``NN.tex``, ``NN.pdf`` (and pdfLaTeX's ``NN.log``) for each page of nq-long into
    ``out_dir``; a page whose PDF is newer than this module and blocks.py is not typeset again. A page whose text
    repeats an earlier page's (the set has one) is skipped. Returns per page: id, title, txt, pdf, pages, questions
    (``{question, answer}`` whose answer occurs verbatim in the ``.txt``), answers_lost (answers verbatim in the
    page's input but not in its text: lost to LaTeX's repertoire), mapped/dropped character counts, overfull boxes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # the pages' text and LaTeX are this module's and blocks.py's work: a change to either typesets them again
    module_time = max(p.stat().st_mtime for p in (Path(__file__), Path(__file__).with_name("blocks.py")))
    seen: dict[str, str] = {}
    jobs: list[tuple[str, str, Path, Path]] = []  # (page, LaTeX, pdf, log)
    result: list[dict[str, Any]] = []
    for page in read_pages(dataset):
        if page["input"] in seen:
            print(f"page {page['id']} repeats page {seen[page['input']]}: skipped", file=sys.stderr)
            continue
        seen[page["input"]] = page["id"]
        blocks = page_blocks(page["input"])
        title = page_title(blocks)
        text = as_text(blocks)
        txt, pdf = out_dir / f"{page['id']}.txt", out_dir / f"{page['id']}.pdf"
        txt.write_text(text, encoding="utf-8")
        raw = _TAG.sub(" ", page["input"])
        settable = _repertoire()
        chars = [c for c in raw if not c.isspace()]
        qa = list(zip(page["instructions"], page["outputs"], strict=True))
        entry = {"id": page["id"], "title": title, "txt": str(txt), "pdf": str(pdf),
                 "questions": [{"question": q, "answer": a} for q, a in qa if a in text],
                 "answers_lost": [a for _, a in qa if a in page["input"] and a not in text],
                 "chars_mapped": sum(1 for c in chars if c not in settable and _settable(c)),
                 "chars_dropped": sum(1 for c in chars if c not in settable and not _settable(c))}
        result.append(entry)
        if not (pdf.exists() and pdf.stat().st_mtime > module_time):
            tex = as_latex(blocks, title)
            out_dir.joinpath(f"{page['id']}.tex").write_text(tex, encoding="utf-8")
            jobs.append((f"{page['id']} ({title})", tex, pdf, out_dir / f"{page['id']}.log"))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for f in [pool.submit(_pdflatex, tex, pdf, log, name) for name, tex, pdf, log in jobs]:
            f.result()
    for e in result:
        log = Path(e["pdf"]).with_suffix(".log")
        e["pages"] = pdf_pages(Path(e["pdf"]))
        e.update(_overfull(log.read_text(encoding="latin-1") if log.exists() else ""))
    return result
