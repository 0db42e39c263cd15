"""Running headers and footers: the lines that repeat at the top or bottom of a document's pages (a title, a
library notice, a page number). They name the document, so they stay in its text (citations stay exact, and
`declrag.pipeline.stages.generate` and the index over whole documents read them), but they are left out of what each
chunk embeds and indexes for keywords: a notice repeated on every page would otherwise make every chunk look alike.

Pages are a text's form feeds: what ``pdftotext`` writes between pages, and how `declrag.ingest._pdf` joins a PDF's
pages into one document (`page_starts` says where each begins; a chunk's page is the one it starts on). A line is
running when it is one of the `EDGE_LINES` first or last non-blank lines of at least `SHARE` of the pages, and of at
least `AT_LEAST` pages; lines are compared with their digits as one mark, so "Page 3 of 40" and "Page 4 of 40" are one
line. Only those lines at a page's edge are left out, not the same words in its
body. A text without pages has none: a running line cannot be told from a repeated sentence there.

The spans are written on the document's `Document.metadata` (``running``: ``[[start, end], ...]``), then on each chunk
(`declrag.types.Chunk.running`, relative to its text), which `declrag.types.searched_text` leaves out.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

EDGE_LINES = 3  # non-blank lines at each page's top and bottom that may be running
SHARE = 0.5  # a line on at least this share of the pages ...
AT_LEAST = 3  # ... and on at least this many
_LINE = re.compile(r"[^\n]*\S[^\n]*")
_DIGITS = re.compile(r"\d+")

Span = tuple[int, int]


def _key(line: str) -> str:
    return " ".join(_DIGITS.sub("#", line).lower().split())


def _edges(page: str) -> list[tuple[str, Span]]:
    """The first and last `EDGE_LINES` non-blank lines of ``page``, each with its key and span."""
    lines = list(_LINE.finditer(page))
    picked = lines if len(lines) <= 2 * EDGE_LINES else lines[:EDGE_LINES] + lines[-EDGE_LINES:]
    return [(_key(m.group()), (m.start(), m.end())) for m in picked]


def running_spans(pages: Sequence[str]) -> list[list[Span]]:
    """For each of ``pages``, the spans of its running lines (none when there are fewer than `AT_LEAST` pages)."""
    if len(pages) < AT_LEAST:
        return [[] for _ in pages]
    edges = [_edges(p) for p in pages]
    counts = Counter(k for e in edges for k in {k for k, _ in e})
    need = max(AT_LEAST, math.ceil(SHARE * len(pages)))
    running = {k for k, c in counts.items() if c >= need}
    return [[span for k, span in e if k in running] for e in edges]


def paged_spans(text: str) -> list[Span]:
    """The running lines of a text whose pages are separated by form feeds, as spans of the whole text; its blank
    pages (a PDF's unread or empty ones) neither count nor have any."""
    if "\f" not in text:
        return []
    pages, starts, at = text.split("\f"), [], 0
    for page in pages:
        starts.append(at)
        at += len(page) + 1
    full = [i for i, page in enumerate(pages) if page.strip()]
    return [(starts[i] + a, starts[i] + b) for i, spans in zip(full, running_spans([pages[i] for i in full]))
            for a, b in spans]


def page_starts(text: str) -> list[int]:
    """Where each page of a text paged by form feeds begins: ``[0, after the first form feed, ...]``; [] for a text
    without one. Page ``n`` (1-based) of an offset ``x`` is ``bisect.bisect_right(starts, x)``."""
    if "\f" not in text:
        return []
    return [0, *(m.end() for m in re.finditer("\f", text))]


def spans_of(metadata: dict) -> list[Span]:
    """The running lines' spans that a loader wrote on a document's metadata (``running``); [] when there are none,
    or when the key holds something else (a JSONL document's own field of that name)."""
    got = metadata.get("running")
    if not isinstance(got, list):
        return []
    ok = all(isinstance(s, (list, tuple)) and len(s) == 2 and all(type(x) is int for x in s) for s in got)
    return [(a, b) for a, b in got] if ok else []


def within(spans: Sequence[Sequence[int]], start: int, end: int) -> str:
    """The parts of ``spans`` (of a document) inside its chunk ``[start, end)``, relative to the chunk, as
    `declrag.types.Chunk.running` writes them: ``"a:b,c:d"``; '' for none."""
    return ",".join(f"{max(a, start) - start}:{min(b, end) - start}" for a, b in spans if a < end and b > start)
