"""The office files a corpus is written in: the nq-long pages (Natural Questions' real search queries over 20 whole
Wikipedia pages) as plain text and as the files of real writers, asked the same questions by the default program.

Each page's blocks (`declrag_bench.blocks`: headings, paragraphs, list items, tables) are written
- as the text the PDF benchmark reads (``text``: `blocks.as_text`);
- as one HTML page, which LibreOffice's Writer (Debian's package) opens and saves as Word (``docx``), OpenDocument
  text (``odt``) and EPUB (``epub``);
- as a deck by python-pptx (``pptx``): a slide per section, its paragraphs and items in text boxes of at most
  `SLIDE_CHARS` characters, a table on slides of its own (`SLIDE_ROWS` rows a slide, the header row on each), which
  LibreOffice's Impress saves as OpenDocument (``odp``);
- with its tables moved into a workbook by openpyxl, a sheet a table (``xlsx``; LibreOffice's Calc saves it as
  ``ods``), the rest of the page beside it as text: the same text in all, its tables where a team keeps them.

A deck and a workbook lay the page out otherwise than its text: slides of at most `SLIDE_CHARS` characters, the
tables apart from the prose. Each has a twin, the same layout written as plain text (``slides``: the deck's slides;
``split``: the prose and the tables in two text files, a table under ``Table k`` as a sheet is), so that the loss
against text parts into what the layout costs (twin against text) and what the reader loses (kind against twin).

Scores per question as `declrag bench pdf`'s (`declrag_bench.rows.answer_row`): hit@1, hit@5, the answer within the
first 1,500 characters handed over, the default answer's reference rate, the characters handed over; each arm against
``text``, paired, with 95% bootstrap intervals, table questions apart. Reading speed (files and documents a second)
and indexing speed per arm. The target (issue: office files): each kind loses at most .02 on hit@5 and the answer.
"""

from __future__ import annotations

import html
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from declrag.config import IngestConfig, ProgramConfig, default_config
from declrag.embed.embedder import Embedder
from declrag.metrics.stats import mean_of, paired_difference
from declrag.pipeline.program import RAGProgram
from declrag.runtime.folders import cache_dir

from .blocks import Block, Heading, Item, Paragraph, Table, as_text, page_blocks, page_title
from .pdf import _in_table
from .rows import SCORES, answer_row, fresh_index
from .typeset import read_pages

ARMS = ("text", "docx", "odt", "epub", "slides", "pptx", "odp", "split", "xlsx", "ods")
#: each kind whose files lay the page out otherwise than the text does, and the arm of the same layout as plain text:
#: the deck's slides (``slides``), the page split into its prose and its tables (``split``); a kind against its twin
#: is what its reader loses, the twin against text what the layout costs
TWINS = {"pptx": "slides", "odp": "slides", "xlsx": "split", "ods": "split"}
SLIDE_CHARS, SLIDE_ROWS = 900, 12
_WRITER = {"docx": "docx:MS Word 2007 XML", "odt": "odt", "epub": "epub"}


def as_html(blocks: list[Block], title: str) -> str:
    """One HTML page: headings, paragraphs, nested lists, tables (header rows as ``<th>``, spans kept)."""
    out = [f'<html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head><body>']
    depth = 0
    for b in blocks:
        want = b.depth if isinstance(b, Item) else 0
        while depth < want:
            out.append("<ul>")
            depth += 1
        while depth > want:
            out.append("</ul>")
            depth -= 1
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{html.escape(b.text)}</p>")
        elif isinstance(b, Item):
            out.append(f"<li>{html.escape(b.text)}</li>")
        else:
            out.append("<table>" + "".join(
                "<tr>" + "".join(f'<{t} colspan="{c.span}">{html.escape(c.text)}</{t}>'
                                 for c in r.cells for t in ["th" if r.header else "td"]) + "</tr>"
                for r in b.rows) + "</table>")
    out.append("</ul>" * depth + "</body></html>")
    return "\n".join(out)


def deck_slides(blocks: list[Block], title: str) -> list[tuple[str, list[str] | list[list[str]]]]:
    """The slides of the page's deck, each ``(its title, its lines)`` or ``(its title, a table's rows)``: a slide per
    section (a heading of level 1 or 2), text of at most `SLIDE_CHARS` characters a slide, each table on slides of its
    own, `SLIDE_ROWS` rows a slide under its header rows."""
    slides: list[tuple[str, Any]] = []
    section, size = title, 0
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Heading) and b.level <= 2 or isinstance(b, Table) or size > SLIDE_CHARS:
            if lines:
                slides.append((section, lines))
            lines, size = [], 0
        if isinstance(b, Heading) and b.level <= 2:
            section = b.text
        elif isinstance(b, Table):
            head = [r for r in b.rows if r.header][:1]
            body = [r for r in b.rows if r not in head]
            for at in range(0, max(len(body), 1), SLIDE_ROWS):
                slides.append((section, [[c.text for c in r.cells] for r in head + body[at:at + SLIDE_ROWS]]))
        else:
            line = b.text if not isinstance(b, Item) else f"• {b.text}"
            lines.append(line)
            size += len(line)
    if lines:
        slides.append((section, lines))
    return slides


def as_deck(blocks: list[Block], title: str, path: Path) -> None:
    """The deck (`deck_slides`) written by python-pptx: a title and a text box, or a title and a table, a slide."""
    import pptx
    from pptx.util import Inches, Pt

    prs = pptx.Presentation()
    prs.core_properties.title = title
    layout = prs.slide_layouts[5]  # title only
    for name, body in deck_slides(blocks, title):
        s = prs.slides.add_slide(layout)
        s.shapes.title.text = name
        if body and isinstance(body[0], list):
            rows = cast(list[list[str]], body)
            shape = s.shapes.add_table(len(rows), max(len(r) for r in rows), Inches(0.5), Inches(1.5), Inches(9),
                                       Inches(0.3 * len(rows)))
            for i, r in enumerate(rows):
                for j, text in enumerate(r):
                    shape.table.cell(i, j).text = text
        else:
            box = s.shapes.add_textbox(Inches(0.5), Inches(1.5), Inches(9), Inches(5)).text_frame
            box.word_wrap = True
            box.text = "\n".join(cast(list[str], body))
            for para in box.paragraphs:
                para.font.size = Pt(12)
    prs.save(str(path))


def deck_as_text(blocks: list[Block], title: str) -> str:
    """The deck's twin: its slides as plain text (each slide's title a line, then its lines or its table's rows, cells
    joined by `` | ``), so that a deck is compared with the same text laid out the same way."""
    return "\n\n".join(name + "\n\n" + "\n".join(" | ".join(r) if isinstance(r, list) else r for r in body)
                       for name, body in deck_slides(blocks, title))


def as_workbook(blocks: list[Block], title: str, path: Path) -> str:
    """The page's tables as a workbook, a sheet each (a cell per column it spans, the first holding the text); the
    rest of the page returned as its text."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.properties.title = title
    wb.remove(wb.active)
    for k, table in enumerate((b for b in blocks if isinstance(b, Table)), 1):
        ws = wb.create_sheet(f"Table {k}")
        for r in table.rows:
            ws.append([v for c in r.cells for v in [c.text, *[None] * (c.span - 1)]])
    if wb.worksheets:
        wb.save(path)
    return _prose(blocks)


def _prose(blocks: list[Block]) -> str:
    """The page's text without its tables."""
    return as_text([b for b in blocks if not isinstance(b, Table)])


def _soffice(files: list[Path], to: str, out: Path, infilter: str | None = None) -> None:
    """LibreOffice converts ``files`` into ``out`` (one process for all)."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = ["soffice", "--headless", f"-env:UserInstallation=file://{profile}/p", "--convert-to", to,
               *([f"--infilter={infilter}"] if infilter else []), "--outdir", str(out), *map(str, files)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=1800)


def corpus(folder: Path | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """The corpus (made once, in declrag's cache unless ``folder``): a folder per arm, and the pages' questions."""
    folder = folder or cache_dir() / "bench-office" / "nq-long"
    pages, seen = [], set()
    for page in read_pages():
        if page["input"] in seen:
            continue
        seen.add(page["input"])
        blocks = page_blocks(page["input"])
        title, text, n = page_title(blocks), as_text(blocks), page["id"]
        qa = zip(page["instructions"], page["outputs"], strict=True)
        pages.append({"id": n, "title": title, "blocks": blocks,
                      "questions": [(q, a, _in_table(text, a)) for q, a in qa if a in text]})
    done = folder / "done"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        for arm in ARMS:
            if arm not in TWINS.values():
                (folder / arm).mkdir(parents=True)
        for p in pages:
            (folder / "text" / f"{p['id']}.txt").write_text(as_text(p["blocks"]), encoding="utf-8")
            (folder / "html").mkdir(exist_ok=True)
            (folder / "html" / f"{p['id']}.html").write_text(as_html(p["blocks"], p["title"]), encoding="utf-8")
            as_deck(p["blocks"], p["title"], folder / "pptx" / f"{p['id']}.pptx")
            rest = as_workbook(p["blocks"], p["title"], folder / "xlsx" / f"{p['id']}.xlsx")
            for arm in ("xlsx", "ods"):
                (folder / arm / f"{p['id']}-prose.txt").write_text(rest, encoding="utf-8")
        pages_html = sorted((folder / "html").glob("*.html"))
        for arm, to in _WRITER.items():
            _soffice(pages_html, to, folder / arm, "HTML (StarWriter)")
        _soffice(sorted((folder / "pptx").glob("*.pptx")), "odp", folder / "odp")
        _soffice(sorted((folder / "xlsx").glob("*.xlsx")), "ods", folder / "ods")
        books = len(list(folder.glob("xlsx/*.xlsx")))
        for arm, want in (*((a, len(pages)) for a in (*_WRITER, "odp")), ("ods", books)):
            if (got := len(list((folder / arm).glob(f"*.{arm}")))) != want:
                raise RuntimeError(f"LibreOffice wrote {got} of the {want} .{arm} files into {folder / arm}")
        done.write_text("made\n")
    for twin in TWINS.values():  # plain text: made again each run, cheaply
        shutil.rmtree(folder / twin, ignore_errors=True)
        (folder / twin).mkdir()
    for p in pages:
        (folder / "slides" / f"{p['id']}.txt").write_text(deck_as_text(p["blocks"], p["title"]), encoding="utf-8")
        tables = [b for b in p["blocks"] if isinstance(b, Table)]
        (folder / "split" / f"{p['id']}-prose.txt").write_text(_prose(p["blocks"]), encoding="utf-8")
        if tables:
            (folder / "split" / f"{p['id']}-tables.txt").write_text("\n\n".join(
                f"Table {k}\n\n" + as_text([t]) for k, t in enumerate(tables, 1)), encoding="utf-8")
    return folder, pages


def run(folder: Path | None = None, arms: list[str] | None = None, progress: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    folder, pages = corpus(folder)
    chosen = set(arms or ARMS)
    order = [a for a in ARMS if a in chosen or a == "text" or any(TWINS.get(c) == a for c in chosen)]
    embedder = Embedder(IngestConfig().embedder)
    questions = [q for p in pages for q in p["questions"]]
    out: dict[str, Any] = {"corpus": str(folder), "pages": len(pages), "questions": len(questions),
                           "table_questions": sum(t for *_, t in questions), "arms": {}, "indexing": {}}
    rows: dict[str, list[dict[str, Any]]] = {}
    for arm in order:
        files = sorted(f for f in (folder / arm).iterdir() if f.is_file())
        store, report = fresh_index(folder / f"store-{arm}", folder / arm, embedder, progress, ocr=False)
        total, read_s = sum(report.seconds.values()), report.seconds["load"]
        out["indexing"][arm] = {"files": len(files), "bytes": sum(f.stat().st_size for f in files),
                                "documents": report.indexed, "chunks": report.chunks, "read_s": round(read_s, 2),
                                "files_per_s": round(len(files) / read_s, 1) if read_s else None,
                                "index_s": round(total, 1), "chunks_per_s": round(report.chunks / total, 1),
                                "skipped": [f"{s.where}: {s.reason}" for s in report.skipped]}
        prog = RAGProgram(default_config(ProgramConfig()), store=store, embedder=embedder)
        rows[arm] = [{**answer_row(prog, q, a), "table": t} for q, a, t in questions]
    for part, keep in (("all", lambda r: True), ("table", lambda r: r["table"]), ("prose", lambda r: not r["table"])):
        out["arms"][part] = {}
        lead = [r for r in rows["text"] if keep(r)]
        for arm in order:
            mine = [r for r in rows[arm] if keep(r)]
            out["arms"][part][arm] = {
                "n": len(mine), **{s: mean_of([r[s] for r in mine]) for s in (*SCORES, "chars")},
                "vs_text": {s: paired_difference([r[s] for r in lead], [r[s] for r in mine]) for s in SCORES}}
            if twin := TWINS.get(arm):
                theirs = [r for r in rows[twin] if keep(r)]
                out["arms"][part][arm]["vs_twin"] = {
                    s: paired_difference([r[s] for r in theirs], [r[s] for r in mine]) for s in SCORES}
    out["rows"] = rows
    out["twins"] = {a: t for a, t in TWINS.items() if a in order}
    out["target"] = {"max_loss": 0.02, "scores": ["hit@5", "contains"]}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out
