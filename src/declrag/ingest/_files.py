"""What reading one file gives: its documents and the parts of it skipped (`Read`), or a `LoadError` with a one-line
reason; and the byte-level checks every text format shares (`decode`, `is_binary`)."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

from ..types import Document

SNIFF = 8192  # the bytes `is_binary` looks at
# Bytes that are never in text: C0 controls except tab, newline, vertical tab, form feed, CR and ESC; DEL.
_CONTROL = bytes([*range(0x01, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL)
_UNDECODABLE = "undecodable text (not UTF-8 or Latin-1)"


class LoadError(Exception):
    """Raised by ``load_file`` for a file that cannot be used; ``.reason`` is a short one-line reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file (or path) that was not loaded, and why; or, with ``line``, ``page`` or ``part``, one part of a file
    that was (a JSONL record, a PDF page, a deck's hidden slide, a workbook's hidden sheet, an e-mail's attachment,
    an archive's member), the rest of the file read."""

    path: str
    reason: str
    line: int | None = None  # a record: its line in the file (1-based)
    page: int | None = None  # a page or a slide (1-based)
    part: str | None = None  # any other part, named: "sheet 'Q3'", "attachment 'a.bin'", "member 'b/c.docx'"

    @property
    def where(self) -> str:
        """``path``, ``path:line``, ``path page N`` or ``path PART``: what to print before the reason."""
        return (self.path + (f":{self.line}" if self.line else "") + (f" page {self.page}" if self.page else "")
                + (f" {self.part}" if self.part else ""))

    @property
    def whole(self) -> bool:
        """Whether the whole file was skipped (not one record, page or part of it)."""
        return self.line is None and self.page is None and self.part is None


@dataclass(slots=True)
class Read:
    """What `read_file` got from one file: its documents, and the parts of it that were skipped (records, pages),
    each with why."""

    documents: list[Document]
    skipped: list[Skipped] = field(default_factory=list)


def short(e: BaseException, limit: int = 120) -> str:
    """An exception's first line, at most ``limit`` characters: a reason fit for one line."""
    lines = str(e).strip().splitlines()
    msg = lines[0] if lines else type(e).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def is_binary(head: bytes) -> bool:
    """NUL bytes, or mostly control bytes, in the first bytes of a file that should be text."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head or len(head.translate(None, _NOT_CONTROL)) > len(head) * 0.1


def decode(data: bytes) -> str:
    """UTF-8 (BOM stripped; UTF-16 if it has a BOM), else Windows-1252/Latin-1 if the bytes look like text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise LoadError(_UNDECODABLE) from None
    if is_binary(data[:SNIFF]):
        raise LoadError("binary file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    if len(data.translate(None, _NOT_CONTROL)) > len(data) * 0.01:
        raise LoadError(_UNDECODABLE)
    try:  # Windows-1252 is Latin-1 with printable characters (curly quotes, dashes) in 0x80-0x9F
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")
