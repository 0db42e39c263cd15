"""Office documents: Word (`load_docx`, by mammoth), PowerPoint (`load_pptx`, by python-pptx) and OpenDocument text
(`load_odt`, by odfpy); OpenDocument presentations are `declrag.ingest._odf`'s.

Word and OpenDocument files are converted to HTML by their library and read by the HTML loader
(`declrag.ingest._html`), so their headings are sections and their tables units with the header row, as a web
page's; mammoth keeps a tracked insertion and leaves out a tracked deletion and comments. A deck is one document
whose pages are its slides (a passage's ``page`` is the slide it starts on, as a PDF's; a citation's, the slide of
its quote): each headed by its title (``Slide N`` when it has none: its number is its page, and in every section
it would only be noise to search), its text boxes in reading order (top to bottom, then left to right), its tables
as units, its speaker notes under ``Speaker notes``; a hidden slide is left out, and said so.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ._files import LoadError, Read, Skipped
from ._html import load_html
from ._odf import dc_title, odt_cleaned
from ._writer import Writer, cell_text, deck_read


def load_docx(data: bytes, source: str, name: str) -> Read:
    """A Word document (.docx): mammoth's HTML of it, read as a web page; its title from the file's properties. Hidden
    text, tracked deletions and comments are left out, each kind counted in a `Skipped`."""
    import mammoth

    try:
        data, left_out = _without_hidden(data)
        html = header_rows(mammoth.convert_to_html(io.BytesIO(data)).value)
    except Exception as e:
        raise LoadError(f"not a readable Word document ({type(e).__name__}): a corrupt or unsupported file") from e
    title = dc_title(data, "docProps/core.xml")
    page = f"<html><head><title>{_escape(title)}</title></head><body>{html}</body></html>" if title else html
    try:
        docs = load_html(page.encode(), source, name)
    except LoadError as e:
        raise LoadError("no text in the document" if "no visible text" in e.reason else e.reason) from None
    return Read(docs, [Skipped(source, f"{n} left out", part=what) for what, n in left_out.items() if n])


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OFFICE_DOCUMENT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"


def _main_part(z: Any) -> str:
    """The Word file's main part, as its package relationships name it (``word/document.xml`` by default)."""
    from lxml import etree

    try:
        rels = etree.fromstring(z.read("_rels/.rels"), etree.XMLParser(resolve_entities=False))
        target = next(r.get("Target") for r in rels if r.get("Type") == _OFFICE_DOCUMENT)
        return target.lstrip("/")
    except (KeyError, StopIteration, etree.XMLSyntaxError):
        return "word/document.xml"


def _without_hidden(data: bytes) -> tuple[bytes, dict[str, int]]:
    """The document without its hidden runs (``w:vanish``: mammoth would show them), and how many hidden runs,
    tracked deletions and comments it had (mammoth leaves the last two out itself)."""
    import zipfile

    from lxml import etree

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = set(z.namelist())
        main = _main_part(z)
        root = etree.fromstring(z.read(main), etree.XMLParser(resolve_entities=False, huge_tree=True))
        comments = z.read("word/comments.xml") if "word/comments.xml" in names else b""
        hidden = [r for r in root.iter(f"{_W}r") if (v := r.find(f"{_W}rPr/{_W}vanish")) is not None
                  and v.get(f"{_W}val", "true") not in ("0", "false")]
        counts = {"hidden text": len(hidden), "tracked deletions": sum(1 for _ in root.iter(f"{_W}del")),
                  "comments": comments.count(b"<w:comment ")}
        if not hidden:
            return data, counts
        for r in hidden:
            r.getparent().remove(r)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
            for item in z.infolist():
                w.writestr(item, etree.tostring(root) if item.filename == main else z.read(item))
    return out.getvalue(), counts


def load_odt(data: bytes, source: str, name: str) -> Read:
    """An OpenDocument text (.odt): odfpy's XHTML of it, read as a web page; tracked deletions and comments left out,
    each kind counted in a `Skipped`."""
    from odf.odf2xhtml import ODF2XHTML

    try:
        data, left_out = odt_cleaned(data)
        converter = ODF2XHTML(generate_css=False, embedable=False)
        converter.load(io.BytesIO(data))
        xhtml = header_rows(converter.xhtml())
    except Exception as e:
        raise LoadError(f"not a readable OpenDocument file ({type(e).__name__}): a corrupt or unsupported file") from e
    try:
        docs = load_html(xhtml.encode(), source, name)
    except LoadError as e:
        raise LoadError("no text in the document" if "no visible text" in e.reason else e.reason) from None
    return Read(docs, [Skipped(source, f"{n} left out", part=what) for what, n in left_out.items() if n])


def load_pptx(data: bytes, source: str, name: str) -> Read:
    """A PowerPoint deck (.pptx): one document, a page per slide; hidden slides left out (each a `Skipped` with its
    number, its page empty)."""
    import pptx

    try:
        deck = pptx.Presentation(io.BytesIO(data))
    except Exception as e:
        raise LoadError(f"not a readable PowerPoint deck ({type(e).__name__}): a corrupt or unsupported file") from e
    writer, skipped, first = Writer(), [], ""
    for n, slide in enumerate(deck.slides, 1):
        if n > 1:
            writer.page()
        if slide._element.get("show") in ("0", "false"):  # python-pptx has no property for it
            skipped.append(Skipped(source, "hidden slide: left out", page=n))
            continue
        title = _slide_title(slide)
        first = first or title
        writer.heading(1, title or f"Slide {n}")  # its number is its page: not repeated in its section
        for shape in _reading_order(slide.shapes):
            if shape == getattr(slide.shapes, "title", None):
                continue
            _write_shape(writer, shape)
        notes = slide.notes_slide.notes_text_frame.text if slide.has_notes_slide and \
            slide.notes_slide.notes_text_frame is not None else ""
        if notes.strip():
            writer.heading(2, "Speaker notes")
            writer.paragraph(notes)
    return deck_read(writer, skipped, source, (deck.core_properties.title or "").strip() or first or name)


def _slide_title(slide: Any) -> str:
    shape = slide.shapes.title
    return " ".join(shape.text_frame.text.split()) if shape is not None and shape.has_text_frame else ""


def _reading_order(shapes: Any) -> list[Any]:
    """Top to bottom, then left to right (a shape without a position last)."""
    return sorted(shapes, key=lambda s: (s.top is None, s.top or 0, s.left or 0))


def _write_shape(writer: Writer, shape: Any) -> None:
    from pptx.enum.shapes import PP_PLACEHOLDER
    from pptx.shapes.group import GroupShape

    running = (PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.HEADER)
    if shape.is_placeholder and shape.placeholder_format.type in running:
        return  # a slide's running lines: its footer, number and date (OpenDocument's are left out alike)
    if isinstance(shape, GroupShape):
        for inner in _reading_order(shape.shapes):
            _write_shape(writer, inner)
    elif getattr(shape, "has_table", False) and shape.has_table:
        rows = [[cell_text(c.text) for c in row.cells] for row in shape.table.rows]
        if rows:
            writer.table(rows[0], rows[1:])
    elif shape.has_text_frame and shape.text_frame.text.strip():
        writer.paragraph("\n".join(p.text for p in shape.text_frame.paragraphs))


_FIRST_ROW = re.compile(r"(<table\b[^>]*>\s*(?:<colgroup\b.*?</colgroup>\s*|<col\b[^>]*>\s*)*"
                        r"(?:<thead\b[^>]*>\s*|<tbody\b[^>]*>\s*)?<tr\b[^>]*>)(.*?)(</tr>)", re.S)


def header_rows(html: str) -> str:
    """A word processor's table has its header in its first row, written as plain cells (``<td>``): made header
    cells (``<th>``), so that the HTML loader takes the row as the table's head (a chunk cut from the table carries
    it)."""
    def heads(m: re.Match[str]) -> str:
        row = m.group(2)
        if "<th" in row or "<table" in row:
            return m.group(0)
        return m.group(1) + re.sub(r"<(/?)td\b", r"<\1th", row) + m.group(3)

    return _FIRST_ROW.sub(heads, html)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
