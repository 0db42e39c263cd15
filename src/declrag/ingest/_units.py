"""Units: the parts of a document that only make sense whole. A fenced code block (a command cut in two is no command)
and a table (a row cut in two pairs a value with the wrong setting; a row without its header row is numbers without
names).

The loaders find them (Markdown: `markdown_units`, by markdown-it-py's CommonMark parser with GitHub's tables; HTML:
its ``<pre>`` and ``<table>`` elements) and write them on the document's metadata (``units``: ``[[start, end, kind,
head], ...]``, character offsets into its text; ``head``: where a table's header row, and the line under it, end).
The chunkers (`declrag.ingest.chunkers`) keep a unit in one chunk when it fits; a longer one is cut between its lines
only (rows, for a table), and every piece of a table after its first carries the table's header row in front of what
it embeds and indexes for keywords (`declrag.types.Chunk.header`): "What were capital expenditures in 2022?" then finds
the row and its column's name. The text itself stays the exact span.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import Any

CODE, TABLE = "code", "table"
Unit = tuple[int, int, str, int]  # (start, end, kind, head: the end of a table's header lines; start for code)
_LAST = float("inf")  # (offset, _LAST) sorts after every unit that starts at that offset


def markdown_units(text: str) -> list[Unit]:
    """The fenced and indented code blocks and the tables of a Markdown text, in order, as character spans (a code
    fence left open runs to the end of the text, as CommonMark reads it)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def at(line: int) -> int:  # the offset where line ``line`` (0-based) starts; the text's end past the last one
        return min(starts[min(line, len(lines))], len(text))

    out: list[Unit] = []
    tokens = md.parse(text)
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.map is None:
            continue  # a block inside a list or a quote is in the unit of its container's text, not one of its own
        a, b = at(tok.map[0]), at(tok.map[1])
        b = a + len(text[a:b].rstrip())
        if tok.type in ("fence", "code_block") and b > a:
            out.append((a, b, CODE, a))
        elif tok.type == "table_open" and b > a:
            body = b  # the header row and the delimiter row (|---|) are the head: the body starts after them
            for t in itertools.islice(tokens, i + 1, None):
                if t.type == "table_close":
                    break
                if t.type == "tbody_open" and t.map:
                    body = at(t.map[0])
                    break
            out.append((a, b, TABLE, min(body, b)))
    return out


def of(metadata: dict[str, Any]) -> list[Unit]:
    """A document's units, as its loader wrote them (``metadata["units"]``), sorted; [] when it has none, or when the
    key holds something else (a JSONL record's own field of that name)."""
    got = metadata.get("units")
    if not isinstance(got, list):
        return []
    ok = all(isinstance(u, (list, tuple)) and len(u) == 4 and type(u[0]) is int and type(u[1]) is int
             and u[2] in (CODE, TABLE) and type(u[3]) is int and 0 <= u[0] < u[1] for u in got)
    return sorted((a, b, k, h) for a, b, k, h in got) if ok else []


def segments(a: int, b: int, units: Sequence[Unit]) -> list[tuple[int, int, Unit | None]]:
    """``[a, b)`` as consecutive segments: each unit inside it (clipped to it), and the text between them (None)."""
    out: list[tuple[int, int, Unit | None]] = []
    at = a
    for u in units:
        s, e = max(u[0], a), min(u[1], b)
        if e <= s or s < at:
            continue
        if s > at:
            out.append((at, s, None))
        out.append((s, e, u))
        at = e
    if at < b:
        out.append((at, b, None))
    return out


def around(units: Sequence[Unit], pos: int) -> Unit | None:
    """The unit ``pos`` lies strictly inside (after its start, before its end), or None. ``units`` sorted and not
    overlapping, as `of` gives them (a binary search: O(log n))."""
    i = bisect.bisect_right(units, (pos, _LAST)) - 1
    return units[i] if i >= 0 and units[i][0] < pos < units[i][1] else None



def table_head(text: str, units: Sequence[Unit], start: int) -> str:
    """The header lines of the table a chunk starting at ``start`` continues (it starts inside the table's body, past
    its header), else ''."""
    i = bisect.bisect_right(units, (start, _LAST)) - 1
    if i < 0:
        return ""
    s, e, kind, head = units[i]
    if kind != TABLE or not head > s or not head <= start < e:
        return ""
    return text[s:head].strip()
