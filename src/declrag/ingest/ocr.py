"""Reading the PDF pages that have no text layer (scans, photographed pages) with Tesseract OCR.

A page is rendered with PDFium (`pypdfium2`) at `DPI` and read by Tesseract through `pytesseract`. Tesseract is a
program, not a Python package: Debian's ``tesseract-ocr`` (``bash scripts/setup.sh --ocr`` installs it), Homebrew's
``tesseract`` on macOS. `declrag.ingest.loaders.read_file` uses it by default where it is installed, and otherwise
names every such page in the run's summary.

Tesseract runs with one OpenMP thread (``OMP_THREAD_LIMIT=1`` unless the environment sets it): its threads cost far
more than they save on a few cores, 40 s against 4.7 s for one typeset page at 300 dpi on 2 cores. Cost: about 5 s a
dense page (`declrag bench pdf` reports it).
"""

from __future__ import annotations

import os
import shutil
from functools import cache

DPI = 300  # Tesseract reads best at 300 dpi (its documentation's advice); higher costs time for little
LANG_ENV = "DECLRAG_OCR_LANG"  # Tesseract's language codes, joined by '+': eng (the default), deu, chi_sim, ...
INSTALL = "install Tesseract to read it (Debian: apt-get install tesseract-ocr, or bash scripts/setup.sh --ocr)"


@cache
def available() -> bool:
    """Whether OCR can run here: the ``tesseract`` program on PATH, and the Python packages that drive it."""
    if shutil.which("tesseract") is None:
        return False
    try:
        import pypdfium2  # noqa: F401
        import pytesseract  # noqa: F401
    except ImportError:
        return False
    return True


def language() -> str:
    """The languages Tesseract reads in (``$DECLRAG_OCR_LANG``, else English)."""
    return os.environ.get(LANG_ENV, "").strip() or "eng"


def read_pages(data: bytes, pages: list[int], dpi: int = DPI) -> dict[int, str | RuntimeError]:
    """What OCR reads on each of ``pages`` (1-based) of the PDF ``data``: {page: its text, or a RuntimeError with a
    one-line reason where that page failed (a language Tesseract lacks, a page PDFium cannot render)}; one page's
    failure costs no other page."""
    import pypdfium2 as pdfium
    import pytesseract

    out: dict[int, str | RuntimeError] = {}
    pdf = pdfium.PdfDocument(data)
    threads = os.environ.get("OMP_THREAD_LIMIT")
    os.environ["OMP_THREAD_LIMIT"] = threads or "1"  # Tesseract's own threads: one (see the module docstring)
    try:
        for n in pages:
            try:
                image = pdf[n - 1].render(scale=dpi / 72).to_pil()
                out[n] = pytesseract.image_to_string(image, lang=language())
            except pytesseract.TesseractError as e:
                out[n] = RuntimeError(f"Tesseract: {(str(e.message).strip().splitlines() or ['no message'])[-1]}")
            except Exception as e:  # a page PDFium cannot render
                out[n] = RuntimeError(f"{type(e).__name__}: {e}")
    finally:
        pdf.close()
        if threads is None:
            os.environ.pop("OMP_THREAD_LIMIT", None)
    return out
