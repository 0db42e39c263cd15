"""Chunking strategies. Every chunk is an exact span of its document: ``doc.text[c.start:c.end] == c.text``.

All strategies work on character spans and count tokens with the embedding model's own tokenizer
(`TokenCounter`), so a chunk of ``chunk_size`` tokens is what the model actually sees:

- ``fixed``: windows of ``chunk_size`` tokens, stepping ``chunk_size - overlap``;
- ``recursive``: split by paragraphs, then lines, then sentences, then words, and pack the pieces
  greedily up to ``chunk_size`` tokens, carrying up to ``overlap`` tokens of trailing pieces;
- ``sentence``: pack whole sentences up to ``chunk_size`` tokens (a longer sentence is cut by tokens);
- ``semantic``: cut between consecutive sentences whose embeddings diverge (cosine distance above the
  ``semantic_percentile``-th percentile of the document's distances), then cap at ``chunk_size``;
- ``parent-child``: ``recursive`` parents of ``parent_size`` tokens, each cut into ``fixed`` children of
  ``chunk_size`` tokens; children are searched and carry their parent's span, which search returns.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

from ..config import ChunkerConfig, Context
from ..text.languages import identify
from ..text.sentences import LINE, PARAGRAPH, sentence_spans, split_on, strip_span, word_spans
from ..text.tokens import ScriptTokens, Span, TokenCounter
from ..types import Chunk, Document, chunk_id
from . import _units as units
from ._running import page_starts, spans_of, within
from .headers import content_ends, header, headings, path_text, section_paths, section_range

EmbedFn = Callable[[list[str]], np.ndarray]


class _Tokens:
    """Token offsets of one document, to count the tokens inside any span in O(log n)."""

    def __init__(self, text: str, counter: TokenCounter):
        self.text = text
        self.spans = counter.offsets(text)
        self.starts = [s for s, _ in self.spans]
        self.ends = [e for _, e in self.spans]

    def count(self, a: int, b: int) -> int:
        return max(0, bisect.bisect_right(self.ends, b) - bisect.bisect_left(self.starts, a))

    def _inside_word(self, pos: int) -> bool:
        t = self.text
        return 0 < pos < len(t) and t[pos - 1].isalnum() and t[pos].isalnum()

    def windows(self, a: int, b: int, size: int, overlap: int, blocks: Sequence[units.Unit] = ()) -> list[Span]:
        """Spans of at most ``size`` tokens inside [a, b), each starting where the previous one's last
        ``overlap`` tokens start. Windows begin and end at word boundaries (never inside a word split
        into sub-word tokens) unless a single word is longer than the window. ``blocks`` (code blocks and tables,
        `declrag.ingest._units`): a window ends before a unit that a window can hold whole (the next one starts at
        it), and otherwise cuts a unit only between its lines (a table between rows) unless its next line is longer
        than a window holds."""
        i, j = bisect.bisect_left(self.starts, a), bisect.bisect_right(self.ends, b)
        if i >= j:
            return [(a, b)] if a < b else []
        out, s, last = [], i, i
        while s < j:
            e, restart = min(s + size, j), None
            if e < j:
                k = e
                while k > s + 1 and self._inside_word(self.ends[k - 1]):
                    k -= 1
                if not self._inside_word(self.ends[k - 1]):
                    e = k
                if blocks:
                    cut, restart = self._unit_end(s, e, blocks, size)
                    if cut <= last and restart is not None:  # it would end where the one before it did: the
                        s = restart  # next one starts at the unit
                        continue
                    # a window ends past the one before it: where the unit's next line is longer than a window
                    # holds, the cut is the same each time, and the window is cut mid-line instead
                    e, restart = (cut, restart) if cut > last else (e, None)
            last = e
            out.append((self.starts[s], self.ends[e - 1]))
            if e >= j:
                break
            if restart is not None:
                s = restart
                continue
            k = max(e - overlap, s + 1)
            while k < e and self._inside_word(self.starts[k]):
                k += 1
            s = self._unit_start(k, e, blocks) if blocks else k
        return out

    def _unit_end(self, s: int, e: int, blocks: Sequence[units.Unit], size: int) -> tuple[int, int | None]:
        """A window of tokens [s, e) whose end falls inside a unit ends before the unit instead, when a window holds
        the unit whole (and the next window starts at it: the second value); else, cutting mid-line, at the unit's
        last line end inside the window, or before the unit when the window holds none of its line ends (the next
        window starting at it); as it was when neither can be."""
        pos, first = self.ends[e - 1], self.starts[s]
        u = units.around(blocks, pos)
        if u is None:
            return e, None
        start, end = u[0], u[1]
        if start > first and self.count(start, end) <= size:
            cut = bisect.bisect_right(self.ends, start)
            if cut > s:
                return cut, bisect.bisect_left(self.starts, start)
        if self.text[pos:pos + 1] in ("\n", ""):  # at a line end already: rows whole
            return e, None
        line_end = self.text.rfind("\n", max(start, first), pos)
        if line_end > first:
            cut = bisect.bisect_right(self.ends, line_end)
            return (cut, None) if cut > s else (e, None)
        if start > first and (cut := bisect.bisect_right(self.ends, start)) > s:
            # before the unit, and the next window starts at it: one that overlapped back would hold none of its
            # line ends either, and be cut here again, a token shorter each time
            return cut, bisect.bisect_left(self.starts, start)
        return e, None

    def _unit_start(self, k: int, e: int, blocks: Sequence[units.Unit]) -> int:
        """The window start ``k`` moved to the next line's start when it falls mid-line inside a unit (at most to
        ``e``, where the previous window ended: no text is skipped)."""
        if k >= e:
            return k
        pos = self.starts[k]
        u = units.around(blocks, pos)
        if u is None or self.text[pos - 1:pos] == "\n":
            return k
        nl = self.text.find("\n", pos, u[1])
        return e if nl < 0 else min(e, bisect.bisect_left(self.starts, nl + 1))


def _pack(pieces: Sequence[Span], toks: _Tokens, size: int, overlap: int) -> list[Span]:
    """Greedily join consecutive pieces into spans of at most ``size`` tokens; each new span starts with
    the trailing pieces of the previous one that fit in ``overlap`` tokens."""
    out: list[Span] = []
    cur: list[Span] = []
    for p in pieces:
        if cur and toks.count(cur[0][0], p[1]) > size:
            out.append((cur[0][0], cur[-1][1]))
            end, k = cur[-1][1], len(cur)
            while k > 0 and toks.count(cur[k - 1][0], end) <= overlap:
                k -= 1
            cur = cur[k:]
            while cur and toks.count(cur[0][0], p[1]) > size:
                cur.pop(0)
        cur.append(p)
    if cur:
        out.append((cur[0][0], cur[-1][1]))
    return out


class Chunker:
    """Cuts documents into chunks according to a `ChunkerConfig`."""

    def __init__(self, config: ChunkerConfig, tokens: TokenCounter, embed: EmbedFn | None = None,
                 context: Context = "none", covers: Callable[[str], bool] | None = None):
        """``tokens`` counts a chunk's size (the embedding model's tokenizer); ``covers`` (the model's
        `Embedder.covers`): whether the model was trained on a language; a document in a language it was not is
        counted in `ScriptTokens` instead, so that a chunk holds about as much text in every script."""
        if config.name == "semantic" and embed is None:
            raise ValueError("the semantic chunker needs an embedding function")
        self.config, self.tokens, self.embed, self.context = config, tokens, embed, context
        self.covers = covers

    def __call__(self, doc: Document) -> list[Chunk]:
        c, text = self.config, doc.text
        language = str(doc.metadata.get("language") or identify(text))  # a record's own, else identified
        fits = self.covers is None or not language or self.covers(language)
        toks = _Tokens(text, self.tokens if fits else ScriptTokens())
        whole = strip_span(text, 0, len(text))
        if whole is None:
            return []
        spans: list[Span] = []
        parents: list[Span | None] = []
        blocks = units.of(doc.metadata)  # code blocks and tables (`declrag.ingest._units`)
        if c.name == "parent-child":
            for p in self._recursive(text, toks, whole, c.parent_size, 0, blocks):
                kids = toks.windows(*p, c.chunk_size, c.overlap, blocks)
                spans += kids
                parents += [p] * len(kids)
        else:
            if c.name == "fixed":
                spans = toks.windows(*whole, c.chunk_size, c.overlap, blocks)
            elif c.name == "recursive":
                spans = self._recursive(text, toks, whole, c.chunk_size, c.overlap, blocks)
            elif c.name == "sentence":
                spans = _pack(self._sentence_parts(toks, sentence_spans(text, *whole)), toks, c.chunk_size,
                              c.overlap)
            else:  # semantic
                spans = self._semantic(text, toks, whole)
            parents = [None] * len(spans)
        # the section where each starts (its header) and where it ends, in one pass over the headings
        heads = headings(doc)
        both = section_paths(heads, [s for s, _ in spans] + content_ends(text, heads, spans))
        firsts, lasts = both[:len(spans)], both[len(spans):]
        paths = [path_text(f) for f in firsts]
        ranges = [section_range(a, b) for a, b in zip(firsts, lasts, strict=True)]
        running = spans_of(doc.metadata)  # its running headers and footers (`declrag.ingest._running`)
        pages = page_starts(text)  # a paged text (a PDF): a chunk's page is the one it starts on
        first = (doc.page or 1) - 1
        return [
            Chunk(
                id=chunk_id(doc.id, i), doc_id=doc.id, text=text[s:e], start=s, end=e, position=i,
                source=doc.source, title=doc.title, page=first + bisect.bisect_right(pages, s) if pages else doc.page,
                parent_start=p[0] if p else None, parent_end=p[1] if p else None,
                section=label, running=within(running, s, e), language=language, readers=doc.readers,
                header="\n".join(h for h in (header(doc.title, path, self.context), units.table_head(text, blocks, s))
                                  if h),
            )
            for i, ((s, e), p, path, label) in enumerate(zip(spans, parents, paths, ranges, strict=True))
        ]

    def _recursive(self, text: str, toks: _Tokens, span: Span, size: int, overlap: int,
                   blocks: Sequence[units.Unit] = ()) -> list[Span]:
        """Pieces of ``span`` (paragraphs, then lines, sentences, words: the first level whose pieces fit), packed up to
        ``size`` tokens. A unit (``blocks``: a code block, a table) is one piece when it fits, else its lines."""
        levels = [
            lambda a, b: split_on(PARAGRAPH, text, a, b),
            lambda a, b: split_on(LINE, text, a, b),
            lambda a, b: sentence_spans(text, a, b),
            lambda a, b: word_spans(text, a, b),
        ]

        def pieces(a: int, b: int, level: int) -> list[Span]:
            if toks.count(a, b) <= size:
                return [(a, b)]
            if level == len(levels):
                return toks.windows(a, b, size, 0)
            parts = levels[level](a, b)
            if len(parts) <= 1:
                return pieces(a, b, level + 1)
            return [q for p in parts for q in pieces(*p, level + 1)]

        out: list[Span] = []
        for a, b, unit in units.segments(*span, blocks):
            if unit is None:
                gap = strip_span(text, a, b)
                out += pieces(*gap, 0) if gap else []
            elif toks.count(a, b) <= size:
                out.append((a, b))
            else:  # a table's rows, a code block's lines: cut only between them (a line too long: by words)
                out += [p for line in split_on(LINE, text, a, b) for p in pieces(*line, 3)]
        return _pack(out, toks, size, overlap)

    def _sentence_parts(self, toks: _Tokens, sents: list[Span]) -> list[Span]:
        """The sentences, each longer than ``chunk_size`` tokens cut into windows of that size."""
        size = self.config.chunk_size
        return [w for s in sents for w in ([s] if toks.count(*s) <= size else toks.windows(*s, size, 0))]

    def _semantic(self, text: str, toks: _Tokens, span: Span) -> list[Span]:
        c = self.config
        sents = sentence_spans(text, *span)
        if len(sents) < 3:
            groups = [sents]
        else:
            assert self.embed is not None  # checked in __init__
            vecs = np.asarray(self.embed([text[a:b] for a, b in sents]), dtype=np.float32)
            dist = 1.0 - np.sum(vecs[:-1] * vecs[1:], axis=1)
            cut = np.percentile(dist, c.semantic_percentile)
            groups, cur = [], [sents[0]]
            for s, d in zip(sents[1:], dist):
                if d > cut:
                    groups.append(cur)
                    cur = []
                cur.append(s)
            groups.append(cur)
        out: list[Span] = []
        for g in groups:  # a group over the size limit is packed by sentences, as the sentence chunker does
            out += _pack(self._sentence_parts(toks, g), toks, c.chunk_size, 0)
        return out
