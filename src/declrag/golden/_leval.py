"""L-Eval's open-ended task layout (OpenLMLab/LEval, ``LEval-data/Open-ended-tasks/*.jsonl``): one long document a
line, ``input``, with the questions asked of it, ``instructions``, and their reference answers, ``outputs``
(parallel lists). Its ``natural_question.jsonl`` is Natural Questions over whole Wikipedia pages (``nq-long``).

Each line is one Document ``<file stem>-<line>`` (``natural_question-00``) and each question one Example
``<document id>-<i>`` with that document as its gold. Natural Questions gives a page as tokens, its HTML tags among
them (``<H1>``, ``<P>``, ``<Tr>``, ``<Td_colspan="2">``): the tags are removed, block tags (headings, paragraphs,
tables, lists) become blank lines, rows and list items lines, a row's cells are joined by `` | ``, and every other
token is kept as NQ wrote it, so that the short answers ("`` The Word ''") occur verbatim. The title is the text
before `` - wikipedia`` at the start of ``input``. A line whose ``input`` repeats an earlier line's is that page
again: its questions go to the first copy (those it already has are dropped), so no page is two documents of which
only one is gold. Each answer's occurrences in its page are the question's gold spans, one credit (`spans`); a question
whose answer does not occur there is scored on its document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ..types import Document, GoldSpan
from ._formats import Parsed, read_jsonl
from ._sets import Example

NEEDED = ("input", "instructions", "outputs")
_TAG = re.compile(r"(?<!\S)</?([A-Za-z][A-Za-z0-9]*)(?:_[^\s>]*)?>(?!\S)")  # <P>, </Td>, <Th_colspan="2">
_BREAK = {**dict.fromkeys(("h1", "h2", "h3", "h4", "h5", "h6", "p", "table", "ul", "ol", "dl"), "\f"),
          **dict.fromkeys(("tr", "li", "dd", "dt"), "\n"), "td": "\t", "th": "\t"}
_TITLE = re.compile(r"\s*([^<]*?)\s+-\s+wikipedia(?:\s+|$)", re.IGNORECASE)  # "Harry Potter - wikipedia <H1>"


def looks_like(first_row: dict[str, Any]) -> bool:
    """Whether a JSONL file's first row is an L-Eval task line."""
    return all(k in first_row for k in NEEDED)


def clean(page: str) -> tuple[str, str]:
    """(title, text) of a page given as Natural Questions' tokens: tags out, blocks as paragraphs, rows as lines. A
    text without such tags is kept as it is."""
    m = _TITLE.match(page)
    title, body = (m.group(1), page[m.end():]) if m else ("", page)
    if not _TAG.search(body):
        return title, body.strip()
    paragraphs = []
    for block in _TAG.sub(lambda t: _BREAK.get(t.group(1).lower(), " "), body).split("\f"):
        rows = (" | ".join(c for c in (" ".join(cell.split()) for cell in row.split("\t")) if c)
                for row in block.split("\n"))
        paragraphs.append("\n".join(r for r in rows if r))
    return title, "\n\n".join(p for p in paragraphs if p)


def spans(answer: str, doc: str, text: str) -> tuple[GoldSpan, ...]:
    """Every occurrence of a short answer in its page, one credit (`GoldSpan.occurrences`, not capped: "13" occurs
    over 50 times in its page); a longer answer (over 12 words) where it occurs verbatim."""
    found = GoldSpan.occurrences([answer], {doc: text}, limit=len(text))
    if found or len(answer.split()) <= 12:
        return found
    return tuple(GoldSpan(doc, m.start(), m.end(), 1, answer, "answer") for m in re.finditer(re.escape(answer), text))


def _strings(f: Path, n: int, r: dict[str, Any], key: str) -> list[str]:
    if not isinstance(r[key], list) or not all(isinstance(s, str) for s in r[key]):
        raise DeclragError(f"{f}:{n}: `{key}` must be a list of strings",
                           hint="an L-Eval line has input (the document), instructions (the questions) and outputs "
                                "(their answers, one each)")
    return r[key]


def read(files: dict[str, Path]) -> Parsed:
    docs: dict[str, Document] = {}
    out: dict[str, tuple[Example, ...]] = {}
    for name, f in files.items():
        exs: list[Example] = []
        by_input: dict[str, str] = {}  # a page's raw input -> its document id
        asked: set[tuple[str, str, str]] = set()
        for line, (n, r) in enumerate(read_jsonl(f)):
            if missing := [k for k in NEEDED if k not in r]:
                raise DeclragError(f"{f}:{n}: missing field(s) {', '.join(missing)}",
                                   hint="an L-Eval line has input, instructions, outputs (source, evaluation)")
            if not isinstance(r["input"], str) or not r["input"].strip():
                raise DeclragError(f"{f}:{n}: `input` must be a non-empty string", hint="the document's text")
            questions, answers = _strings(f, n, r, "instructions"), _strings(f, n, r, "outputs")
            if len(questions) != len(answers):
                raise DeclragError(f"{f}:{n}: {len(questions)} instructions but {len(answers)} outputs",
                                   hint="outputs are the instructions' answers, one each, in the same order")
            own = f"{f.stem}-{line:02d}"
            if (did := by_input.setdefault(r["input"], own)) == own:
                title, text = clean(r["input"])
                docs[did] = Document(id=did, text=text, source=str(f), title=title)
            for i, (q, a) in enumerate(zip(questions, answers)):
                q, a = q.strip(), a.strip()
                if q and (did, q, a) not in asked:
                    asked.add((did, q, a))
                    exs.append(Example(id=f"{own}-{i}", question=q, answers=(a,) if a else (), gold={did: 1},
                                       spans=spans(a, did, docs[did].text) if a else ()))
        out[name] = tuple(exs)
    return tuple(docs.values()), out
