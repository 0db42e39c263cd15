"""A PDF's layout read back: paragraphs from its lines, headings and its title from their type sizes."""

from __future__ import annotations

from pathlib import Path

from reportlab.pdfgen import canvas

from declrag.config import ChunkerConfig
from declrag.ingest.chunkers import Chunker
from declrag.ingest.layout import headings, paragraphs, title_of
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


def test_a_title_is_one_heading_of_the_first_level_on_the_first_page_only():
    heads = [(0, 1, "Chapter One"), (50, 2, "Start"), (900, 1, "Chapter Two")]
    assert title_of(heads, 500) == ""  # chapters, not a title
    assert title_of(heads[:2], 500) == "Chapter One" and title_of([], 10) == ""
    assert headings("no sizes", [0], [[]]) == []
