"""The candidates of an extractive answer: the pieces of the passages that can be quoted (`candidates`): sentences, or
parts of one at most a given length (`spans`), and the lines of fenced code blocks with the line that introduces each
block; and how a piece is shown in an answer (`shown`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ....text.reading import shown as reading_shown
from ....text.sentences import sentence_spans
from ._postprocess import content_words

_CLAUSE = re.compile(r"(?<=[;:,)\]])\s+|\s+(?=\()|\s+[-–—]\s+")
CITE = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")  # a [n] citation, or a passage's own footnote mark


@dataclass(frozen=True)
class Piece:
    """A sentence, or a part of one, of passage ``n`` (1-based): ``text`` is ``passage[start:end]``."""

    n: int
    start: int
    end: int
    text: str
    score: float = 0.0
    code: bool = False  # a line of a fenced code block (a command, as its document writes it)
    lead: str = ""  # for a code block's line: the line before the block, which says what it is ("Run the reset ...")


def shown(text: str) -> str:
    """A passage's piece as the answer shows it: as a reader sees it (`declrag.text.reading.shown`: "calibra-" /
    "tion" is "calibration", "ﬁ" is "fi", "m²" stays), on one line, its own ``[n]`` footnote marks out."""
    return " ".join(CITE.sub(" ", reading_shown(text)).split())


def spans(text: str, limit: int, wrapped: bool = False, start: int = 0, end: int | None = None
          ) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` as (start, end) in ``text``, each at most ``limit`` characters: a longer
    one is cut at clause boundaries, and a clause still too long into word windows. ``wrapped``: a sentence wrapped
    onto the next line is one sentence (`sentence_spans`)."""
    out: list[tuple[int, int]] = []
    end = len(text) if end is None else end
    for a, b in sentence_spans(text, start, end, wrapped=wrapped) if text[start:end].strip() else []:
        if b - a <= limit:
            out.append((a, b))
            continue
        cuts = [a] + [a + m.end() for m in _CLAUSE.finditer(text[a:b])] + [b]
        parts = [(x, y) for x, y in zip(cuts, cuts[1:]) if text[x:y].strip()]
        merged: list[tuple[int, int]] = []
        for x, y in parts:  # join clauses back while they fit
            if merged and y - merged[-1][0] <= limit:
                merged[-1] = (merged[-1][0], y)
            else:
                merged.append((x, y))
        for x, y in merged:
            out.extend(_windows(text, x, y, limit) if y - x > limit else [(x, y)])
    return [(a, b) for a, b in ((_trim(text, a, b)) for a, b in out) if b > a]


def _windows(text: str, a: int, b: int, limit: int) -> list[tuple[int, int]]:
    words = [(a + m.start(), a + m.end()) for m in re.finditer(r"\S+", text[a:b])]
    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for x, y in words:
        if cur is None:
            cur = (x, min(y, x + limit))  # a single word longer than the limit is cut
        elif y - cur[0] <= limit:
            cur = (cur[0], y)
        else:
            out.append(cur)
            cur = (x, min(y, x + limit))
    return out + ([cur] if cur else [])


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and (text[b - 1].isspace() or text[b - 1] in ",;:-–—"):
        b -= 1
    return a, b


_HEADING = re.compile(r"#{1,6}\s")  # a Markdown heading line
# a Markdown code fence's body (a fence left open runs to the passage's end), and a fence line alone
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n`]*)$", re.M)  # a fence line: its mark, and its info string
_FENCE_LINE = re.compile(r" {0,3}(?:`{3,}|~{3,})[\w+-]*[ \t]*")


def candidates(passages: Sequence[str], limit: int, wrapped: bool = False,
               headings: Sequence[frozenset[str]] = ()) -> list[Piece]:
    """Every sentence (or part) of every passage but its headings, in passage order, repeated text once (a window
    repeats). A heading is a line that names, not says: a Markdown heading, or a line that is the passage's title or
    one of its section's headings (``headings[n - 1]``, `declrag.ingest.headers.heading_names`)."""
    seen: set[str] = set()
    out: list[Piece] = []
    for n, text in enumerate(passages, 1):
        named = headings[n - 1] if n <= len(headings) else frozenset()
        for a, b, lead in _regions(text, limit, wrapped):
            key = shown(text[a:b]).lower()  # a footnote mark alone is not a sentence, a heading not an answer
            if len(content_words(key)) == 0 or key in seen or _HEADING.match(text, a) or (
                    lead is None and _whole_line(text, a, b) and " ".join(re.findall(r"\w+", key)) in named):
                continue
            seen.add(key)
            out.append(Piece(n, a, b, text[a:b], code=lead is not None, lead=lead or ""))
    return out


def _whole_line(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` is a line of its own (only spaces beside it on its line)."""
    end = text.find("\n", b)
    return not text[text.rfind("\n", 0, a) + 1:a].strip() and not text[b:len(text) if end < 0 else end].strip()


def _regions(text: str, limit: int, wrapped: bool) -> list[tuple[int, int, str | None]]:
    """The sentences of a passage, each with None; and each line of its fenced code blocks (never joined to the next,
    its fences left out) with the line before its block ('' when none)."""
    out: list[tuple[int, int, str | None]] = []
    at = 0
    for body_start, body_end, end in _code_blocks(text):
        fence = text.rfind("\n", 0, max(body_start - 1, 0)) + 1 if body_start else 0  # its opening fence's line
        out += [(a, b, None) for a, b in spans(text, limit, wrapped, at, fence)]
        lead = text[:fence].rstrip().rsplit("\n", 1)[-1].strip()
        out += [(a, b, lead) for a, b in spans(text, limit, False, body_start, body_end)
                if not _FENCE_LINE.fullmatch(text[a:b])]
        at = end
    return out + [(a, b, None) for a, b in spans(text, limit, wrapped, at)]


def _code_blocks(text: str) -> list[tuple[int, int, int]]:
    """A passage's fenced code blocks as (body start, body end, end after the closing fence). A passage cut from a
    document may start inside a block: an odd number of fences whose first is bare (a closing fence's form) and not
    introduced (the line before it does not end with ":") opens it at the passage's start; otherwise the last fence
    left open runs to the passage's end (as CommonMark reads it)."""
    fences = [(m.start(), m.end(), m.group(1), bool(m.group(2).strip())) for m in _FENCE.finditer(text)]
    out: list[tuple[int, int, int]] = []
    if (len(fences) % 2 and fences and not fences[0][3] and text[:fences[0][0]].strip()
            and not text[:fences[0][0]].rstrip().endswith(":")):  # "```" alone first: the block began before
        out.append((0, fences[0][0], fences[0][1]))
        fences = fences[1:]
    i = 0
    while i < len(fences):
        start, end, mark, _ = fences[i]
        close = next((j for j in range(i + 1, len(fences)) if fences[j][2][0] == mark[0]
                      and len(fences[j][2]) >= len(mark) and not fences[j][3]), None)
        body = min(end + 1, len(text))
        if close is None:
            out.append((body, len(text), len(text)))
            break
        out.append((body, fences[close][0], fences[close][1]))
        i = close + 1
    return out
