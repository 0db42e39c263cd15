"""Token counters with character offsets: a model folder's own tokenizer (`HFTokens`, read without importing
transformers where it can be) and a dependency-free one (`WordTokens`). Chunking counts with them, and the embedder
cuts its inputs with them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

Span = tuple[int, int]


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
