"""`declrag bench pdf`: the same documents as their text and as typeset two-column PDFs, asked the same real
questions, with the default program; what reading PDFs costs, reader by reader.

The corpus is nq-long's Wikipedia pages typeset by pdfLaTeX as two-column papers (running header and page number on
every page, footnotes, tables in boxes, hyphenation on: `declrag_bench.typeset`), each written beside the text that
went into it, into declrag's cache. The questions are the set's real search queries whose short answer occurs
verbatim in that text (102 over 20 pages; one of the 21 pages repeats another).

Arms: ``text`` (the ``.txt`` files), ``pdf`` (the PDFs, read by the default reader), ``pdf-pypdf`` (read by pypdf, the
reader before PDFium). Each is indexed into a store of its own with the default settings and asked through the
default program (`declrag.config.default_config`: extractive answers, no model). Scores per question:

- ``hit@1``, ``hit@5``: a passage among the first 1 or 5 handed over holds the answer (whitespace and case aside, the
  passage as read: `declrag.text.reading`);
- ``first_1500``: the first 1,500 characters of what is handed over (the passages in rank order, as read, joined by
  blank lines) hold it;
- ``contains``: the default answer holds the reference (SQuAD-normalised);
- ``chars``: the characters handed over (what a setting costs).

Each arm against ``text``, paired, with 95% bootstrap intervals; questions whose answer is in a table's row (a line of
the text with ``|``) reported apart. Reading and indexing speed (pages/s read, chunks/s indexed) per arm, and OCR's
cost per page on pages rendered to images, where Tesseract is installed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.config import IngestConfig, ProgramConfig, default_config
from declrag.embed.embedder import Embedder
from declrag.ingest import ocr
from declrag.ingest.loaders import read_file
from declrag.metrics.stats import mean_of, paired_difference
from declrag.pipeline.program import RAGProgram
from declrag.runtime.folders import cache_dir
from declrag.stores._lancedb import LanceStore

from . import typeset
from .rows import SCORES, answer_row, flat, fresh_index

ARMS = ("text", "pdf", "pdf-pypdf")
READER = {"pdf": "pdfium", "pdf-pypdf": "pypdf"}
OCR_PAGES = 6  # pages rendered to images and read by OCR, for its cost per page


def corpus(folder: Path | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """The typeset corpus (made once, in declrag's cache unless ``folder``): its folder and its pages."""
    folder = folder or cache_dir() / "bench-pdf" / "nq-long"
    return folder, typeset.typeset(folder)


def _files(folder: Path, arm: str) -> Path:
    """A folder holding only one arm's files (links to the corpus's ``.txt`` or ``.pdf``)."""
    out = folder.parent / f"{folder.name}-{'txt' if arm == 'text' else 'pdf'}"
    out.mkdir(exist_ok=True)
    for f in folder.glob("*.txt" if arm == "text" else "*.pdf"):
        link = out / f.name
        if not link.exists():
            link.symlink_to(f)
    return out


def _index(folder: Path, arm: str, embedder: Embedder, progress: bool, pages: int) -> tuple[LanceStore, dict[str, Any]]:
    """A fresh store of one arm's files (``pages`` pages in all), and what indexing them cost."""
    store, report = fresh_index(folder.parent / f"store-{arm}", _files(folder, arm), embedder, progress, ocr=False,
                                pdf_reader=READER.get(arm, "pdfium"))
    total, read_s = sum(report.seconds.values()), report.seconds["load"]
    return store, {"documents": report.indexed, "pages": pages, "chunks": report.chunks, "read_s": round(read_s, 2),
                   "pages_per_s": round(pages / read_s, 1) if read_s else None, "index_s": round(total, 1),
                   "chunks_per_s": round(report.chunks / total, 1) if total else None,
                   "texts_embedded": report.embedded}


def _in_table(text: str, answer: str) -> bool:
    return any(answer in line for line in text.split("\n") if "|" in line) and not any(
        answer in line for line in text.split("\n") if "|" not in line)


def _ocr_cost(pages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Seconds a page for OCR on the first `OCR_PAGES` pages of the first PDF (rendered as a scan is), and the
    share of those pages' words it read back."""
    if not ocr.available():
        return None
    import pypdfium2 as pdfium

    pdf = Path(pages[0]["pdf"])
    data = pdf.read_bytes()
    n = min(OCR_PAGES, len(pdfium.PdfDocument(data)))
    t0 = time.perf_counter()
    read = ocr.read_pages(data, list(range(1, n + 1)))
    seconds = time.perf_counter() - t0
    layer = read_file(pdf, ocr=False).documents[0].text.split("\f")[:n]  # its pages
    words = [set(flat(page).split()) for page in layer]
    got = [set(flat(t if isinstance(t := read.get(k, ""), str) else "").split()) for k in range(1, n + 1)]
    return {"pages": n, "s_per_page": round(seconds / n, 2), "dpi": ocr.DPI,
            "words_read": round(sum(len(w & g) for w, g in zip(words, got)) / max(1, sum(map(len, words))), 3)}


def run(folder: Path | None = None, arms: list[str] | None = None, progress: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    folder, pages = corpus(folder)
    order = [a for a in ARMS if a in (arms or ARMS)]
    if "text" not in order:
        order.insert(0, "text")
    embedder = Embedder(IngestConfig().embedder)
    questions = [(q["question"], q["answer"], _in_table(Path(p["txt"]).read_text("utf-8"), q["answer"]))
                 for p in pages for q in p["questions"]]
    out: dict[str, Any] = {"corpus": str(folder), "pages": len(pages),
                           "pdf_pages": sum(p.get("pages", 0) for p in pages), "questions": len(questions),
                           "table_questions": sum(t for *_, t in questions), "arms": {}, "indexing": {}}
    rows: dict[str, list[dict[str, Any]]] = {}
    for arm in order:
        store, cost = _index(folder, arm, embedder, progress, out["pages"] if arm == "text" else out["pdf_pages"])
        out["indexing"][arm] = cost
        prog = RAGProgram(default_config(ProgramConfig()), store=store, embedder=embedder)
        rows[arm] = [{**answer_row(prog, q, a), "table": t} for q, a, t in questions]
    for part, keep in (("all", lambda r: True), ("table", lambda r: r["table"]), ("prose", lambda r: not r["table"])):
        out["arms"][part] = {}
        for arm in order:
            mine = [r for r in rows[arm] if keep(r)]
            lead = [r for r in rows["text"] if keep(r)]
            out["arms"][part][arm] = {
                "n": len(mine), **{s: mean_of([r[s] for r in mine]) for s in (*SCORES, "chars")},
                "vs_text": {s: paired_difference([r[s] for r in lead], [r[s] for r in mine]) for s in SCORES}}
    out["ocr"] = _ocr_cost(pages)
    out["rows"] = rows
    out["target"] = {"max_loss": 0.02}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _cell(a: dict[str, Any], s: str, lead: bool) -> str:
    v = f"{a[s]:.3f}" if a[s] is not None else "-"
    d = a["vs_text"][s]
    return v if lead or d["diff"] is None else f"{v}\n{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def print_report(r: dict[str, Any], console: Console) -> None:
    for part, arms in r["arms"].items():
        n = next(iter(arms.values()))["n"]
        t = Table(title=f"{part} questions ({n}) over {r['pages']} nq-long pages typeset as {r['pdf_pages']} PDF "
                        "pages; each arm against text, paired, 95% interval")
        for col in ("arm", *SCORES, "chars handed over"):
            t.add_column(col)
        for arm, a in arms.items():
            t.add_row(arm, *(_cell(a, s, arm == "text") for s in SCORES), f"{a['chars']:.0f}")
        console.print(t)
    t = Table(title="reading and indexing (the same files; embeddings cached across runs: see texts embedded)")
    for col in ("arm", "pages", "read pages/s", "chunks", "indexed chunks/s", "texts embedded"):
        t.add_column(col)
    for arm, c in r["indexing"].items():
        t.add_row(arm, str(c["pages"]), str(c["pages_per_s"]), str(c["chunks"]), str(c["chunks_per_s"]),
                  str(c["texts_embedded"]))
    console.print(t)
    if r["ocr"]:
        o = r["ocr"]
        console.print(f"OCR (Tesseract, {o['dpi']} dpi): {o['s_per_page']} s a page over {o['pages']} pages; "
                      f"{o['words_read']:.1%} of the text layer's words read back")
    else:
        console.print("OCR: Tesseract is not installed here (bash scripts/setup.sh --ocr): its cost not measured")
    console.print(f"target: each PDF arm within {r['target']['max_loss']} of text; {r['wall_s']} s in all")
