"""What a PDF's layout tells that its text layer does not: where paragraphs end (`paragraphs`), and which lines are
headings, by their type size (`headings`), the largest on its first page being its title (`title_of`).

A PDF's text layer gives lines, not paragraphs nor headings; chunks and sentences end at paragraphs
(`declrag.text.sentences.PARAGRAPH`) and a chunk's header names its title and section (`declrag.ingest.headers`), so
both are read back from the layout: a paragraph ends at a line that ends a sentence and stops short of the page's
usual line width; a heading is a short line set in a larger type than the body's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ..text.sentences import FULL
from .headers import Heading, clip

#: A line set in at least this many times the body's type size is a heading.
HEADING_SIZE = 1.15
HEADING_WORDS = 15  # a longer line is a paragraph set large, not a heading
HEADING_LEVELS = 4  # type sizes told apart as heading levels, largest first (smaller ones share the last level)
PROSE_CHARS = 40  # a line this long is prose: the body's size is the one most of such lines' characters are set in

#: A page's lines as PDFium sets them: each line's text (stripped) and its type size, in points (to the half point).
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
    """The type size that sets the most characters of these pages' prose: lines of `PROSE_CHARS` characters or more
    (a table's narrow cells in a smaller type do not outweigh it), all lines where none is that long; 0 when none is
    known."""
    sizes: Counter[float] = Counter()
    for prose in (True, False):
        for lines in pages:
            for line, size in lines:
                if not prose or len(line) >= PROSE_CHARS:
                    sizes[size] += len(line)
        if sizes:
            break
    return sizes.most_common(1)[0][0] if sizes else 0.0


def headings(text: str, starts: Sequence[int], pages: Sequence[Sized],
             running: Sequence[tuple[int, int]] = ()) -> list[Heading]:
    """The headings of a paged ``text`` (pages beginning at ``starts``; ``pages[i]``: page i+1's lines and their type
    sizes), in text order: each line (or run of lines in one size on one page: a heading wrapped) at least
    `HEADING_SIZE` times the body's size, of at most `HEADING_WORDS` words with a letter, found where it stands as a
    line of its page; levels by size, largest first. A running header or footer (``running``: their spans,
    `declrag.ingest._running`) is no heading."""
    body = body_size(pages)
    if not body:
        return []
    repeated = {a for a, _ in running}
    found: list[tuple[int, int, float, str]] = []  # (offset, end, size, text)
    for n, lines in enumerate(pages):
        at, end = starts[n], starts[n + 1] if n + 1 < len(starts) else len(text)
        for line, size in lines:
            where = _line_at(text, line, at, end)
            if where < 0:
                continue
            at = where + len(line)
            if size < body * HEADING_SIZE or not any(ch.isalpha() for ch in line) or where in repeated:
                continue
            gap = text[found[-1][1]:where] if found else "\f"
            if found and found[-1][2] == size and not gap.strip() and "\f" not in gap:  # the same heading, wrapped
                found[-1] = (found[-1][0], at, size, f"{found[-1][3]} {line}")
            else:
                found.append((where, at, size, line))
    found = [h for h in found if len(h[3].split()) <= HEADING_WORDS]
    ranks = {s: min(i + 1, HEADING_LEVELS) for i, s in enumerate(sorted({s for *_, s, _ in found}, reverse=True))}
    return [(o, ranks[s], clip(" ".join(t.split()))) for o, _, s, t in found]


def _line_at(text: str, line: str, at: int, end: int) -> int:
    """Where ``line`` stands as a whole line of ``text[at:end]`` (only spaces beside it, and a footnote's mark after
    it), at or after ``at``; -1 when it does not (a body line's words are never taken for a heading)."""
    where = text.find(line, at, end) if line else -1
    while where >= 0:
        after = where + len(line)
        start = max(text.rfind("\n", at, where) + 1, at)
        if not text[start:where].strip() and _MARK.fullmatch(text[after:_line_end(text, after, end)].strip()):
            return where
        where = text.find(line, where + 1, end)
    return -1


_MARK = re.compile(r"[\d*†‡§]{0,3}")  # a footnote's mark after a heading (`declrag.ingest._pdf` leaves it out of it)


def _line_end(text: str, at: int, end: int) -> int:
    nl = text.find("\n", at, end)
    return end if nl < 0 else nl


TITLE_WITHIN = 3  # non-blank lines (a running header, a date, a logo's text) a title may follow on its page


def title_of(heads: Sequence[Heading], text: str, page: tuple[int, int]) -> str:
    """The title a PDF's layout gives: the one heading in its largest type, when it stands at the top of the first
    page with text (``page``: where that page starts and ends), after at most `TITLE_WITHIN` lines; else '' (a size
    shared by chapters or sections, or a heading further down, names no title)."""
    top = [(o, t) for o, level, t in heads if level == 1]
    if len(top) != 1 or not page[0] <= top[0][0] < page[1]:
        return ""
    above = [x for x in text[page[0]:top[0][0]].split("\n") if x.strip()]
    return top[0][1] if len(above) <= TITLE_WITHIN else ""
