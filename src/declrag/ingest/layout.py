"""What a PDF's layout tells that its text layer does not: where paragraphs end (`paragraphs`), and which lines are
headings, by their type size (`headings`), the largest on its first page being its title (`title_of`).

A PDF's text layer gives lines, not paragraphs nor headings; chunks and sentences end at paragraphs
(`declrag.text.sentences.PARAGRAPH`) and a chunk's header names its title and section (`declrag.ingest.headers`), so
both are read back from the layout: a paragraph ends at a line that ends a sentence and stops short of the page's
usual line width; a heading is a short line set in a larger type than the body's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..text.sentences import FULL
from .headers import Heading, clip

#: A line set in at least this many times the body's type size is a heading.
HEADING_SIZE = 1.15
HEADING_WORDS = 15  # a longer line is a paragraph set large, not a heading
HEADING_LEVELS = 4  # type sizes told apart as heading levels, largest first (smaller ones share the last level)

#: A page's lines as PDFium sets them: each line's text (stripped) and its type size, in points.
Sized = Sequence[tuple[str, float]]


def paragraphs(page: str) -> str:
    """``page``'s text with a blank line after each line that ends a paragraph: it ends a sentence (``.!?``) and
    stops short of the page's usual line width (less than `FULL` of its lines' 80th percentile of length, among 5
    lines or more)."""
    lines = page.split("\n")
    lengths = sorted(len(x.strip()) for x in lines if x.strip())
    if len(lengths) < 5:
        return page
    width = lengths[int(0.8 * (len(lengths) - 1))] * FULL
    for i, line in enumerate(lines[:-1]):
        body = line.strip()
        if body and body[-1] in ".!?" and len(body) < width and lines[i + 1].strip():
            lines[i] = line + "\n"
    return "\n".join(lines)


def body_size(pages: Sequence[Sized]) -> float:
    """The type size that sets the most characters of these pages (0 when none is known)."""
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line, size in lines:
            sizes[round(size, 1)] += len(line)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def headings(text: str, starts: Sequence[int], pages: Sequence[Sized]) -> list[Heading]:
    """The headings of a paged ``text`` (pages beginning at ``starts``; ``pages[i]``: page i+1's lines and their type
    sizes), in text order: each line (or run of lines in one size: a heading wrapped) at least `HEADING_SIZE` times
    the body's size, of at most `HEADING_WORDS` words with a letter, found at its place in its page; levels by size,
    largest first."""
    body = body_size(pages)
    if not body:
        return []
    found: list[tuple[int, int, float, str]] = []  # (offset, end, size, text)
    for n, lines in enumerate(pages):
        at, end = starts[n], starts[n + 1] if n + 1 < len(starts) else len(text)
        for line, size in lines:
            where = text.find(line, at, end) if line else -1
            if where < 0:
                continue
            at = where + len(line)
            if size < body * HEADING_SIZE or not any(ch.isalpha() for ch in line):
                continue
            if found and found[-1][2] == size and not text[found[-1][1]:where].strip():  # the same heading, wrapped
                found[-1] = (found[-1][0], at, size, f"{found[-1][3]} {line}")
            else:
                found.append((where, at, size, line))
    found = [h for h in found if len(h[3].split()) <= HEADING_WORDS]
    ranks = {s: min(i + 1, HEADING_LEVELS) for i, s in enumerate(sorted({s for *_, s, _ in found}, reverse=True))}
    return [(o, ranks[s], clip(" ".join(t.split()))) for o, _, s, t in found]


def title_of(heads: Sequence[Heading], first_page_end: int) -> str:
    """The title a PDF's layout gives: its first page's first heading of the first level (the largest type), when no
    later page has one (a chapter's); else ''."""
    top = [(o, t) for o, level, t in heads if level == 1]
    return top[0][1] if top and all(o < first_page_end for o, _ in top) else ""
