"""A chunk's document identity: its document's title and the path of headings above it.

A chunk cut from page 40 of a report has lost what the first page says; the user who names the report ("the Milan
thesis") names something the chunk no longer carries. At ingest every chunk gets, from its own document:

- ``title``: the file's metadata title (PDF, HTML ``<title>``, Markdown front matter), else its first heading, else
  its title page (the first lines of a plain-text file when they read as a title), else the file name when the name
  says something (``langchain-test-report.txt``; not ``doc1.txt`` or a hash), else nothing: never an invented one;
- ``section``: the headings above the chunk, outermost first, joined by ``" > "`` (Markdown and HTML headings,
  numbered section titles such as ``3.2 Retrieval`` and capitalised ones such as ``INTRODUCTION`` in plain text and
  PDF pages); a chunk that runs into later sections (small sections packed together: a workbook's sheets, a deck's
  slides) names the first and the last, ``Sheet: Sales … Sheet: Marketing`` (`section_range`), so that a citation
  never names only a section its passage has left;
- ``header``: what the ingest setting ``context`` puts in front of the chunk's text when it is embedded and indexed
  for keywords (``none``: nothing; ``title``; ``title+section``), at most `HEADER_MAX` characters.

The chunk's text and span stay exact: what is quoted and cited does not change.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from pathlib import Path

from ..text.keywords import keyword_tokens, spaceless
from ..types import Chunk, Document

HEADER_MAX = 200  # characters of a header (and of a title or a section path alone)
SEP = " > "
RANGE = " … "  # between the first and the last section a chunk runs through
Heading = tuple[int, int, str]  # (offset in the document's text, level 1-6, text)

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# "3 Results", "2.1. Data sets", "Chapter 4: Evaluation", "APPENDIX A", "INTRODUCTION"
_NUMBERED = re.compile(r"^[ \t]{0,3}((?:\d{1,2}\.)*\d{1,2})\.?[ \t]+(\S.{1,90}?)[ \t]*$")
_NAMED = re.compile(r"^[ \t]{0,3}((?:chapter|part|appendix|section)[ \t]+[\dIVXLA-Z]{1,6}\b[.:]?[ \t]*.{0,90}?)[ \t]*$",
                    re.I)
_CAPS = re.compile(r"^[ \t]{0,3}([A-Z][A-Z0-9 &,'/-]{3,60})[ \t]*$")
_GENERIC = frozenset("""doc docs document documents file files untitled new copy scan scanned page pages text txt draft
final tmp temp output export download downloads image img index readme data misc unnamed noname version v""".split())


def clip(text: str, limit: int = HEADER_MAX) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (with "…" when cut)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut + "…"


def helpful_name(path: str) -> str:
    """A file's name as words (``langchain_test-report.txt`` -> ``langchain test report``), or '' when the name says
    nothing: only generic words (doc, untitled, scan, final ...), numbers, or an identifier such as a hash."""
    stem = Path(path.split("#", 1)[0]).stem if path else ""
    words = [w for w in re.split(r"[\W_]+", stem) if w]
    telling = [w for w in words if sum(ch.isalpha() for ch in w) >= 3 and re.sub(r"\d+", "", w).lower() not in _GENERIC
               and not (len(w) >= 8 and any(ch.isdigit() for ch in w))]  # hex and ids mix digits in
    return clip(" ".join(words)) if telling else ""


def text_title(text: str) -> str:
    """A plain-text file's title page: its first block of lines (up to the first blank line) when it reads as a
    title (at most 4 lines, each short: 15 words, or 16 characters of a script without spaces; and not a sentence),
    joined by " · "; else ''."""
    lines: list[str] = []
    for line in text.lstrip().split("\n"):
        if not line.strip():
            break
        lines.append(line.strip())
        if len(lines) > 4:
            return ""
    if not lines or any(len(x) > 100 or len(x.split()) > 15 or x[-1] in ".,;:。，；：।"
                        or (spaceless(x) and len(keyword_tokens(x)) > 15) for x in lines):  # 15 words, 16 characters
        return ""
    return clip(" · ".join(x for x in lines if any(ch.isalpha() for ch in x)))


def markdown_headings(text: str) -> list[Heading]:
    """ATX (``## Title``) and setext (a line underlined by ``===`` or ``---``) headings outside code fences."""
    out: list[Heading] = []
    fence, pos, prev = "", 0, None  # prev: (offset, line) of the previous non-blank line, for setext
    for line in text.split("\n"):
        bare = line.rstrip("\r")
        if m := _FENCE.match(bare):
            fence = "" if fence == m.group(1) else fence or m.group(1)
            prev = None
        elif not fence:
            if (h := _ATX.match(bare)) and h.group(2).strip():
                out.append((pos, len(h.group(1)), clip(h.group(2))))
                prev = None
            elif (s := _SETEXT.match(bare)) and prev is not None and not _ATX.match(prev[1]):
                out.append((prev[0], 1 if s.group(1)[0] == "=" else 2, clip(prev[1])))
                prev = None
            else:
                prev = (pos, bare.strip()) if bare.strip() else None
        pos += len(line) + 1
    return out


def text_headings(text: str) -> list[Heading]:
    """Section titles of plain text and PDF pages: a line of its own (a blank line before or after it) that is
    numbered (``2.1 Data sets``: the level is the count of numbers), names a chapter, part or appendix, or is short
    and in capitals (``INTRODUCTION``); not a sentence (no final period, at most 12 words)."""
    out: list[Heading] = []
    lines = text.split("\n")
    pos = 0
    for i, line in enumerate(lines):
        bare = line.strip()
        alone = (i == 0 or not lines[i - 1].strip()) or (i + 1 == len(lines) or not lines[i + 1].strip())
        if alone and bare and len(bare.split()) <= 12 and bare[-1] not in ".,;":
            if (m := _NUMBERED.match(line)) and m.group(2)[0].isupper() and int(m.group(1).split(".")[0]) > 0:
                out.append((pos, min(6, m.group(1).count(".") + 1), clip(bare)))
            elif m := _NAMED.match(line):
                out.append((pos, 1, clip(m.group(1))))
            elif (m := _CAPS.match(line)) and sum(ch.isalpha() for ch in bare) >= 4:
                out.append((pos, 1, clip(bare)))
        pos += len(line) + 1
    return out


def headings(doc: Document) -> list[Heading]:
    """The document's headings, in text order: those its loader found (HTML: ``metadata["headings"]``), else
    Markdown's for a Markdown file, else `text_headings`."""
    given = doc.metadata.get("headings")
    if given is not None:
        return [(int(o), int(lv), str(t)) for o, lv, t in given]
    if Path(doc.source.split("#", 1)[0]).suffix.lower() in (".md", ".markdown"):
        return markdown_headings(doc.text)
    return text_headings(doc.text)


def section_paths(heads: Sequence[Heading], starts: Sequence[int]) -> list[tuple[str, ...]]:
    """For each offset in ``starts``, the headings at or before it that are still open (a heading closes the deeper
    and equal ones before it), outermost first."""
    offsets = [o for o, _, _ in heads]
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    for _, level, text in heads:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        paths.append(tuple(t for _, t in stack))
    out = []
    for s in starts:
        i = bisect.bisect_right(offsets, s) - 1
        out.append(paths[i] if i >= 0 else ())
    return out


def content_ends(text: str, heads: Sequence[Heading], spans: Sequence[tuple[int, int]]) -> list[int]:
    """For each span ``(start, end)`` of ``text``, the offset of its last character that is neither blank nor in a
    heading line at its tail (``start`` when there is none): where its last section is read (`section_paths`), so
    that a chunk that ends on a heading, holding none of that section's body, does not name it. ``heads``:
    `headings`, in text order."""
    offsets = [o for o, _, _ in heads]
    out = []
    for start, end in spans:
        i, stop = bisect.bisect_left(offsets, end) - 1, end
        while i >= 0 and start < offsets[i] < stop:
            line_end = text.find("\n", offsets[i], stop)
            if line_end >= 0 and text[line_end:stop].strip():
                break  # the heading's body is in the span
            stop, i = offsets[i], i - 1
        out.append(start + max(len(text[start:stop].rstrip()) - 1, 0))
    return out


def path_text(path: Sequence[str], limit: int = HEADER_MAX) -> str:
    """A section path (`section_paths`) as text: its headings joined by `SEP`, at most ``limit`` characters."""
    return clip(SEP.join(path), limit)


def sections(heads: Sequence[Heading], starts: Sequence[int]) -> list[str]:
    """For each offset in ``starts``, the path of the headings at or before it (`section_paths`) as text."""
    return [path_text(p) for p in section_paths(heads, starts)]


def section_range(first: Sequence[str], last: Sequence[str]) -> str:
    """The section of a chunk that starts in section ``first`` and ends in ``last`` (paths, `section_paths`):
    ``first`` when they are one, ``last`` when the chunk starts above every heading, else both, the headings they share
    written once (``Report > Sales … Marketing``); each side at most half of `HEADER_MAX` characters, so that the
    last is never cut off."""
    first, last = tuple(first), tuple(last)
    if first == last or not last:
        return path_text(first)
    if not first:
        return path_text(last)
    shared = next((i for i, (x, y) in enumerate(zip(first, last)) if x != y), min(len(first), len(last)))
    half = HEADER_MAX // 2 - len(RANGE)
    return path_text(first, half) + RANGE + path_text(last[shared:] or last[-1:], half)


def header(title: str, section: str, context: str) -> str:
    """What goes in front of a chunk's text when it is searched: nothing (``none``), the title, or the title and the
    section path (a section that only repeats the title is left out)."""
    if context == "none":
        return ""
    parts = [title] if title else []
    if context == "title+section" and section and section != title:
        parts.append(section.removeprefix(title + SEP) if title else section)
    return clip(" — ".join(parts))


def heading_names(title: str, section: str) -> frozenset[str]:
    """A chunk's title (and each line of a title page's, `text_title`) and each heading of its section path, lower
    case, words only: the lines of its text that name it rather than say something
    (`declrag.pipeline.stages.generate.candidates` quotes none of them)."""
    heads = [h for part in section.split(RANGE) for h in part.split(SEP)]
    return frozenset(k for k in (_name_key(x) for x in (title, *title.split(" · "), *heads)) if k)


def _name_key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def identity(title: str, section: str, source: str) -> str:
    """Everything a chunk knows of its document, for the detail rule: title, section path and telling file name."""
    return " ".join(x for x in (title, section, helpful_name(source)) if x)


def shown_header(chunk: Chunk) -> str:
    """A chunk's title and section as shown beside it (in citations, search results and an LM's context)."""
    return header(chunk.title, chunk.section, "title+section")
