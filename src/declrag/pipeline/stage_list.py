"""The program's stages, in the order a question runs through them (`STAGES`): the one list `RAGProgram` is made of.

Everything that depends on which stages there are is derived from it: the prompts a program loads (`needed_specs`),
the config paths that name a prompt variant for compile's space (`variant_specs`), the LM routes checked and warmed up
(`lm_stages`), an answer's ``stages`` and ``latency_ms``, and the names a saved program records (its artifact's
``stages``). A new stage is one file (a `PipelineStage` subclass; its settings a `declrag.config.Strict` section
registered with `declrag.config.register_section`) and one entry here."""

from __future__ import annotations

from collections.abc import Sequence

from ..config import ProgramConfig
from .stages import PHASES, PipelineStage, QueryRewriter, Reranker, SelfJudge, stage_class
from .stages.generate import Generator
from .stages.history import HistoryQuery
from .stages.retrieve import Retriever
from .stages.select import Selector

#: The stages of a program, in order; each phase's stages before the next phase's (`declrag.pipeline.stages.PHASES`).
STAGES: list[type[PipelineStage]] = [HistoryQuery, QueryRewriter, Retriever, Reranker, Selector, Generator, SelfJudge]


def resolved(stages: Sequence[type[PipelineStage] | str] | None = None) -> tuple[type[PipelineStage], ...]:
    """A program's stages as classes, checked.

    Args:
        stages: stage classes, or their names as an artifact records them; None: `STAGES` as it is now.

    Returns:
        The classes, in order.

    Raises:
        KeyError: a name no imported stage has (the message names those known).
        ValueError: a stage listed twice, or the phases out of order (`declrag.pipeline.stages.PHASES`).
    """
    kinds = tuple(stage_class(s) if isinstance(s, str) else s for s in (STAGES if stages is None else stages))
    names = [k.name for k in kinds]
    if len(set(names)) != len(names):
        raise ValueError(f"a stage is listed twice: {names}")
    ranks = [PHASES.index(k.phase) for k in kinds]
    if ranks != sorted(ranks):
        raise ValueError(f"stages out of phase order {PHASES}: " + ", ".join(f"{k.name} ({k.phase})" for k in kinds))
    return kinds


def needed_specs(stages: Sequence[type[PipelineStage]] | None = None) -> tuple[str, ...]:
    """The signature specs (``signatures/*.yaml``) the stages may read.

    Args:
        stages: the stages; None: `STAGES`.

    Returns:
        Their names, each once, in stage order.
    """
    return tuple(dict.fromkeys(p for k in resolved(stages) for p in k.prompts))


def variant_specs(stages: Sequence[type[PipelineStage]] | None = None) -> dict[str, tuple[str, ...]]:
    """The config paths that name a prompt variant: what compile checks a space's prompt-variant parameters against.

    Args:
        stages: the stages; None: `STAGES`.

    Returns:
        Config path -> the signature specs whose variants it may name (``generate.variant`` -> ``("generate",)``).
    """
    return {path: specs for k in resolved(stages) for path, specs in k.variants.items()}


def lm_stages(config: ProgramConfig, stages: Sequence[type[PipelineStage]] | None = None) -> list[str]:
    """The LM stages a config has on.

    Args:
        config: the program's settings.
        stages: the stages; None: `STAGES`.

    Returns:
        The LM stages' names (routes by `ProgramConfig.stage_lm`), in stage order.
    """
    return [name for k in resolved(stages) for name in k.lm_stages(config)]
