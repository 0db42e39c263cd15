"""One document's text written from its structure (`Writer`), for the loaders that read structure rather than text
(decks, workbooks, CSV, e-mail): headings as lines of their own, recorded as the document's ``headings``; tables as
units (`declrag.ingest._units`), a row a line with its cells joined by " | " as the HTML loader writes them, the
header row the unit's head. A deck is one document whose pages are its slides, joined by form feeds as a PDF's pages
are (`Writer.page`; a chunk's page is the slide it starts on); a workbook is one document whose sections are its
sheets. Small slides and sheets are then packed into chunks as a text's sections are, rather than each searched
alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..types import Document
from ._files import LoadError, Read, Skipped
from ._units import TABLE, Unit
from .headers import clip

_BLOCK = re.compile(r"[^\n\f]+(?:\n[^\n\f]+)*")
_CELL_WS = str.maketrans({"\n": " ", "\r": " ", "\t": " ", "\f": " ", "|": "/"})


def cell_text(value: Any) -> str:
    """A cell as one line: None is empty, a whole float loses its ``.0``, a date its midnight; a "|" (the cell
    separator) becomes "/"."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    elif hasattr(value, "isoformat"):
        text = value.isoformat()
        value = text[:-9] if text.endswith("T00:00:00") else text
    return " ".join(str(value).translate(_CELL_WS).split())


class Writer:
    """Builds a text, its headings (``(offset, level, text)``) and its units (``(start, end, kind, head)``)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.headings: list[tuple[int, int, str]] = []
        self.units: list[Unit] = []

    def _add(self, text: str) -> int:
        """Append ``text`` as a block of its own (a blank line before it, unless it starts a page); returns where it
        starts."""
        if self.parts and not self.parts[-1].endswith("\f"):
            self.parts.append("\n\n")
            self.size += 2
        at = self.size
        self.parts.append(text)
        self.size += len(text)
        return at

    def page(self) -> None:
        """End this page (a deck's slide): what follows is on the next one, after a blank line and a form feed (a
        paragraph's end, and the page's: `declrag.ingest._running.page_starts`). A page with nothing on it (a hidden
        slide) still counts."""
        sep = "\n\n\f" if self.parts else "\f"
        self.parts.append(sep)
        self.size += len(sep)

    def heading(self, level: int, text: str) -> None:
        text = " ".join(text.split())
        if text:
            self.headings.append((self._add(text), level, clip(text)))

    def paragraph(self, text: str) -> None:
        lines = [" ".join(line.split()) for line in text.replace("\f", "\n").replace("\r", "\n").split("\n")]
        if body := "\n".join(line for line in lines if line):
            self._add(body)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """A table: ``header`` its first line (the unit's head), each row a line; empty trailing cells cut."""
        lines = [" | ".join(header).rstrip(" |")] if any(header) else []
        lines += [line for row in rows if (line := " | ".join(row).rstrip(" |"))]
        if not lines:
            return
        body = "\n".join(lines)
        at = self._add(body)
        head = at + len(lines[0]) if any(header) else at
        self.units.append((at, at + len(body), TABLE, head))

    def include(self, doc: Document) -> None:
        """Another loader's document (an e-mail's HTML body, an EPUB's chapter) as the next block, its headings and
        units with it."""
        if not doc.text.strip():
            return
        at = self._add(doc.text)
        self.headings += [(at + int(o), int(level), str(t)) for o, level, t in doc.metadata.get("headings", [])]
        self.units += [(at + int(a), at + int(b), str(k), at + int(h)) for a, b, k, h in doc.metadata.get("units", [])]

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def document(self, source: str, title: str, metadata: dict[str, Any] | None = None, *,
                 doc_id: str | None = None, page: int | None = None) -> Document:
        """The document written (``page``: its first page's number, for a paged text)."""
        meta = dict(metadata or {})
        meta["headings"] = [list(h) for h in self.headings]
        if self.units:
            meta["units"] = [list(u) for u in self.units]
        return Document(doc_id or source, self.text, source, title, page=page, metadata=meta)


def text_blocks(text: str) -> list[int]:
    """Where each block (lines between blank lines or form feeds) with text starts."""
    return [m.start() for m in _BLOCK.finditer(text) if m.group().strip()]


def deck_read(writer: Writer, skipped: list[Skipped], source: str, title: str) -> Read:
    """A deck written a slide a page (`Writer.page`) as one document (its ``page`` 1, the first slide); `LoadError`
    when no slide has more than its title. A slide's running lines (its footer, number and date placeholders) are
    left out by the readers: the PDF's rule (`declrag.ingest._running`) would take a slide's few lines, all near its
    edges, for running ones when they differ only in their numbers."""
    headed = {at for at, _, _ in writer.headings}
    if not any(at not in headed for at in text_blocks(writer.text)):
        raise LoadError("no text on any visible slide" + (f" ({len(skipped)} hidden)" if skipped else ""))
    return Read([writer.document(source, title, page=1)], skipped)
