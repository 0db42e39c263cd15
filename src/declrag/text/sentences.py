"""Sentences, lines and words of a text as character spans (``(start, end)`` into the text): the splitting that
chunking, extractive answers, the named-document search and the synthetic writers share."""

from __future__ import annotations

import re

Span = tuple[int, int]


PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
LINE = re.compile(r"\n")
WORD = re.compile(r"\S+")


def strip_span(text: str, a: int, b: int) -> Span | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def split_on(pattern: re.Pattern, text: str, a: int, b: int) -> list[Span]:
    out, pos = [], a
    for m in pattern.finditer(text, a, b):
        if (s := strip_span(text, pos, m.start())) is not None:
            out.append(s)
        pos = m.end()
    if (s := strip_span(text, pos, b)) is not None:
        out.append(s)
    return out


def sentence_spans(text: str, a: int = 0, b: int | None = None, wrapped: bool = False) -> list[Span]:
    """Sentences of text[a:b] as spans: lines first, then a statistical sentence splitter per line. ``wrapped``: a
    line break inside a sentence (a hard-wrapped paragraph, a PDF page's lines) is not a boundary (`_hard_lines`)."""
    import blingfire

    b = len(text) if b is None else b
    out: list[Span] = []
    for la, lb in _hard_lines(text, a, b) if wrapped else split_on(LINE, text, a, b):
        line = text[la:lb].translate(_SPACED)  # a soft break is a space: offsets stay the text's
        _, offs = blingfire.text_to_sentences_and_offsets(line)
        spans = [s for o in offs if (s := strip_span(text, la + o[0], la + min(o[1], len(line)))) is not None]
        out.extend(p for s in spans or [(la, lb)] for p in split_on(_ENDS, text, *s))
    return out


# sentence ends the statistical splitter does not know: Devanagari's danda and double danda (Hindi, Marathi, Nepali,
# Sanskrit), and the space between two Thai sentences (Thai writes no full stop; a space ends a sentence or clause)
_ENDS = re.compile(r"(?<=[।॥])\s*|(?<=[\u0E00-\u0E7F])\s+(?=[\u0E00-\u0E7F])")
_STOPS = ".!?:;。！？；：।॥؟"  # what ends a sentence or a clause, in the scripts declrag reads


_SPACED = str.maketrans("\n\f", "  ")
# a line end, or a page's: a form feed with the blank lines around it (a page's running lines blanked)
# (matched from a whitespace run's start only: linear however long the run)
_BREAK = re.compile(r"(?<![^\S\f])[^\S\f]*+\f\s*+|\n")
_SOFT_AFTER = re.compile(r"[ \t]*[a-z0-9(]")
_BLANK = re.compile(r"[ \t\r]*(?:\n|$)")  # a blank line: always a paragraph's end
_ITEM = re.compile(r"[ \t]*(?:[-*+•▪◦‣–—]|\d{1,3}[.)]|[a-z][.)])[ \t]")  # a list item's mark starts a line
FULL = 0.85  # a line at least this share of the text's usual width was wrapped, whatever starts the next one


def _hard_lines(text: str, a: int, b: int) -> list[Span]:
    """text[a:b] cut at its hard line breaks: a break is soft (a sentence wrapped onto the next line) when the line
    before it does not end a sentence or a clause (`_STOPS`: ``.!?:;``, ``。！？``, the danda and others), the next
    line starts no list item, and either the next line goes on in lower case, a digit or a parenthesis, or the line
    before fills the text's usual width (at least `FULL` of its lines' 80th percentile of length, among 5 lines or
    more: a column of a typeset page breaks before names and capitals too); a blank line is always hard, but not at a
    page break (a form feed and the blank lines around it: a sentence runs on to the next page)."""
    lengths = sorted(len(x.strip()) for x in text[a:b].split("\n") if x.strip())
    width = lengths[int(0.8 * (len(lengths) - 1))] * FULL if len(lengths) >= 5 else float("inf")
    out, pos, line = [], a, a  # line: where the line before the next break starts
    for m in _BREAK.finditer(text, a, b):
        i, after, page = m.start(), m.end(), "\f" in m.group()
        j = i
        while j > pos and text[j - 1] in " \t\r":
            j -= 1
        last = text[j - 1] if j > pos else ""  # the last character before the break
        if (last and last not in _STOPS and not _ITEM.match(text, after, b)
                and (page or not _BLANK.match(text, after, b))
                and (_SOFT_AFTER.match(text, after, b) or len(text[line:i].strip()) >= width)):
            line = after
            continue
        if (s := strip_span(text, pos, i)) is not None:
            out.append(s)
        pos = line = after
    if (s := strip_span(text, pos, b)) is not None:
        out.append(s)
    return out


def word_spans(text: str, a: int, b: int) -> list[Span]:
    return [(m.start(), m.end()) for m in WORD.finditer(text, a, b)]
