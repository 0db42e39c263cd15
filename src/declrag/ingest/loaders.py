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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from declrag.types import Document

from .headers import clip, helpful_name, text_title
from .running import paged_spans, running_spans

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
    """A file (or path) that was not loaded, and why."""

    path: str
    reason: str


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
            docs += load_file(item)
        except LoadError as e:
            skipped.append(Skipped(str(item), e.reason))
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


def load_file(path: str | Path) -> list[Document]:
    """Load one file into Documents; raises ``LoadError`` (and nothing else) if it cannot be used."""
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
            return _load_pdf(data, source, helpful_name(source))
        if suffix in (".html", ".htm"):
            return _load_html(data, source, helpful_name(source))
        if suffix == ".jsonl":
            return _load_jsonl(data, source)
        text = _decode(data)
        if not text.strip():
            raise LoadError("empty file")
        title = _markdown_title(text) if suffix in (".md", ".markdown") else text_title(text)
        running = paged_spans(text)  # a text with form feeds between its pages: their running lines
        return [Document(id=source, text=text, source=source, title=title or helpful_name(source),
                         metadata={"running": [list(s) for s in running]} if running else {})]
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


def _load_pdf(data: bytes, source: str, name: str) -> list[Document]:
    import pypdf

    with _quiet_pypdf():
        encrypted = False
        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            encrypted = reader.is_encrypted
            if encrypted and not reader.decrypt(""):
                raise LoadError("encrypted PDF")
            pages = list(reader.pages)
        except LoadError:
            raise
        except Exception as e:  # decrypting AES needs the cryptography package
            raise LoadError(f"encrypted PDF ({_short(e)})" if encrypted else f"corrupt PDF: {_short(e)}") from e
        try:
            meta_title = str(reader.metadata.title or "").strip() if reader.metadata else ""
        except Exception:
            meta_title = ""
        title = meta_title if meta_title.lower() not in _JUNK_PDF_TITLES else ""
        docs = []
        for n, page in enumerate(pages, 1):
            try:
                text = page.extract_text() or ""
            except Exception as e:
                raise LoadError(f"corrupt PDF: page {n}: {_short(e)}") from e
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            if text.strip():
                docs.append(Document(f"{source}#page={n}", text, source, title or name, page=n))
    if not docs:
        raise LoadError("no extractable text (scanned PDF?)")
    for doc, spans in zip(docs, running_spans([d.text for d in docs])):  # its running headers and footers
        if spans:
            doc.metadata["running"] = [list(s) for s in spans]
    return docs


_DROP = ["script", "style", "noscript", "template", "svg", "head", "iframe", "object"]
_BLOCK = (
    "address article aside blockquote body caption dd details dialog div dl dt fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hr html legend li main nav ol p pre section summary table tbody "
    "td tfoot th thead tr ul"
).split()
_WS = re.compile(r"\s+")


def _load_html(data: bytes, source: str, name: str) -> list[Document]:
    from bs4 import BeautifulSoup, CData, NavigableString

    if _is_binary(data[:_SNIFF]):
        raise LoadError("binary file")

    class Raw(NavigableString):
        """Text kept verbatim: block breaks and <pre> contents."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        soup = BeautifulSoup(data, "lxml")
    title_tag = next((t for t in soup.find_all("title") if not t.find_parent("svg")), None)
    title = _WS.sub(" ", title_tag.get_text()).strip() if title_tag else ""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    if not title and (h1 := soup.find("h1")):
        title = _WS.sub(" ", h1.get_text()).strip()
    heads = [(int(h.name[1]), _WS.sub(" ", h.get_text()).strip()) for h in soup.find_all(_HEADINGS)]
    for pre in soup.find_all("pre"):
        for piece in list(pre.find_all(string=True)):
            piece.replace_with(Raw(str(piece)))
    for tag in soup.find_all(_BLOCK):
        tag.insert_before(Raw("\n"))
        tag.insert_after(Raw("\n"))
    for br in soup.find_all("br"):
        br.replace_with(Raw("\n"))
    parts: list[str] = []
    last = "\n"
    for node in soup.descendants:
        if isinstance(node, Raw):
            s = str(node)
        elif type(node) in (NavigableString, CData):  # not comments, doctypes, processing instructions
            s = _WS.sub(" ", str(node))
            if last in "\n ":
                s = s.lstrip(" ")
        else:
            continue
        if s:
            parts.append(s)
            last = s[-1]
    text = "\n".join(line.rstrip() for line in "".join(parts).split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if not text:
        raise LoadError("no visible text in HTML")
    return [Document(source, text, source, title or name, metadata={"headings": _placed(text, heads)})]


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


def _load_jsonl(data: bytes, source: str) -> list[Document]:
    docs: list[Document] = []
    lines_of: dict[str, int] = {}
    for n, line in enumerate(_decode(data).split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise LoadError(f"line {n}: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(row, dict):
            raise LoadError(f"line {n}: expected a JSON object, got {type(row).__name__}")
        text_key = next((k for k in _TEXT_KEYS if k in row), None)
        if text_key is None:
            raise LoadError(f'line {n}: no "text" field (expected one of {", ".join(_TEXT_KEYS)})')
        text = "" if row[text_key] is None else row[text_key]
        if not isinstance(text, str):
            raise LoadError(f'line {n}: "{text_key}" must be a string, got {type(text).__name__}')
        id_key = next((k for k in _ID_KEYS if row.get(k) not in (None, "")), None)
        if id_key is None:
            doc_id = f"{source}#L{n}"
        elif isinstance(row[id_key], (str, int)) and not isinstance(row[id_key], bool):
            doc_id = str(row[id_key])
        else:
            raise LoadError(f'line {n}: "{id_key}" must be a string or integer')
        if doc_id in lines_of:
            raise LoadError(f"line {n}: duplicate id {doc_id!r} (first on line {lines_of[doc_id]})")
        lines_of[doc_id] = n
        title = row.get("title")
        title = title.strip() if isinstance(title, str) else ""
        metadata = {
            k: v
            for k, v in row.items()
            if k not in (text_key, id_key, "title")
            and (_scalar(v) or isinstance(v, list) and all(_scalar(x) for x in v))
        }
        body = f"{title}\n\n{text}" if title else text
        docs.append(Document(doc_id, body, source, title, metadata=metadata))
    if not docs:
        raise LoadError("empty file")
    return docs
