"""Files that broke RAG systems in public bug reports (`../shared/cases/reading/`), read as a user expects: each a test
of the behaviour, and of the kind it stands for beyond the one file."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from declrag.config import IngestConfig, ProgramConfig, default_config
from declrag.ingest import ocr
from declrag.ingest.indexer import Indexer
from declrag.ingest.loaders import PDF_READERS, LoadError, read_file
from declrag.pipeline.program import RAGProgram
from declrag.stores import open_store
from declrag.text.reading import visible
from declrag.testing import HashEmbedder
from tests.conftest import shared


def pages(doc) -> list[str]:
    """A PDF document's pages: its text between form feeds."""
    return doc.text.split("\f")


def case(name: str) -> Path:
    return shared("..", "cases", "reading", name)


def indexed(tmp_path: Path, files: list[Path], embedder=None, pdf_reader: str = "pdfium"):
    st, meta = open_store(str(tmp_path / "store"), IngestConfig())
    report = Indexer(st, meta.ingest, embedder or HashEmbedder(), progress=False, ocr=False,
                     pdf_reader=pdf_reader).index_paths(files)
    return st, report


def ask(st, embedder, question: str):
    return RAGProgram(default_config(ProgramConfig()), store=st, embedder=embedder)(question=question)


# ------------------------------------------------------------------------------------------ ligatures, hyphenation
@pytest.mark.parametrize("reader", PDF_READERS)
def test_ligatures_pdf_is_found_by_plain_words_and_answered(tmp_path: Path, minilm, reader: str):
    st, _ = indexed(tmp_path, [case("ligatures.pdf")], minilm, reader)
    with st:
        [hit, *_] = st.keyword_search("official figure", 3)
        # cited as the reader gives it: pypdf keeps the ligatures, PDFium writes them as letters
        assert ("ﬁ" in hit.text) == (reader == "pypdf")
        got = ask(st, minilm, "What is the official figure for the refit?")
    assert "412,000" in got.answer and "official figure" in got.answer


@pytest.mark.parametrize("reader", PDF_READERS)
def test_hyphenated_pdf_is_one_word_to_search_and_to_the_answer(tmp_path: Path, minilm, reader: str):
    st, _ = indexed(tmp_path, [case("hyphenated.pdf")], minilm, reader)
    with st:
        for word in ("calibration", "warehouse", "schedule", "replacement"):
            assert st.keyword_search(word, 3), word
        got = ask(st, minilm, "How often must the calibration of the pitch sensor be repeated?")
    assert "every ninety days" in got.answer
    assert "calibration" in got.answer and "calibra-" not in got.answer and "re- peated" not in got.answer
    [cited, *_] = got.citations
    a, b = cited["quotes"][0]  # the citation: the PDF's own characters, exact
    page = read_file(case("hyphenated.pdf"), pdf_reader=reader).documents[0].text
    assert "calibra-\ntion" in page[a:b] and "every ninety days" in page[a:b]


# ------------------------------------------------------------------------------------------ pages without text
def test_a_page_without_a_text_layer_is_named_when_not_read(tmp_path: Path):
    got = read_file(case("image-page.pdf"), ocr=False)
    [doc] = got.documents
    assert visible(pages(doc)[0]) and pages(doc)[1] == ""  # page 2 is there, empty, and its number is kept
    [page] = got.skipped
    assert (page.page, page.where.endswith("image-page.pdf page 2")) == (2, True)
    assert page.reason.startswith("no text layer")
    _, report = indexed(tmp_path, [case("image-page.pdf")])
    assert "1 page of files read" in report.summary()
    with pytest.raises(LoadError, match=r"no text layer on any of its 1 page"):
        read_file(case("scanned.pdf"), ocr=False)


needs_ocr = pytest.mark.skipif(not ocr.available(), reason="Tesseract is not installed (bash scripts/setup.sh --ocr)")


@needs_ocr
def test_scanned_pages_are_read_by_ocr():
    got = read_file(case("image-page.pdf"))
    [doc] = got.documents
    assert len(pages(doc)) == 2 and not got.skipped and doc.metadata["ocr"] == [2]
    assert "chimney was swept in June" in pages(doc)[1]
    [scan] = read_file(case("scanned.pdf")).documents
    assert "Boiler room inspection" in scan.text


@needs_ocr
def test_any_scanned_page_is_read_a_page_of_text_among_them(tmp_path: Path):
    """The kind, not the file: a PDF of our own whose middle page is a picture of text."""
    from PIL import Image, ImageDraw, ImageFont
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    image = Image.new("L", (1700, 400), 255)
    font = ImageFont.load_default(size=48)
    ImageDraw.Draw(image).text((60, 150), "The spare fuse is taped inside the meter cupboard.", fill=0, font=font)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    pdf = tmp_path / "mixed.pdf"
    c = canvas.Canvas(str(pdf))
    for n in (1, 2, 3):
        if n == 2:
            c.drawImage(ImageReader(io.BytesIO(buf.getvalue())), 40, 500, width=520, height=122)
        else:
            c.drawString(72, 720, f"Page {n} is typed text about the cellar.")
        c.showPage()
    c.save()
    [doc] = read_file(pdf).documents
    assert all(visible(p) for p in pages(doc)) and len(pages(doc)) == 3
    assert "spare fuse is taped inside the meter cupboard" in " ".join(pages(doc)[1].split())
    without = read_file(pdf, ocr=False)
    assert [bool(visible(p)) for p in pages(without.documents[0])] == [True, False, True]
    assert [s.page for s in without.skipped] == [2]


# ------------------------------------------------------------------------------------------ HTML as a browser shows it
def test_hidden_html_is_not_indexed():
    [doc] = read_file(case("hidden.html")).documents
    assert "Swimmers must shower" in doc.text
    assert not [m for m in ("zqdisplaynonemark", "zqhiddenattrmark", "zqariahiddenmark", "zqinputhiddenmark",
                            "closed forever", "never on duty") if m in doc.text]


def test_every_way_of_hiding_html_is_honoured(tmp_path: Path):
    p = tmp_path / "page.html"
    p.write_text('<body><p>Shown.</p><div style="color: red; visibility : hidden">v1</div>'
                 '<section aria-hidden="TRUE"><p>v2</p></section><div style="DISPLAY:NONE !important">v3</div>'
                 '<template><p>v4</p></template><details hidden><p>v5</p></details>'
                 '<p style="display: block">Also shown.</p></body>', "utf-8")
    [doc] = read_file(p).documents
    assert doc.text == "Shown.\n\nAlso shown."


# ------------------------------------------------------------------------------------------ Markdown structure
def test_settings_md_table_rows_stay_whole_and_carry_their_header(tmp_path: Path):
    st, _ = indexed(tmp_path, [case("settings.md")])
    with st:
        chunks = sorted((h.chunk for h in st.keyword_search("scheduler stage upper bound", 100)),
                        key=lambda c: c.position)
    table = [c for c in chunks if "_limit` |" in c.text]
    assert len(table) >= 2  # the table is longer than a chunk
    for c in table:
        rows = [line for line in c.text.split("\n") if line.startswith("|")]
        assert all(r.endswith("|") for r in rows), c.text[:200]  # never cut mid-row
    for c in table[1:]:  # the header row, searched with it (after the document's title and section)
        assert c.header.endswith("| setting | type | default | meaning |\n|---|---|---|---|")
        assert "| setting | type | default | meaning |" in c.searched.split("| `")[0]
    assert "| setting |" not in table[0].header  # the first piece has the header row in its text


def test_settings_md_command_question_is_answered_with_the_command(tmp_path: Path, minilm):
    st, _ = indexed(tmp_path, [case("settings.md")], minilm)
    with st:
        got = ask(st, minilm, "Which command resets the scheduler?")
    assert "schedctl reset --all --keep-logs" in got.answer


def test_an_unclosed_code_fence_runs_to_the_end(tmp_path: Path):
    p = tmp_path / "open.md"
    p.write_text("# Setup\n\nRun this:\n\n```bash\ninstall --now\n\nstill code\n", "utf-8")
    [doc] = read_file(p).documents
    [(a, b, kind, _)] = doc.metadata["units"]
    assert kind == "code" and doc.text[a:b] == "```bash\ninstall --now\n\nstill code"


# ------------------------------------------------------------------------------------------ records, not files, fail
def test_records_jsonl_skips_records_not_the_file(tmp_path: Path):
    got = read_file(case("records.jsonl"))
    assert [d.id for d in got.documents] == ["r1", "r2", "r3", "r8"]
    assert [(s.line, s.reason.split(" (")[0].split(";")[0]) for s in got.skipped] == [
        (4, 'no "text" field'), (5, '"text" is null'), (6, '"text" must be a string, got int'),
        (7, "not valid JSON")]
    assert all(s.where.endswith(f"records.jsonl:{s.line}") for s in got.skipped)
    _, report = indexed(tmp_path, [case("records.jsonl")])
    assert report.added == 4 and "0 skipped (and 4 records of files read)" in report.summary()


# ------------------------------------------------------------------------------------------ bad input
def test_a_text_layer_of_unmapped_glyphs_is_read_as_a_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A PDF whose fonts have no Unicode map extracts replacement and private-use characters: not text."""
    import declrag.ingest._pdf as pdf_module

    assert pdf_module._garbled("\ufffd\ue001\ue002 " * 10) and not pdf_module._garbled("Plain words, and one \ufffd.")
    pdf = tmp_path / "odd.pdf"
    pdf.write_bytes(b"%PDF-1.4 stand-in")
    monkeypatch.setattr(pdf_module, "_pdfium_pages", lambda data: ("", [
        ("The first page reads well enough.", False, ()), ("\ue010\ue011\ufffd\ue012 " * 12, False, ())]))
    got = read_file(pdf, ocr=False)
    assert pages(got.documents[0]) == ["The first page reads well enough.", ""]
    assert [(s.page, s.reason.split(";")[0]) for s in got.skipped] == [
        (2, "text layer unreadable (a font without a Unicode map?)")]


def test_a_table_of_ten_thousand_rows_is_chunked_between_rows(tmp_path: Path):
    from declrag.config import ChunkerConfig
    from declrag.ingest.chunkers import Chunker
    from declrag.text.tokens import WordTokens

    md = tmp_path / "big.md"
    rows = "\n".join(f"| item {i} | {i * 7} | shelf {i % 40} |" for i in range(10_000))
    md.write_text(f"# Stock\n\n| item | count | where |\n|---|---|---|\n{rows}\n\nThe end.\n", "utf-8")
    [doc] = read_file(md).documents
    chunks = Chunker(ChunkerConfig(), WordTokens())(doc)
    assert len(chunks) > 100
    for c in chunks:
        assert doc.text[c.start:c.end] == c.text
        assert all(line.startswith("| item") and line.endswith("|") for line in c.text.split("\n")
                   if line.startswith("| item ")), c.text[:80]
    assert sum(c.header.endswith("| item | count | where |\n|---|---|---|") for c in chunks) == len(chunks) - 1
    assert chunks[-1].text.endswith("The end.")


def test_an_extractive_answer_never_quotes_a_running_header(tmp_path: Path, minilm):
    """A page's title line and number repeat on every page: they name the document (searched as its identity) but
    are no sentence of an answer."""
    from reportlab.pdfgen import canvas

    pdf = tmp_path / "report.pdf"
    c = canvas.Canvas(str(pdf))
    bodies = ["Dredging of the east basin finished in April.", "The north quay was resurfaced in June.",
              "Two new cranes arrived in August.", "The ferry terminal opened in October."]
    for n, body in enumerate(bodies, 1):
        c.drawString(72, 770, "Harbour Works Annual Report")
        c.drawString(72, 700, body)
        c.drawString(300, 40, f"{n}")
        c.showPage()
    c.save()
    st, _ = indexed(tmp_path, [pdf], minilm)
    with st:
        got = ask(st, minilm, "What does the harbour works annual report say about dredging?")
    assert "Dredging of the east basin finished in April." in got.answer
    assert "Harbour Works Annual Report" not in got.answer


def test_a_record_s_own_units_field_is_not_taken_for_code_blocks(tmp_path: Path):
    from declrag.config import ChunkerConfig
    from declrag.ingest.chunkers import Chunker
    from declrag.text.tokens import WordTokens

    p = tmp_path / "rows.jsonl"
    p.write_text('{"id": "a", "text": "Weight.\\n\\nFive.", "units": "metric"}\n'
                 '{"id": "b", "text": "Length.", "units": ["kg", "m"]}\n', "utf-8")
    for doc in read_file(p).documents:
        assert [c.text for c in Chunker(ChunkerConfig(), WordTokens())(doc)]  # chunked, no error


@pytest.mark.parametrize(("text", "unit", "size", "want"), [
    # a table that fits a window, reached at one of its line ends: still kept whole (the window ends before it)
    ("one two three four\na | b\nc | d\ne | f", (19, None), 10, ["one two three four", "a | b\nc | d\ne | f"]),
    # a table too long for a window, reached in its first line: the window ends before the table, not mid-row
    ("one two three four five six\nname | value | unit\n" + "\n".join(f"r{i} | {i} | kg" for i in range(8)),
     (28, 48), 8, None),
])
def test_fixed_windows_never_cut_a_table_mid_row(text: str, unit, size: int, want):
    from declrag.config import ChunkerConfig
    from declrag.ingest.chunkers import Chunker
    from declrag.text.tokens import WordTokens
    from declrag.types import Document

    start, head = unit
    doc = Document("d", text, metadata={"units": [[start, len(text), "table", head or start]]})
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=size, overlap=0), WordTokens())(doc)
    if want is not None:
        assert [c.text for c in chunks] == want
    for c in chunks:
        assert c.text == text[c.start:c.end]
        if c.start >= start:  # inside the table: whole lines only
            assert (c.start == start or text[c.start - 1] == "\n") and (c.end == len(text) or text[c.end] == "\n")


def test_malformed_html_tables_keep_their_words_apart_and_headings_read_as_shown(tmp_path: Path):
    p = tmp_path / "odd.html"
    for html, text in (("<table>x<tr><td>a</td></tr></table>", "x\na"), ("<div>x<th>y</th>z</div>", "x yz"),
                       ("<span>x</span><td>1</td><td>2</td>", "x 1 | 2")):
        p.write_text(html, "utf-8")
        assert read_file(p).documents[0].text == text
    p.write_text('<h1>Guide</h1><p>intro</p><h2><svg><title>Link icon</title></svg>Install'
                 '<span aria-hidden="true">#</span></h2><p>run it</p>', "utf-8")
    [doc] = read_file(p).documents
    assert doc.metadata["headings"] == [(0, 1, "Guide"), (14, 2, "Install")]


def test_a_blank_line_always_ends_a_sentence():
    from declrag.text.sentences import sentence_spans

    text = "\n".join(["word " * 12] * 5) + "which the architect had designed in\n\n(b) a new paragraph starts here."
    assert text[slice(*sentence_spans(text, wrapped=True)[-1])] == "(b) a new paragraph starts here."
