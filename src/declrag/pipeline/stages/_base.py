"""The contract of the program's stages (`PipelineStage`; they run over one `declrag.pipeline.stages.State`),
what a stage is built from (`Building`), and the embedding time a question spends across them.

A stage declares what the program needs to know of it: its ``name`` (its span, its time in ``latency_ms``, its LM
calls' meter), its ``phase`` (how far `RAGProgram.search` and `retrieve_only` run), its config ``section``, its
``prompts`` (the signature specs it may read) and ``variants`` (the config paths that name a prompt variant, for
compile's space), and how it is built from the program (`build`), warmed up (`warm_up`), run over the state (`run`),
which LM stages it has on (`lm_stages`) and how `Answer.stages` shows it (`describe`). The program is the ordered
list of its stages (`declrag.pipeline.stage_list.STAGES`); every stage class is known by its name (`stage_class`),
which is how a saved program names its stages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, Literal, Protocol

import dspy

from ...config import LMConfig, ProgramConfig
from ...embed.embedder import Embedder
from ...lm.prompts import LMPrompt, SignatureSpec
from ...runtime import tracing
from ...stores.base import Store
from ._state import State

_EMBED_MS: ContextVar[list[float] | None] = ContextVar("declrag_embed_ms", default=None)

#: The phases of a question, in order: the search question and its queries, the candidate pool, the passages handed
#: over, the answer. `RAGProgram.retrieve_only` runs the stages up to ``candidates``, `RAGProgram.search` up to
#: ``passages``, a call all of them.
Phase = Literal["queries", "candidates", "passages", "answer"]
PHASES: tuple[Phase, ...] = ("queries", "candidates", "passages", "answer")

_CLASSES: dict[str, type[PipelineStage]] = {}


class Building(Protocol):
    """What a stage is built from (`PipelineStage.build`): the program being made, with its settings, store, embedder
    and prompt specs set (a `declrag.pipeline.program.RAGProgram`)."""

    config: ProgramConfig
    store: Store
    embedder: Embedder
    specs: dict[str, SignatureSpec]


class PipelineStage(dspy.Module):
    """One stage of the RAG program (a DSPy module). Subclasses set the class attributes and override what they
    need; a subclass with a ``name`` is known by it (`stage_class`).

    Class attributes: ``name`` (str: span, ``latency_ms`` key, LM meter), ``phase`` (`Phase`), ``section`` (the
    `ProgramConfig` section it reads, or None), ``reads`` (every section it is built from, when more than its own:
    a program whose settings change builds it again), ``attribute`` (the program's attribute holding it: its predictors'
    keys in a saved ``dspy_state.json``; default ``name``), ``prompts`` (signature spec names it may use),
    ``variants`` (config path -> the spec names whose variants that path may name)."""

    name: ClassVar[str]
    phase: ClassVar[Phase]
    section: ClassVar[str | None] = None
    reads: ClassVar[tuple[str, ...]] = ()
    attribute: ClassVar[str | None] = None
    prompts: ClassVar[tuple[str, ...]] = ()
    variants: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if cls.__dict__.get("phase") not in PHASES:
                raise TypeError(f"stage {cls.__name__}: phase must be one of {PHASES}")
            _CLASSES[cls.name] = cls

    @classmethod
    def build(cls, program: Building) -> PipelineStage:
        """This stage for ``program`` (its config, store, embedder and prompt specs, all set when stages are built).
        The default: the stage's constructor with its config section (kept as ``cfg``), or with nothing."""
        return cls(program.config.section(cls.section)) if cls.section else cls()

    @classmethod
    def lm_stages(cls, config: ProgramConfig) -> list[str]:
        """The LM stages (routes by `ProgramConfig.stage_lm`) this stage calls under ``config``; none by default."""
        return []

    def describe(self) -> Any:
        """How `Answer.stages` shows this stage; None: not shown. Default: its settings' (``cfg``) ``mode``, else
        all its settings, else None."""
        cfg = getattr(self, "cfg", None)
        if cfg is None:
            return None
        mode = getattr(cfg, "mode", None)
        return mode if mode is not None else cfg.model_dump(mode="json")

    def warm_up(self) -> None:
        """Load what this stage needs (a model, an index) now, not on the first question. Idempotent."""

    def attributes(self, state: State) -> dict[str, Any]:
        """The attributes of this stage's span, known before it runs."""
        return {}

    def span_name(self) -> str:
        """The name of this stage's span (default: its ``name``)."""
        return self.name

    def run(self, state: State, span: Any) -> None:
        """Run over ``state``: read what the earlier stages wrote and write this stage's part. ``span``: this
        stage's span (an OpenTelemetry span, or a non-recording one), for attributes known only after."""
        raise NotImplementedError(f"stage {self.name} does not run")

    def stage_for(self, spec: SignatureSpec, variant: str, lm: LMConfig, name: str | None = None,
                  **params: str) -> LMPrompt:
        """A prompt on ``spec``'s ``variant`` ("default": the spec's own default), run under ``lm``."""
        return LMPrompt(name or self.name, spec, spec.default if variant == "default" else variant, lm, **params)


def stage_class(name: str) -> type[PipelineStage]:
    """The stage class named ``name``; `KeyError` naming the stages known when none is (a saved program whose stage's
    module is not imported)."""
    try:
        return _CLASSES[name]
    except KeyError:
        raise KeyError(f"no stage named {name!r} (known: {', '.join(sorted(_CLASSES))}); import the module that "
                       "defines it before loading") from None


@contextmanager
def embedding_time() -> Iterator[None]:
    """Add the time spent in this block to the current question's embedding time (see `timing_embeddings`)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if (box := _EMBED_MS.get()) is not None:
            box[0] += 1000 * (time.perf_counter() - t0)


@contextmanager
def timing_embeddings() -> Iterator[list[float]]:
    """Collect the embedding time of one question (per thread / context, so concurrent questions don't mix)."""
    box = [0.0]
    token = _EMBED_MS.set(box)
    try:
        yield box
    finally:
        _EMBED_MS.reset(token)


def since_ms(t: float) -> float:
    """Milliseconds since ``t`` (a `time.perf_counter` reading), to the microsecond."""
    return round(1000 * (time.perf_counter() - t), 3)


@contextmanager
def timed(ms: dict[str, float] | None, stage: str, attributes: dict[str, Any] | None = None,
          name: str | None = None) -> Iterator[Any]:
    """One stage of a question: its span (named ``name``, by default the stage), and its time into ``ms``."""
    t = time.perf_counter()
    merged = {"declrag.stage": stage, **(attributes or {})} if tracing.enabled() else None  # off: nothing built
    with tracing.span(name or stage, merged) as s:
        yield s
    if ms is not None:
        ms[stage] = since_ms(t)
