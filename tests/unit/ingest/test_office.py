"""Office files, e-mail, EPUB, CSV and zip archives read with their structure (tests/data/office, made by
LibreOffice, python-pptx and openpyxl: make.py there): the same fact in each kind is found and cited with its sheet,
slide, chapter or attachment; hidden parts left out and said so; bad files one clear line each."""

from __future__ import annotations

import io
import re
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from declrag.config import IngestConfig, ProgramConfig, default_config
from declrag.ingest import _containers, _sheets
from declrag.ingest.indexer import Indexer
from declrag.ingest.loaders import LoadError, read_file
from declrag.payloads import page_at
from declrag.pipeline.program import RAGProgram
from declrag.stores import open_store
from declrag.testing import HashEmbedder

OFFICE = Path(__file__).resolve().parents[2] / "data" / "office"
QUESTION = "What is the budget for Q3 in Marketing?"


def indexed(tmp_path: Path, files: list[Path]):
    st, meta = open_store(str(tmp_path / "store"), IngestConfig())
    report = Indexer(st, meta.ingest, HashEmbedder(), progress=False, ocr=False).index_paths(files)
    return st, report


# the file, where its answer is (a section its passage runs through, the row's page, the title), and the row as the
# passage holds it
KINDS = {
    "budget.xlsx": ({"section": "Sheet: Marketing"}, "6 | Q3 | 120000 | Tomas Berg"),
    "budget.ods": ({"section": "Sheet: Marketing"}, "6 | Q3 | 120000 | Tomas Berg"),
    "marketing.csv": ({}, "4 | Q3 | 120000 | Tomas Berg"),
    "plan.docx": ({"section": "Marketing plan 2026"}, "Q3 | 120,000 | Tomas Berg"),
    "plan.odt": ({"section": "Marketing plan 2026"}, "Q3 | 120,000 | Tomas Berg"),
    "plan.pptx": ({"section": "Marketing budget", "page": 3}, "Q3 | 120,000 | Tomas Berg"),
    "plan.odp": ({"section": "Marketing budget", "page": 3}, "Q3 | 120,000 | Tomas Berg"),
    "plan.epub": ({"section": "Marketing plan 2026"}, "Q3 | 120,000 | Tomas Berg"),
    "budget-mail.eml": ({"title": "marketing.csv (attached to: Marketing budget for 2026 (2026-02-03))"},
                        "4 | Q3 | 120000 | Tomas Berg"),
    "bundle.zip": ({}, "Q3 | "),
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_question_about_a_table_cell_finds_its_row_with_the_header_and_cites_where_it_is(tmp_path, name):
    where, row = KINDS[name]
    st, report = indexed(tmp_path, [OFFICE / name])
    with st:
        got = RAGProgram(default_config(ProgramConfig()), store=st, embedder=HashEmbedder())(question=QUESTION)
    # the passage with the row (the e-mail's own text, "the budget for the third quarter", may rank above it)
    top = next((p for p in got.passages[:3] if row in p.text), None)
    assert top is not None, (name, [p.text for p in got.passages])
    header = "Row | Quarter | Budget | Owner" if name.endswith((".xlsx", ".ods", ".csv", ".eml")) else \
        "Quarter | Budget | Owner"
    assert header in top.text.replace("Row | ", "") if name == "bundle.zip" else header in top.text
    # what a citation of the row shows: the sections its passage runs through (small sheets and slides are packed
    # together, `section_range`), the page (slide) of the row itself, the title
    cited = {"section": top.chunk.section, "page": page_at(top, top.start + top.text.index(row)),
             "title": top.chunk.title}
    for field, value in where.items():
        assert value in cited[field] if field == "section" else cited[field] == value, (name, cited)
    assert top.chunk.source == str((OFFICE / name).resolve())
    assert "999" not in " ".join(p.text for p in got.passages)  # the hidden slide's and the hidden sheet's figures


def test_every_kind_of_the_folder_is_read_and_nothing_is_left_out_without_a_line(tmp_path):
    st, report = indexed(tmp_path, [OFFICE])
    st.close()
    lines = {s.where.replace(f"{OFFICE}/", ""): s.reason for s in report.skipped}
    assert lines == {
        "make.py": "unsupported file type .py",
        "protected.docx": "password-protected or encrypted Word document (save a copy without a password to index "
                          "it)",
        "budget.xlsx sheet 'Old plan'": "hidden sheet: left out",
        "budget.ods sheet 'Old plan'": "hidden sheet: left out",
        "plan.pptx page 2": "hidden slide: left out",
        "plan.odp page 2": "hidden slide: left out",
        "budget-mail.eml attachment 'logo.png'": "unsupported file type .png",
        "bundle.zip member 'tables/chart.png'": "unsupported file type .png",
    }, lines
    # a document per workbook and per deck (its sheets and slides are its sections and pages), twice; the e-mail and
    # its attachment; the archive's two members; the csv, the docx, the odt and the epub
    assert report.indexed == 2 + 2 + 2 + 2 + 4
    assert "2 skipped (and 2 pages, 4 other parts of files read)" in report.summary()


def _docx_with(extra: str) -> bytes:
    """plan.docx with ``extra`` (WordprocessingML paragraphs) at the start of its body."""
    src = zipfile.ZipFile(OFFICE / "plan.docx")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as w:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "word/document.xml":
                text = data.decode()
                at = text.index("<w:body>") + len("<w:body>")
                data = (text[:at] + extra + text[at:]).encode()
            w.writestr(item, data)
    return out.getvalue()


def test_a_word_documents_hidden_text_and_tracked_deletions_are_left_out_and_counted(tmp_path):
    f = tmp_path / "tracked.docx"
    f.write_bytes(_docx_with(
        '<w:p><w:r><w:t xml:space="preserve">Kept words. </w:t></w:r>'
        '<w:del w:id="91" w:author="A" w:date="2026-01-01T00:00:00Z"><w:r><w:delText>Deleted 777.</w:delText></w:r>'
        '</w:del><w:ins w:id="92" w:author="A" w:date="2026-01-01T00:00:00Z"><w:r><w:t>Inserted words.</w:t></w:r>'
        '</w:ins><w:r><w:rPr><w:vanish/></w:rPr><w:t>Hidden 888.</w:t></w:r></w:p>'))
    got = read_file(f)
    text = got.documents[0].text
    assert "Kept words. Inserted words." in text and "777" not in text and "888" not in text
    assert {(s.part, s.reason) for s in got.skipped} == {("hidden text", "1 left out"),
                                                         ("tracked deletions", "1 left out")}


def test_a_long_sheet_is_cut_between_rows_each_piece_with_its_header_row(tmp_path):
    rows = "".join(f"{n},Item {n} with a long description of what it is,{n * 10}\n" for n in range(1, 400))
    f = tmp_path / "items.csv"
    f.write_text("Number,Description,Price\n" + rows)
    st, _ = indexed(tmp_path, [f])
    with st:
        [hit] = st.keyword_search("Item 350 with a long description", 1)
        pieces = st.count()
    assert pieces > 5  # the table did not fit one chunk
    assert "351 | 350 | Item 350" in hit.text  # the row, with its row number in the file
    assert "Row | Number | Description | Price" not in hit.text  # a later piece of the table...
    assert hit.chunk.header.endswith("Row | Number | Description | Price")  # ...searched with the header row


# ----------------------------------------------------------------------------------------------------- bad input
def _zip_bomb(path: Path, size: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("zeros.txt", "w", force_zip64=True) as f:
        block = b"0" * 2**20
        for _ in range(size // len(block)):
            f.write(block)


def test_bad_files_are_one_clear_line_each_and_the_rest_of_the_folder_is_indexed(tmp_path, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("# Budget\n\nThe Q3 marketing budget is 120,000.\n")
    (folder / "protected.docx").write_bytes((OFFICE / "protected.docx").read_bytes())
    (folder / "corrupt.xlsx").write_bytes((OFFICE / "budget.xlsx").read_bytes()[:3000])
    (folder / "not-a-deck.pptx").write_text("plain text saved with the wrong name")
    _zip_bomb(folder / "bomb.zip", 600 * 2**20)  # 600 MB of zeros: about 600 kB on disk
    msg = EmailMessage()
    msg["Subject"], msg["From"], msg["Date"] = "Scans", "a@example.com", "Tue, 03 Feb 2026 09:15:00 +0100"
    msg.set_content("The scans are attached.")
    msg.add_attachment(bytes(50 * 2**20), maintype="application", subtype="pdf", filename="scans.pdf")
    (folder / "big.eml").write_bytes(msg.as_bytes())
    st, report = indexed(tmp_path, [folder])
    st.close()
    lines = {s.where.split("/")[-1]: s.reason for s in report.skipped}
    assert lines["protected.docx"].startswith("password-protected or encrypted Word document")
    assert lines["corrupt.xlsx"].startswith("corrupt Excel workbook: not a valid zip container")
    assert lines["not-a-deck.pptx"].startswith("corrupt PowerPoint deck: not a valid zip container")
    assert lines["bomb.zip"] == "zip archive would unpack to 600.0 MB, over the 512.0 MB limit (a zip bomb?): left out"
    assert lines["big.eml attachment 'scans.pdf'"] == "50.0 MB, over the 25.0 MB limit of one attachment: left out"
    assert report.indexed == 2  # good.md, and the e-mail's own text
    assert all("\n" not in r and "Traceback" not in r for r in lines.values())


def test_a_workbook_of_a_million_rows_is_read_up_to_the_bound_and_the_rest_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(_sheets, "MAX_ROWS", 1000)  # the real bound is 200,000 rows: the same code, a faster test
    f = tmp_path / "million.xlsx"
    src = zipfile.ZipFile(OFFICE / "budget.xlsx")
    rows = "".join(f'<row r="{n}"><c r="A{n}" t="inlineStr"><is><t>item {n}</t></is></c><c r="B{n}"><v>{n}</v></c>'
                   "</row>" for n in range(1, 1_000_001))
    sheet = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet xmlns="http://schemas.openxmlformats.org/'
             'spreadsheetml/2006/main"><dimension ref="A1:B1000000"/><sheetData>' + rows + "</sheetData></worksheet>")
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        for item in src.infolist():
            z.writestr(item, sheet if item.filename == "xl/worksheets/sheet1.xml" else src.read(item))
    got = read_file(f)
    assert "1000 | item 1000 | 1000" in got.documents[0].text and "item 1001" not in got.documents[0].text
    [cut] = [s for s in got.skipped if s.part == "sheet 'Sales'"]
    assert cut.reason == ("rows 1,001 of 1,000,000 left out: a file is read up to 1,000 rows (split it, or keep the "
                          "rows questions are about)")


def test_containers_are_bounded_in_depth_and_size(tmp_path, monkeypatch):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("note.txt", "The deepest note.")
    data = inner.getvalue()
    for depth in range(4):  # a zip in a zip in a zip in a zip
        outer = io.BytesIO()
        with zipfile.ZipFile(outer, "w") as z:
            z.writestr(f"level{depth}.zip", data)
        data = outer.getvalue()
    (tmp_path / "deep.zip").write_bytes(data)
    with pytest.raises(LoadError, match="a container 3 deep: not opened further"):
        read_file(tmp_path / "deep.zip")
    monkeypatch.setattr(_containers, "MAX_MEMBER", 10)
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as z:
        z.writestr("small.txt", "tiny")
        z.writestr("large.txt", "a longer text than ten bytes")
    got = read_file(tmp_path / "two.zip")
    assert [d.id.rsplit("#", 1)[1] for d in got.documents] == ["small.txt"]
    assert [(s.part, s.reason) for s in got.skipped] == [
        ("member 'large.txt'", "0.0 MB, over the 0.0 MB limit of one member: left out")]


def test_hostile_and_odd_files_are_read_in_bounds_or_skipped_alone(tmp_path):
    import openpyxl

    wb = openpyxl.Workbook()  # a far corner cell: rows are not padded to 16,384 empty cells each
    wb.active["A1"], wb.active["B1"], wb.active["A2"] = "Item", "Price", "tea"
    wb.active["XFD1048576"] = "corner"
    wb.save(tmp_path / "corner.xlsx")
    [sheet] = read_file(tmp_path / "corner.xlsx").documents
    assert "Row | Item | Price\n2 | tea" in sheet.text
    with zipfile.ZipFile(tmp_path / "damaged.zip", "w") as z:  # one member's bytes damaged: that member alone
        z.writestr("good.txt", "A good note.")
        z.writestr("bad.txt", "A note whose bytes are damaged.")
    raw = bytearray((tmp_path / "damaged.zip").read_bytes())
    at = raw.index(b"A note whose")
    raw[at:at + 6] = b"XXXXXX"
    (tmp_path / "damaged.zip").write_bytes(bytes(raw))
    got = read_file(tmp_path / "damaged.zip")
    assert [d.text for d in got.documents] == ["A good note."]
    assert got.skipped[0].part == "member 'bad.txt'" and got.skipped[0].reason.startswith("unreadable member")
    mail = (b"Subject: Notes\r\nFrom: a@example.com\r\nContent-Type: text/plain; charset=unknown-8bit\r\n\r\n"
            b"Caf\xc3\xa9 budget is settled.\r\n")
    (tmp_path / "charset.eml").write_bytes(mail)  # a charset Python does not know: read, not lost
    assert "Café budget is settled." in read_file(tmp_path / "charset.eml").documents[0].text
    (tmp_path / "cells.html").write_text("<table><tr><th>A</th></tr><tr><td><p>a</p>b<div>c</div>d</td></tr></table>")
    assert "a b c d" in read_file(tmp_path / "cells.html").documents[0].text  # a cell's blocks: words kept apart


def test_declrag_ask_cites_the_sheet_of_its_answer(tmp_path, capsys):
    from declrag.cli import main

    assert main(["index", str(OFFICE / "budget.xlsx"), "--store", str(tmp_path / "s"), "-q"]) == 0
    assert main(["ask", QUESTION, "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "6 | Q3 | 120000 | Tomas Berg" in out, out
    cited = [line for line in out.splitlines() if line.startswith("  [")]
    # the workbook's title, then the sheets its passage runs through (from the first to the row's) and its span
    assert cited and all(re.search(r" Budgets 2026 › (Sheet: \w+ … )?Sheet: Marketing \d+-\d+", c) for c in cited), out


def test_a_deck_of_slides_alike_but_their_figures_is_searched_whole_and_its_footer_left_out(tmp_path):
    # slides whose lines differ only in their numbers, each with a footer: only the footer is chrome (the PDF rule
    # for running lines took every row of such slides for one, and left them out of what is searched)
    import pptx
    from pptx.enum.shapes import PP_PLACEHOLDER
    from pptx.util import Inches

    from declrag.ingest.chunkers import Chunker
    from declrag.text.tokens import WordTokens
    from declrag.types import searched_text

    prs = pptx.Presentation()
    layout = prs.slide_layouts[5]
    for k, region in enumerate(("North", "South", "East", "West", "Central", "Coast"), 1):
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = f"{region} region"
        footer = next(p for p in layout.placeholders if p.placeholder_format.type == PP_PLACEHOLDER.FOOTER)
        slide.shapes.clone_placeholder(footer)
        next(s for s in slide.shapes if s.is_placeholder and s.placeholder_format.type == PP_PLACEHOLDER.FOOTER
             ).text = "Acme confidential"
        rows = [["Metric", "2024", "2025"], ["Revenue ($M)", f"{10 + k}.4", f"{11 + k}.1"],
                ["Headcount", f"{120 + k}", f"{131 + k}"]]
        table = slide.shapes.add_table(3, 3, Inches(0.5), Inches(1.5), Inches(9), Inches(1.2)).table
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                table.cell(i, j).text = text
    path = tmp_path / "regions.pptx"
    prs.save(str(path))
    (doc,) = read_file(path).documents
    assert "Acme confidential" not in doc.text and "running" not in doc.metadata
    chunks = Chunker(IngestConfig().chunker, WordTokens(), context="title+section")(doc)
    searched = " ".join(searched_text(c.header, c.text, c.running) for c in chunks)
    assert searched.count("Headcount") == 6 and searched.count("Revenue ($M)") == 6 and "West region" in searched


@pytest.mark.parametrize("name, part", [("plan.pptx", "slide"), ("budget.xlsx", "sheet")])
def test_a_deck_or_workbook_indexed_a_document_a_part_before_is_read_again_as_one(tmp_path, name, part):
    from declrag.ingest.indexer import IndexReport
    from declrag.types import Document

    path = OFFICE / name
    st, meta = open_store(str(tmp_path / "s"), IngestConfig())
    indexer = Indexer(st, meta.ingest, HashEmbedder(), progress=False, ocr=False)
    [doc] = read_file(path).documents
    src = str(path.resolve())
    parts = [Document(f"{src}#{part}-{n}", text, src, doc.title) for n, text in enumerate(("a b c", "d e f"), 1)]
    indexer._index([(d, (path.stat().st_mtime_ns, path.stat().st_size)) for d in parts], {}, IndexReport())
    report = indexer.index_paths([path])
    assert report.unchanged == 0 and sorted(st.documents()) == [src]  # one document now, the parts gone
    st.close()
