"""A chunk's document identity: titles, section paths, headers, and what the searched text is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from declrag.config import ChunkerConfig, IngestConfig
from declrag.ingest.chunkers import Chunker
from declrag.text.tokens import WordTokens
from declrag.ingest.headers import (
    HEADER_MAX,
    content_ends,
    header,
    heading_names,
    headings,
    helpful_name,
    markdown_headings,
    section_range,
    sections,
    text_headings,
    text_title,
)
from declrag.ingest.loaders import load_file
from declrag.types import Document

REPORT = """Politecnico di Milano
Master Thesis in Computer Engineering
Retrieval-Augmented Generation for Enterprise Search

Abstract. This thesis studies retrieval.

1 Introduction

Large language models answer questions. They hallucinate.

2 Background

2.1 Retrieval

BM25 and dense retrieval, as Lewis et al. proposed.

2.2 Generation

Decoders write the answer.

REFERENCES

[1] Lewis, P. et al. Retrieval-augmented generation.
"""


@pytest.mark.parametrize("name,expected", [
    ("/d/langchain_test-report.txt", "langchain test report"), ("/d/milan-thesis.pdf", "milan thesis"),
    ("/d/doc1.txt", ""), ("/d/untitled_final_v2.md", ""), ("/d/scan0001.pdf", ""), ("/d/3f9a2c1b7e44.txt", ""),
    ("/d/IMG_2231.html", ""), ("/d/README.md", ""), ("", ""),
])
def test_a_file_name_counts_as_a_title_only_when_it_says_something(name, expected):
    assert helpful_name(name) == expected


def test_a_plain_text_title_page_is_its_first_short_lines_and_never_a_sentence():
    assert text_title(REPORT) == ("Politecnico di Milano · Master Thesis in Computer Engineering · "
                                  "Retrieval-Augmented Generation for Enterprise Search")
    assert text_title("Apples grow on trees in orchards. They are red.\nMore.") == ""
    assert text_title("one\ntwo\nthree\nfour\nfive\nsix\n\nbody") == ""  # a list, not a title page
    assert text_title("") == ""


def test_numbered_and_capitalised_section_titles_make_a_path():
    heads = text_headings(REPORT)
    assert [h[2] for h in heads] == ["1 Introduction", "2 Background", "2.1 Retrieval", "2.2 Generation",
                                     "REFERENCES"]
    at = REPORT.index("BM25")
    assert sections(heads, [0, REPORT.index("Large"), at, REPORT.index("Decoders"), REPORT.index("[1]")]) == [
        "", "1 Introduction", "2 Background > 2.1 Retrieval", "2 Background > 2.2 Generation", "REFERENCES"]


def test_a_numbered_list_item_or_a_sentence_in_a_paragraph_is_not_a_heading():
    text = "Steps follow.\n1. install the package\n2. Run it, then check.\nThe END of it all is near today."
    assert text_headings(text) == []


def test_markdown_headings_skip_code_fences_and_read_setext():
    text = "Title\n=====\n\nIntro.\n\n```\n# not a heading\n```\n\n## Usage ##\n\nText.\n\nNotes\n-----\n"
    assert [(lv, t) for _, lv, t in markdown_headings(text)] == [(1, "Title"), (2, "Usage"), (2, "Notes")]


def test_html_headings_are_placed_in_the_flattened_text(tmp_path: Path):
    f = tmp_path / "guide.html"
    f.write_text("<html><head><title>The Guide</title></head><body><h1>The Guide</h1><p>Intro text.</p>"
                 "<h2>Install</h2><p>Run pip.</p><h3>On Windows</h3><p>Use py.</p><h2>Use</h2><p>Ask.</p>"
                 "</body></html>")
    doc = load_file(f)[0]
    heads = headings(doc)
    assert [(lv, t) for _, lv, t in heads] == [(1, "The Guide"), (2, "Install"), (3, "On Windows"), (2, "Use")]
    assert all(doc.text[o:o + len(t)] == t for o, _, t in heads)
    assert sections(heads, [doc.text.index("Use py")])[0] == "The Guide > Install > On Windows"


def test_a_chunk_that_runs_into_later_sections_names_the_first_and_the_last():
    # a workbook's small sheets packed into one chunk: its citation names both, never only the one it has left
    text = "Sheet: Sales\n\nQ1 | 310\n\nSheet: Marketing\n\nQ3 | 120 | Tomas Berg | approved in March by the board"
    heads = [[0, 1, "Sheet: Sales"], [text.index("Sheet: M"), 1, "Sheet: Marketing"]]
    doc = Document(id="b", text=text, title="Budgets", metadata={"headings": heads})
    whole = Chunker(ChunkerConfig(name="fixed", chunk_size=40, overlap=0), WordTokens(), context="title+section")(doc)[0]
    tail = Chunker(ChunkerConfig(name="fixed", chunk_size=8, overlap=0), WordTokens())(doc)[-1]
    assert whole.section == "Sheet: Sales … Sheet: Marketing"
    assert whole.header == "Budgets — Sheet: Sales"  # what is searched: where it starts, as before
    assert tail.section == "Sheet: Marketing"
    assert section_range(("Report", "Sales"), ("Report", "Marketing", "Q3")) == "Report > Sales … Marketing > Q3"
    assert section_range((), ("Intro",)) == "Intro" and section_range(("Intro",), ("Intro",)) == "Intro"
    # the last is never cut off by a long first; what two sheets share is read from their paths, not their names
    assert section_range(("Y" * 190,), ("Zeta",)).endswith(" … Zeta")
    assert section_range(("In > Out",), ("In > Err",)) == "In > Out … In > Err"
    # the headings a range names are each a heading name (the generator quotes none of them)
    assert heading_names("Budgets", "Report > Sales … Marketing") == {"budgets", "report", "sales", "marketing"}


def test_a_chunk_that_ends_on_a_heading_does_not_name_its_section():
    # the chunk holds the Sales rows and then only Marketing's heading: its citation names Sales alone
    text = "Sheet: Sales\n\nQ1 | 310 | 411\n\nSheet: Marketing\n\nQ3 | 120 | Tomas Berg | approved in March"
    m = text.index("Sheet: M")
    heads = [(0, 1, "Sheet: Sales"), (m, 1, "Sheet: Marketing")]
    doc = Document(id="b", text=text, title="Budgets", metadata={"headings": [list(h) for h in heads]})
    first = Chunker(ChunkerConfig(name="fixed", chunk_size=11, overlap=0), WordTokens())(doc)[0]
    assert first.text.rstrip().endswith("Sheet: Marketing") and first.section == "Sheet: Sales"
    # where each span's last section is read: before a tail of headings and blank lines; at a body's last character
    ends = content_ends(text, heads, [(0, len(text)), (0, m + 18), (0, m + 3), (0, m), (m, m + 16), (0, 2)])
    assert ends[0] == len(text) - 1  # Marketing's body is in it
    assert ends[1] == ends[2] == ends[3] == text.index("411") + 2  # ends on (or within) the heading: Sales's body
    assert ends[4] == m + 15  # a span that starts on the heading keeps it: it is the first section
    assert ends[5] == 1
    nested = "# A\n\nbody\n\n## B\n\n### C\n\n"
    hs = markdown_headings(nested)
    assert content_ends(nested, hs, [(0, len(nested))]) == [nested.index("body") + 3]


def test_header_follows_the_setting_and_is_bounded():
    assert header("Report", "1 Intro > 1.2 Aims", "none") == ""
    assert header("Report", "1 Intro > 1.2 Aims", "title") == "Report"
    assert header("Report", "1 Intro > 1.2 Aims", "title+section") == "Report — 1 Intro > 1.2 Aims"
    assert header("The Guide", "The Guide > Install", "title+section") == "The Guide — Install"
    assert header("", "", "title+section") == ""  # nothing known: nothing invented
    long = header("T" * 50, " > ".join(["Section heading words"] * 30), "title+section")
    assert len(long) <= HEADER_MAX and long.endswith("…")


def test_chunks_carry_title_section_and_header_while_their_text_stays_exact(tmp_path: Path):
    f = tmp_path / "milan-thesis.txt"
    f.write_text(REPORT)
    doc = load_file(f)[0]
    assert doc.title.startswith("Politecnico di Milano")
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=12, overlap=0), WordTokens(),
                     context="title+section")(doc)
    assert all(doc.text[c.start:c.end] == c.text for c in chunks)
    bm25 = next(c for c in chunks if "BM25" in c.text)
    assert bm25.section.endswith("2.1 Retrieval")
    assert bm25.header.startswith("Politecnico di Milano") and bm25.header.endswith("2.1 Retrieval")
    assert bm25.searched == f"{bm25.header}\n\n{bm25.text}"
    plain = Chunker(ChunkerConfig(name="fixed", chunk_size=12, overlap=0), WordTokens())(doc)
    assert all(c.header == "" and c.searched == c.text for c in plain)
    assert [c.section for c in plain] == [c.section for c in chunks]  # the section is kept whatever the setting


def test_a_document_with_no_title_no_headings_and_a_telling_nothing_name_gets_an_empty_header(tmp_path: Path):
    f = tmp_path / "doc1.txt"
    f.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    doc = load_file(f)[0]
    assert doc.title == ""
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=16, overlap=0), WordTokens(), context="title+section")(doc)
    assert chunks and all(c.header == "" and c.section == "" for c in chunks)


def test_the_context_setting_is_part_of_an_index_address_and_none_keeps_the_address_it_had():
    from declrag.config import CHUNKING_VERSION
    from declrag.types import content_hash

    before = content_hash(json.dumps({"chunker": ChunkerConfig().model_dump(), "chunking_version": CHUNKING_VERSION,
                                      "embedder": IngestConfig().embedder.identity()}, sort_keys=True))
    assert IngestConfig(context="none").digest() == before  # stores built before the setting are still found
    assert len({IngestConfig(context=c).digest() for c in ("none", "title", "title+section")}) == 3
    assert IngestConfig().context == "title+section"


def test_a_store_or_an_artifact_written_before_the_setting_reads_as_none():
    from declrag.stores.base import StoreMeta

    old = {"format": 1, "backend": "lancedb", "metric": "cosine", "ingest": {"chunker": {"name": "fixed"}}}
    assert StoreMeta.model_validate(old).ingest.context == "none"
    assert StoreMeta.model_validate_json(StoreMeta().model_dump_json()).ingest.context == "title+section"


def test_headings_a_loader_found_are_used_as_given():
    doc = Document("x", "Intro\nBody", metadata={"headings": [[0, 1, "Intro"]]})
    assert headings(doc) == [(0, 1, "Intro")]
