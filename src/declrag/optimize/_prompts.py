"""Prompt optimization of the chosen program with DSPy's optimizers, on the train split only: ``bootstrap``,
``knn`` (DSPy's KNNFewShot idea, kept inside the program so that the saved artifact carries its pool), ``mipro``
and ``gepa`` (whose reflection model reads `gepa_metric`'s feedback; docs/guides/compile.md).

Each is one `Optimizer` class, registered by its name in `OPTIMIZERS`; the metric is the compile objective. An
optimizer that fails with the configured model (a small model may not follow the optimizer's own prompts) is
reported, and the program is kept as it was. The step reads of a compile only `Scoring`: an `Objective`, or a
`Scorer` made from a space alone (what ``declrag bench gepa`` runs it with).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import dspy

from ..errors import DeclragError
from ..evaluate.evaluation import score_case
from ..golden import Example
from ..lm import Meter, metering
from ..lm.prompts import adapter_for, get_lm
from ..metrics.base import Case, Metric, to_case
from ..metrics.catalog import get_metrics
from ..metrics.feedback import findings
from ._budget import Spent
from ._objective import weighted
from ._space import Space

log = logging.getLogger(__name__)


def _examples(exs) -> list[dspy.Example]:
    return [dspy.Example(id=e.id, question=e.question, history=[t.to_dict() for t in e.history],
                         answers=list(e.answers), answerable=e.answerable, gold=e.gold,
                         answer_starts=list(e.answer_starts)).with_inputs("question", "history") for e in exs]


class Scoring(Protocol):
    """What the prompt step reads of a compile (an `Objective` is one): the space (the optimizer's settings and the
    objective's weights), the objective's metrics, and the tally its LM usage is added to."""

    @property
    def space(self) -> Space: ...
    @property
    def metrics(self) -> list[Metric]: ...
    @property
    def spent(self) -> Spent: ...


@dataclass
class Scorer:
    """`Scoring` without a compile: a space's objective metrics and a fresh tally."""

    space: Space
    metrics: list[Metric]
    spent: Spent = field(default_factory=Spent)

    @classmethod
    def of(cls, space: Space) -> Scorer:
        return cls(space, get_metrics(list(space.objective.metrics), space.objective.judges or None))


def objective(comp: Scoring, case: Case) -> float:
    """The compile objective of one answered case."""
    values, _, _ = score_case(case, comp.metrics)
    return weighted(values, comp.space.objective.metrics)


def objective_metric(comp: Scoring, threshold: float = 0.5):
    """The compile objective as a DSPy metric; during bootstrapping (a trace is given) a pass/fail."""
    def metric(example, prediction, trace=None, *args, **kwargs):
        score = objective(comp, to_case(example, prediction))
        return score >= threshold if trace is not None else score
    return metric


def gepa_metric(comp: Scoring, kind: Literal["findings", "score"] = "findings"):
    """GEPA's metric: ``dspy.Prediction(score=the objective, feedback=text)``. The text is the objective and the
    reference answer(s), then, for ``findings``, what the grounding tier found wrong with the answer."""
    def feedback(gold, pred, trace=None, pred_name=None, pred_trace=None):
        case = to_case(gold, pred)
        score = objective(comp, case)
        text = f"objective {score:.2f}; reference: {'; '.join(case.references) or 'unanswerable'}"
        if kind == "findings":
            text += ". " + findings(case)
        return dspy.Prediction(score=score, feedback=text)
    return feedback


class Optimizer:
    """One prompt optimizer, registered by its ``name`` in `OPTIMIZERS` (`register`); the space's
    ``prompt_optimizer.name`` picks it. `run` returns the optimized program (``prog`` itself when it only sets
    what ``prog`` carries); ``train`` and ``dev`` are the splits' examples, already capped at ``max_examples``.
    Like DSPy's ``Teleprompter.compile``, one method per optimizer; the usage and failure handling are
    `optimize_prompts`'s."""

    name: ClassVar[str]

    def __init__(self, comp: Scoring):
        self.comp, self.cfg = comp, comp.space.prompt_optimizer

    def info(self) -> dict[str, Any]:
        """What the report says of this optimizer's settings beyond the train examples."""
        return {}

    def run(self, prog, train: list[Example], dev: list[Example]) -> Any:
        raise NotImplementedError

    @contextmanager
    def task_lm(self, prog) -> Iterator[Any]:
        """The generator's LM (and its adapter) as DSPy's current LM: the optimizers that prompt an LM themselves
        (proposals, reflections) use the one the program answers with."""
        gen = prog.config.stage_lm("generate")
        lm = get_lm(gen)
        with dspy.context(lm=lm, adapter=adapter_for(gen)):
            yield lm


OPTIMIZERS: dict[str, type[Optimizer]] = {}


def register(cls: type[Optimizer]) -> type[Optimizer]:
    """Add ``cls`` to `OPTIMIZERS` under its ``name`` (a class decorator)."""
    OPTIMIZERS[cls.name] = cls
    return cls


def optimizer_for(comp: Scoring) -> Optimizer:
    """The optimizer the space names, over ``comp``; an unknown name is refused with the known ones."""
    name = comp.space.prompt_optimizer.name
    if name not in OPTIMIZERS:
        raise DeclragError(f"unknown prompt optimizer {name!r}",
                           hint="prompt_optimizer.name is one of: none, " + ", ".join(sorted(OPTIMIZERS)))
    return OPTIMIZERS[name](comp)


@register
class Bootstrap(Optimizer):
    """DSPy's BootstrapFewShot: demos bootstrapped from the program's own successful runs."""

    name = "bootstrap"

    def run(self, prog, train, dev):
        trainset = _examples(train)
        tele = dspy.BootstrapFewShot(metric=objective_metric(self.comp), max_bootstrapped_demos=self.cfg.max_demos,
                                     max_labeled_demos=0, max_rounds=1, max_errors=len(trainset))
        return tele.compile(prog, trainset=trainset)


@register
class Knn(Optimizer):
    """Demos chosen per question by similarity, from a pool that travels in the artifact (`knn_pool`)."""

    name = "knn"

    def run(self, prog, train, dev):
        prog.generate.set_knn_pool(knn_pool(prog, train), self.cfg.max_demos)
        return prog


@register
class Mipro(Optimizer):
    """DSPy's MIPROv2: instruction proposals and demos, searched with Optuna."""

    name = "mipro"

    def run(self, prog, train, dev):
        cfg = self.cfg
        with self.task_lm(prog) as lm:
            tele = dspy.MIPROv2(metric=objective_metric(self.comp), prompt_model=lm, task_model=lm, auto=None,
                                num_candidates=cfg.trials, max_bootstrapped_demos=cfg.max_demos,
                                max_labeled_demos=cfg.max_demos, num_threads=1, verbose=False)
            return tele.compile(prog, trainset=_examples(train), valset=_examples(dev), num_trials=cfg.trials,
                                minibatch=False, requires_permission_to_run=False)


@register
class Gepa(Optimizer):
    """DSPy's GEPA: reflective instruction evolution; its reflection model reads `gepa_metric`'s feedback."""

    name = "gepa"

    def info(self) -> dict[str, Any]:
        return {"feedback": self.cfg.feedback}

    def run(self, prog, train, dev):
        with self.task_lm(prog) as lm:
            return self.evolve(prog, _examples(train), _examples(dev), lm)

    def evolve(self, prog, trainset: list[dspy.Example], valset: list[dspy.Example], lm) -> Any:
        tele = dspy.GEPA(metric=gepa_metric(self.comp, self.cfg.feedback), reflection_lm=lm,
                         max_metric_calls=self.cfg.trials * len(trainset), num_threads=1, track_stats=False)
        return tele.compile(prog, trainset=trainset, valset=valset)


def optimize_prompts(prog, comp: Scoring, train, dev) -> tuple[Any, dict[str, Any]]:
    """``prog`` with the space's prompt optimizer run on ``train`` (and ``dev``, for those that validate), and its
    report: the examples, the usage, the demos, and the error of an optimizer that failed (the program is then
    kept as it was)."""
    opt = optimizer_for(comp)
    cap = opt.cfg.max_examples
    info: dict[str, Any] = {"train_examples": len(train[:cap]), **opt.info()}
    meter = Meter()
    try:
        with metering(meter):
            new = opt.run(prog, train[:cap], dev[:cap])
    except Exception as e:  # reported, not fatal: the search's best program stands
        log.warning("prompt optimizer %s failed: %s", opt.name, e)
        info["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        new = prog
    info["usage"] = meter.to_dict().get("total", {})
    comp.spent.add(info["usage"])
    info["demos"] = {name: len(p.demos) for name, p in new.named_predictors()}
    return new, info


def knn_pool(prog, train) -> list[dict[str, str]]:
    """Labelled demos for kNN selection: each train question with the context the program retrieves for it
    and its reference answer (or the abstention phrase for unanswerable questions)."""
    pool = []
    phrase = prog.config.generate.abstain_phrase
    for ex in train:
        pool_hits = prog.retrieve_only(ex.question, history=ex.history)[: prog.config.retrieve.k]
        answer = (ex.answers[0] if ex.answers else phrase) if ex.answerable or not ex.answers else phrase
        pool.append({"question": ex.question, "context": prog.generate.context(pool_hits), "answer": answer})
    return pool
