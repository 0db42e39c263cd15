"""Turn files (text, markdown, PDF, HTML, JSONL) into ``Document``s.

``iter_files`` expands files and folders into the files to load; ``load_file`` loads one file and raises
``LoadError`` (with a one-line ``reason``) for anything it cannot use, so callers can report and move on.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import logging
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from declrag.types import Document

from ..text.reading import visible
from .headers import clip, helpful_name, text_title
from .running import paged_spans, running_spans
from .units import CODE, TABLE, Unit, markdown_units

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".txt", ".md", ".markdown", ".pdf", ".html", ".htm", ".jsonl"})

_SNIFF = 8192
# Bytes that are never in text: C0 controls except tab, newline, vertical tab, form feed, CR and ESC; DEL.
_CONTROL = bytes([*range(0x01, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL)
_TEXT_KEYS = ("text", "content", "body", "contents", "passage")
_ID_KEYS = ("_id", "id", "doc_id")
_JUNK_PDF_TITLES = frozenset({"untitled", "untitled document"})  # generator defaults, e.g. reportlab
_UNDECODABLE = "undecodable text (not UTF-8 or Latin-1)"


class LoadError(Exception):
    """Raised by ``load_file`` for a file that cannot be used; ``.reason`` is a short one-line reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file (or path) that was not loaded, and why; or, with ``line`` or ``page``, one part of a file that was (a
    JSONL record, a PDF page), the rest of the file read."""

    path: str
    reason: str
    line: int | None = None  # a record: its line in the file (1-based)
    page: int | None = None  # a page (1-based)

    @property
    def where(self) -> str:
        """``path``, ``path:line`` or ``path page N``: what to print before the reason."""
        return self.path + (f":{self.line}" if self.line else "") + (f" page {self.page}" if self.page else "")

    @property
    def whole(self) -> bool:
        """Whether the whole file was skipped (not one record or page of it)."""
        return self.line is None and self.page is None


@dataclass(slots=True)
class Read:
    """What `read_file` got from one file: its documents, and the parts of it that were skipped (records, pages),
    each with why."""

    documents: list[Document]
    skipped: list[Skipped] = field(default_factory=list)


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
            return _load_pdf(data, source, helpful_name(source), ocr, pdf_reader)
        if suffix in (".html", ".htm"):
            return Read(_load_html(data, source, helpful_name(source)))
        if suffix == ".jsonl":
            return _load_jsonl(data, source)
        text = _decode(data)
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
        raise LoadError(f"unexpected error: {type(e).__name__}: {_short(e)}") from e


def _short(e: BaseException, limit: int = 120) -> str:
    lines = str(e).strip().splitlines()
    msg = lines[0] if lines else type(e).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _is_binary(head: bytes) -> bool:
    """NUL bytes, or mostly control bytes, in the first bytes of a file that should be text."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head or len(head.translate(None, _NOT_CONTROL)) > len(head) * 0.1


def _decode(data: bytes) -> str:
    """UTF-8 (BOM stripped; UTF-16 if it has a BOM), else Windows-1252/Latin-1 if the bytes look like text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise LoadError(_UNDECODABLE) from None
    if _is_binary(data[:_SNIFF]):
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


@contextlib.contextmanager
def _quiet_pypdf() -> Iterator[None]:
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


PdfReaderName = Literal["pdfium", "pypdf"]
#: The PDF readers `read_file` offers, best first: PDFium (pypdfium2; the default: in reading order more often than
#: the others on two-column typeset pages, 13 times pypdf's speed, and it marks a typesetter's line-end hyphens,
#: `declrag bench pdf`), and pypdf (pure Python).
PDF_READERS: tuple[str, ...] = get_args(PdfReaderName)


def _load_pdf(data: bytes, source: str, name: str, ocr: bool | None = None, reader: str = "pdfium") -> Read:
    """A document per page with text, in page order. A page without a text layer (a scan: images and no text) is read
    by OCR (`declrag.ingest.ocr`; ``ocr`` as `read_file` takes it), else skipped with why; a blank page is nothing."""
    from . import ocr as tesseract

    meta_title, pages = _pdfium_pages(data) if reader == "pdfium" else _pypdf_pages(data)
    title = meta_title if meta_title.lower() not in _JUNK_PDF_TITLES else ""
    texts: dict[int, str] = {}
    scans: list[int] = []  # pages to read by OCR: no text layer, or one that maps its glyphs to no characters
    garbled: set[int] = set()
    for n, (text, images) in enumerate(pages, 1):
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if visible(text) and not _garbled(text):
            texts[n] = text
        elif images or visible(text):
            scans.append(n)
            if visible(text):
                garbled.add(n)
    skipped: list[Skipped] = []
    use_ocr = tesseract.available() if ocr is None else ocr
    if scans and use_ocr and tesseract.available():
        try:
            read = tesseract.read_pages(data, scans)
        except Exception as e:  # a page PDFium cannot render, a language Tesseract lacks
            read = {}
            skipped += [Skipped(source, f"no text layer, and OCR failed: {_short(e)}", page=n) for n in scans]
        for n, text in read.items():
            if visible(text):
                texts[n] = text
            else:
                skipped.append(Skipped(source, "no text layer, and OCR read no text on it", page=n))
    elif scans:
        fix = "indexed without OCR" if ocr is False else tesseract.INSTALL
        if not texts:
            what = "an unreadable text layer" if garbled else "no text layer"
            raise LoadError(f"{what} on any of its {len(pages)} page{'s' * (len(pages) != 1)} ({fix})")
        skipped += [Skipped(source, ("text layer unreadable (a font without a Unicode map?); " if n in garbled else
                                     "no text layer (a scan?); ") + fix, page=n) for n in scans]
    docs = [Document(f"{source}#page={n}", texts[n], source, title or name, page=n,
                     metadata={"ocr": True} if n in scans else {}) for n in sorted(texts)]
    if not docs:
        raise LoadError("no extractable text (its pages are blank)" if not skipped else
                        f"no extractable text ({skipped[0].reason})")
    for doc, spans in zip(docs, running_spans([d.text for d in docs])):  # its running headers and footers
        if spans:
            doc.metadata["running"] = [list(s) for s in spans]
    return Read(docs, sorted(skipped, key=lambda s: s.page or 0))


def _garbled(text: str) -> bool:
    """A text layer that is not text: mostly characters no font maps a glyph to (U+FFFD, private use, controls), as
    a PDF whose fonts lack a Unicode map extracts."""
    import unicodedata

    shown = [ch for ch in text if not ch.isspace()]
    bad = sum(ch == "\ufffd" or unicodedata.category(ch) in ("Co", "Cc", "Cn") for ch in shown)
    return len(shown) >= 20 and bad > 0.3 * len(shown)


def _pdfium_pages(data: bytes) -> tuple[str, list[tuple[str, bool]]]:
    """The metadata title and each page's (text, whether it draws images), read by PDFium. PDFium writes a hyphen
    it takes for a typesetter's at a line end as U+FFFE and joins the lines: it is written back as the page shows
    it, a hyphen and a line break (`declrag.text.reading` decides what it was)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():
            raise LoadError("encrypted PDF (a password is needed; decrypt it first, e.g. qpdf --decrypt)") from e
        raise LoadError(f"corrupt PDF: {_short(e)}") from e
    try:
        try:
            meta_title = str(pdf.get_metadata_dict().get("Title") or "").strip()
        except Exception:
            meta_title = ""
        pages: list[tuple[str, bool]] = []
        for n in range(len(pdf)):
            try:
                page = pdf[n]
                textpage = page.get_textpage()
                text = textpage.get_text_range().replace("\ufffe", "-\n")
                images = next(iter(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2)), None)
                textpage.close()
                page.close()
            except Exception as e:
                raise LoadError(f"corrupt PDF: page {n + 1}: {_short(e)}") from e
            pages.append((text, images is not None))
        return meta_title, pages
    finally:
        pdf.close()


def _pypdf_pages(data: bytes) -> tuple[str, list[tuple[str, bool]]]:
    """The metadata title and each page's (text, whether it draws images), read by pypdf."""
    import pypdf

    with _quiet_pypdf():
        encrypted = False
        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            encrypted = reader.is_encrypted
            if encrypted and not reader.decrypt(""):
                raise LoadError("encrypted PDF (a password is needed; decrypt it first, e.g. qpdf --decrypt)")
            pdf_pages = list(reader.pages)
        except LoadError:
            raise
        except Exception as e:  # decrypting AES needs the cryptography package
            raise LoadError(f"encrypted PDF ({_short(e)})" if encrypted else f"corrupt PDF: {_short(e)}") from e
        try:
            meta_title = str(reader.metadata.title or "").strip() if reader.metadata else ""
        except Exception:
            meta_title = ""
        pages: list[tuple[str, bool]] = []
        for n, page in enumerate(pdf_pages, 1):
            try:
                text = page.extract_text() or ""
            except Exception as e:
                raise LoadError(f"corrupt PDF: page {n}: {_short(e)}") from e
            pages.append((text, not visible(text) and _has_images(page)))
    return meta_title, pages


def _has_images(page: Any) -> bool:
    """Whether a PDF page draws images (a page with images and no text is a scan; one with neither is blank)."""
    try:
        return len(page.images) > 0
    except Exception:  # an image pypdf cannot parse is still an image
        return True


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
).split()  # a table's rows are lines (`_load_html`), its cells joined by " | " on them
# where a unit (`declrag.ingest.units`) starts and ends in the flattened text, and a table's head ends: characters of
# Unicode's private use area, taken out of the page first and out of its text at the end
_CODE_START, _CODE_END, _TABLE_START, _TABLE_HEAD, _TABLE_END = "\ue000\ue001\ue002\ue003\ue004"
_MARKS = re.compile("([\ue000-\ue004])")
_WS = re.compile(r"\s+")


def _load_html(data: bytes, source: str, name: str) -> list[Document]:
    from bs4 import BeautifulSoup

    if _is_binary(data[:_SNIFF]):
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
    from bs4 import CData, NavigableString, Tag

    parts: list[str] = []
    heads: list[tuple[int, str]] = []
    last = "\n"  # the last character of text written (marks aside)

    def put(s: str) -> None:
        nonlocal last
        if s:
            parts.append(s)
            last = s[-1]

    class Frame:
        __slots__ = ("children", "tag", "pre", "tables", "cells", "heads", "in_head", "rows")

        def __init__(self, tag: Any, pre: bool, tables: int, in_head: bool):
            self.children, self.tag, self.pre, self.tables = iter(tag.children), tag, pre, tables
            self.cells, self.heads, self.in_head, self.rows = 0, 0, in_head, 0  # cells and rows ended in it

    stack = [Frame(soup, False, 0, False)]
    marked_head: set[int] = set()  # the tables (by id) whose head is marked
    while stack:
        frame = stack[-1]
        node = next(frame.children, None)
        if node is None:  # the element ends
            stack.pop()
            tag = frame.tag
            if tag is soup:
                continue
            parent = stack[-1]
            if tag.name in ("td", "th"):
                parent.cells += 1
                parent.heads += tag.name == "th"
            elif tag.name == "tr":
                put("\n")
                table = next((f for f in reversed(stack) if f.tag.name == "table"), None)
                if table is not None:
                    table.rows += 1
                    if (frame.tables == 1 and id(table.tag) not in marked_head and frame.cells
                            and (frame.in_head or table.rows == 1 and frame.heads == frame.cells)):
                        parts.append(_TABLE_HEAD)  # a <thead> row, or a first row of header cells: the head ends
                        marked_head.add(id(table.tag))
            if tag.name == "table" and frame.tables == 1:
                parts.append(_TABLE_END)
            elif tag.name == "pre" and not parent.pre and not frame.tables:
                parts.append(_CODE_END)
            if tag.name in _BLOCK:
                put("\n")
            continue
        if isinstance(node, Tag):
            nm = node.name
            if nm in _DROP or _hidden(node):
                continue
            if nm == "br":
                put("\n")
                continue
            if nm in _HEADINGS:
                heads.append((int(nm[1]), _WS.sub(" ", node.get_text()).strip()))
            if nm in _BLOCK:
                put("\n")
            tables = frame.tables + (nm == "table")
            if nm == "table" and tables == 1:
                parts.append(_TABLE_START)
            elif nm == "pre" and not frame.pre and not frame.tables:
                parts.append(_CODE_START)
            elif nm in ("td", "th") and frame.cells:
                put(" | ")
            stack.append(Frame(node, frame.pre or nm == "pre", tables, frame.in_head or nm == "thead"))
        elif type(node) in (NavigableString, CData):  # not comments, doctypes, processing instructions
            raw = _MARKS.sub("", str(node))  # the page's own private-use characters cannot pass for marks
            if frame.pre:
                put(raw)
            else:
                piece = _WS.sub(" ", raw)
                put(piece.lstrip(" ") if last in "\n " else piece)
    return "".join(parts), heads


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
    return text, [u for u in _trimmed(text, clip) if u[1] > u[0]]


_BLANKS = re.compile("\n(?:[\ue000-\ue004]*\n){2,}")  # blank lines, marks between them


def _trimmed(text: str, units: list[Unit]) -> list[Unit]:
    """Units without the blank lines at their edges."""
    out = []
    for a, b, kind, head in units:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        out.append((a, b, kind, max(head, a)))
    return out


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


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


_FIX_RECORD = "fix the record or remove the line"


def _load_jsonl(data: bytes, source: str) -> Read:
    """One document per JSON object line. A line that is no such record (not JSON, no text, a duplicate id) is
    skipped, with its line number and why; the file's other records are read. `LoadError` when none is usable."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    lines_of: dict[str, int] = {}
    for n, line in enumerate(_decode(data).split("\n"), 1):
        if not line.strip():
            continue
        try:
            doc = _record(line, n, source, lines_of)
        except LoadError as e:
            skipped.append(Skipped(source, f"{e.reason}; {_FIX_RECORD}", line=n))
            continue
        lines_of[doc.id] = n
        docs.append(doc)
    if not docs:
        if skipped:
            raise LoadError(f"no usable record ({len(skipped)} skipped; line {skipped[0].line}: {skipped[0].reason})")
        raise LoadError("empty file")
    return Read(docs, skipped)


def _record(line: str, n: int, source: str, lines_of: dict[str, int]) -> Document:
    """The document of line ``n``; `LoadError` with why it is none."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise LoadError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(row, dict):
        raise LoadError(f"expected a JSON object, got {type(row).__name__}")
    text_key = next((k for k in _TEXT_KEYS if k in row), None)
    if text_key is None:
        raise LoadError(f'no "text" field (expected one of {", ".join(_TEXT_KEYS)})')
    text = row[text_key]
    if text is None:
        raise LoadError(f'"{text_key}" is null')
    if not isinstance(text, str):
        raise LoadError(f'"{text_key}" must be a string, got {type(text).__name__}')
    if not visible(text):
        raise LoadError(f'"{text_key}" is empty')
    id_key = next((k for k in _ID_KEYS if row.get(k) not in (None, "")), None)
    if id_key is None:
        doc_id = f"{source}#L{n}"
    elif isinstance(row[id_key], (str, int)) and not isinstance(row[id_key], bool):
        doc_id = str(row[id_key])
    else:
        raise LoadError(f'"{id_key}" must be a string or integer')
    if doc_id in lines_of:
        raise LoadError(f"duplicate id {doc_id!r} (first on line {lines_of[doc_id]})")
    title = row.get("title")
    title = title.strip() if isinstance(title, str) else ""
    metadata = {
        k: v
        for k, v in row.items()
        if k not in (text_key, id_key, "title")
        and (_scalar(v) or isinstance(v, list) and all(_scalar(x) for x in v))
    }
    body = f"{title}\n\n{text}" if title else text
    return Document(doc_id, body, source, title, metadata=metadata)
