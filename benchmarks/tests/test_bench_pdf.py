"""`declrag bench pdf`: the typeset corpus is what it claims (two-column PDFs holding exactly their text), and the
default reader gets that text back."""

from __future__ import annotations

import bisect
import shutil

import pytest
from declrag_bench import pdf, typeset

from declrag.ingest.loaders import read_file
from declrag.ingest._running import page_starts
from declrag.text.reading import reading

needs_latex = pytest.mark.skipif(
    shutil.which("pdflatex") is None or not typeset.DATASET.exists(),
    reason="pdflatex (Debian's texlive-latex-base) or ../shared/datasets/nq-long is not here")


def test_the_text_is_typeset_as_the_pdf_holds_it():
    blocks = typeset.page_blocks("<H1> Tide tables </H1> <P> High water at 06:40 , low at 12:55 . </P> "
                                 "<Table> <Tr> <Th> Port </Th> <Th> High </Th> </Tr> <Tr> <Td> Brest </Td> "
                                 "<Td> 06:40 </Td> </Tr> </Table>")
    text = typeset.as_text(blocks)
    assert "High water at 06:40 , low at 12:55 ." in text and "Brest | 06:40" in text  # NQ's spacing kept
    latex = typeset.as_latex(blocks, typeset.page_title(blocks))
    assert "twocolumn" in latex and "\\markright" in latex and "06:40" in latex
    assert pdf._in_table(text, "Brest") and not pdf._in_table(text, "12:55")


@needs_latex
def test_the_default_reader_reads_the_typeset_pages_back(tmp_path):
    folder, pages = pdf.corpus(tmp_path / "corpus")
    assert len(pages) == 20 and sum(len(p["questions"]) for p in pages) >= 100
    page = min(pages, key=lambda p: p["pages"])  # the shortest: a few seconds to read
    assert page["pages"] >= 2
    [doc] = read_file(page["pdf"]).documents  # one document of its pages
    starts = page_starts(doc.text)
    assert len(starts) == page["pages"]
    # the running header and page number found on every page
    assert {bisect.bisect_right(starts, a) for a, _ in doc.metadata["running"]} == set(range(1, page["pages"] + 1))
    assert doc.title == page["title"] and doc.metadata["headings"][0][2] == page["title"]  # the largest type
    read = " ".join(reading(doc.text).split())
    answers = [q["answer"] for q in page["questions"]]
    assert sum(" ".join(a.split()) in read for a in answers) >= 0.9 * len(answers)
