"""The values that flow through declrag: documents, chunks and search hits.

Plain frozen dataclasses: cheap to create by the hundred thousand, easy to serialise with
``dataclasses.asdict``. Character spans are half-open ``[start, end)`` offsets into the document text,
so ``document.text[chunk.start:chunk.end] == chunk.text`` always holds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal


def content_hash(*parts: str) -> str:
    """A short, stable hash of text (sha256, hex, 32 characters)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Document:
    """A unit of source text: a file, a PDF page, a corpus entry, a SQuAD paragraph."""

    id: str
    text: str
    source: str = ""
    title: str = ""
    page: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def hash(self) -> str:
        return content_hash(self.id, self.title, self.text)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A searchable piece of a document, with its exact character span in that document.

    ``parent_start``/``parent_end`` are set by the parent-child strategy: the small chunk is what is
    searched, the parent span is what a search returns.
    """

    id: str
    doc_id: str
    text: str
    start: int
    end: int
    position: int
    source: str = ""
    title: str = ""
    page: int | None = None
    parent_start: int | None = None
    parent_end: int | None = None


def chunk_id(doc_id: str, position: int) -> str:
    """The id of a document's ``position``-th chunk (the chunkers make it; context expansion finds neighbours by it)."""
    return f"{doc_id}#{position}"


Leg = Literal["keyword", "vector", "hybrid"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result. ``text``/``start``/``end`` are what to show and cite; after context
    expansion they cover more than ``chunk``, the piece that matched."""

    chunk: Chunk
    score: float
    text: str
    start: int
    end: int
    scores: dict[str, float] = field(default_factory=dict)  # per-leg raw scores, for explanation

    @classmethod
    def of(cls, chunk: Chunk, score: float, **scores: float) -> Hit:
        return cls(chunk=chunk, score=score, text=chunk.text, start=chunk.start, end=chunk.end, scores=scores)

    @property
    def doc_id(self) -> str:
        return self.chunk.doc_id
