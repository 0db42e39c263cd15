"""What a retrieved passage looks like on the wire, one model per idea: `SearchHit` (a ranked passage:
``/v1/search`` and the MCP ``search`` tool) and `Citation` (a passage an answer cites: `Answer.citations`, hence
``/v1/ask``, the OpenAI-compatible routes, ``declrag ask --json`` and the MCP ``ask`` tool). Each model's
``payload`` makes the plain dict the hot paths send (no model is built per hit); tests check that every
payload is exactly its model."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import orjson
from pydantic import BaseModel, Field

from .types import Hit


def _passage(hit: Hit, at: int | None = None) -> dict[str, Any]:
    """Where a hit's text comes from, the part both payloads share: its chunk, document, source, title, section (the
    headings above it), page (of document offset ``at``, by default the span's start: `page_at`) and the span (in
    the document) shown and cited."""
    c = hit.chunk
    return {"chunk_id": c.id, "doc_id": c.doc_id, "source": c.source, "title": c.title, "section": c.section,
            "page": page_at(hit, hit.start if at is None else at), "span": [hit.start, hit.end]}


def page_at(hit: Hit, at: int) -> int | None:
    """The page of document offset ``at`` (inside ``hit``'s span or its chunk's): the chunk's page (the one it starts
    on), plus the page breaks (form feeds) between the chunk's start and ``at``, or minus those before it."""
    c = hit.chunk
    if c.page is None:
        return None
    lo, hi = min(c.start, at), max(c.start, at)
    if c.start <= lo and hi <= c.end:
        between = c.text[lo - c.start:hi - c.start]
    elif hit.start <= lo and hi <= hit.end:
        between = hit.text[lo - hit.start:hi - hit.start]
    else:
        return c.page
    return c.page + between.count("\f") if at >= c.start else c.page - between.count("\f")


class SearchHit(BaseModel):
    rank: int
    chunk_id: str
    doc_id: str
    source: str
    title: str
    section: str = Field("", description="the headings above the passage in its document, outermost first")
    page: int | None
    span: tuple[int, int]
    text: str
    score: float

    @staticmethod
    def payload(hit: Hit, rank: int) -> dict[str, Any]:
        """``hit`` at ``rank`` (1 is the best): the chunk it came from, the span and text to show and cite (with a
        window, wider than the chunk), and its score as the program ranked it, unrounded."""
        return {"rank": rank, **_passage(hit), "text": hit.text, "score": float(hit.score)}


class Citation(BaseModel):
    n: int = Field(description="the [n] marker in the answer")
    chunk_id: str
    doc_id: str
    source: str
    title: str
    section: str = Field("", description="the headings above the passage in its document, outermost first")
    page: int | None = Field(description="in a paged document (a PDF): the page of the first quote, else the passage's")
    span: tuple[int, int]
    snippet: str
    score: float
    attributed: bool = Field(description="true: not cited by the model, attributed to its claim afterwards")
    quotes: list[tuple[int, int]] = Field(default_factory=list, description=(
        "the exact character spans, in the document, of the words the answer took from this passage (the "
        "extractive and verified generate modes)"))
    nearest: bool = Field(False, description=(
        "true: the answer is an abstention and this is one of the passages nearest to the question, cited for the "
        "reader to check (the answer takes nothing from it)"))

    @staticmethod
    def payload(n: int, hit: Hit, attributed: bool, quotes: list[tuple[int, int, int]],
                nearest: bool = False) -> dict[str, Any]:
        """Passage ``n`` as the answer cites it; ``quotes``: (passage, start, end) of the words the answer took
        from its passages, offsets in the passage's text (only passage ``n``'s are kept, moved into its
        document); ``quotes`` is left out when there are none."""
        mine = [[hit.start + a, hit.start + b] for p, a, b in quotes if p == n]
        out = {"n": n, **_passage(hit, mine[0][0] if mine else None), "snippet": " ".join(hit.text.split())[:300],
               "score": round(float(hit.score), 6), "attributed": attributed, "nearest": nearest}
        if mine:  # its page: where the first quote is
            out["quotes"] = mine
        return out


class PublicPaths:
    """How a server names its documents' files to its clients: a public API need not say where its files live.
    An absolute path in a payload's ``source``, ``doc_id`` and ``chunk_id`` becomes the path relative to the folder
    the store's files were indexed from (the common folder of every file in it); with ``base`` (`declrag serve
    --source-base`, a public URL) the ``source`` is that relative path under it. A filter a client sends back with
    those names is read as the stored ones (`inward`). Sources that are not absolute paths (URLs, dataset ids) stay
    as they are. The CLI and the Python API keep the absolute paths."""

    ID_FIELDS = ("chunk_id", "doc_id")

    def __init__(self, sources: Iterable[str], base: str | None = None):
        files = {s for s in sources if os.path.isabs(s)}
        root = os.path.commonpath(sorted({os.path.dirname(f) for f in files})) if files else None
        self.prefix = None if root is None else root if root.endswith(os.sep) else root + os.sep
        self.base = base.rstrip("/") + "/" if base else None
        self.known = {self.relative(f) for f in files}  # what `inward` maps back: only names that are ours

    @classmethod
    def of_store(cls, store: Any, base: str | None = None) -> PublicPaths:
        """The public names of ``store``'s files (read once: its document records)."""
        return cls([r.source for r in store.documents().values()] if store is not None else [], base)

    def relative(self, name: str) -> str:
        p = self.prefix
        return name[len(p):].replace(os.sep, "/") if p and name.startswith(p) else name

    def source(self, name: str) -> str:
        rel = self.relative(name)
        return self.base + quote(rel, safe="/") if self.base and rel != name else rel

    def rewrite(self, passage: dict[str, Any]) -> dict[str, Any]:
        """A `SearchHit` or `Citation` payload with its public names."""
        out = {**passage, **{k: self.relative(passage[k]) for k in self.ID_FIELDS if k in passage}}
        if "source" in out:
            out["source"] = self.source(out["source"])
        return out

    def inward(self, where: Any) -> Any:
        """A filter with the public names of ``doc_id``, ``id`` and ``source`` turned back into the stored ones."""
        if self.prefix is None or not isinstance(where, dict):
            return where
        return {k: self._stored(v) if k in ("doc_id", "id", "source") else
                [self.inward(w) for w in v] if k in ("$and", "$or") and isinstance(v, list) else v
                for k, v in where.items()}

    def _stored(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {op: self._stored(v) for op, v in value.items()}
        if isinstance(value, list):
            return [self._stored(v) for v in value]
        if not isinstance(value, str) or self.prefix is None:
            return value
        rel = unquote(value[len(self.base):]) if self.base and value.startswith(self.base) else value
        name, sep, n = rel.partition("#")  # a chunk id: its document's name, then #n
        return self.prefix + name.replace("/", os.sep) + sep + n if name in self.known else value


def _numpy(o: Any) -> Any:
    """NumPy scalars and arrays as Python values (anything else: what ``tolist`` gives, or its error)."""
    return o.item() if isinstance(o, np.generic) else o.tolist()


def plain(x: Any) -> Any:
    """A JSON-safe copy of ``x``: NumPy scalars and arrays become Python values."""
    try:
        return orjson.loads(orjson.dumps(x, default=_numpy))
    except orjson.JSONEncodeError:
        return json.loads(json.dumps(x, default=_numpy))


__all__ = ["Citation", "PublicPaths", "SearchHit", "plain"]
