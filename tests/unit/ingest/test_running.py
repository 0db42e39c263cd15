"""Running headers and footers: found on a document's pages, kept in its text, left out of what is searched."""

from __future__ import annotations

import bisect
from pathlib import Path

from reportlab.pdfgen import canvas

from declrag.config import IngestConfig
from declrag.ingest.indexer import Indexer
from declrag.ingest.loaders import load_file
from declrag.ingest._running import page_starts, paged_spans, running_spans, spans_of, within
from declrag.stores import open_store
from declrag.testing import HashEmbedder
from declrag.types import Chunk, searched_text

NOTICE = "Die approbierte Originalversion ist an der TU Wien Bibliothek verfuegbar."
BODIES = ["The retriever returned five passages for each question.",
          "Passages were cut at 256 tokens with an overlap of 32.",
          "The answerer read the passages in rank order and quoted one sentence.",
          "Abstentions were counted as wrong answers on answerable questions."]


def page(n: int, body: str, total: int = 4) -> str:
    other = BODIES[(BODIES.index(body) + 1) % len(BODIES)].replace("The ", "Then the ")  # its own second line
    return f"Evaluating retrieval for question answering\n{body}\n{other}\n{NOTICE}\n{n} / {total}"


def keys(text: str, spans) -> list[str]:
    return [text[a:b] for a, b in spans]


def test_the_lines_at_the_edges_of_most_pages_are_running_and_page_numbers_are_one_line():
    pages = [page(n, b) for n, b in enumerate(BODIES, 1)]
    got = running_spans(pages)
    assert keys(pages[0], got[0]) == ["Evaluating retrieval for question answering", NOTICE, "1 / 4"]
    assert keys(pages[3], got[3]) == ["Evaluating retrieval for question answering", NOTICE, "4 / 4"]
    assert all(BODIES[i] not in keys(p, s) for i, (p, s) in enumerate(zip(pages, got)))  # the body is not


def test_a_line_on_few_pages_or_in_a_short_document_is_not_running():
    pages = [page(n, b) for n, b in enumerate(BODIES, 1)]
    pages[1] = pages[1].replace(NOTICE, "Another notice")
    pages[2] = pages[2].replace(NOTICE, "A third notice")
    pages[3] = pages[3].replace(NOTICE, "A fourth notice")  # the notice on one page of four: not running
    assert all(NOTICE not in keys(p, s) for p, s in zip(pages, running_spans(pages)))
    assert running_spans(pages[:2]) == [[], []]  # two pages: nothing can be told apart
    long = "\n".join(f"line {i} of a long page" for i in range(40))
    mid = [f"{long}\nThe same sentence in the middle.\n{long}" for _ in range(4)]
    assert all("The same sentence" not in keys(p, s) for p, s in zip(mid, running_spans(mid)))  # not at an edge


def test_a_text_with_form_feeds_has_pages_and_one_without_has_none():
    text = "\f".join(page(n, b) for n, b in enumerate(BODIES, 1))
    spans = paged_spans(text)
    assert [text[a:b] for a, b in spans].count(NOTICE) == 4 and "3 / 4" in keys(text, spans)
    assert paged_spans(text.replace("\f", "\n\n")) == []
    # blank pages (a PDF's unread scans) neither count against a line's share nor shift the spans
    blanks = "\f".join([text.split("\f")[0], "", " \n", *text.split("\f")[1:], "", ""])
    assert [blanks[a:b] for a, b in paged_spans(blanks)].count(NOTICE) == 4
    assert page_starts(blanks)[1] == blanks.index("\f") + 1 and page_starts("one page") == []


def test_a_chunk_searches_its_text_without_its_running_lines_and_keeps_them():
    text = page(1, BODIES[0])
    spans = running_spans([text, page(2, BODIES[1]), page(3, BODIES[2])])[0]
    start, end = 10, len(text)  # a chunk that starts inside the first running line
    running = within(spans, start, end)
    c = Chunk(id="d#0", doc_id="d", text=text[start:end], start=start, end=end, position=0, header="Doc",
              running=running)
    assert c.text == text[start:end]  # the text stays the exact span
    assert NOTICE not in c.searched and "retrieval for" not in c.searched and "1 / 3" not in c.searched
    assert BODIES[0] in c.searched and c.searched.startswith("Doc\n\n")
    assert searched_text("", "abc", "") == "abc" and within(spans, 0, 5) == "0:5"
    assert spans_of({"running": ["yes", "no"]}) == [] and spans_of({"running": [[0, 4]]}) == [(0, 4)]  # a JSONL
    # document's own "running" field is not read as spans


def make_pdf(path: Path, pages: list[list[str]]) -> Path:
    c = canvas.Canvas(str(path))
    for lines in pages:
        for i, line in enumerate(lines):
            c.drawString(72, 720 - 14 * i, line)
        c.showPage()
    c.save()
    return path


def test_a_pdfs_running_footer_is_kept_as_its_name_and_left_out_of_its_chunks_index(tmp_path):
    pdf = make_pdf(tmp_path / "thesis.pdf", [[f"Page {n}", body, "Bibliothek der TU Wien"]
                                             for n, body in enumerate(BODIES, 1)])
    [doc] = load_file(pdf)  # one document, its pages after form feeds
    starts = page_starts(doc.text)
    assert len(starts) == 4 and len(doc.metadata["running"]) == 8
    assert all(doc.text[a:b] in ("Bibliothek der TU Wien", f"Page {bisect.bisect_right(starts, a)}")
               for a, b in doc.metadata["running"])
    store, meta = open_store(tmp_path / "store", IngestConfig())
    Indexer(store, meta.ingest, HashEmbedder(), progress=False).index_paths([pdf])
    assert store.keyword_search("Bibliothek") == []  # not searched for in its chunks ...
    [hit] = store.keyword_search("rank order")
    assert BODIES[2] in hit.chunk.text and "Bibliothek der TU Wien" in hit.chunk.text  # ... cited whole
    assert "Bibliothek der TU Wien" in store.document_texts([doc.id])[doc.id]
    again = open_store(tmp_path / "store", IngestConfig())[0]  # read back from disk: the spans are kept
    assert again.keyword_search("Bibliothek") == [] and again.get([f"{doc.id}#0"])[0].running
