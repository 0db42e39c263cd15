"""Files that hold files: a ``.zip`` of documents (`load_zip`), an e-mail (`load_eml`: its headers, its body and its
attachments) and an EPUB book (`load_epub`: its chapters, in reading order).

What a container holds is read by the loader of its kind (the ``read`` given: `declrag.ingest.loaders.read_data`), as
documents of their own whose ids name the container and the member (``mail.eml#report.docx``), whose ``source`` is
the container's file (so that indexing it again finds them). Bounded, each bound said when reached: `MAX_MEMBER`
bytes a member or attachment, `MAX_UNPACKED` bytes a container in all, `MAX_MEMBERS` members, `MAX_DEPTH` containers
one inside another; what a bound leaves out is a `Skipped` with the member's name and why, never dropped silently.
"""

from __future__ import annotations

import contextvars
import email
import email.policy
import io
import posixpath
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote

from ..types import Document
from ._files import LoadError, Read, Skipped
from ._html import load_html
from ._office import header_rows
from ._writer import Writer
from .headers import clip

MAX_MEMBER = 25 * 2**20  # bytes: one member of an archive, one attachment (25 MB: a large e-mail attachment)
MAX_UNPACKED = 512 * 2**20  # bytes unpacked from one container, all its members together
MAX_MEMBERS = 10_000  # members read from one archive
MAX_DEPTH = 3  # containers one inside another (a .zip attached to an e-mail in a .zip is 3)
MAX_PART = 64 * 2**20  # bytes: one part of a document its reader parses whole (a Word file's document.xml)
#: what is left of `MAX_UNPACKED` for the file being read, members of members included (None: outside a container)
_LEFT: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("unpacked_left", default=None)
#: reads one member: (bytes, suffix, id and source, name, depth) -> what it holds; `LoadError` when nothing
Reader = Callable[[bytes, str, str, str, int], Read]


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def zip_container(data: bytes, what: str, whole_parts: bool = False) -> zipfile.ZipFile:
    """The zip container of ``data`` (an archive, or an Office or EPUB file, which are zips); `LoadError` for a file
    that is none, is encrypted, or would unpack to more than `MAX_UNPACKED` (a zip bomb); ``whole_parts``: its reader
    parses each part whole, so none may be over `MAX_PART`."""
    if data[:8] == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1":  # an OLE2 file where a zip should be: Office's encryption
        raise LoadError(f"password-protected or encrypted {what} (save a copy without a password to index it)")
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as e:
        raise LoadError(f"corrupt {what}: not a valid zip container ({e})") from None
    unpacked = sum(i.file_size for i in z.infolist())
    if unpacked > MAX_UNPACKED:
        raise LoadError(f"{what} would unpack to {_mb(unpacked)}, over the {_mb(MAX_UNPACKED)} limit "
                        f"(a zip bomb?): left out")
    if whole_parts and (big := max(z.infolist(), key=lambda i: i.file_size, default=None)) and \
            big.file_size > MAX_PART:
        raise LoadError(f"{what} has a part of {_mb(big.file_size)} ({big.filename}), over the {_mb(MAX_PART)} "
                        "limit of one part: split the document")
    return z


@contextmanager
def _budget() -> Iterator[None]:
    """`MAX_UNPACKED` for the outermost container being read, shared by every container inside it."""
    if _LEFT.get() is not None:
        yield
        return
    token = _LEFT.set([MAX_UNPACKED])
    try:
        yield
    finally:
        _LEFT.reset(token)


def _nested(read: Reader, data: bytes, name: str, source: str, depth: int, part: str) -> Read:
    """A member read by its loader, its documents' ids under the container's, their source the container's file."""
    suffix = PurePosixPath(name).suffix.lower()
    if depth >= MAX_DEPTH:
        return Read([], [Skipped(source, f"a container {MAX_DEPTH} deep: not opened further", part=part)])
    left = _LEFT.get() or [MAX_UNPACKED]
    if len(data) > left[0]:
        return Read([], [Skipped(source, f"over the {_mb(MAX_UNPACKED)} read from one container, its members' "
                                 "members included: left out", part=part)])
    left[0] -= len(data)
    try:
        got = read(data, suffix, f"{source}#{name}", PurePosixPath(name).name, depth + 1)
    except LoadError as e:
        return Read([], [Skipped(source, e.reason, part=part)])
    docs = [replace(d, source=source) for d in got.documents]
    skipped = [replace(s, path=source, part=f"{part}{' ' + s.part if s.part else ''}") for s in got.skipped]
    return Read(docs, skipped)


def load_zip(data: bytes, source: str, read: Reader, depth: int = 0, supported: frozenset[str] = frozenset()) -> Read:
    """Every document in a ``.zip``: each member of a supported kind read by its loader (hidden members and folders
    passed over, as in a folder); an unsupported, encrypted or oversized one a `Skipped` naming it."""
    out = Read([], [])
    with zip_container(data, "zip archive") as z, _budget():
        members = [i for i in z.infolist() if not i.is_dir() and not any(
            p.startswith(".") or p == "__MACOSX" for p in PurePosixPath(i.filename).parts)]
        if len(members) > MAX_MEMBERS:  # one line for all the rest
            out.skipped.append(Skipped(source, f"{len(members) - MAX_MEMBERS:,} members after the first "
                                       f"{MAX_MEMBERS:,}: not read", part="members"))
        for info in members[:MAX_MEMBERS]:
            part = f"member '{info.filename}'"
            suffix = PurePosixPath(info.filename).suffix.lower()
            big = info.file_size > MAX_MEMBER
            why = ("encrypted: left out" if info.flag_bits & 0x1 else
                   f"{_mb(info.file_size)}, over the {_mb(MAX_MEMBER)} limit of one member: left out" if big else
                   f"unsupported file type {suffix or '(no suffix)'}" if supported and suffix not in supported else
                   None)
            if why:
                out.skipped.append(Skipped(source, why, part=part))
                continue
            try:
                member = z.read(info)
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError, zlib.error) as e:
                out.skipped.append(Skipped(source, f"unreadable member ({type(e).__name__}: {e}): left out", part=part))
                continue
            got = _nested(read, member, info.filename, source, depth, part)
            out.documents += got.documents
            out.skipped += got.skipped
    if not out.documents:
        raise LoadError("no readable document in the archive" + (
            f" ({out.skipped[0].part}: {out.skipped[0].reason})" if out.skipped else " (it is empty)"))
    return out


def load_eml(data: bytes, source: str, name: str, read: Reader, depth: int = 0) -> Read:
    """An e-mail (.eml): one document of its headers (From, To, Cc, Date) under its subject, and its body (the plain
    text, else the HTML); each attachment a document of its own (`MAX_MEMBER` bytes at most), titled with the
    e-mail's subject. ``metadata``: ``from``, ``date`` (ISO 8601) and ``subject``."""
    msg = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(msg, EmailMessage) or not (msg.keys() or msg.get_payload()):
        raise LoadError("not an e-mail message (no headers)")
    subject = " ".join(str(msg.get("subject", "")).split())
    try:
        date = parsedate_to_datetime(str(msg["date"])).isoformat() if msg["date"] else ""
    except (TypeError, ValueError):
        date = str(msg["date"] or "")
    writer = Writer()
    writer.heading(1, subject or "(no subject)")
    writer.paragraph("\n".join(f"{h}: {' '.join(str(msg[h]).split())}" for h in ("From", "To", "Cc", "Date") if msg[h]))
    _body(writer, msg, source)
    title = f"{subject or name}" + (f" ({date[:10]})" if date else "")
    meta = {"from": str(msg.get("from", "")), "date": date, "subject": subject}
    out = Read([writer.document(source, title, meta)], [])
    with _budget():
        for n, att in enumerate(msg.iter_attachments(), 1):
            filename = att.get_filename()
            if not filename and (att.is_multipart() or att.get_content_type() in ("text/plain", "text/html")):
                _body(writer, att, source)  # more of the message's text (Apple Mail writes some after an attachment)
                continue
            forwarded = att.get_content_type() == "message/rfc822"
            filename = filename or f"attachment-{n}"
            if forwarded and not filename.lower().endswith(".eml"):
                filename += ".eml"
            part = f"attachment '{filename}'"
            payload = _payload(att)
            if len(payload) > MAX_MEMBER:
                out.skipped.append(Skipped(source, f"{_mb(len(payload))}, over the {_mb(MAX_MEMBER)} limit of one "
                                           "attachment: left out", part=part))
                continue
            got = _nested(read, payload, filename, source, depth, part)
            out.documents += [replace(d, title=f"{d.title} (attached to: {title})") for d in got.documents]
            out.skipped += got.skipped
    out.documents[0] = writer.document(source, title, meta)  # with the text found among the attachments
    return out


def _payload(part: EmailMessage) -> bytes:
    """An attachment's bytes as sent (a forwarded message: the message), whatever charset it names."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        inner = inner[0] if isinstance(inner, list) and inner else inner
        return inner.as_bytes() if hasattr(inner, "as_bytes") else str(inner).encode()
    raw = part.get_payload(decode=True)
    return raw if isinstance(raw, bytes) else b""


def _text(part: Any) -> str:
    """A text part's text in its charset; a charset Python does not know (``unknown-8bit``) read as UTF-8, else
    Latin-1, its undecodable bytes replaced."""
    try:
        return part.get_content()
    except (LookupError, KeyError, ValueError, UnicodeError):
        raw = part.get_payload(decode=True)
        raw = raw if isinstance(raw, bytes) else b""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("latin-1", "replace")


def _body(writer: Writer, msg: EmailMessage, source: str) -> None:
    body = msg.get_body(preferencelist=("plain", "html"))
    if body is None:
        return
    text = _text(body)
    if body.get_content_subtype() == "html":
        try:
            writer.include(load_html(text.encode(), f"{source}#body", "body")[0])
        except LoadError:  # an HTML body without visible text: the headers are the document
            pass
        return
    for block in text.replace("\r\n", "\n").split("\n\n"):
        writer.paragraph(block)


def _toc(z: zipfile.ZipFile, opf: Any, base: str, items: dict[str, Any], parser: Any) -> dict[str, str]:
    """Each chapter file's title in the book's table of contents (EPUB 3's nav document, else EPUB 2's NCX): its
    first entry's."""
    from lxml import etree

    nav = next((i for i in items.values() if "nav" in (i.get("properties") or "").split()), None)
    ncx = items.get(opf.find(f"{_OPF}spine").get("toc", "")) if opf.find(f"{_OPF}spine") is not None else None
    entry = nav if nav is not None else ncx
    if entry is None:
        return {}
    path = posixpath.normpath(posixpath.join(base, unquote(entry.get("href", ""))))
    try:
        root = etree.fromstring(z.read(path), parser)
    except (KeyError, etree.XMLSyntaxError):
        return {}
    found: list[tuple[str, str]] = []
    if entry is nav:
        found = [(a.get("href", ""), " ".join("".join(a.itertext()).split())) for a in root.iter("{*}a")]
    else:
        for point in root.iter("{*}navPoint"):
            label, content = point.find("{*}navLabel/{*}text"), point.find("{*}content")
            if label is not None and content is not None:
                found.append((content.get("src", ""), " ".join((label.text or "").split())))
    out: dict[str, str] = {}
    for href, title in found:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), unquote(href.split("#", 1)[0])))
        if title:
            out.setdefault(target, title)
    return out


def _headed(doc: Document, title: str) -> Document | None:
    """A chapter with a heading: its own, else its first line when that line is its title (None: it has none, and
    the title is to be put above it)."""
    if doc.metadata.get("headings"):
        return doc
    if title and doc.text.startswith(title) and doc.text[len(title):len(title) + 1] in ("", "\n"):
        return replace(doc, metadata={**doc.metadata, "headings": [[0, 1, clip(title)]]})
    return None


_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"


def load_epub(data: bytes, source: str, name: str) -> Read:
    """An EPUB book: one document of its chapters in the spine's reading order (each read as a web page, its
    headings the book's sections), titled with the book's ``dc:title``."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    with zipfile.ZipFile(io.BytesIO(data)) as z:  # checked by `read_data` (`zip_container`), as every Office file
        try:
            container = etree.fromstring(z.read("META-INF/container.xml"), parser)
            opf_path = container.find(".//{*}rootfile").get("full-path")
            opf = etree.fromstring(z.read(opf_path), parser)
        except (KeyError, AttributeError, etree.XMLSyntaxError) as e:
            raise LoadError(f"corrupt EPUB book: no readable package document ({type(e).__name__})") from None
        base = posixpath.dirname(opf_path)
        items = {i.get("id"): i for i in opf.iter(f"{_OPF}item")}
        writer, skipped = Writer(), []
        titles = _toc(z, opf, base, items, parser)
        for n, ref in enumerate(opf.iter(f"{_OPF}itemref"), 1):
            item = items.get(ref.get("idref"))
            if item is None or "html" not in (item.get("media-type") or ""):
                continue
            href = posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))  # a URL: %20 is a space
            if ref.get("linear") == "no":  # a note, an answer key: outside the reading order
                skipped.append(Skipped(source, "outside the book's reading order (linear=\"no\"): left out",
                                       part=f"chapter '{href}'"))
                continue
            try:
                page = header_rows(z.read(href).decode("utf-8", "replace"))
                doc = load_html(page.encode(), f"{source}#{href}", titles.get(href) or f"Chapter {n}")[0]
            except KeyError:
                skipped.append(Skipped(source, "named in the book's spine, missing from the file",
                                       part=f"chapter '{href}'"))
                continue
            except LoadError:
                continue  # a cover or a blank page
            title = titles.get(href) or doc.title
            if (headed := _headed(doc, title)) is None:
                writer.heading(1, title)
            writer.include(headed or doc)
    if not writer.text.strip():
        raise LoadError("no text in any chapter of the book")
    found = opf.find(f".//{_DC}title")
    title = " ".join((found.text or "").split()) if found is not None else ""
    return Read([writer.document(source, title or name)], skipped)

