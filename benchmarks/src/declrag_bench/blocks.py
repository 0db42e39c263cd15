"""An nq-long page as blocks (headings, paragraphs, list items, tables), and as the plain text typeset from them.

`page_blocks` reads a page of the ``nq-long`` golden set (Natural Questions over whole Wikipedia pages, its HTML tags
as tokens); `as_text` writes the plain text that `declrag_bench.typeset` typesets as a PDF and writes beside it
(``NN.txt``). The text is kept as NQ tokenised it (``April 25 , 2018``, ``Handmaid 's``) so that the answers keep
occurring verbatim; characters that pdfLaTeX (T1/TS1) cannot set are mapped to their base letter or dropped, in the
blocks themselves, so the ``.txt`` is exactly the text of the PDF.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

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


class _PageParser:
    """What `page_blocks` holds as it reads a page's text and tags in order."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.stack: list[str] = []  # open tags outside tables
        self.buf: list[str] = []
        self.rows: list[Row] | None = None  # the open (outermost) table's rows
        self.table_depth = 0
        self.row: list[Cell] | None = None
        self.cell: list[str] | None = None
        self.cell_span, self.cell_header = 1, False
        self.started = False

    def flush(self) -> None:
        """The text read since the last block tag, as a block (none before the first ``<H1>``)."""
        text = _clean(self.buf)
        self.buf.clear()
        if not text or not self.started:
            return
        top = next((t for t in reversed(self.stack) if t in _TEXT_BLOCKS), None)
        if top in _HEADINGS:
            self.blocks.append(Heading(_HEADINGS[top], text))
        elif top == "Li":
            self.blocks.append(Item(text, max(1, sum(t in _LISTS for t in self.stack))))
        else:
            self.blocks.append(Paragraph(text))

    def end_cell(self) -> None:
        if self.cell is not None and self.row is not None:
            self.row.append(Cell(_clean(self.cell), self.cell_span, self.cell_header))
        self.cell = None

    def end_row(self) -> None:
        self.end_cell()
        if self.row and self.rows is not None and any(c.text for c in self.row):
            self.rows.append(Row(tuple(self.row)))
        self.row = None

    def text(self, text: str) -> None:
        if not text.strip():
            return
        if self.table_depth:
            if self.cell is None:  # text in a table but outside any cell: a cell of its own
                if self.row is None:
                    self.row = []
                self.cell, self.cell_span, self.cell_header = [], 1, False
            self.cell.append(text)
        else:
            self.buf.append(text)

    def tag(self, closing: bool, tag: str, span: int) -> None:
        if tag == "Table":
            self.table(closing)
        elif self.table_depth:
            if self.table_depth == 1:  # a nested table's content goes into the outer cell, as text
                self.table_tag(closing, tag, span)
        elif tag in _TEXT_BLOCKS or tag in _LISTS or tag == "Dl":
            self.block_tag(closing, tag)

    def table(self, closing: bool) -> None:
        if not closing:
            self.table_depth += 1
            if self.table_depth == 1:
                self.flush()
                self.rows, self.row, self.cell = [], None, None
        elif self.table_depth:
            self.table_depth -= 1
            if self.table_depth == 0 and self.rows is not None:
                self.end_row()
                if self.rows and self.started:
                    self.blocks.append(Table(tuple(self.rows)))
                self.rows = None

    def table_tag(self, closing: bool, tag: str, span: int) -> None:
        if tag == "Tr":
            self.end_row()
            if not closing:
                self.row = []
        elif tag in ("Td", "Th"):
            self.end_cell()
            if not closing:
                if self.row is None:
                    self.row = []
                self.cell, self.cell_span, self.cell_header = [], max(1, span), tag == "Th"

    def block_tag(self, closing: bool, tag: str) -> None:
        self.flush()
        if not closing:
            self.stack.append(tag)
            if tag == "H1":
                self.started = True
        elif tag in self.stack:
            while self.stack.pop() != tag:
                pass


def page_blocks(input: str) -> list[Block]:
    """Parse one nq-long page (text with ``<H1>``, ``<P>``, ``<Table>``, ``<Tr>``, ``<Th>``, ``<Td>``, ``<Ul>``,
    ``<Li>``, ``<Dl>``, ``<Dd>`` ... as tokens) into headings, paragraphs, list items and tables.

    Text before the first ``<H1>`` (NQ's "Title - wikipedia" line) is dropped. Text outside any block is a
    paragraph; ``<Dd>``/``<Dt>`` are paragraphs. Everything inside a table cell, nested lists and tables
    included, is that cell's text. Words and spacing are kept as NQ gives them, except characters that LaTeX
    cannot set (see ``_settable``)."""
    parser = _PageParser()
    pos = 0
    for m in _TAG.finditer(input):
        parser.text(input[pos:m.start()])
        pos = m.end()
        parser.tag(m.group(1) == "/", m.group(2), int(m.group(3) or 1))
    parser.text(input[pos:])
    parser.flush()
    return parser.blocks


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
