"""A program's answer as a token stream, for `declrag serve`'s ``stream: true``.

`dspy.streamify` puts a send stream into DSPy's settings; every LM call of the program then streams its chunks into
it (LiteLLM's ``stream=True``; the local model through the ``local`` provider's ``astreaming``), and an
`AnswerListener` on the generate stage's main predictor picks out the ``answer`` field: the other stages' chunks are
dropped, and a response from DSPy's cache streams nothing (the answer then arrives whole with the result).
`CitationStream` keeps what is sent a prefix of the post-processed answer, and sends nothing of an output that echoes
the prompt or copies the passages (`declrag.pipeline.stages.generate.EchoGate`). The extractive and verified modes send
their answer as one piece once it is made (verified: once checked, so no word the check drops is ever sent).
Post-processing that replaces the text (an abstention recognised, markers attributed, the self-judge abstaining or
regenerating) cannot be streamed: `Done.streamed` says what was sent, for the caller to compare.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
import dspy
from dspy.streaming import StatusMessageProvider, StreamListener, StreamResponse

from ....lm.prompts import PlainTextAdapter, adapter_for
from ._echo import EchoGate
from ._postprocess import resolve_citations
from ._stage import VETTED

_OPEN_MARKER = re.compile(r"\[[\s\d,;]*$")  # the start of what may still become a [n] marker


class CitationStream:
    """`resolve_citations` applied to a growing answer: ``feed`` takes the next piece of the model's text and
    returns what can be sent now, so that everything sent is a prefix of ``resolve_citations(whole).text``.
    Held back until known: trailing whitespace (it may precede punctuation) and an unclosed ``[``; with a ``gate``,
    what it holds back (an echo, a copy: `EchoGate`)."""

    def __init__(self, n_passages: int | None = None, gate: EchoGate | None = None):
        self.n_passages, self.gate, self.raw, self.sent = n_passages, gate, "", ""

    def feed(self, piece: str, vetted: bool = False) -> str:
        """``vetted``: the piece is a whole answer the program made or checked itself (`VETTED`), not the LM's
        tokens: the gate does not hold it; sent only when nothing of an earlier output was."""
        if vetted:
            if self.sent:  # the final answer will not extend what was sent: the caller is told it was replaced
                return ""
            self.gate, self.raw = None, ""
        self.raw += piece
        if self.n_passages is None:  # not known yet: nothing can be judged
            return ""
        safe = self.raw.rstrip()
        if m := _OPEN_MARKER.search(safe):
            safe = safe[: m.start()]
        if self.gate is not None:
            safe = safe[: self.gate.safe(safe)].rstrip()
        clean = resolve_citations(safe, self.n_passages).text
        if not clean.startswith(self.sent):  # cannot happen for a safe prefix; hold rather than contradict
            return ""
        out, self.sent = clean[len(self.sent):], clean
        return out


class AnswerListener(StreamListener):
    """DSPy's listener on a predictor's ``answer`` field, told the predictor's adapter (DSPy's listener reads
    it from the global settings, but declrag sets it per stage). With the plain-text adapter, which DSPy's
    listener does not know, the whole completion is the answer: every content token is passed on."""

    def __init__(self, predict: dspy.Predict, adapter: Any, name: str = "generate"):
        super().__init__("answer", predict=predict, predict_name=name)
        self.adapter = adapter

    def receive(self, chunk):
        if isinstance(self.adapter, PlainTextAdapter):
            try:
                text = chunk.choices[0].delta.content
            except (AttributeError, IndexError, TypeError):
                return None
            if not text:
                return None
            self.stream_start = True
            return StreamResponse(self.predict_name, self.signature_field_name, text, is_last_chunk=False)
        with dspy.settings.context(adapter=self.adapter):
            return super().receive(chunk)

    def finalize(self):
        if isinstance(self.adapter, PlainTextAdapter):
            return None
        with dspy.settings.context(adapter=self.adapter):
            return super().finalize()


class _GenerateInputs(StatusMessageProvider):
    """Learns, as the generate stage starts, how many passages its ``[n]`` markers may point at, and what an echo
    of its prompt would hold (the question, the passages as shown, the instructions: `EchoGate`)."""

    def __init__(self, generator: dspy.Module):
        self.generator, self.n, self.gate = generator, None, None

    def module_start_status_message(self, instance, inputs):
        if instance is self.generator:
            kw = inputs.get("kwargs", inputs)
            passages = kw.get("passages") or []
            self.n = len(passages)
            self.gate = EchoGate(self.generator.prompt(kw.get("question") or "", passages, bool(kw.get("strict"))))
        return None  # no message: only the answer's tokens are streamed


class _Run(dspy.Module):
    """What `dspy.streamify` runs: ``call`` on an AnyIO worker thread (DSPy's streaming LM calls go back to
    the event loop through it). Cancelling reaches the thread at its next LM token (its streaming call fails)
    and waits for it to end: a slot is held until the work really ends."""

    def __init__(self, call: Callable[[], Any]):
        super().__init__()
        self.call = call

    async def acall(self, *args, **kwargs):
        return dspy.Prediction(result=await anyio.to_thread.run_sync(self.call))


@dataclass
class Done:
    """The end of a stream: ``call``'s result, and the text that was streamed (cleaned, as sent)."""

    result: Any
    streamed: str


async def astream(program: Any, call: Callable[[], Any]) -> AsyncIterator[str | Done]:
    """Run ``call`` (blocking; it runs ``program``, a `RAGProgram`, e.g. ``lambda: program(question=q)``) on a
    worker thread and yield the pieces of the answer's text as the generate stage's LM produces them (see
    `CitationStream`), then `Done`. Raises what ``call`` raises."""
    gen = program.generate
    counter = _GenerateInputs(gen)
    # only an LM that writes the answer as it is streams its tokens (``auto`` may be one: an LM set in the worker
    # thread decides); the deterministic modes send their answer themselves, and the verified mode only once it has
    # been checked (no unsupported word reaches the client)
    writes = gen.cfg.mode in ("lm", "auto")
    listeners = [AnswerListener(gen.main.predict, adapter_for(gen.main.lm_config))] if writes else []
    streamer = dspy.streamify(_Run(call), status_message_provider=counter, stream_listeners=listeners,
                              include_final_prediction_in_output_stream=True, is_async_program=True)
    clean, final = CitationStream(), None
    async with aclosing(streamer()) as items:  # closed in this task: DSPy's task group is bound to it
        async for item in items:
            if isinstance(item, StreamResponse):
                if clean.n_passages is None:
                    clean.n_passages, clean.gate = counter.n, counter.gate
                if piece := clean.feed(item.chunk, vetted=item.predict_name == VETTED):
                    yield piece
            elif isinstance(item, dspy.Prediction):
                final = item
    if final is None:  # streamify ends with the program's result; anything else is a bug, not an answer
        raise RuntimeError("the program's stream ended without a result")
    yield Done(final.result, clean.sent)
