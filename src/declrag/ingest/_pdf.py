"""PDFs: one document of its pages, read by PDFium (the default) or pypdf; pages without a text layer read by OCR
or named (`load_pdf`)."""

from __future__ import annotations

import contextlib
import io
import logging
import unicodedata
import warnings
from collections.abc import Iterator
from typing import Any, Literal, get_args

from ..text.reading import visible
from ..types import Document
from . import ocr as tesseract
from ._files import LoadError, Read, Skipped, short
from ._layout import Sized, headings, paragraphs, title_of
from ._running import page_starts, paged_spans

_JUNK_PDF_TITLES = frozenset({"untitled", "untitled document"})  # generator defaults, e.g. reportlab


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


def load_pdf(data: bytes, source: str, name: str, ocr: bool | None = None, reader: str = "pdfium") -> Read:
    """One document (its ``page`` 1, the first): the PDF's pages in order, each after a form feed but the first (as
    ``pdftotext`` writes them; a chunk's page is the one it starts on, `declrag.ingest._running.page_starts`), so that
    a sentence or a chunk runs on from one page to the next. A page without a text layer (a scan: images and no text)
    is read by OCR (`declrag.ingest.ocr`; ``ocr`` as `read_file` takes it; its number in ``metadata["ocr"]``), else
    skipped with why and left empty; a blank page is empty."""
    meta_title, pages = _pdfium_pages(data) if reader == "pdfium" else _pypdf_pages(data)
    title = meta_title if meta_title.lower() not in _JUNK_PDF_TITLES else ""
    texts: dict[int, str] = {}
    scans: list[int] = []  # pages to read by OCR: no text layer, or one that maps its glyphs to no characters
    garbled: set[int] = set()
    for n, (text, images, _) in enumerate(pages, 1):
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if visible(text) and not _garbled(text):
            texts[n] = text
        elif images or visible(text):
            scans.append(n)
            if visible(text):
                garbled.add(n)
    skipped: list[Skipped] = []
    read: list[int] = []  # the pages OCR read
    use_ocr = tesseract.available() if ocr is None else ocr
    if scans and use_ocr and tesseract.available():
        try:
            got_pages = tesseract.read_pages(data, scans)
        except Exception as e:  # a file PDFium cannot open for rendering: every such page fails alike
            got_pages = {n: RuntimeError(short(e)) for n in scans}
        for n, got in got_pages.items():
            if isinstance(got, RuntimeError):
                skipped.append(Skipped(source, f"no text layer, and OCR failed: {short(got)}", page=n))
            elif visible(got):
                texts[n] = got
                read.append(n)
            else:
                skipped.append(Skipped(source, "no text layer, and OCR read no text on it", page=n))
    elif scans:
        fix = "indexed without OCR" if ocr is False else tesseract.INSTALL
        if not texts:
            what = "an unreadable text layer" if garbled else "no text layer"
            raise LoadError(f"{what} on any of its {len(pages)} page{'s' * (len(pages) != 1)} ({fix})")
        skipped += [Skipped(source, ("text layer unreadable (a font without a Unicode map?); " if n in garbled else
                                     "no text layer (a scan?); ") + fix, page=n) for n in scans]
    if not texts:
        raise LoadError("no extractable text (its pages are blank)" if not skipped else
                        f"no extractable text ({skipped[0].reason})")
    # a form feed is the page break: none inside a page
    text = "\f".join(paragraphs(texts.get(n, "").replace("\f", "\n")) for n in range(1, len(pages) + 1))
    metadata: dict[str, Any] = {"ocr": sorted(read)} if read else {}
    if running := paged_spans(text):  # its running headers and footers
        metadata["running"] = [list(s) for s in running]
    starts = page_starts(text) or [0]
    heads = headings(text, starts, [lines if n in texts and n not in read else []
                                    for n, (_, _, lines) in enumerate(pages, 1)], running)
    if heads:  # its sections, and its title where the metadata gives none (from its first page with text)
        metadata["headings"] = [list(h) for h in heads]
        first = min(texts)
        title = title or title_of(heads, text, (starts[first - 1], starts[first] if first < len(starts) else len(text)))
    return Read([Document(source, text, source, title or name, page=1, metadata=metadata)],
                sorted(skipped, key=lambda s: s.page or 0))


def _garbled(text: str) -> bool:
    """A text layer that is not text: mostly characters no font maps a glyph to (U+FFFD, private use, controls), as
    a PDF whose fonts lack a Unicode map extracts."""
    shown = [ch for ch in text if not ch.isspace()]
    bad = sum(ch == "\ufffd" or unicodedata.category(ch) in ("Co", "Cc", "Cn") for ch in shown)
    return len(shown) >= 20 and bad > 0.3 * len(shown)


def _pdfium_pages(data: bytes) -> tuple[str, list[tuple[str, bool, Sized]]]:
    """The metadata title and each page's (text, whether it draws images, its lines with their type sizes), read by
    PDFium. PDFium writes a hyphen it takes for a typesetter's at a line end as U+FFFE and joins the lines: it is
    written back as the page shows it, a hyphen and a line break (`declrag.text.reading` decides what it was)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():
            raise LoadError("encrypted PDF (a password is needed; decrypt it first, e.g. qpdf --decrypt)") from e
        raise LoadError(f"corrupt PDF: {short(e)}") from e
    try:
        try:
            meta_title = str(pdf.get_metadata_dict().get("Title") or "").strip()
        except Exception:
            meta_title = ""
        pages: list[tuple[str, bool, Sized]] = []
        for n in range(len(pdf)):
            try:
                page = pdf[n]
                textpage = page.get_textpage()
                raw = textpage.get_text_range()
                lines = _sized_lines(textpage, raw)
                text = raw.replace("\ufffe", "-\n")
                images = next(iter(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2)), None)
                textpage.close()
                page.close()
            except Exception as e:
                raise LoadError(f"corrupt PDF: page {n + 1}: {short(e)}") from e
            pages.append((text, images is not None, lines))
        return meta_title, pages
    finally:
        pdf.close()


def _sized_lines(textpage: Any, raw: str) -> list[tuple[str, float]]:
    """Each line of a page's text as PDFium gives it (``raw``: a character per PDFium character index) and its type
    size in points: the median of its first, middle and last characters'; a mark set small at its end (a footnote's)
    is left out of the line. [] when the text and the indices do not line up."""
    import pypdfium2.raw as pdfium_c

    if len(raw) != textpage.count_chars():
        return []
    out, pos = [], 0
    for line in raw.split("\n"):
        shown = [pos + i for i, ch in enumerate(line) if not ch.isspace()]
        if shown:
            sizes = [pdfium_c.FPDFText_GetFontSize(textpage.raw, i) for i in (shown[0], shown[len(shown) // 2])]
            last = [pdfium_c.FPDFText_GetFontSize(textpage.raw, shown[-1])]
            size = sorted([*sizes, *last])[1]
            while len(last) < len(shown) and last[-1] < 0.8 * size:  # a footnote's mark
                last.append(pdfium_c.FPDFText_GetFontSize(textpage.raw, shown[-1 - len(last)]))
            kept = line[:shown[-len(last)] - pos + 1] if len(last) > 1 else line
            # a line PDFium joined at a typesetter's hyphen is two in the text (`_pdfium_pages`)
            out += [(part.strip(), round(size * 2) / 2) for part in kept.replace("\ufffe", "-\n").split("\n")
                    if part.strip()]
        pos += len(line) + 1
    return out


def _pypdf_pages(data: bytes) -> tuple[str, list[tuple[str, bool, Sized]]]:
    """The metadata title and each page's (text, whether it draws images, no lines' sizes), read by pypdf."""
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
            raise LoadError(f"encrypted PDF ({short(e)})" if encrypted else f"corrupt PDF: {short(e)}") from e
        try:
            meta_title = str(reader.metadata.title or "").strip() if reader.metadata else ""
        except Exception:
            meta_title = ""
        pages: list[tuple[str, bool, Sized]] = []
        for n, page in enumerate(pdf_pages, 1):
            try:
                text = page.extract_text() or ""
            except Exception as e:
                raise LoadError(f"corrupt PDF: page {n}: {short(e)}") from e
            pages.append((text, not visible(text) and _has_images(page), ()))
    return meta_title, pages


def _has_images(page: Any) -> bool:
    """Whether a PDF page draws images (a page with images and no text is a scan; one with neither is blank)."""
    try:
        return len(page.images) > 0
    except Exception:  # an image pypdf cannot parse is still an image
        return True
