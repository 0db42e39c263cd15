"""A corpus of typeset two-column PDFs whose text is known, and what PDF text extractors lose on it.

Reading a PDF is not reading its text: a typeset page hyphenates words at line ends, sets text in two columns,
repeats a running header and a page number on every page, puts footnotes at the foot of a column and tables in
boxes. To measure what that costs a RAG pipeline, this module typesets the 21 Wikipedia pages of the ``nq-long``
golden set (Natural Questions over whole pages, read in place from ``../shared/datasets`` beside the checkout) with
pdfLaTeX as two-column papers, and writes for each page the plain text that went into the PDF (``NN.txt``) beside
the PDF (``NN.pdf``). The questions whose short answer occurs verbatim in the ``.txt`` come with them.

``compare_readers`` then extracts the PDFs page by page with pypdf, pypdfium2, pdfminer.six and pdfplumber and
measures speed, how many answers are still found verbatim (as extracted, and after joining line-end hyphenation),
whether long paragraphs come out in reading order, and how often the running header shows up.

The text is kept as NQ tokenised it (``April 25 , 2018``, ``Handmaid 's``) so that the answers keep occurring
verbatim; only what LaTeX needs is changed: its special characters are escaped, ``'``, `````, ``--`` and the other
T1 ligatures are set as the ASCII characters they are, and characters T1/TS1 cannot set are mapped to their base
letter or dropped, in the blocks themselves, so the ``.txt`` is exactly the text of the PDF. Hyphenation stays on.

``python -m declrag_bench.typeset OUT_DIR`` typesets into OUT_DIR (cached) and prints the comparison, also written
to ``OUT_DIR/readers.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Item:
    """A list item; ``depth`` 1 for a top-level list, 2 for a list inside an item, ..."""

    text: str
    depth: int


@dataclass(frozen=True)
class Cell:
    text: str
    span: int = 1
    header: bool = False


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]

    @property
    def header(self) -> bool:
        """A header row: every cell a ``<Th>``."""
        return all(c.header for c in self.cells)


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]

    @property
    def columns(self) -> int:
        return max(sum(c.span for c in r.cells) for r in self.rows)


Block = Heading | Paragraph | Item | Table

_TAG = re.compile(r'<(/?)([A-Za-z][A-Za-z0-9]*)(?:_colspan="(\d+)")?>')
_HEADINGS = {f"H{i}": i for i in range(1, 7)}
_TEXT_BLOCKS = {"P", "Li", "Dd", "Dt", *_HEADINGS}
_LISTS = {"Ul", "Ol"}


@cache
def _repertoire() -> frozenset[str]:
    """The characters pdfLaTeX sets with T1 + TS1 + OMS and utf8 inputenc (their ``.dfu`` files), and ASCII."""
    chars = {chr(c) for c in range(32, 127)}
    for name in ("t1enc.dfu", "ts1enc.dfu", "omsenc.dfu"):
        found = subprocess.run(["kpsewhich", name], capture_output=True, text=True).stdout.strip()
        if found:
            text = Path(found).read_text(encoding="latin-1")
            chars |= {chr(int(h, 16)) for h in re.findall(r"\\DeclareUnicodeCharacter\{([0-9A-Fa-f]+)\}", text)}
    chars.discard("\u00ad")  # a soft hyphen would vanish from the PDF
    return frozenset(c for c in chars if c.isprintable())


def _settable(token: str) -> str:
    """``token`` with what LaTeX cannot set mapped to its base letters (``ế`` -> ``e``) or dropped."""
    ok = _repertoire()
    if all(c in ok for c in token):
        return token
    out = []
    for c in token:
        if c in ok:
            out.append(c)
            continue
        base = "".join(b for b in unicodedata.normalize("NFKD", c) if not unicodedata.combining(b))
        if base and all(b in ok for b in base):
            out.append(base)
    return "".join(out)


def _clean(parts: Iterable[str]) -> str:
    """Text chunks -> one line of NQ tokens joined by single spaces, each token made settable."""
    return " ".join(t for t in (_settable(w) for p in parts for w in p.split()) if t)


def page_blocks(input: str) -> list[Block]:
    """Parse one nq-long page (text with ``<H1>``, ``<P>``, ``<Table>``, ``<Tr>``, ``<Th>``, ``<Td>``, ``<Ul>``,
    ``<Li>``, ``<Dl>``, ``<Dd>`` ... as tokens) into headings, paragraphs, list items and tables.

    Text before the first ``<H1>`` (NQ's "Title - wikipedia" line) is dropped. Text outside any block is a
    paragraph; ``<Dd>``/``<Dt>`` are paragraphs. Everything inside a table cell, nested lists and tables
    included, is that cell's text. Words and spacing are kept as NQ gives them, except characters that LaTeX
    cannot set (see ``_settable``)."""
    blocks: list[Block] = []
    stack: list[str] = []  # open tags outside tables
    buf: list[str] = []
    rows: list[Row] | None = None  # the open (outermost) table's rows
    table_depth = 0
    row: list[Cell] | None = None
    cell: list[str] | None = None
    cell_span, cell_header = 1, False
    started = False

    def flush() -> None:
        text = _clean(buf)
        buf.clear()
        if not text or not started:
            return
        top = next((t for t in reversed(stack) if t in _TEXT_BLOCKS), None)
        if top in _HEADINGS:
            blocks.append(Heading(_HEADINGS[top], text))
        elif top == "Li":
            blocks.append(Item(text, max(1, sum(t in _LISTS for t in stack))))
        else:
            blocks.append(Paragraph(text))

    def end_cell() -> None:
        nonlocal cell
        if cell is not None and row is not None:
            row.append(Cell(_clean(cell), cell_span, cell_header))
        cell = None

    def end_row() -> None:
        nonlocal row
        end_cell()
        if row and rows is not None and any(c.text for c in row):
            rows.append(Row(tuple(row)))
        row = None

    pos = 0
    for m in [*_TAG.finditer(input), None]:
        text = input[pos:m.start() if m else len(input)]
        pos = m.end() if m else len(input)
        if text.strip():
            if table_depth:
                if cell is None:  # text in a table but outside any cell: a cell of its own
                    if row is None:
                        row = []
                    cell, cell_span, cell_header = [], 1, False
                cell.append(text)
            else:
                buf.append(text)
        if m is None:
            break
        closing, tag, span = m.group(1) == "/", m.group(2), int(m.group(3) or 1)
        if tag == "Table":
            if not closing:
                table_depth += 1
                if table_depth == 1:
                    flush()
                    rows, row, cell = [], None, None
            elif table_depth:
                table_depth -= 1
                if table_depth == 0 and rows is not None:
                    end_row()
                    if rows and started:
                        blocks.append(Table(tuple(rows)))
                    rows = None
            continue
        if table_depth:
            if table_depth > 1:  # a nested table's content goes into the outer cell, as text
                continue
            if tag == "Tr":
                end_row()
                if not closing:
                    row = []
            elif tag in ("Td", "Th"):
                end_cell()
                if not closing:
                    if row is None:
                        row = []
                    cell, cell_span, cell_header = [], max(1, span), tag == "Th"
            continue
        if tag in _TEXT_BLOCKS or tag in _LISTS or tag == "Dl":
            flush()
            if not closing:
                stack.append(tag)
                if tag == "H1":
                    started = True
            elif tag in stack:
                while stack.pop() != tag:
                    pass
    flush()
    return blocks


def page_title(blocks: Sequence[Block]) -> str:
    """The page's title: its ``<H1>``."""
    return next((b.text for b in blocks if isinstance(b, Heading) and b.level == 1), "")


# ---------------------------------------------------------------------------------------------------- plain text


ITEM_MARKS = ("•", "–", "*", "·")  # LaTeX's itemize labels, level by level


def as_text(blocks: Sequence[Block]) -> str:
    """The plain text: headings and paragraphs as lines between blank lines, a list's items on consecutive
    lines with the marks LaTeX sets before them (the PDF shows them, and its readers read them), a table as one line
    per row with its cells joined by `` | ``."""
    parts: list[str] = []
    prev: Block | None = None
    for b in blocks:
        if isinstance(b, Table):
            line = "\n".join(" | ".join(c.text for c in r.cells) for r in b.rows)
        elif isinstance(b, Item):
            line = f"{ITEM_MARKS[min(b.depth, len(ITEM_MARKS)) - 1]} {b.text}"
        else:
            line = b.text
        if parts:
            parts.append("\n" if isinstance(b, Item) and isinstance(prev, Item) else "\n\n")
        parts.append(line)
        prev = b
    return "".join(parts) + "\n"


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


def _pdf_pages(pdf: Path) -> int:
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
    ``out_dir``; a page whose PDF is newer than this module is not typeset again. A page whose text repeats an
    earlier page's (the set has one) is skipped. Returns per page: id, title, txt, pdf, pages, questions
    (``{question, answer}`` whose answer occurs verbatim in the ``.txt``), answers_lost (answers verbatim in the
    page's input but not in its text: lost to LaTeX's repertoire), mapped/dropped character counts, overfull boxes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    module_time = Path(__file__).stat().st_mtime
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
        e["pages"] = _pdf_pages(Path(e["pdf"]))
        e.update(_overfull(log.read_text(encoding="latin-1") if log.exists() else ""))
    return result


# ---------------------------------------------------------------------------------------------------- readers


def _pypdf(pdf: Path) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(pdf).pages]


def _pypdfium2(pdf: Path) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        out = []
        for i in range(len(doc)):
            page = doc[i]
            tp = page.get_textpage()
            out.append(tp.get_text_range())
            tp.close()
            page.close()
        return out
    finally:
        doc.close()


def _pdfminer(pdf: Path) -> list[str]:
    from pdfminer.high_level import extract_text

    return [extract_text(pdf, page_numbers=[i]) for i in range(_pdf_pages(pdf))]


def _pdfplumber(pdf: Path) -> list[str]:
    import pdfplumber

    with pdfplumber.open(pdf) as doc:
        out = []
        for page in doc.pages:
            out.append(page.extract_text() or "")
            page.close()
        return out


READERS: dict[str, Callable[[Path], list[str]]] = {
    "pypdf": _pypdf, "pypdfium2": _pypdfium2, "pdfminer.six": _pdfminer, "pdfplumber": _pdfplumber}
_HYPHEN = re.compile(r"(\w)-\s*\n\s*(\w)")
_ANY_HYPHEN = re.compile(r"(\w)[-\u00ad\u2010]\s*\n\s*(\w)")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def dehyphenate(text: str) -> str:
    """Join words hyphenated at a line end (``exam-\\nple`` -> ``example``)."""
    return _HYPHEN.sub(r"\1\2", text)


def normalise(text: str) -> str:
    """NFKC (ligatures), then words joined across a line-end hyphen of any kind: ``-``, a soft hyphen, U+2010,
    or pdfium's U+FFFE marker (which it sets in place of a line-end hyphen, with no line break after it)."""
    text = unicodedata.normalize("NFKC", text.replace("\r\n", "\n"))
    return _ANY_HYPHEN.sub(r"\1\2", re.sub(r"\ufffe\s*", "", text))


def paragraphs(text: str, min_words: int = 12) -> list[str]:
    """The ``.txt``'s blank-line-separated blocks of at least ``min_words`` words that are not table rows."""
    return [p for p in (b.strip() for b in text.split("\n\n"))
            if len(p.split()) >= min_words and "\n" not in p and " | " not in p]


def in_order(hay: str, paragraph: str, slack: float = 1.6) -> tuple[bool, bool]:
    """(both the first and last 6-word shingles of ``paragraph`` occur in ``hay``; they occur first before last,
    at most ``slack`` times the paragraph's length apart). Both texts whitespace-collapsed."""
    words = paragraph.split()
    first, last = " ".join(words[:6]), " ".join(words[-6:])
    found = first in hay and last in hay
    i = hay.find(first)
    while found and i >= 0:
        j = hay.find(last, i)
        if j < 0:
            break
        if j - i <= slack * len(paragraph):
            return True, True
        i = hay.find(first, i + 1)
    return found, False


def _headers(page: str, title: str, number: int) -> int:
    """How often ``page`` (collapsed) holds its running header: the title next to the page number."""
    head = re.escape(_collapse(title))
    return len(re.findall(rf"{head} ?{number}(?!\d)|(?<!\d){number} ?{head}", _collapse(page)))


def _measure(extracted: Sequence[str], text: str, answers: Sequence[str], title: str) -> Counter[str]:
    """One PDF's counts (see ``compare_readers``)."""
    c: Counter[str] = Counter()
    whole = "\n".join(extracted)
    versions = {"raw": _collapse(whole), "dehyphenated": _collapse(dehyphenate(whole)),
                "normalised": _collapse(normalise(whole))}
    c["answers"] += len(answers)
    for kind, hay in versions.items():
        c[f"answers_{kind}"] += sum(_collapse(a) in hay for a in answers)
    for p in map(_collapse, paragraphs(text)):
        c["paragraphs"] += 1
        for kind in ("dehyphenated", "normalised"):
            found, ordered = in_order(versions[kind], p)
            c[f"paragraphs_found_{kind}"] += found
            c[f"paragraphs_in_order_{kind}"] += ordered
    counts = [_headers(page, title, k) for k, page in enumerate(extracted, 1)]
    c["headers"] += sum(counts)
    c["pages_with_header"] += sum(n > 0 for n in counts)
    c["pages"] += len(extracted)
    return c


def compare_readers(pdfs: Sequence[Path], texts: Sequence[str], answers: Sequence[Sequence[str]],
                    titles: Sequence[str] | None = None,
                    readers: Sequence[str] = tuple(READERS)) -> dict[str, dict[str, Any]]:
    """Extract each PDF page by page with each reader and measure against the PDF's known text and answers.

    Per reader: seconds and pages/s; the share of answers found verbatim (whitespace collapsed) in the text as
    extracted (``raw``), after joining line-end hyphens (``dehyphenated``, ``-`` + newline only) and after
    ``normalise`` (any hyphen, pdfium's marker, NFKC); for the ``.txt``'s paragraphs of 12+ words, the share whose
    first and last 6-word shingles are found, and found in order at most 1.6x the paragraph's length apart
    (in the dehyphenated and the normalised text); the running header (the title, by default the text's first
    line, next to the page number) per page."""
    titles = list(titles) if titles is not None else [t.split("\n", 1)[0] for t in texts]
    out: dict[str, dict[str, Any]] = {}
    for name in readers:
        read = READERS[name]
        c: Counter[str] = Counter()
        seconds = 0.0
        errors: list[str] = []
        for pdf, text, ans, title in zip(pdfs, texts, answers, titles, strict=True):
            start = time.perf_counter()
            try:
                extracted = read(Path(pdf))
            except Exception as e:  # a reader that fails on a PDF counts as finding nothing there
                errors.append(f"{Path(pdf).name}: {type(e).__name__}: {e}")
                extracted = []
            seconds += time.perf_counter() - start
            c += _measure(extracted, text, ans, title)
        r: dict[str, Any] = {"pages": c["pages"], "seconds": round(seconds, 3),
                             "pages_per_s": round(c["pages"] / seconds, 2) if seconds else None,
                             "answers": c["answers"], "paragraphs": c["paragraphs"]}
        for kind in ("raw", "dehyphenated", "normalised"):
            r[f"answers_{kind}"] = _share(c[f"answers_{kind}"], c["answers"])
        for kind in ("dehyphenated", "normalised"):
            r[f"paragraphs_found_{kind}"] = _share(c[f"paragraphs_found_{kind}"], c["paragraphs"])
            r[f"paragraphs_in_order_{kind}"] = _share(c[f"paragraphs_in_order_{kind}"], c["paragraphs"])
        r["headers_per_page"] = round(c["headers"] / c["pages"], 3) if c["pages"] else None
        r["pages_with_header"] = _share(c["pages_with_header"], c["pages"])
        r["errors"] = errors
        out[name] = r
    return out


def _share(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def print_table(result: dict[str, dict[str, Any]]) -> None:
    """The comparison as a fixed-width table (answers and paragraphs as shares)."""
    cols = [("reader", "", 12), ("pages/s", "pages_per_s", 8), ("ans raw", "answers_raw", 8),
            ("ans dehyph", "answers_dehyphenated", 10), ("ans norm", "answers_normalised", 9),
            ("¶ found", "paragraphs_found_dehyphenated", 8), ("¶ order", "paragraphs_in_order_dehyphenated", 8),
            ("¶ order norm", "paragraphs_in_order_normalised", 12), ("header/page", "headers_per_page", 11)]
    print("  ".join(f"{h:>{w}}" if key else f"{h:<{w}}" for h, key, w in cols))
    for name, r in result.items():
        vals = [name] + [f"{r[key]:.3f}" if isinstance(r[key], float) and key != "pages_per_s" else f"{r[key]}"
                         for _, key, _ in cols[1:]]
        print("  ".join(f"{v:>{w}}" if key else f"{v:<{w}}" for v, (_, key, w) in zip(vals, cols, strict=True)))
    errors = [e for r in result.values() for e in r["errors"]]
    if errors:
        print(f"{len(errors)} reader errors, first: {errors[0]}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m declrag_bench.typeset", description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--workers", type=int, default=2, help="pdfLaTeX runs at once")
    parser.add_argument("--readers", nargs="*", default=list(READERS), choices=list(READERS))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    pages = typeset(args.out_dir, workers=args.workers)
    typeset_s = time.perf_counter() - start
    qa = [[q["answer"] for q in p["questions"]] for p in pages]
    questions = sum(len(a) for a in qa)
    lost = [a for p in pages for a in p["answers_lost"]]
    print(f"{len(pages)} pages, {sum(p['pages'] for p in pages)} PDF pages, typeset in {typeset_s:.1f}s; "
          f"{questions} questions whose answer is in the text; "
          f"{len(lost)} answers lost to LaTeX's repertoire {lost}; "
          f"{sum(p['chars_mapped'] for p in pages)} characters mapped, {sum(p['chars_dropped'] for p in pages)} "
          f"dropped; overfull boxes: {sum(p['overfull_hbox'] for p in pages)} hbox, "
          f"{sum(p['overfull_vbox'] for p in pages)} vbox")
    texts = [Path(p["txt"]).read_text(encoding="utf-8") for p in pages]
    result = compare_readers([Path(p["pdf"]) for p in pages], texts, qa, [p["title"] for p in pages], args.readers)
    print_table(result)
    summary = {"typeset_seconds": round(typeset_s, 1), "pages": pages, "readers": result}
    (args.out_dir / "readers.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
