"""Loaders: every supported format, every bad input, folder expansion, and the real SciFact corpus."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from declrag.ingest.loaders import SUPPORTED_SUFFIXES, LoadError, Skipped, iter_files, load_file, load_paths, read_file

SCIFACT = Path(__file__).resolve().parents[3].parent / "shared/datasets/scifact/corpus.jsonl"


def make_pdf(path: Path, pages: list[str], title: str | None = None) -> Path:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    if title is not None:
        c.setTitle(title)
    for text in pages:
        if text:
            c.drawString(72, 720, text)
        c.showPage()
    c.save()
    return path


def reason(path: Path) -> str:
    with pytest.raises(LoadError) as info:
        load_file(path)
    assert str(info.value) == info.value.reason
    assert "\n" not in info.value.reason
    return info.value.reason


# ------------------------------------------------------------------------------------------- formats


def test_supported_suffixes():
    assert SUPPORTED_SUFFIXES == {".txt", ".md", ".markdown", ".pdf", ".html", ".htm", ".jsonl", ".docx", ".pptx",
                                  ".xlsx", ".xlsm", ".odt", ".ods", ".odp", ".epub", ".csv", ".tsv", ".eml", ".zip"}


def test_txt(tmp_path: Path):
    p = tmp_path / "notes.txt"
    p.write_text("Line one.\nLine two.\n", encoding="utf-8")
    [doc] = load_file(p)
    source = str(p.resolve())
    assert (doc.id, doc.source, doc.title, doc.page) == (source, source, "notes", None)
    assert doc.text == "Line one.\nLine two.\n"


def test_txt_latin1_and_bom(tmp_path: Path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9 na\xefve")
    assert load_file(latin)[0].text == "café naïve"
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfhello w\xc3\xb6rld")
    assert load_file(bom)[0].text == "hello wörld"
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("\ufeffgrüße".encode("utf-16-le"))  # NUL bytes, but a BOM says it is text
    assert load_file(utf16)[0].text == "grüße"


def test_markdown_title_and_text_kept_verbatim(tmp_path: Path):
    text = "```bash\n# not a title\n```\n\n# Real *Title* #\n\nSome **bold** text.\n\n## Section\n"
    p = tmp_path / "readme.md"
    p.write_text(text, encoding="utf-8")
    [doc] = load_file(p)
    assert doc.title == "Real *Title*"
    assert doc.text == text
    q = tmp_path / "plain.markdown"
    q.write_text("No heading here, just text.\n", encoding="utf-8")
    assert load_file(q)[0].title == "plain"


def test_markdown_front_matter_title(tmp_path: Path):
    p = tmp_path / "post.md"
    p.write_text('---\ntitle: "From Front Matter"\n---\n# Heading\nbody\n', encoding="utf-8")
    assert load_file(p)[0].title == "From Front Matter"


def test_pdf_pages(tmp_path: Path):
    p = make_pdf(tmp_path / "report.pdf", ["Alpha page content", "", "Gamma page content"])
    [doc] = load_file(p)
    source = str(p.resolve())
    # one document of its pages, each after a form feed: the blank middle page is empty, the numbers stay the PDF's
    assert (doc.id, doc.source, doc.title, doc.page) == (source, source, "report", 1)  # "untitled" ignored
    pages = doc.text.split("\f")
    assert len(pages) == 3 and "Alpha page content" in pages[0] and not pages[1].strip()
    assert "Gamma page content" in pages[2] and "\r" not in doc.text


def test_a_chunk_of_a_pdf_names_the_page_it_starts_on(tmp_path: Path):
    from declrag.config import ChunkerConfig
    from declrag.ingest.chunkers import Chunker
    from declrag.text.tokens import WordTokens

    p = make_pdf(tmp_path / "long.pdf", [f"Page {n} says the valve number {n} is open" for n in (1, 2, 3, 4)])
    [doc] = load_file(p)
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=8, overlap=0), WordTokens())(doc)
    for c in chunks:  # each chunk: the page of its first character, as the form feeds before it count
        assert c.page == doc.text.count("\f", 0, c.start) + 1
        assert doc.text[c.start:c.end] == c.text
    assert {c.page for c in chunks} == {1, 2, 3, 4}
    assert any("\f" in c.text for c in chunks)  # a chunk runs on from one page to the next


def test_pdf_title_from_metadata(tmp_path: Path):
    p = make_pdf(tmp_path / "x.pdf", ["Body text", "More text"], title="A Study of Things")
    [doc] = load_file(p)
    assert doc.title == "A Study of Things" and doc.text.count("\f") == 1


def test_pdf_without_text(tmp_path: Path):
    p = make_pdf(tmp_path / "blank.pdf", ["", ""])  # no text and no image: blank pages, not scans
    assert reason(p) == "no extractable text (its pages are blank)"


def test_pdf_encrypted(tmp_path: Path):
    from pypdf import PdfReader, PdfWriter

    src = make_pdf(tmp_path / "plain.pdf", ["Secret words"])
    writer = PdfWriter()
    for page in PdfReader(src).pages:
        writer.add_page(page)
    writer.encrypt(user_password="hunter2", owner_password="owner", algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    with locked.open("wb") as f:
        writer.write(f)
    assert reason(locked) == "encrypted PDF (a password is needed; decrypt it first, e.g. qpdf --decrypt)"


def test_html(tmp_path: Path):
    p = tmp_path / "page.html"
    p.write_text(
        "<!doctype html><html><head><title> The  Page </title><style>p { color: red }</style>"
        "<script>var secret = 1;</script></head><body><noscript>enable js</noscript>"
        "<h1>Heading</h1><p>First <b>bold</b> paragraph.</p><p>Second paragraph.</p>"
        "<template>hidden template</template><!-- a comment --></body></html>",
        encoding="utf-8",
    )
    [doc] = load_file(p)
    assert doc.id == doc.source == str(p.resolve())
    assert doc.title == "The Page"
    for hidden in ("secret", "color", "enable js", "hidden template", "a comment", "The Page"):
        assert hidden not in doc.text
    assert doc.text == "Heading\n\nFirst bold paragraph.\n\nSecond paragraph."


def test_html_title_falls_back_to_h1_then_stem_and_honours_charset(tmp_path: Path):
    p = tmp_path / "doc.htm"
    p.write_bytes('<html><head><meta charset="iso-8859-1"></head><body><h1>Caf\xe9</h1></body></html>'.encode("latin-1"))
    [doc] = load_file(p)
    assert doc.title == "Café" and doc.text == "Café"
    q = tmp_path / "bare.html"
    q.write_text("<p>just text</p>", encoding="utf-8")
    assert load_file(q)[0].title == "bare"


def test_jsonl(tmp_path: Path):
    rows = [
        {"_id": "d1", "title": "First", "text": "Body one.", "year": 2020, "tags": ["a", "b"], "nested": {"x": 1}},
        {"id": 7, "content": "Body two."},
        {"passage": "Body three.", "title": ""},
    ]
    p = tmp_path / "corpus.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]) + "\n", encoding="utf-8")
    d1, d2, d3 = load_file(p)
    source = str(p.resolve())
    assert (d1.id, d1.title, d1.text, d1.source) == ("d1", "First", "First\n\nBody one.", source)
    assert d1.metadata == {"year": 2020, "tags": ["a", "b"]}
    assert (d2.id, d2.title, d2.text) == ("7", "", "Body two.")
    assert (d3.id, d3.text) == (f"{source}#L4", "Body three.")  # 1-based line number, blank line counted


# ------------------------------------------------------------------------------------------ bad input


def test_corrupt_pdfs(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level("DEBUG")
    junk = tmp_path / "junk.pdf"
    junk.write_bytes(os.urandom(4096))
    assert reason(junk).startswith("corrupt PDF: ")
    good = make_pdf(tmp_path / "good.pdf", ["Some text here", "More text"]).read_bytes()
    cut = tmp_path / "truncated.pdf"
    cut.write_bytes(good[: len(good) // 2])
    assert reason(cut).startswith("corrupt PDF: ")
    assert not [r for r in caplog.records if r.name.startswith("pypdf")]  # pypdf kept quiet


def test_binary_txt(tmp_path: Path):
    p = tmp_path / "image.txt"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(500))
    assert reason(p) == "binary file"
    h = tmp_path / "image.html"
    h.write_bytes(p.read_bytes())
    assert reason(h) == "binary file"


def test_undecodable_text(tmp_path: Path):
    p = tmp_path / "odd.txt"
    # not UTF-8 (\xff) and too many control bytes (~5%) to be Latin-1 text, but not binary either
    p.write_bytes(b"plain words here \xff\x01" * 20)
    assert reason(p) == "undecodable text (not UTF-8 or Latin-1)"


@pytest.mark.parametrize("content", [b"", b"   \n\t\r\n  "])
@pytest.mark.parametrize("name", ["e.txt", "e.md", "e.pdf", "e.html", "e.jsonl"])
def test_empty_and_whitespace_files(tmp_path: Path, name: str, content: bytes):
    p = tmp_path / name
    p.write_bytes(content)
    assert reason(p) == "empty file"


def test_html_with_no_visible_text(tmp_path: Path):
    p = tmp_path / "blank.html"
    p.write_text("<html><head><title>T</title></head><body><script>x()</script></body></html>")
    assert reason(p) == "no visible text in HTML"


def test_jsonl_bad_records_are_skipped_alone(tmp_path: Path):
    """A record that is not one (bad JSON, not an object, no text, a duplicate id) is skipped with its line and the
    fix; the file's other records are read."""
    p = tmp_path / "mixed.jsonl"
    p.write_text('{"_id": "1", "text": "ok"}\n\n{"_id": "2", "text": broken}\n["not", "an", "object"]\n'
                 '{"_id": "3", "summary": "no text"}\n{"_id": "1", "text": "again"}\n{"_id": "4", "text": "fine"}\n',
                 encoding="utf-8")
    got = read_file(p)
    assert [d.id for d in got.documents] == ["1", "4"]
    source = str(p.resolve())
    assert [(s.line, s.reason.split("; ")[0]) for s in got.skipped] == [
        (3, "not valid JSON (Expecting value at column 22)"),
        (4, "expected a JSON object, got list"),
        (5, 'no "text" field (expected one of text, content, body, contents, passage)'),
        (6, "duplicate id '1' (first on line 1)"),
    ]
    assert all(s.path == source and s.reason.endswith("fix the record or remove the line") for s in got.skipped)
    assert got.skipped[0].where == f"{source}:3"
    assert [d.id for d in load_file(p)] == ["1", "4"]  # load_file: the documents, the skipped parts left out


def test_jsonl_with_no_usable_record(tmp_path: Path):
    p = tmp_path / "notext.jsonl"
    p.write_text('{"_id": "2", "summary": "no text"}\n{"_id": "3", "text": null}\n', encoding="utf-8")
    assert reason(p) == ('no usable record (2 skipped; line 1: no "text" field (expected one of text, content, body, '
                         'contents, passage); fix the record or remove the line)')


def test_missing_path_and_directory(tmp_path: Path):
    assert reason(tmp_path / "nope.txt") == "no such file or folder"
    assert reason(tmp_path) == "is a directory"


def test_unsupported_suffix_explicit(tmp_path: Path):
    p = tmp_path / "photo.PNG"
    p.write_bytes(b"not really")
    assert reason(p) == "unsupported file type .png"


def test_unreadable_file_chmod(tmp_path: Path):
    if os.geteuid() == 0:
        pytest.skip("running as root: root can read a chmod 000 file")
    p = tmp_path / "secret.txt"
    p.write_text("hidden")
    p.chmod(0)
    try:
        assert reason(p) == "permission denied"
    finally:
        p.chmod(0o644)


def test_unreadable_file_simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    p = tmp_path / "secret.txt"
    p.write_text("hidden")

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    assert reason(p) == "permission denied"


def test_parser_crash_becomes_load_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import declrag.ingest._records as records

    p = tmp_path / "x.jsonl"
    p.write_text('{"text": "fine"}\n')
    monkeypatch.setattr(records.json, "loads", lambda s: 1 / 0)
    assert reason(p).startswith("unexpected error: ZeroDivisionError")


# ---------------------------------------------------------------------------------------- iter_files


def test_iter_files(tmp_path: Path):
    root = tmp_path / "docs"
    for rel in ["b.txt", "a.md", "sub/z.pdf", "sub/deeper/c.html", "sub/image.png", ".hidden.txt",
                ".git/config.txt", "__pycache__/m.txt", "sub/.cache/x.md", "Makefile"]:
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    explicit = tmp_path / "data.csv"
    explicit.write_text("a,b")
    out = list(iter_files([root, explicit, tmp_path / "missing", root / "a.md"]))
    assert out == [
        Skipped(str(root / "Makefile"), "unsupported file type (no suffix)"),
        root / "a.md",
        root / "b.txt",
        root / "sub/deeper/c.html",
        Skipped(str(root / "sub/image.png"), "unsupported file type .png"),
        root / "sub/z.pdf",
        explicit,  # explicit files are passed through whatever their suffix
        Skipped(str(tmp_path / "missing"), "no such file or folder"),
        # root / "a.md" again is not repeated
    ]


def test_iter_then_load_reports_everything(tmp_path: Path):
    (tmp_path / "ok.txt").write_text("fine")
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4 garbage")
    loaded, skipped = load_paths([tmp_path])
    assert [d.text for d in loaded] == ["fine"]
    assert len(skipped) == 1 and skipped[0].reason.startswith("corrupt PDF")


# ----------------------------------------------------------------------------------------- real data


def test_scifact_corpus():
    if not SCIFACT.is_file():
        pytest.skip(f"SciFact corpus not found at {SCIFACT}")
    docs = load_file(SCIFACT)
    assert len(docs) == 5183
    assert len({d.id for d in docs}) == 5183
    doc = next(d for d in docs if d.id == "4983")
    assert doc.title.startswith("Microstructural development")
    assert doc.text.startswith(doc.title + "\n\n")
