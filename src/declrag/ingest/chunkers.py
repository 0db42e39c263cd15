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
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ..config import ChunkerConfig, Context
from ..types import Chunk, Document, chunk_id
from .headers import header, headings, sections
from .running import spans_of, within

Span = tuple[int, int]
EmbedFn = Callable[[list[str]], np.ndarray]


class TokenCounter(Protocol):
    def offsets(self, text: str) -> list[Span]:
        """Character spans of the tokens of ``text`` (no special tokens)."""


class WordTokens:
    """Words and punctuation marks as tokens: a dependency-free counter for tests and fallbacks."""

    _re = re.compile(r"\w+|[^\w\s]")

    def offsets(self, text: str) -> list[Span]:
        return [m.span() for m in self._re.finditer(text)]


def fast_tokenizer(model_dir: str | Path):
    """A Hugging Face model folder's fast tokenizer (a `tokenizers.Tokenizer`): its ``tokenizer.json``, read without
    importing transformers (and with it torch), or transformers' conversion of a slow-tokenizer-only model."""
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    if path.exists():
        return Tokenizer.from_file(str(path))
    from transformers import AutoTokenizer  # slow-tokenizer-only models: let transformers convert it

    return AutoTokenizer.from_pretrained(str(model_dir), use_fast=True).backend_tokenizer


class HFTokens:
    """The tokenizer of a Hugging Face model folder, with offsets, without truncation."""

    def __init__(self, model_dir: str | Path):
        self._tok = fast_tokenizer(model_dir)
        self._tok.no_truncation()
        self._tok.no_padding()

    def offsets(self, text: str) -> list[Span]:
        return [o for o in self._tok.encode(text, add_special_tokens=False).offsets if o[1] > o[0]]


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

    def windows(self, a: int, b: int, size: int, overlap: int) -> list[Span]:
        """Spans of at most ``size`` tokens inside [a, b), each starting where the previous one's last
        ``overlap`` tokens start. Windows begin and end at word boundaries (never inside a word split
        into sub-word tokens) unless a single word is longer than the window."""
        i, j = bisect.bisect_left(self.starts, a), bisect.bisect_right(self.ends, b)
        if i >= j:
            return [(a, b)] if a < b else []
        out, s = [], i
        while s < j:
            e = min(s + size, j)
            if e < j:
                k = e
                while k > s + 1 and self._inside_word(self.ends[k - 1]):
                    k -= 1
                if not self._inside_word(self.ends[k - 1]):
                    e = k
            out.append((self.starts[s], self.ends[e - 1]))
            if e >= j:
                break
            k = max(e - overlap, s + 1)
            while k < e and self._inside_word(self.starts[k]):
                k += 1
            s = k
        return out


_PARA = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_LINE = re.compile(r"\n")
_WORD = re.compile(r"\S+")


def _strip(text: str, a: int, b: int) -> Span | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def _split_on(pattern: re.Pattern, text: str, a: int, b: int) -> list[Span]:
    out, pos = [], a
    for m in pattern.finditer(text, a, b):
        if (s := _strip(text, pos, m.start())) is not None:
            out.append(s)
        pos = m.end()
    if (s := _strip(text, pos, b)) is not None:
        out.append(s)
    return out


def sentence_spans(text: str, a: int = 0, b: int | None = None, wrapped: bool = False) -> list[Span]:
    """Sentences of text[a:b] as spans: lines first, then a statistical sentence splitter per line. ``wrapped``: a
    line break inside a sentence (a hard-wrapped paragraph, a PDF page's lines) is not a boundary (`_hard_lines`)."""
    import blingfire

    b = len(text) if b is None else b
    out: list[Span] = []
    for la, lb in _hard_lines(text, a, b) if wrapped else _split_on(_LINE, text, a, b):
        line = text[la:lb].replace("\n", " ")  # a soft break is a space: offsets stay the text's
        _, offs = blingfire.text_to_sentences_and_offsets(line)
        spans = [s for o in offs if (s := _strip(text, la + o[0], la + min(o[1], len(line)))) is not None]
        out.extend(spans or [(la, lb)])
    return out


_SOFT_AFTER = re.compile(r"[ \t]*[a-z0-9(]")


def _hard_lines(text: str, a: int, b: int) -> list[Span]:
    """text[a:b] cut at its hard line breaks: a break is soft (a sentence wrapped onto the next line) when the line
    before it does not end a sentence or a clause (``.!?:;``) and the next line goes on in lower case, a digit or a
    parenthesis; a blank line is always hard."""
    out, pos = [], a
    for m in _LINE.finditer(text, a, b):
        i = m.start()
        before = text[pos:i].rstrip(" \t\r")
        if before and before[-1] not in ".!?:;" and _SOFT_AFTER.match(text, i + 1, b):
            continue
        if (s := _strip(text, pos, i)) is not None:
            out.append(s)
        pos = i + 1
    if (s := _strip(text, pos, b)) is not None:
        out.append(s)
    return out


def _words(text: str, a: int, b: int) -> list[Span]:
    return [(m.start(), m.end()) for m in _WORD.finditer(text, a, b)]


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
                 context: Context = "none"):
        if config.name == "semantic" and embed is None:
            raise ValueError("the semantic chunker needs an embedding function")
        self.config, self.tokens, self.embed, self.context = config, tokens, embed, context

    def __call__(self, doc: Document) -> list[Chunk]:
        c, text = self.config, doc.text
        toks = _Tokens(text, self.tokens)
        whole = _strip(text, 0, len(text))
        if whole is None:
            return []
        spans: list[Span] = []
        parents: list[Span | None] = []
        if c.name == "parent-child":
            for p in self._recursive(text, toks, whole, c.parent_size, 0):
                kids = toks.windows(*p, c.chunk_size, c.overlap)
                spans += kids
                parents += [p] * len(kids)
        else:
            if c.name == "fixed":
                spans = toks.windows(*whole, c.chunk_size, c.overlap)
            elif c.name == "recursive":
                spans = self._recursive(text, toks, whole, c.chunk_size, c.overlap)
            elif c.name == "sentence":
                spans = _pack(self._sentence_parts(toks, sentence_spans(text, *whole)), toks, c.chunk_size,
                              c.overlap)
            else:  # semantic
                spans = self._semantic(text, toks, whole)
            parents = [None] * len(spans)
        paths = sections(headings(doc), [s for s, _ in spans])
        running = spans_of(doc.metadata)  # its running headers and footers (`declrag.ingest.running`)
        return [
            Chunk(
                id=chunk_id(doc.id, i), doc_id=doc.id, text=text[s:e], start=s, end=e, position=i,
                source=doc.source, title=doc.title, page=doc.page,
                parent_start=p[0] if p else None, parent_end=p[1] if p else None,
                section=path, header=header(doc.title, path, self.context), running=within(running, s, e),
            )
            for i, ((s, e), p, path) in enumerate(zip(spans, parents, paths))
        ]

    def _recursive(self, text: str, toks: _Tokens, span: Span, size: int, overlap: int) -> list[Span]:
        levels = [
            lambda a, b: _split_on(_PARA, text, a, b),
            lambda a, b: _split_on(_LINE, text, a, b),
            lambda a, b: sentence_spans(text, a, b),
            lambda a, b: _words(text, a, b),
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

        return _pack(pieces(*span, 0), toks, size, overlap)

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
