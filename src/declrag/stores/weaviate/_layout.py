"""How a chunks collection's properties are laid out, by the store format that made it (`Layout`): which property
BM25 searches and what it holds, and whether chunks keep their language. `schema` creates collections in it, `wire`
writes and reads chunks in it."""

from __future__ import annotations

from dataclasses import dataclass

from ...text.keywords import tokenize
from ...text.reading import reading
from ...text.stopwords import query_terms
from ..base import StoreMeta


@dataclass(frozen=True)
class Layout:
    """A chunks collection's properties, as the declrag that made it wrote them (its `StoreMeta` format):

    - ``keyword``, the one property BM25 searches: ``text``, or ``searched`` (a chunk's header, then its text without
      its running lines: `Chunk.searched`, what the embedded store indexes) in a store built with headers (ingest
      ``context`` not ``none``) or of format 3 or later (running lines left out);
    - ``tokens`` (format 5 and later): the property holds declrag's keyword tokens joined by spaces
      (`declrag.text.keywords`), whitespace-tokenized, and queries are sent as their tokens with the English stop words
      taken out (`declrag.text.stopwords.query_terms`), so Weaviate indexes and looks up exactly the tokens the embedded
      store does, in every script. Before, Weaviate word-tokenized the text itself (no word in a script without
      spaces; Devanagari cut at its vowel signs);
    - ``language`` (format 5 and later): each chunk's language, filterable (`Chunk.language`);
    - ``readers`` (format 6 and later): each chunk's and document record's readers, a text array compared whole
      (`Chunk.readers`, as `declrag.types.stored_readers` stores them)."""

    keyword: str = "text"
    tokens: bool = False
    language: bool = False
    readers: bool = False

    @classmethod
    def of(cls, meta: StoreMeta | None) -> Layout:
        if meta is None:
            return cls()
        return cls("text" if meta.ingest.context == "none" and meta.format < 3 else "searched", meta.format >= 5,
                   meta.format >= 5, meta.format >= 6)

    def value(self, searched: str) -> str:
        """What the property holds for a chunk whose searched text is ``searched``."""
        return " ".join(tokenize(searched)) if self.tokens else searched

    def query(self, query: str) -> str:
        """What a BM25 search of the property is sent for ``query``."""
        return " ".join(query_terms(query)) if self.tokens else reading(query)
