"""The values that flow through declrag: documents, chunks, search hits and gold spans.

Plain frozen dataclasses: cheap to create by the hundred thousand, easy to serialise with
``dataclasses.asdict``. Character spans are half-open ``[start, end)`` offsets into the document text,
so ``document.text[chunk.start:chunk.end] == chunk.text`` always holds.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .text.reading import reading


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
    #: the groups that may read it (`check_readers`; () not labelled: the serving policy decides). Not part of
    #: its `hash`: changing readers relabels, it embeds nothing again
    readers: tuple[str, ...] = ()

    @property
    def hash(self) -> str:
        return content_hash(self.id, self.title, self.text)

    def original(self) -> Document:
        """The document with the text a synthetic set took out put back (``metadata["removed"]``: ``[position in
        this text, text]`` pairs, ascending; the inverse cloze of `declrag synth` scores a set over such a copy), or
        itself when nothing was taken out."""
        removed = self.metadata.get("removed")
        if not removed:
            return self
        pieces, at = [], 0
        for pos, text in removed:
            pieces += [self.text[at:pos], text]
            at = pos
        pieces.append(self.text[at:])
        meta = {k: v for k, v in self.metadata.items() if k != "removed"}
        return replace(self, text="".join(pieces), metadata=meta)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A searchable piece of a document, with its exact character span in that document.

    ``parent_start``/``parent_end`` are set by the parent-child strategy: the small chunk is what is
    searched, the parent span is what a search returns. ``section`` is the path of headings above the chunk, and
    ``header`` what the ingest setting ``context`` puts in front of its text when it is embedded and indexed for
    keywords (`declrag.ingest.headers`); the text itself stays the exact span.
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
    section: str = ""
    header: str = ""
    running: str = ""  # its running headers and footers, "start:end,..." in its text (`declrag.ingest._running`)
    language: str = ""  # its document's language, an ISO 639 code ("" not known: `declrag.text.languages.identify`)
    readers: tuple[str, ...] = ()  # the groups that may read its document (`check_readers`); () not labelled

    @property
    def searched(self) -> str:
        """What is embedded and indexed for keywords: the header, then the text without its running lines, as a reader
        sees it (`searched_text`)."""
        return searched_text(self.header, self.text, self.running)


def searched_text(header: str, text: str, running: str = "") -> str:
    """A chunk's searched text from its header, text and running lines (``"start:end,..."``, left out), in the form
    a reader sees (`declrag.text.reading.reading`: line-end hyphenation joined, ligatures and other compatibility
    forms folded, invisible characters out): the one format every store embeds and indexes."""
    if running:
        parts, at = [], 0
        for a, b in sorted(tuple(map(int, r.split(":"))) for r in running.split(",")):
            parts.append(text[at:a])
            at = max(at, b)
        text = "".join(parts) + text[at:]
    return reading(f"{header}\n\n{text}" if header else text)


#: the reader that stands for every caller: a document labelled with it is read by all (``--readers '*'``)
EVERYONE = "*"
#: what a store holds for a chunk whose document was given no readers (`Chunk.readers` ``()``); who reads it is
#: the serving policy's choice (`declrag.access`), made per question, so changing the policy relabels nothing
UNLABELLED = "*unlabelled"
_GROUP = re.compile(r"[^\s,*][^\s,]{0,127}")


def check_readers(readers: Sequence[str] | str, what: str = "readers") -> tuple[str, ...]:
    """Groups as a document's readers: a comma-separated string or a sequence of names, each 1-128 characters
    without whitespace or commas, not beginning with ``*`` (`EVERYONE` alone excepted); sorted, without repeats.
    Raises ValueError naming ``what`` and the bad name."""
    names = [r.strip() for r in readers.split(",")] if isinstance(readers, str) else list(readers)
    for n in names:
        if not isinstance(n, str) or (n != EVERYONE and not _GROUP.fullmatch(n)):
            raise ValueError(f"{what}: {n!r} is not a group name (1-128 characters, no whitespace or commas, "
                             f"not beginning with '*'; '*' alone means everyone)")
    return tuple(sorted(set(names)))


def stored_readers(readers: Sequence[str]) -> list[str]:
    """What a store holds for these readers: them, or [`UNLABELLED`] for none (every backend holds at least one, so
    that a filter can ask for the unlabelled documents as for a group)."""
    return list(readers) or [UNLABELLED]


def read_readers(stored: Sequence[str] | None) -> tuple[str, ...]:
    """`stored_readers` undone: a chunk's `Chunk.readers` from what a store holds (None: a store made before
    readers)."""
    return tuple(r for r in stored or () if r != UNLABELLED)


def chunk_id(doc_id: str, position: int) -> str:
    """The id of a document's ``position``-th chunk (the chunkers make it; context expansion finds neighbours by it)."""
    return f"{doc_id}#{position}"


@dataclass(frozen=True, slots=True)
class GoldSpan:
    """A relevant span of a document: characters ``[start, end)`` of document ``doc``, with a grade (how relevant,
    as qrels grade) and the answer string it holds, when it is an answer's span. Retrieval is scored on the
    passages that cover it (`declrag.metrics.passages`), whatever the chunking."""

    doc: str
    start: int
    end: int
    grade: int = 1
    answer: str = ""
    credit: str = ""  # spans with the same credit are one (an answer's occurrences: covering any of them covers it)

    @classmethod
    def from_answers(cls, gold: dict[str, int], answers: Sequence[str], starts: Sequence[int | None]
                     ) -> tuple[GoldSpan, ...]:
        """Each extractive answer's span in the one gold document (SQuAD's answer offsets); () unless there is
        exactly one gold document and an offset per answer."""
        docs = [d for d, g in gold.items() if g > 0]
        if len(docs) != 1 or not starts or len(starts) != len(answers):
            return ()
        return tuple(dict.fromkeys(cls(docs[0], s, s + len(a), 1, a) for s, a in zip(starts, answers)
                                   if s is not None and s >= 0 and a))

    @classmethod
    def of(cls, raw: Any) -> GoldSpan:
        """A span from a `GoldSpan` or a record ``{doc, start, end, grade?, answer?}``."""
        if isinstance(raw, GoldSpan):
            return raw
        return cls(str(raw["doc"]), int(raw["start"]), int(raw["end"]), int(raw.get("grade", 1)),
                   str(raw.get("answer") or ""), str(raw.get("credit") or ""))

    @classmethod
    def occurrences(cls, answers: Sequence[str], docs: dict[str, str], limit: int = 50) -> tuple[GoldSpan, ...]:
        """Where short answers occur (whole words, any case and spacing) in the gold documents' texts ``{id: text}``:
        every occurrence, all one credit (a chunk holding any of them holds the answer); () when none occurs."""
        out: list[GoldSpan] = []
        for a in answers:
            words = a.split()
            if not words or len(words) > 12 or words[0].lower().strip(",.") in ("yes", "no"):
                continue  # free text, or a yes/no answer: not a string a passage holds
            pattern = re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)
            for doc, text in docs.items():
                out += [cls(doc, m.start(), m.end(), 1, a, "answer") for m in pattern.finditer(text)]
                if len(out) >= limit:
                    return tuple(out[:limit])
        return tuple(out)


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
