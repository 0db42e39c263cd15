"""OpenDocument's XML, read with lxml: a presentation's slides (`load_odp`: as a PowerPoint deck is read, a page per
slide), a spreadsheet's hidden sheets (`odf_hidden_sheets`) and a file's title (`odf_title`). ODF 1.2+, OASIS."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from ._files import LoadError, Read, Skipped
from ._writer import Writer, cell_text, deck_read

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


def _part(data: bytes, name: str) -> Any:
    from lxml import etree

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return etree.fromstring(z.read(name), etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))


def dc_title(data: bytes, part: str) -> str:
    """The Dublin Core title in a part of a zipped document (an OpenDocument file's ``meta.xml``, an Office file's
    ``docProps/core.xml``), or ''."""
    try:
        found = _part(data, part).find(f".//{_q('dc:title')}")
    except Exception:  # no such part: the title comes from elsewhere
        return ""
    return " ".join((found.text or "").split()) if found is not None else ""


def odf_title(data: bytes) -> str:
    """The title in an OpenDocument file's meta.xml, or ''."""
    return dc_title(data, "meta.xml")


def _styles_with(root: Any, family: str, props: str, attr: str, value: str) -> set[str]:
    return {s.get(_q("style:name")) for s in root.iter(_q("style:style")) if s.get(_q("style:family")) == family
            and any(p.get(_q(attr)) == value for p in s.iter(_q(props)))}


_TRACKED = re.compile(rb"<text:tracked-changes\b.*?</text:tracked-changes>", re.S)
_SPACES = re.compile(rb'(<text:s\b[^>]*?text:c=")(\d{2,})(")')


def odt_cleaned(data: bytes) -> tuple[bytes, dict[str, int]]:
    """An OpenDocument text without its record of tracked changes (whose deletions a converter would show as text)
    and with a run of spaces (``text:s``) of at most 8; and how many tracked deletions and comments it had."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        content = z.read("content.xml")
        counts = {"tracked deletions": content.count(b"<text:deletion"),
                  "comments": content.count(b"<office:annotation")}
        cleaned = _SPACES.sub(lambda m: m.group(1) + b"8" + m.group(3), _TRACKED.sub(b"", content))
        if cleaned == content:
            return data, counts
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
            for item in z.infolist():
                w.writestr(item, cleaned if item.filename == "content.xml" else z.read(item))
    return out.getvalue(), counts


MAX_REPEAT = 1_000  # a repeated row or cell with content: read this many times at most


def odf_sheets(data: bytes, max_columns: int) -> Iterator[tuple[int, str, bool, int, list[str]]]:
    """A spreadsheet's rows with text, streamed from content.xml (a row at a time: a sheet of a million rows is never
    held whole), as ``(sheet number, sheet name, hidden, row number, cells' text)``; rows and cells repeated
    (``table:number-rows-repeated``, ``...-columns-repeated``) expanded only where they hold text, at most
    `MAX_REPEAT` times; a row's first ``max_columns`` cells (and an empty one more where it has text past them).
    `LoadError` for a file whose content cannot be read."""
    from lxml import etree

    try:
        yield from _streamed(data, max_columns, etree)
    except (KeyError, zipfile.BadZipFile, etree.XMLSyntaxError) as e:
        raise LoadError(f"not a readable OpenDocument spreadsheet ({type(e).__name__}): a corrupt file") from None


def _streamed(data: bytes, max_columns: int, etree: Any) -> Iterator[tuple[int, str, bool, int, list[str]]]:
    hidden: set[str] = set()
    sheet, name, hides, n = 0, "", False, 0
    with zipfile.ZipFile(io.BytesIO(data)) as z, z.open("content.xml") as f:
        for event, el in etree.iterparse(f, events=("start", "end"), resolve_entities=False, huge_tree=True,
                                         tag=(_q("style:style"), _q("table:table"), _q("table:table-row"))):
            if el.tag == _q("table:table") and event == "start":
                sheet, name, n = sheet + 1, el.get(_q("table:name")) or "", 0
                hides = el.get(_q("table:style-name")) in hidden
            elif event != "end":
                continue
            elif el.tag == _q("style:style"):
                props = el.find(_q("style:table-properties"))
                if el.get(_q("style:family")) == "table" and props is not None and \
                        props.get(_q("table:display")) == "false":
                    hidden.add(el.get(_q("style:name")))
            elif el.tag == _q("table:table-row"):
                times = _count(el.get(_q("table:number-rows-repeated")))
                if cells := _row_cells(el, max_columns):
                    for k in range(min(times, MAX_REPEAT)):
                        yield sheet, name, hides, n + 1 + k, cells
                n += times
                el.clear()


def _row_cells(row: Any, max_columns: int) -> list[str]:
    cells: list[str] = []
    for cell in row:
        if cell.tag not in (_q("table:table-cell"), _q("table:covered-table-cell")):
            continue
        text = " ".join(text_of(cell).split())
        times = _count(cell.get(_q("table:number-columns-repeated")))
        if len(cells) >= max_columns:
            if text:
                return [*cells[:max_columns], ""]  # a mark: text past the last cell read (`_Book.sheet` counts it)
            continue
        cells += [text] * min(times, MAX_REPEAT if text else max_columns)
    while cells and not cells[-1]:
        cells.pop()
    return cells[:max_columns]


def _count(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def text_of(el: Any) -> str:
    """An ODF element's text as shown: ``text:s`` its spaces, ``text:tab`` a tab, a line break a newline, each
    paragraph a line."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if node.text:
            out.append(node.text)
        for child in node:
            tag = child.tag
            if tag == _q("text:s"):
                out.append(" " * min(_count(child.get(_q("text:c"))), 8))  # spaces kept as a few
            elif tag == _q("text:tab"):
                out.append("\t")
            elif tag == _q("text:line-break"):
                out.append("\n")
            else:
                walk(child)
                if tag in (_q("text:p"), _q("text:h")):
                    out.append("\n")
            if child.tail:
                out.append(child.tail)

    walk(el)
    return "".join(out).strip()


def load_odp(data: bytes, source: str, name: str) -> Read:
    """An OpenDocument presentation (.odp): one document, a page per slide (as `declrag.ingest._office.load_pptx`),
    each headed by its title (``Slide N`` when it has none), its frames in reading order, tables as units, speaker
    notes under ``Speaker notes``; a hidden slide left out (its page empty), and said so."""
    try:
        root = _part(data, "content.xml")
    except Exception as e:
        raise LoadError(f"not a readable OpenDocument presentation ({type(e).__name__}): a corrupt file") from e
    hidden = _styles_with(root, "drawing-page", "style:drawing-page-properties", "presentation:visibility", "hidden")
    writer, skipped, first = Writer(), [], ""
    for n, page in enumerate(root.iter(_q("draw:page")), 1):
        if n > 1:
            writer.page()
        if page.get(_q("draw:style-name")) in hidden:
            skipped.append(Skipped(source, "hidden slide: left out", page=n))
            continue
        frames = list(_shapes(page))
        titles = [f for f in frames if f.get(_q("presentation:class")) == "title"]
        title = " ".join(text_of(titles[0]).split()) if titles else ""
        first = first or title
        writer.heading(1, title or f"Slide {n}")  # its number is its page: not repeated in its section
        for frame in sorted((f for f in frames if f not in titles), key=_position):
            _write_frame(writer, frame)
        notes = page.find(_q("presentation:notes"))
        said = "\n".join(text_of(f) for f in notes.iter(_q("draw:frame"))
                         if f.get(_q("presentation:class")) == "notes") if notes is not None else ""
        if said.strip():
            writer.heading(2, "Speaker notes")
            writer.paragraph(said)
    return deck_read(writer, skipped, source, odf_title(data) or first or name)


_SHAPES = {_q(f"draw:{k}") for k in ("frame", "custom-shape", "rect", "ellipse", "polygon", "polyline", "path",
                                       "circle", "line", "connector", "caption", "regular-polygon")}


def _shapes(parent: Any) -> Iterator[Any]:
    """A page's shapes that can hold text, those in groups (``draw:g``) too."""
    for child in parent:
        if child.tag == _q("draw:g"):
            yield from _shapes(child)
        elif child.tag in _SHAPES:
            yield child


def _length(value: str | None) -> float:
    """An ODF length (``2.5cm``, ``1in``...) in cm; 0 when absent."""
    if not value:
        return 0.0
    for unit, cm in (("cm", 1.0), ("mm", 0.1), ("in", 2.54), ("pt", 2.54 / 72), ("pc", 2.54 / 6)):
        if value.endswith(unit):
            try:
                return float(value[: -len(unit)]) * cm
            except ValueError:
                return 0.0
    return 0.0


def _position(frame: Any) -> tuple[float, float]:
    return _length(frame.get(_q("svg:y"))), _length(frame.get(_q("svg:x")))


def _write_frame(writer: Writer, frame: Any) -> None:
    table = frame.find(_q("table:table"))
    if table is not None:
        rows = [[cell_text(text_of(c)) for c in r.iter(_q("table:table-cell"))]
                for r in table.iter(_q("table:table-row"))]
        if rows:
            writer.table(rows[0], rows[1:])
        return
    if frame.get(_q("presentation:class")) in ("page-number", "footer", "date-time", "header"):
        return  # a slide's running lines
    said = text_of(frame)
    if said:
        writer.paragraph(said)
