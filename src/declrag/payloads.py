"""What a retrieved passage looks like on the wire, one model per idea: `SearchHit` (a ranked passage:
``/v1/search`` and the MCP ``search`` tool) and `Citation` (a passage an answer cites: `Answer.citations`, hence
``/v1/ask``, the OpenAI-compatible routes, ``declrag ask --json`` and the MCP ``ask`` tool). Each model's
``payload`` makes the plain dict the hot paths send (no model is built per hit); tests check that every
payload is exactly its model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from .types import Hit


def _passage(hit: Hit) -> dict[str, Any]:
    """Where a hit's text comes from, the part both payloads share: its chunk, document, source, title, page and
    the span (in the document) shown and cited."""
    c = hit.chunk
    return {"chunk_id": c.id, "doc_id": c.doc_id, "source": c.source, "title": c.title, "page": c.page,
            "span": [hit.start, hit.end]}


class SearchHit(BaseModel):
    rank: int
    chunk_id: str
    doc_id: str
    source: str
    title: str
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
    page: int | None
    span: tuple[int, int]
    snippet: str
    score: float
    attributed: bool = Field(description="true: not cited by the model, attributed to its claim afterwards")
    quotes: list[tuple[int, int]] = Field(default_factory=list, description=(
        "the exact character spans, in the document, of the words the answer took from this passage (the "
        "extractive and verified generate modes)"))

    @staticmethod
    def payload(n: int, hit: Hit, attributed: bool, quotes: list[tuple[int, int, int]]) -> dict[str, Any]:
        """Passage ``n`` as the answer cites it; ``quotes``: (passage, start, end) of the words the answer took
        from its passages, offsets in the passage's text (only passage ``n``'s are kept, moved into its
        document); ``quotes`` is left out when there are none."""
        out = {"n": n, **_passage(hit), "snippet": " ".join(hit.text.split())[:300],
               "score": round(float(hit.score), 6), "attributed": attributed}
        if mine := [[hit.start + a, hit.start + b] for p, a, b in quotes if p == n]:
            out["quotes"] = mine
        return out


__all__ = ["Citation", "SearchHit"]
