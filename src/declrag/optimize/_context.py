"""The context budget a compile scores retrieval at (`declrag.metrics.budget`).

A retrieval objective named ``kind@budget`` (``optimizers/retrieval.yaml``: ``ndcg@budget``) is scored on the evidence
within the first B characters each program hands over: programs are compared at the same context, not credited for
handing over more text. B is ``objective.context_budget`` (``declrag compile --context-budget CHARS``), by default
what the space's baseline, the default program, hands over on the dev questions (`handed_by_default`), so "better"
means better at the default's cost; a budget smaller than one of its passages is raised to one, and says so.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import with_model
from ..errors import DeclragError
from ..metrics.budget import characters, resolve_budget
from ..metrics.stats import mean_of
from ._space import Space

log = logging.getLogger(__name__)
BUDGET_QUESTIONS = 100  # dev questions the default budget is measured on (the first ones, in split order)
ROUND_TO = 100  # characters


def needs_budget(space: Space) -> bool:
    return any(n.endswith("@budget") for n in space.objective.metrics)


def with_context_budget(space: Space, chars: int | None) -> Space:
    """``space`` with ``objective.context_budget`` = ``chars`` (None: as it is)."""
    if chars is None:
        return space
    if chars < 1:
        raise DeclragError(f"--context-budget {chars}: a budget is a number of characters, at least 1",
                           hint="e.g. --context-budget 5000 (about what 5 chunks of 256 tokens hold)")
    return space.model_copy(update={"objective": space.objective.model_copy(update={"context_budget": chars})})


def budgeted(plan: Any, chars: int | None) -> Any:
    """A compile's plan with ``--context-budget``: a new study's space takes it; a study resumed or joined keeps
    its own, and a different one given is an error."""
    if chars is None:
        return plan
    if plan.role != "new" and plan.space.objective.context_budget != chars:
        raise DeclragError(f"the study {plan.name!r} scores at its own context budget "
                           f"({plan.space.objective.context_budget or 'the default'}), not {chars}",
                           hint="drop --context-budget when resuming or joining")
    plan.space = with_context_budget(plan.space, chars)
    return plan


def handed_by_default(comp: Any) -> tuple[int, int]:
    """What the space's baseline hands over (characters, each once), averaged over the first `BUDGET_QUESTIONS` dev
    questions and rounded to `ROUND_TO`: the default budget; and its mean passage's characters."""
    base = comp.space.baseline()
    prog = comp.program_for(with_model(base, comp.model) if comp.model else base)
    asked = [e for e in comp.splits["dev"] if e.gold or e.answers][:BUDGET_QUESTIONS] or comp.splits["dev"][:1]
    found = [prog.search(e.question, history=e.history) for e in asked]
    got = mean_of([float(characters(hits)) for hits in found]) or 0.0
    one = mean_of([float(len(h.text)) for hits in found for h in hits]) or 0.0
    return max(ROUND_TO, int(round(got / ROUND_TO)) * ROUND_TO), int(one)


def at_budget(comp: Any) -> tuple[Space, int | None]:
    """The compile's space with its ``kind@budget`` metrics named at their budget (``ndcg@4400c``), and the budget
    (None when no metric needs one)."""
    space = comp.space
    if not needs_budget(space):
        return space, space.objective.context_budget
    default, one = handed_by_default(comp)
    chars = space.objective.context_budget or default
    if chars < one:  # not even one passage fits: a budget that credits nothing is no comparison
        log.warning("context budget %d characters is smaller than one passage of the default program (about %d): "
                    "scoring within one passage, %d", chars, one, one)
        chars = one
    obj = space.objective
    metrics = dict(zip(resolve_budget(list(obj.metrics), chars), obj.metrics.values()))
    return space.model_copy(update={"objective": obj.model_copy(update={"metrics": metrics,
                                                                        "context_budget": chars})}), chars


__all__ = ["at_budget", "budgeted", "handed_by_default", "needs_budget", "with_context_budget"]
