"""HTML as a browser shows it: hidden elements left out, a table's rows as lines, ``<pre>`` verbatim, its headings
placed, its code blocks and tables as units (`load_html`)."""

from __future__ import annotations

import re
import warnings
from typing import Any

from ..text.reading import visible
from ..text.sentences import strip_span
from ..types import Document
from ._files import SNIFF, LoadError, is_binary
from ._units import CODE, TABLE, Unit
from .headers import clip

_DROP = ["script", "style", "noscript", "template", "svg", "head", "iframe", "object"]
_NOT_SHOWN = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\s*(?:!important\s*)?(?:;|$)", re.I)


def _hidden(tag: Any) -> bool:
    """An element a browser does not show: ``hidden``, ``aria-hidden="true"`` or an inline ``display: none`` /
    ``visibility: hidden`` (style sheets are not applied)."""
    attrs = tag.attrs
    return ("hidden" in attrs or str(attrs.get("aria-hidden", "")).strip().lower() == "true"
            or bool(_NOT_SHOWN.search(str(attrs.get("style", "")))))


_BLOCK = (
    "address article aside blockquote body caption dd details dialog div dl dt fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hr html legend li main nav ol p pre section summary table ul"
).split()  # a table's rows are lines (`load_html`), its cells joined by " | " on them
# where a unit (`declrag.ingest._units`) starts and ends in the flattened text, and a table's head ends: characters of
# Unicode's private use area, taken out of the page first and out of its text at the end
_CODE_START, _CODE_END, _TABLE_START, _TABLE_HEAD, _TABLE_END = "\ue000\ue001\ue002\ue003\ue004"
_MARKS = re.compile("([\ue000-\ue004])")
_WS = re.compile(r"\s+")


def load_html(data: bytes, source: str, name: str) -> list[Document]:
    from bs4 import BeautifulSoup

    if is_binary(data[:SNIFF]):
        raise LoadError("binary file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        soup = BeautifulSoup(data, "lxml")
    title_tag = next((t for t in soup.find_all("title") if not t.find_parent("svg")), None)
    title = _WS.sub(" ", title_tag.get_text()).strip() if title_tag else ""
    marked, heads = _flatten(soup)
    if not title and heads:
        title = next((h for level, h in heads if level == 1), "")
    text, found = _unmarked("\n".join(line.rstrip() for line in marked.split("\n")))
    if not visible(text):
        raise LoadError("no visible text in HTML")
    metadata: dict[str, Any] = {"headings": _placed(text, heads)}
    if found:
        metadata["units"] = [list(u) for u in found]
    return [Document(source, text, source, title or name, metadata=metadata)]


def _flatten(soup: Any) -> tuple[str, list[tuple[int, str]]]:
    """The text a browser shows of a parsed page, in one walk that changes nothing (time linear in the page): block
    elements on lines of their own, a table's rows as lines with their cells joined by " | ", ``<pre>`` verbatim,
    hidden elements (`_hidden`) and `_DROP`'s left out; the units' marks in it (`_unmarked` takes them out); and its
    headings (level, text) in order."""
    from bs4 import CData, NavigableString, Tag  # here, with BeautifulSoup: only HTML needs it

    walk = _Walk(soup)
    while walk.stack:
        frame = walk.stack[-1]
        node = next(frame.children, None)
        if node is None:
            walk.close(walk.stack.pop())
        elif isinstance(node, Tag):
            walk.open(node, frame)
        elif type(node) in (NavigableString, CData):  # not comments, doctypes, processing instructions
            raw = _MARKS.sub("", str(node))  # the page's own private-use characters cannot pass for marks
            piece = raw if frame.pre else _WS.sub(" ", raw)
            walk.put(piece.lstrip(" ") if not frame.pre and walk.last in "\n " else piece)
    return "".join(walk.parts), walk.heads


class _Frame:
    """An element being walked: its children left, whether it is inside ``<pre>``, how deep in tables, and (for a row
    or a table) the cells and rows that ended in it."""

    __slots__ = ("children", "tag", "pre", "tables", "cells", "heads", "in_head", "rows", "at", "cell")

    def __init__(self, tag: Any, pre: bool, tables: int, in_head: bool, at: int = 0, cell: bool = False):
        self.children, self.tag, self.pre, self.tables = iter(tag.children), tag, pre, tables
        self.cell = cell  # inside a table's cell: its paragraphs (a word processor's <td><p>) are one line
        self.cells, self.heads, self.in_head, self.rows = 0, 0, in_head, 0
        self.at = at  # where its text starts in what is written (a heading's text is what it wrote)


class _Walk:
    """`_flatten`'s state: the text written (``parts``; ``last``, its last character, marks aside), the headings, and
    the stack of elements open."""

    def __init__(self, soup: Any):
        self.soup, self.last = soup, "\n"
        self.parts: list[str] = []
        self.heads: list[tuple[int, str]] = []
        self.stack = [_Frame(soup, False, 0, False)]
        self.marked_head: set[int] = set()  # the tables (by id) whose head is marked

    def put(self, s: str) -> None:
        if s:
            self.parts.append(s)
            self.last = s[-1]

    def open(self, node: Any, frame: _Frame) -> None:
        nm = node.name
        if nm in _DROP or _hidden(node):
            return
        in_cell = frame.cell and nm not in ("table", "tr", "td", "th")
        if nm == "br" or in_cell and nm in _BLOCK:  # in a cell, a block or a break is a space
            self.put("\n" if not frame.cell else "" if self.last in "\n |" else " ")
            if nm == "br":
                return
        elif nm in _BLOCK or nm == "tr" and self.last != "\n":  # a row starts a line
            self.put("\n")
        tables = frame.tables + (nm == "table")
        if nm == "table" and tables == 1:
            self.parts.append(_TABLE_START)
        elif nm == "pre" and not frame.pre and not frame.tables:
            self.parts.append(_CODE_START)
        elif nm in ("td", "th"):
            self.put(("| " if self.last == " " else " | ") if frame.cells else "" if self.last in "\n " else " ")
        self.stack.append(_Frame(node, frame.pre or nm == "pre", tables, frame.in_head or nm == "thead",
                                 len(self.parts), (frame.cell or nm in ("td", "th")) and nm != "table"))

    def close(self, frame: _Frame) -> None:
        tag = frame.tag
        if tag is self.soup:
            return
        parent = self.stack[-1]
        if tag.name in _HEADINGS:  # the heading as the page shows it: what the walk wrote inside it
            self.heads.append((int(tag.name[1]), _WS.sub(" ", _MARKS.sub("", "".join(self.parts[frame.at:]))).strip()))
        if tag.name in ("td", "th"):
            parent.cells += 1
            parent.heads += tag.name == "th"
        elif tag.name == "tr":
            self.put("\n")
            self._row_ended(frame)
        if tag.name == "table" and frame.tables == 1:
            self.parts.append(_TABLE_END)
        elif tag.name == "pre" and not parent.pre and not frame.tables:
            self.parts.append(_CODE_END)
        if tag.name in _BLOCK:  # in a cell, a block's end is a space
            self.put("\n" if not (frame.cell and tag.name != "table") else "" if self.last in "\n |" else " ")

    def _row_ended(self, row: _Frame) -> None:
        """Count the row in its table; a ``<thead>`` row, or a first row of header cells, ends the table's head."""
        table = next((f for f in reversed(self.stack) if f.tag.name == "table"), None)
        if table is None:
            return
        table.rows += 1
        if (row.tables == 1 and id(table.tag) not in self.marked_head and row.cells
                and (row.in_head or table.rows == 1 and row.heads == row.cells)):
            self.parts.append(_TABLE_HEAD)
            self.marked_head.add(id(table.tag))


def _unmarked(marked: str) -> tuple[str, list[Unit]]:
    """The flattened page without its marks (at most one blank line in a row, no space around it), and the units the
    marks delimited, as spans of that text."""
    marked = _BLANKS.sub(lambda m: "\n\n" + "".join(_MARKS.findall(m.group())), marked)
    out: list[str] = []
    size, head = 0, -1
    units: list[Unit] = []
    open_at: dict[str, int] = {}
    for piece in _MARKS.split(marked):
        if piece in (_CODE_START, _TABLE_START):
            open_at[piece], head = size, -1
        elif piece == _TABLE_HEAD:
            head = size
        elif piece in (_CODE_END, _TABLE_END):
            kind = CODE if piece == _CODE_END else TABLE
            start = open_at.pop(_CODE_START if kind == CODE else _TABLE_START, None)
            if start is not None:
                units.append((start, size, kind, head if kind == TABLE and head > start else start))
        else:
            out.append(piece)
            size += len(piece)
    text = "".join(out)
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    clip = [(max(a - lead, 0), min(b - lead, len(text)), k, min(max(h - lead, 0), len(text))) for a, b, k, h in units]
    trimmed = [(*span, kind, max(head, span[0])) for a, b, kind, head in clip if (span := strip_span(text, a, b))]
    return text, trimmed  # a unit without the blank lines at its edges


_BLANKS = re.compile("\n(?:[\ue000-\ue004]*\n){2,}")  # blank lines, marks between them


_HEADINGS = ["h1", "h2", "h3", "h4", "h5", "h6"]


def _placed(text: str, heads: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """HTML headings (level, text), in document order, as `declrag.ingest.headers` headings: each found at the start
    of a line of the flattened text, after the one before it."""
    out, pos = [], 0
    for level, head in heads:
        if not head:
            continue
        at = text.find(head, pos)
        while at >= 0 and not ((at == 0 or text[at - 1] == "\n")
                               and text[at + len(head):at + len(head) + 1] in ("", "\n")):  # a line of its own
            at = text.find(head, at + 1)
        if at >= 0:
            out.append((at, level, clip(head)))
            pos = at + len(head)
    return out
