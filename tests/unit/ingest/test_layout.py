"""A PDF's layout read back: paragraphs from its lines, headings and its title from their type sizes."""

from __future__ import annotations

from pathlib import Path

from reportlab.pdfgen import canvas

from declrag.config import ChunkerConfig
from declrag.ingest.chunkers import Chunker
from declrag.ingest._layout import headings, paragraphs, title_of
from declrag.ingest.loaders import read_file
from declrag.text.tokens import WordTokens

WRAPPED = ["The valves were checked on every floor of the plant in",
           "the first week of spring, and each one was written down.",
           "Nothing else.",
           "The second round found two valves that leaked slowly at",
           "their seals, and both were replaced on the same afternoon.",
           "A third round is planned for the autumn after the audit."]


def test_a_short_line_that_ends_a_sentence_ends_a_paragraph():
    page = "\n".join(WRAPPED)
    got = paragraphs(page)
    assert got.split("\n\n") == ["\n".join(WRAPPED[:3]), "\n".join(WRAPPED[3:])]
    assert got.replace("\n\n", "\n") == page  # only blank lines are added
    assert paragraphs("\n".join(WRAPPED[:4])) == "\n".join(WRAPPED[:4])  # too few lines to know the width


def sized_pdf(path: Path, title: str | None = None) -> Path:
    c = canvas.Canvas(str(path))
    if title:
        c.setTitle(title)
    y = 780
    for size, line in [(20, "Pump House Maintenance"), (14, "Inspections"), *[(10, w) for w in WRAPPED],
                       (14, "Repairs")]:
        c.setFont("Helvetica", size)
        c.drawString(72, y, line)
        if line == "Repairs":  # a footnote's mark, set small after the heading
            c.setFont("Helvetica", 6)
            c.drawString(72 + c.stringWidth("Repairs", "Helvetica", 14) + 1, y + 6, "1")
        y -= size + 6
    c.setFont("Helvetica", 10)
    c.drawString(72, y, "The seals came from the usual supplier and fitted at once.")
    c.showPage()
    c.setFont("Helvetica", 14)
    c.drawString(72, 780, "Costs")
    c.setFont("Helvetica", 10)
    c.drawString(72, 760, "The repairs cost four hundred pounds in parts and labour.")
    c.save()
    return path


def test_headings_and_title_come_from_type_sizes(tmp_path: Path):
    [doc] = read_file(sized_pdf(tmp_path / "scan0001.pdf")).documents
    assert doc.title == "Pump House Maintenance"  # no metadata title, an unhelpful name: the largest type
    heads = [(level, text) for _, level, text in doc.metadata["headings"]]
    assert heads == [(1, "Pump House Maintenance"), (2, "Inspections"), (2, "Repairs"), (2, "Costs")]
    assert all(doc.text[o:].startswith(t) for o, _, t in doc.metadata["headings"])
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=16, overlap=0), WordTokens())(doc)
    last = chunks[-1]
    assert "four hundred pounds" in last.text and last.section.endswith("Costs") and last.page == 2
    [named] = read_file(sized_pdf(tmp_path / "x.pdf", title="Plant Log 2024")).documents
    assert named.title == "Plant Log 2024"  # the metadata's title comes first


def test_a_title_is_the_one_heading_of_the_largest_type_atop_the_first_page():
    text = "Chapter One\nStart\n" + "Body line.\n" * 80 + "Chapter Two\n"
    heads = [(0, 1, "Chapter One"), (12, 2, "Start"), (len(text) - 12, 1, "Chapter Two")]
    assert title_of(heads, text, (0, 500)) == ""  # chapters, not a title
    assert title_of(heads[:2], text, (0, 500)) == "Chapter One" and title_of([], text, (0, 10)) == ""
    low = "Body line.\n" * 5 + "Methods\n"
    assert title_of([(55, 1, "Methods")], low, (0, len(low))) == ""  # a heading further down the page
    cover = "\fVillage Hall Minutes\nThe hall.\n"  # a blank cover page: the first page with text
    assert title_of([(1, 1, "Village Hall Minutes")], cover, (1, len(cover))) == "Village Hall Minutes"
    assert headings("no sizes", [0], [[]]) == []


def pdf_of(path: Path, pages: list[list[tuple[float, str]]]) -> Path:
    c = canvas.Canvas(str(path))
    for lines in pages:
        y = 780
        for size, line in lines:
            c.setFont("Helvetica", size)
            c.drawString(40, y, line)
            y -= size + 5
        c.showPage()
    c.save()
    return path


def test_headings_stay_on_their_page_and_off_body_lines(tmp_path: Path):
    body = [(11, w) for w in WRAPPED]
    # a cover page with a title, the next page opening with a heading of the same size: two headings, not one
    [doc] = read_file(pdf_of(tmp_path / "a.pdf", [[(24, "Annual Report")], [(24, "Overview"), *body]])).documents
    assert [t for _, _, t in doc.metadata["headings"]] == ["Annual Report", "Overview"] and doc.page == 1
    # a heading's word in a body line above it (a line PDFium joins at a hyphen): placed on its own line
    [doc] = read_file(pdf_of(tmp_path / "b.pdf", [[*body, (11, "The survey was written up by the calibra-"),
                                                   (11, "tion team, whose Methods section was long."),
                                                   (16, "Methods"), *body]])).documents
    [(o, _, name)] = doc.metadata["headings"]
    assert name == "Methods" and doc.text[o - 1] == "\n" and doc.text[o:].startswith("Methods\n")
    assert doc.title != "Methods"  # its one large heading is far down the page: not a title


def test_the_body_is_the_prose_type_not_a_tables(tmp_path: Path):
    cells = [(7, f"{n} | {n * 3}") for n in range(120)]  # a long table in small type: more characters than the prose
    [doc] = read_file(pdf_of(tmp_path / "t.pdf", [[(16, "Stock Count"), *[(11, w) for w in WRAPPED], *cells]])).documents
    assert [t for _, _, t in doc.metadata["headings"]] == ["Stock Count"]  # no prose line taken for a heading


def test_a_quote_on_a_later_page_is_cited_to_its_page_and_never_widened_over_a_break():
    from declrag.payloads import Citation
    from declrag.pipeline.stages.generate._names import whole
    from declrag.types import Chunk, Hit

    text = "First page sentence one.\nThe sentence on page one\n\fNext page goes on here. Third page follows.\n"
    c = Chunk(id="d#0", doc_id="d", text=text, start=0, end=len(text), position=0, page=4)
    hit = Hit(chunk=c, score=1.0, text=text, start=0, end=len(text))
    q = text.index("Next page")
    assert Citation.payload(1, hit, False, [(1, q, q + 10)])["page"] == 5  # where the quote is
    assert Citation.payload(1, hit, False, [])["page"] == 4
    a, b = whole(text, q + 5, q + 12)
    assert a >= text.index("\f") + 1 and "\f" not in text[a:b]


def test_a_pdf_indexed_a_page_a_document_before_is_read_again_as_one(tmp_path: Path):
    from declrag.config import IngestConfig
    from declrag.ingest.indexer import Indexer, IndexReport
    from declrag.stores import open_store
    from declrag.testing import HashEmbedder
    from declrag.types import Document

    pdf = pdf_of(tmp_path / "log.pdf", [[(11, w) for w in WRAPPED], [(11, w) for w in WRAPPED]])
    store, meta = open_store(tmp_path / "s", IngestConfig())
    indexer = Indexer(store, meta.ingest, HashEmbedder(), progress=False)
    [doc] = read_file(pdf).documents
    pages = [Document(f"{doc.id}#page={n}", page, doc.source, doc.title, page=n)  # as declrag indexed it before
             for n, page in enumerate(doc.text.split("\f"), 1)]
    indexer._index([(d, (pdf.stat().st_mtime_ns, pdf.stat().st_size)) for d in pages], {}, IndexReport())
    assert sorted(store.documents()) == [f"{doc.id}#page=1", f"{doc.id}#page=2"]
    report = indexer.index_paths([pdf])
    assert report.unchanged == 0 and sorted(store.documents()) == [doc.id]  # one document now, the pages gone
