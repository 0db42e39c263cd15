"""A deterministic stand-in for the embedding model, for fast unit tests.

`HashEmbedder` embeds a text as the normalised sum of pseudo-random unit vectors of its words (seeded by
each word), so texts sharing words are close, and the same text always gets the same vector. It has
the `Embedder` interface the indexer and search use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from ..ingest.chunkers import WordTokens
from ..stores.bm25 import tokenize


class HashEmbedder:
    def __init__(self, dim: int = 64):
        self.dim, self.calls, self.key, self.name = dim, 0, f"hash-{dim}", f"hash-{dim}"
        self.tokens = WordTokens()
        self._cache: dict[str, np.ndarray] = {}

    def __deepcopy__(self, memo):
        return self

    def _word(self, w: str) -> np.ndarray:
        if w not in self._cache:
            seed = int.from_bytes(hashlib.sha256(w.encode()).digest()[:8], "little")
            self._cache[w] = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return self._cache[w]

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in tokenize(text):
            v += self._word(w)
        n = np.linalg.norm(v)
        return v / n if n else np.full(self.dim, 1 / np.sqrt(self.dim), dtype=np.float32)

    def embed_documents(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        self.calls += len(texts)
        if progress and texts:
            progress(len(texts))
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    embed_queries = embed_documents

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


class ScriptedLM:
    """An instant LM for tests and benchmarks: answers each prompt by the first rule whose key occurs in its
    system message (the stage's instructions), e.g. ``{"search queries": {"queries": "a\nb"}}``; falls back
    to ``default``. Built on DSPy's DummyLM with the plain-text adapter; ``ms`` sums time spent inside;
    ``delay`` seconds are slept on every call (to stand in for a slow model). With ``cost_usd``, every call
    is metered as a paid, uncached call of that price (so budgets count it as they count a real model's)."""

    def __new__(cls, rules: dict[str, dict], default: dict | None = None, delay: float = 0.0,
                cost_usd: float | None = None):
        import time

        from dspy.utils.dummies import DummyLM

        from ..adapters import PlainTextAdapter

        class _Scripted(DummyLM):
            def __call__(self, prompt=None, *, messages=None, **kwargs):
                t0 = time.perf_counter()
                if delay:
                    time.sleep(delay)
                system = (messages or [{}])[0].get("content", "")
                reply = next((v for k, v in rules.items() if k in system), default or {"answer": "It is in [1]."})
                self.answers = iter([reply])
                try:
                    return super().__call__(prompt, messages=messages, **kwargs)
                finally:
                    ms = 1000 * (time.perf_counter() - t0)
                    self.ms += ms
                    if cost_usd is not None:
                        from ..lm import meter_call

                        meter_call({"usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cost": cost_usd}, ms)

        lm = _Scripted([], adapter=PlainTextAdapter())
        lm.ms = 0.0
        return lm
