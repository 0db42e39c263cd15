"""What PDF text extractors lose on typeset two-column PDFs whose text is known.

`compare_readers` extracts the PDFs of the corpus that `declrag_bench.typeset` makes (nq-long's Wikipedia pages
typeset by pdfLaTeX as two-column papers, each beside the text that went into it) page by page with pypdf, pypdfium2,
pdfminer.six and pdfplumber and measures speed, how many answers are still found verbatim (as extracted, and after
joining line-end hyphenation), whether long paragraphs come out in reading order, and how often the running header
shows up.

``python -m declrag_bench.readers OUT_DIR`` typesets into OUT_DIR (cached) and prints the comparison, also written
to ``OUT_DIR/readers.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from declrag.text.reading import reading

from .typeset import pdf_pages, typeset


def _pypdf(pdf: Path) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(pdf).pages]


def _pypdfium2(pdf: Path) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        out = []
        for i in range(len(doc)):
            page = doc[i]
            tp = page.get_textpage()
            out.append(tp.get_text_range())
            tp.close()
            page.close()
        return out
    finally:
        doc.close()


def _pdfminer(pdf: Path) -> list[str]:
    from pdfminer.high_level import extract_text

    return [extract_text(pdf, page_numbers=[i]) for i in range(pdf_pages(pdf))]


def _pdfplumber(pdf: Path) -> list[str]:
    import pdfplumber

    with pdfplumber.open(pdf) as doc:
        out = []
        for page in doc.pages:
            out.append(page.extract_text() or "")
            page.close()
        return out


READERS: dict[str, Callable[[Path], list[str]]] = {
    "pypdf": _pypdf, "pypdfium2": _pypdfium2, "pdfminer.six": _pdfminer, "pdfplumber": _pdfplumber}
_HYPHEN = re.compile(r"(\w)-\s*\n\s*(\w)")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def dehyphenate(text: str) -> str:
    """Join words hyphenated at a line end (``exam-\\nple`` -> ``example``)."""
    return _HYPHEN.sub(r"\1\2", text)


def normalise(text: str) -> str:
    """The text as declrag reads it (`declrag.text.reading`), after what its PDF loader does to every reader's text:
    line ends as ``\n``, and PDFium's U+FFFE (set in place of a line-end hyphen, with no line break after it) as a
    hyphen and a line break."""
    return reading(text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "-\n"))


def paragraphs(text: str, min_words: int = 12) -> list[str]:
    """The ``.txt``'s blank-line-separated blocks of at least ``min_words`` words that are not table rows."""
    return [p for p in (b.strip() for b in text.split("\n\n"))
            if len(p.split()) >= min_words and "\n" not in p and " | " not in p]


def in_order(hay: str, paragraph: str, slack: float = 1.6) -> tuple[bool, bool]:
    """(both the first and last 6-word shingles of ``paragraph`` occur in ``hay``; they occur first before last,
    at most ``slack`` times the paragraph's length apart). Both texts whitespace-collapsed."""
    words = paragraph.split()
    first, last = " ".join(words[:6]), " ".join(words[-6:])
    found = first in hay and last in hay
    i = hay.find(first)
    while found and i >= 0:
        j = hay.find(last, i)
        if j < 0:
            break
        if j - i <= slack * len(paragraph):
            return True, True
        i = hay.find(first, i + 1)
    return found, False


def _headers(page: str, title: str, number: int) -> int:
    """How often ``page`` (collapsed) holds its running header: the title next to the page number."""
    head = re.escape(_collapse(title))
    return len(re.findall(rf"{head} ?{number}(?!\d)|(?<!\d){number} ?{head}", _collapse(page)))


def _measure(extracted: Sequence[str], text: str, answers: Sequence[str], title: str) -> Counter[str]:
    """One PDF's counts (see ``compare_readers``)."""
    c: Counter[str] = Counter()
    whole = "\n".join(extracted)
    versions = {"raw": _collapse(whole), "dehyphenated": _collapse(dehyphenate(whole)),
                "normalised": _collapse(normalise(whole))}
    c["answers"] += len(answers)
    for kind, hay in versions.items():
        c[f"answers_{kind}"] += sum(_collapse(a) in hay for a in answers)
    for p in map(_collapse, paragraphs(text)):
        c["paragraphs"] += 1
        for kind in ("dehyphenated", "normalised"):
            found, ordered = in_order(versions[kind], p)
            c[f"paragraphs_found_{kind}"] += found
            c[f"paragraphs_in_order_{kind}"] += ordered
    counts = [_headers(page, title, k) for k, page in enumerate(extracted, 1)]
    c["headers"] += sum(counts)
    c["pages_with_header"] += sum(n > 0 for n in counts)
    c["pages"] += len(extracted)
    return c


def compare_readers(pdfs: Sequence[Path], texts: Sequence[str], answers: Sequence[Sequence[str]],
                    titles: Sequence[str] | None = None,
                    readers: Sequence[str] = tuple(READERS)) -> dict[str, dict[str, Any]]:
    """Extract each PDF page by page with each reader and measure against the PDF's known text and answers.

    Per reader: seconds and pages/s; the share of answers found verbatim (whitespace collapsed) in the text as
    extracted (``raw``), after joining line-end hyphens (``dehyphenated``, ``-`` + newline only) and after
    ``normalise`` (any hyphen, pdfium's marker, NFKC); for the ``.txt``'s paragraphs of 12+ words, the share whose
    first and last 6-word shingles are found, and found in order at most 1.6x the paragraph's length apart
    (in the dehyphenated and the normalised text); the running header (the title, by default the text's first
    line, next to the page number) per page."""
    titles = list(titles) if titles is not None else [t.split("\n", 1)[0] for t in texts]
    out: dict[str, dict[str, Any]] = {}
    for name in readers:
        read = READERS[name]
        c: Counter[str] = Counter()
        seconds = 0.0
        errors: list[str] = []
        for pdf, text, ans, title in zip(pdfs, texts, answers, titles, strict=True):
            start = time.perf_counter()
            try:
                extracted = read(Path(pdf))
            except Exception as e:  # a reader that fails on a PDF counts as finding nothing there
                errors.append(f"{Path(pdf).name}: {type(e).__name__}: {e}")
                extracted = []
            seconds += time.perf_counter() - start
            c += _measure(extracted, text, ans, title)
        r: dict[str, Any] = {"pages": c["pages"], "seconds": round(seconds, 3),
                             "pages_per_s": round(c["pages"] / seconds, 2) if seconds else None,
                             "answers": c["answers"], "paragraphs": c["paragraphs"]}
        for kind in ("raw", "dehyphenated", "normalised"):
            r[f"answers_{kind}"] = _share(c[f"answers_{kind}"], c["answers"])
        for kind in ("dehyphenated", "normalised"):
            r[f"paragraphs_found_{kind}"] = _share(c[f"paragraphs_found_{kind}"], c["paragraphs"])
            r[f"paragraphs_in_order_{kind}"] = _share(c[f"paragraphs_in_order_{kind}"], c["paragraphs"])
        r["headers_per_page"] = round(c["headers"] / c["pages"], 3) if c["pages"] else None
        r["pages_with_header"] = _share(c["pages_with_header"], c["pages"])
        r["errors"] = errors
        out[name] = r
    return out


def _share(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def print_table(result: dict[str, dict[str, Any]]) -> None:
    """The comparison as a fixed-width table (answers and paragraphs as shares)."""
    cols = [("reader", "", 12), ("pages/s", "pages_per_s", 8), ("ans raw", "answers_raw", 8),
            ("ans dehyph", "answers_dehyphenated", 10), ("ans norm", "answers_normalised", 9),
            ("¶ found", "paragraphs_found_dehyphenated", 8), ("¶ order", "paragraphs_in_order_dehyphenated", 8),
            ("¶ order norm", "paragraphs_in_order_normalised", 12), ("header/page", "headers_per_page", 11)]
    print("  ".join(f"{h:>{w}}" if key else f"{h:<{w}}" for h, key, w in cols))
    for name, r in result.items():
        vals = [name] + [f"{r[key]:.3f}" if isinstance(r[key], float) and key != "pages_per_s" else f"{r[key]}"
                         for _, key, _ in cols[1:]]
        print("  ".join(f"{v:>{w}}" if key else f"{v:<{w}}" for v, (_, key, w) in zip(vals, cols, strict=True)))
    errors = [e for r in result.values() for e in r["errors"]]
    if errors:
        print(f"{len(errors)} reader errors, first: {errors[0]}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m declrag_bench.readers", description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--workers", type=int, default=2, help="pdfLaTeX runs at once")
    parser.add_argument("--readers", nargs="*", default=list(READERS), choices=list(READERS))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    pages = typeset(args.out_dir, workers=args.workers)
    typeset_s = time.perf_counter() - start
    qa = [[q["answer"] for q in p["questions"]] for p in pages]
    questions = sum(len(a) for a in qa)
    lost = [a for p in pages for a in p["answers_lost"]]
    print(f"{len(pages)} pages, {sum(p['pages'] for p in pages)} PDF pages, typeset in {typeset_s:.1f}s; "
          f"{questions} questions whose answer is in the text; "
          f"{len(lost)} answers lost to LaTeX's repertoire {lost}; "
          f"{sum(p['chars_mapped'] for p in pages)} characters mapped, {sum(p['chars_dropped'] for p in pages)} "
          f"dropped; overfull boxes: {sum(p['overfull_hbox'] for p in pages)} hbox, "
          f"{sum(p['overfull_vbox'] for p in pages)} vbox")
    texts = [Path(p["txt"]).read_text(encoding="utf-8") for p in pages]
    result = compare_readers([Path(p["pdf"]) for p in pages], texts, qa, [p["title"] for p in pages], args.readers)
    print_table(result)
    summary = {"typeset_seconds": round(typeset_s, 1), "pages": pages, "readers": result}
    (args.out_dir / "readers.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
