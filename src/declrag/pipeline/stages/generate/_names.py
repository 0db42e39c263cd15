"""What a whole document tells an answer: the names and numbers it holds anywhere (`known`: its title page, author
line, running headers and footers, for the detail rule of `declrag.pipeline.stages.generate`), and the whole sentence
around a quote that its passage's edge cut (`whole`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ....text.normalize import Detail, detail_supported, norm_phrase, numbers
from ....text.sentences import sentence_spans
from ....types import Hit

DOCUMENTS_KNOWN = 32  # whole documents whose names and numbers are kept, found once (an LRU: docs/guides/serve.md)
PAGES_AT_MOST = 1000  # a PDF's pages read as its whole document (a store of a document a page)


def whole_document(hit: Hit, texts: Callable[[Sequence[str]], dict[str, str]]) -> str:
    """The whole text of ``hit``'s document, from the store's ``texts`` (`declrag.stores.base.Store.document_texts`);
    '' when the store cannot give it. A store indexed before declrag read a PDF as one document (chunking version 4)
    holds a document a page (``SOURCE#page=N``): those pages are read together, its title page with its last (at most
    `PAGES_AT_MOST`)."""
    doc = hit.doc_id
    if hit.chunk.page is None or "#page=" not in doc:
        return texts([doc]).get(doc, "")
    base = doc.rsplit("#page=", 1)[0]
    ids = [f"{base}#page={k}" for k in range(1, PAGES_AT_MOST + 1)]
    got = texts(ids)
    return "\n\n".join(got[i] for i in ids if i in got)


@dataclass(frozen=True)
class Known:
    """What a whole document mentions, for the detail rule: its numbers, its text normalised (`norm_phrase`) and
    that text's words."""

    nums: frozenset[str]
    norm: str
    words: frozenset[str]

    def has(self, d: Detail) -> bool:
        return detail_supported(d, "", self.nums, self.norm)


@lru_cache(maxsize=DOCUMENTS_KNOWN)
def known(document: str) -> Known:
    """`Known` of a document's text, found once per document (the last `DOCUMENTS_KNOWN` kept)."""
    norm = norm_phrase(document)
    return Known(frozenset(numbers(document)), norm, frozenset(norm.split()))


WHOLE_AT_MOST = 1000  # characters of a sentence that a quote cut by its passage's edge is widened to


def whole(document: str, start: int, end: int, limit: int = WHOLE_AT_MOST) -> tuple[int, int]:
    """``[start, end)`` of ``document`` (a quote that its passage's edge cut) widened to the whole sentences it is
    part of (`sentence_spans` of the document, wrapped lines joined), when they are at most ``limit`` characters
    longer; else as it was. Never over a page break (a form feed: the running lines there are no sentence's)."""
    first = document.rfind("\f", max(0, start - limit), start) + 1 or max(0, start - limit)
    last = document.find("\f", end, end + limit)
    last = min(len(document), end + limit) if last < 0 else last
    lo, hi = max(0, start - limit, first), last
    sents = [(a, b) for a, b in sentence_spans(document, lo, hi, wrapped=True) if b > start and a < end]
    if not sents:
        return start, end
    a, b = sents[0][0], sents[-1][1]
    # the window's edge is not a sentence's: a sentence that reaches it is too long to take whole
    a = start if a < start and lo > 0 and document[lo - 1] != "\f" and not document[lo:a].strip() else min(a, start)
    b = end if b > end and hi < len(document) and document[hi] != "\f" and not document[b:hi].strip() else max(b, end)
    return a, b
