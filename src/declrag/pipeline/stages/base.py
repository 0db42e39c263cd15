"""The base of the program's stages (`PipelineStage`), and the embedding time a question spends across them."""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar

import dspy

from ...config import LMConfig
from ..signatures import SignatureSpec
from ..stage import Stage

_EMBED_MS: ContextVar[list[float] | None] = ContextVar("declrag_embed_ms", default=None)


class PipelineStage(dspy.Module):
    """One stage of the RAG program (a DSPy module): its ``name`` is what its LM calls are metered and traced as,
    and `stage_for` builds one of its prompts (a `declrag.pipeline.stage.Stage`) from a signature spec."""

    name: ClassVar[str]

    def stage_for(self, spec: SignatureSpec, variant: str, lm: LMConfig, name: str | None = None,
                  **params: str) -> Stage:
        """A prompt on ``spec``'s ``variant`` ("default": the spec's own default), run under ``lm``."""
        return Stage(name or self.name, spec, spec.default if variant == "default" else variant, lm, **params)


@contextmanager
def embedding_time():
    """Add the time spent in this block to the current question's embedding time (see `timing_embeddings`)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if (box := _EMBED_MS.get()) is not None:
            box[0] += 1000 * (time.perf_counter() - t0)


@contextmanager
def timing_embeddings():
    """Collect the embedding time of one question (per thread / context, so concurrent questions don't mix)."""
    box = [0.0]
    token = _EMBED_MS.set(box)
    try:
        yield box
    finally:
        _EMBED_MS.reset(token)
