"""A deterministic stand-in for the embedding model, for fast unit tests.

`HashEmbedder` embeds a text as the normalised sum of pseudo-random unit vectors of its words (seeded by
each word), so texts sharing words are close, and the same text always gets the same vector. It has
the `Embedder` interface the indexer and search use. `ScriptedLM` answers at once (DSPy's DummyLM);
`StreamingLM` streams its scripted reply token by token through LiteLLM, as a real route does.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..lm import RoutedLM, meter_call, setup
from ..lm.prompts import PlainTextAdapter
from ..text.keywords import tokenize
from ..text.tokens import WordTokens


class HashEmbedder:
    def __init__(self, dim: int = 64):
        self.dim, self.calls, self.key, self.name = dim, 0, f"hash-{dim}", f"hash-{dim}"
        self.tokens = WordTokens()
        self._cache: dict[str, np.ndarray] = {}
        self.cache = None  # no embedding file (`declrag.embed.embedder.Embedder.cache`): nothing to measure

    def __deepcopy__(self, memo):
        return self

    def covers(self, language: str) -> bool:
        """Every language: words are hashed alike in every script (`declrag.embed.embedder.Embedder.covers`)."""
        return True

    @staticmethod
    def calibrate(cosine):
        """Its cosines as they are (`declrag.embed.embedder.Embedder.calibrate`)."""
        return cosine

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
                        meter_call({"usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cost": cost_usd}, ms)

        lm = _Scripted([], adapter=PlainTextAdapter())
        lm.ms = 0.0
        return lm


class StreamingLM:
    """A scripted LM that streams, for tests of token streaming: a DSPy LM (metered as declrag's are) on a
    LiteLLM provider of its own, ``declrag-fake``, so its tokens travel exactly as a remote route's or the local
    model's do (LiteLLM streaming, DSPy's stream listeners). Its reply, ``reply`` or ``reply(messages)``, comes
    word by word when streamed, whole otherwise. ``delay`` seconds pass before each token; with ``gate`` (a
    `threading.Event`) the last token waits until the gate opens (at most ``gate_timeout`` seconds), so a test
    can open it from its client once the first token has arrived: proof that tokens leave before generation
    ends. ``produced`` counts the tokens generated, ``streamed_calls`` the streamed calls; ``gate_opened`` says
    whether the gate opened in time."""

    def __new__(cls, reply: str | Callable[[list], str], delay: float = 0.0, gate: Any = None,
                gate_timeout: float = 30.0):
        provider = _fake_provider()
        key = f"s{next(_FAKE_IDS)}"
        lm = RoutedLM(f"declrag-fake/{key}", engine="litellm", cache=False, temperature=0.0, max_tokens=256,
                      num_retries=0)
        lm.reply, lm.delay, lm.gate, lm.gate_timeout = reply, delay, gate, gate_timeout
        lm.produced, lm.streamed_calls, lm.gate_opened = 0, 0, None
        provider.lms[key] = lm
        return lm


_FAKE_IDS = itertools.count()


def _fake_usage(messages: list, n_out: int) -> dict:
    n_in = sum(len(str(m.get("content", "")).split()) for m in messages)
    return {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}


def _fake_provider() -> Any:
    """The LiteLLM provider ``declrag-fake`` behind `StreamingLM` (registered on first use)."""
    import litellm

    setup()
    for p in litellm.custom_provider_map:
        if p.get("provider") == "declrag-fake":
            return p["custom_handler"]
    handler = _fake_handler()
    litellm.custom_provider_map = [*litellm.custom_provider_map,
                                   {"provider": "declrag-fake", "custom_handler": handler}]
    litellm.utils.custom_llm_setup()
    return handler


def _fake_handler() -> Any:
    import asyncio
    import re
    import time

    import litellm
    from litellm.llms.custom_llm import CustomLLM

    def tokens(text: str) -> list[str]:
        return re.findall(r"\s*\S+\s*$|\s*\S+", text) or [text]

    class Handler(CustomLLM):
        lms: dict[str, Any] = {}

        def reply(self, model: str, messages: list) -> tuple[Any, str]:
            lm = self.lms[model]
            return lm, lm.reply(messages) if callable(lm.reply) else lm.reply

        def completion(self, model: str, messages: list, *args, **kwargs):
            lm, text = self.reply(model, messages)
            n = len(tokens(text))
            lm.produced += n
            return litellm.ModelResponse(
                model=f"declrag-fake/{model}", usage=litellm.Usage(**_fake_usage(messages, n)),
                choices=[litellm.Choices(index=0, finish_reason="stop",
                                         message=litellm.Message(role="assistant", content=text))])

        async def acompletion(self, *args, **kwargs):
            return self.completion(*args, **kwargs)

        def streaming(self, model: str, messages: list, *args, **kwargs):
            lm, text = self.reply(model, messages)
            lm.streamed_calls += 1
            parts = tokens(text)
            for i, token in enumerate(parts):
                if lm.delay:
                    time.sleep(lm.delay)
                if lm.gate is not None and i == len(parts) - 1 and i > 0:
                    lm.gate_opened = lm.gate.wait(lm.gate_timeout)
                lm.produced += 1
                yield {"text": token, "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                       "tool_use": None}
            yield {"text": "", "is_finished": True, "finish_reason": "stop", "index": 0, "tool_use": None,
                   "usage": _fake_usage(messages, len(parts))}

        async def astreaming(self, *args, **kwargs):
            chunks = self.streaming(*args, **kwargs)
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                yield chunk

    return Handler()
