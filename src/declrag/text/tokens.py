"""Token counters with character offsets: a model folder's own tokenizer (`HFTokens`, read without importing
transformers where it can be) and a dependency-free one (`WordTokens`). Chunking counts with them, and the embedder
cuts its inputs with them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

import regex

from .keywords import SPACELESS

Span = tuple[int, int]


class TokenCounter(Protocol):
    def offsets(self, text: str) -> list[Span]:
        """Character spans of the tokens of ``text`` (no special tokens)."""


class WordTokens:
    """Words and punctuation marks as tokens: a dependency-free counter for tests and fallbacks."""

    _re = re.compile(r"\w+|[^\w\s]")

    def offsets(self, text: str) -> list[Span]:
        return [m.span() for m in self._re.finditer(text)]


class ScriptTokens:
    """Tokens that hold about as much text in every script, for a language the embedding model's own tokenizer does
    not fit (an English model cuts Russian into letters): a word (letters and digits with their combining marks) or a
    punctuation mark is a token, and so are two characters of a script written without spaces (about a Chinese
    word). XQuAD's 48 articles count 35,380 of these in English and 31,000-39,000 in each of their six translations
    (Chinese 29,837), where all-MiniLM-L6-v2's tokenizer counts 38,666 in English and up to 167,717 (Russian)."""

    _re = regex.compile(rf"(?:[{SPACELESS}]\p{{M}}*){{1,2}}"  # two characters of a script without spaces
                        rf"|[[\p{{L}}\p{{N}}]--[{SPACELESS}]][[\p{{L}}\p{{N}}\p{{M}}]--[{SPACELESS}]]*"  # a word
                        r"|[^\s\p{L}\p{N}\p{M}]", regex.V1)  # a punctuation mark

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
