"""Turn files (text, Markdown, PDF, HTML, JSONL; Word, PowerPoint, Excel, OpenDocument, CSV/TSV; e-mail, EPUB and
zip archives) into ``Document``s.

``iter_files`` expands files and folders into the files to load; ``read_file`` reads one file (its documents and the
parts of it skipped), ``load_file`` its documents only; both raise ``LoadError`` (with a one-line ``reason``) for
anything they cannot use, so callers can report and move on. Each format has its module: `_pdf`, `_html`,
`_records` (JSONL), `_office` (Word, PowerPoint, OpenDocument text), `_sheets` (workbooks, CSV), `_containers`
(e-mail, EPUB, zip); plain text and Markdown are read here (`read_data` dispatches by suffix).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from declrag.types import Document

from ..text.reading import visible
from ._containers import MAX_DEPTH, load_eml, load_epub, load_zip, zip_container
from ._files import LoadError, Read, Skipped, decode, short
from ._html import load_html
from ._odf import load_odp
from ._office import load_docx, load_odt, load_pptx
from ._pdf import PDF_READERS, PdfReaderName, load_pdf
from ._records import load_jsonl
from ._running import paged_spans
from ._sheets import load_delimited, load_ods, load_xlsx
from ._units import markdown_units
from .headers import helpful_name, text_title

_OFFICE: dict[str, tuple[str, Callable[[bytes, str, str], Read]]] = {
    ".docx": ("Word document", load_docx), ".pptx": ("PowerPoint deck", load_pptx),
    ".xlsx": ("Excel workbook", load_xlsx), ".xlsm": ("Excel workbook", load_xlsx),
    ".odt": ("OpenDocument text", load_odt), ".odp": ("OpenDocument presentation", load_odp),
    ".ods": ("OpenDocument spreadsheet", load_ods), ".epub": ("EPUB book", load_epub),
}
_TABLES: dict[str, Callable[[bytes, str, str], Read]] = {".csv": load_delimited,
                                                          ".tsv": partial(load_delimited, tab=True)}
_CONTAINERS = frozenset({".zip", ".eml"})
_PARSED_WHOLE = frozenset({".docx", ".pptx", ".odt", ".odp", ".epub"})  # readers holding each part whole
SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".txt", ".md", ".markdown", ".pdf", ".html", ".htm", ".jsonl",
                                                *_OFFICE, *_TABLES, *_CONTAINERS})

__all__ = ["PDF_READERS", "SUPPORTED_SUFFIXES", "LoadError", "PdfReaderName", "Read", "Skipped", "iter_files",
           "MAX_DEPTH", "load_file", "load_paths", "read_data", "read_file"]


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path | Skipped]:
    """Expand files and folders (recursively, sorted) into the files to load.

    Inside folders, hidden entries and ``__pycache__`` are ignored and unsupported files are yielded as
    ``Skipped``. Explicit files are yielded whatever their suffix. Each file is yielded at most once.

    Args:
        paths: files and folders, as given on a command line.

    Returns:
        An iterator of the files to read, and of what is passed over (a `Skipped` with its reason: an unsupported
        kind, a path that does not exist or cannot be read).
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
    """Every document in these files and folders (`iter_files`, then `read_file`), and what was skipped.

    Args:
        paths: files and folders.

    Returns:
        The documents, and every file or part of one skipped (`Skipped`: its path, the part, and why).
    """
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
    """Load one file into documents; the parts of it that were skipped (`read_file` says which) are left out.

    Args:
        path: the file.
        ocr: read a PDF's pages without a text layer with Tesseract (None: where it is installed).
        pdf_reader: which library reads a PDF's text layer (`PDF_READERS`).

    Returns:
        Its documents (a file, a PDF, a slide, a sheet, a JSONL record, an attachment or an archive's member each).

    Raises:
        LoadError: the file cannot be used (its ``reason``: one line, e.g. "unsupported file type .doc").
    """
    return read_file(path, ocr, pdf_reader).documents


def read_file(path: str | Path, ocr: bool | None = None, pdf_reader: str = "pdfium") -> Read:
    """Read one file: its documents, and the parts of it skipped, each with why.

    A part skipped is a malformed JSONL record, a PDF page without a text layer that OCR did not read, a hidden slide
    or sheet, a Word file's hidden text, an attachment too large, an archive member of an unsupported kind.

    Args:
        path: the file (its suffix says its kind: `SUPPORTED_SUFFIXES`).
        ocr: read the pages of a PDF that have no text layer (scans) with Tesseract (`declrag.ingest.ocr`): None (the
            default) or True where Tesseract is installed (elsewhere each such page is skipped, saying how to
            install it; ``declrag index --ocr`` refuses to start there), False never.
        pdf_reader: which library reads a PDF's text layer (`PDF_READERS`).

    Returns:
        A `Read`: its ``documents`` and the parts ``skipped``.

    Raises:
        LoadError: nothing in the file can be used (and nothing else is raised: its ``reason`` is one line).
    """
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
        source = str(path.resolve())
        return read_data(path.read_bytes(), suffix, source, helpful_name(source), ocr=ocr, pdf_reader=pdf_reader)
    except LoadError:
        raise
    except OSError as e:
        raise LoadError(_os_reason(e)) from e


def read_data(data: bytes, suffix: str, source: str, name: str, depth: int = 0, *, ocr: bool | None = None,
              pdf_reader: str = "pdfium") -> Read:
    """Read the bytes of one file of a known kind (what `read_file` does once it has read the file).

    Args:
        data: the file's bytes.
        suffix: its kind, as a suffix (``".docx"``).
        source: its documents' id and source (a path; a container's member: ``mail.eml#report.docx``).
        name: their title where the file gives none.
        depth: the containers it is inside (an attachment, an archive's member): at most `MAX_DEPTH` are opened.
        ocr: as `read_file`'s.
        pdf_reader: as `read_file`'s.

    Returns:
        A `Read`: its ``documents`` and the parts ``skipped``.

    Raises:
        LoadError: nothing in it can be used.
    """
    try:
        if suffix not in SUPPORTED_SUFFIXES:
            raise LoadError(f"unsupported file type {suffix or '(no suffix)'}")
        if not data.strip():
            raise LoadError("empty file")
        if suffix == ".pdf":
            return load_pdf(data, source, name, ocr, pdf_reader)
        if suffix in _CONTAINERS:
            read = partial(read_data, ocr=ocr, pdf_reader=pdf_reader)
            if suffix == ".zip":
                return load_zip(data, source, read, depth, SUPPORTED_SUFFIXES)
            return load_eml(data, source, name, read, depth)
        if suffix in _OFFICE:
            kind, loader = _OFFICE[suffix]
            # encrypted, not a zip, a zip bomb, a part too large to parse whole: one clear line
            zip_container(data, kind, whole_parts=suffix in _PARSED_WHOLE).close()
            return loader(data, source, name)
        if suffix in _TABLES:
            return _TABLES[suffix](data, source, name)
        if suffix in (".html", ".htm"):
            return Read(load_html(data, source, name))
        if suffix == ".jsonl":
            return load_jsonl(data, source)
        return Read([_text(data, suffix, source, name)])
    except LoadError:
        raise
    except Exception as e:  # a parser bug or an odd file must not stop a whole ingest
        raise LoadError(f"unexpected error: {type(e).__name__}: {short(e)}") from e


def _text(data: bytes, suffix: str, source: str, name: str) -> Document:
    """A plain text or Markdown file."""
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
    return Document(id=source, text=text, source=source, title=title or name, metadata=metadata)


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
