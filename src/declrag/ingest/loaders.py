"""Turn files (text, markdown, PDF, HTML, JSONL) into ``Document``s.

``iter_files`` expands files and folders into the files to load; ``read_file`` reads one file (its documents and the
parts of it skipped), ``load_file`` its documents only; both raise ``LoadError`` (with a one-line ``reason``) for
anything they cannot use, so callers can report and move on. Each format has its module: `pdf`, `html`, `records`
(JSONL); plain text and Markdown are read here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from declrag.types import Document

from ..text.reading import visible
from ._files import LoadError, Read, Skipped, decode, short
from ._html import load_html
from ._pdf import PDF_READERS, PdfReaderName, load_pdf
from ._records import load_jsonl
from ._running import paged_spans
from ._units import markdown_units
from .headers import helpful_name, text_title

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".txt", ".md", ".markdown", ".pdf", ".html", ".htm", ".jsonl"})

__all__ = ["PDF_READERS", "SUPPORTED_SUFFIXES", "LoadError", "PdfReaderName", "Read", "Skipped", "iter_files",
           "load_file", "load_paths", "read_file"]


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path | Skipped]:
    """Expand files and folders (recursively, sorted) into the files to load.

    Inside folders, hidden entries and ``__pycache__`` are ignored and unsupported files are yielded as
    ``Skipped``. Explicit files are yielded whatever their suffix. Each file is yielded at most once.
    """
    seen: set[str] = set()
    for arg in paths:
        path = Path(arg)
        try:
            is_dir, exists = path.is_dir(), path.exists()
        except OSError as e:
            yield Skipped(str(path), _os_reason(e))
            continue
        if is_dir:
            yield from _walk(path, seen)
        elif not exists:
            yield Skipped(str(path), "no such file or folder")
        elif _first_time(path, seen):
            yield path


def load_paths(paths: Iterable[str | Path]) -> tuple[list[Document], list[Skipped]]:
    """Every document in these files and folders (`iter_files`, then `load_file`), and what was skipped, with why."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    for item in iter_files(paths):
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        try:
            got = read_file(item)
        except LoadError as e:
            skipped.append(Skipped(str(item), e.reason))
            continue
        docs += got.documents
        skipped += got.skipped
    return docs, skipped


def _first_time(path: Path, seen: set[str]) -> bool:
    key = os.path.realpath(path)
    if key in seen:
        return False
    seen.add(key)
    return True


def _walk(folder: Path, seen: set[str]) -> Iterator[Path | Skipped]:
    if not _first_time(folder, seen):  # also stops symlink cycles
        return
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as e:
        yield Skipped(str(folder), _os_reason(e))
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError as e:
            yield Skipped(str(entry), _os_reason(e))
            continue
        if is_dir:
            yield from _walk(entry, seen)
        elif not is_file:
            yield Skipped(str(entry), "not a regular file")
        elif entry.suffix.lower() not in SUPPORTED_SUFFIXES:
            yield Skipped(str(entry), f"unsupported file type {entry.suffix.lower() or '(no suffix)'}")
        elif _first_time(entry, seen):
            yield entry


_OS_REASONS = {PermissionError: "permission denied", FileNotFoundError: "no such file or folder",
               IsADirectoryError: "is a directory"}


def _os_reason(e: OSError) -> str:
    """A short reason for an OSError: 'permission denied', 'is a directory', or the system's message."""
    return next((r for t, r in _OS_REASONS.items() if isinstance(e, t)), (e.strerror or type(e).__name__).lower())


def load_file(path: str | Path, ocr: bool | None = None, pdf_reader: str = "pdfium") -> list[Document]:
    """Load one file into Documents; raises ``LoadError`` (and nothing else) if it cannot be used. The parts of it
    that were skipped (`read_file` says which) are left out."""
    return read_file(path, ocr, pdf_reader).documents


def read_file(path: str | Path, ocr: bool | None = None, pdf_reader: str = "pdfium") -> Read:
    """Read one file: its documents, and the parts skipped (a malformed JSONL record, a PDF page without a text layer
    that OCR did not read), each with a reason. Raises ``LoadError`` (and nothing else) when nothing in it can be used.

    ``ocr``: read the pages of a PDF that have no text layer (scans) with Tesseract (`declrag.ingest.ocr`): None (the
    default) or True where Tesseract is installed (elsewhere each such page is skipped, saying how to install it;
    ``declrag index --ocr`` refuses to start there), False never.
    ``pdf_reader``: which library reads a PDF's text layer (`PDF_READERS`)."""
    path = Path(path)
    try:
        suffix = path.suffix.lower()
        if path.is_dir():
            raise LoadError("is a directory")
        if not path.exists():
            raise LoadError("no such file or folder")
        if not path.is_file():
            raise LoadError("not a regular file")
        if suffix not in SUPPORTED_SUFFIXES:
            raise LoadError(f"unsupported file type {suffix or '(no suffix)'}")
        data = path.read_bytes()
        if not data.strip():
            raise LoadError("empty file")
        source = str(path.resolve())
        if suffix == ".pdf":
            return load_pdf(data, source, helpful_name(source), ocr, pdf_reader)
        if suffix in (".html", ".htm"):
            return Read(load_html(data, source, helpful_name(source)))
        if suffix == ".jsonl":
            return load_jsonl(data, source)
        text = decode(data)
        if not visible(text):
            raise LoadError("empty file" if not text.strip() else "no visible text (only invisible characters)")
        markdown = suffix in (".md", ".markdown")
        title = _markdown_title(text) if markdown else text_title(text)
        metadata: dict[str, Any] = {}
        if running := paged_spans(text):  # a text with form feeds between its pages: their running lines
            metadata["running"] = [list(s) for s in running]
        if markdown and (found := markdown_units(text)):  # code blocks and tables: kept whole where they fit
            metadata["units"] = [list(u) for u in found]
        return Read([Document(id=source, text=text, source=source, title=title or helpful_name(source),
                              metadata=metadata)])
    except LoadError:
        raise
    except OSError as e:
        raise LoadError(_os_reason(e)) from e
    except Exception as e:  # a parser bug or an odd file must not stop a whole ingest
        raise LoadError(f"unexpected error: {type(e).__name__}: {short(e)}") from e


_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _markdown_title(text: str) -> str:
    """The YAML front-matter ``title``, else the first ATX heading outside code fences, else ''."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:], 1):
            if line.strip() in ("---", "..."):
                start = i + 1
                break
            m = re.match(r"title:\s*(.+?)\s*$", line)
            if m and m.group(1).strip("'\""):
                return m.group(1).strip("'\"").strip()
    fence = ""
    for line in lines[start:]:
        m = _FENCE.match(line)
        if m:
            fence = "" if fence == m.group(1) else fence or m.group(1)
        elif not fence and (h := _ATX.match(line.rstrip("\r"))) and h.group(1).strip():
            return h.group(1).strip()
    return ""
