"""Every metric by name: the deterministic ones (registered in `base.REGISTRY` by `answer`, `context` and
`grounding`) and the LLM-judge tier (`judges`). It sits above both, so neither needs the other."""

from __future__ import annotations

from ..errors import DeclragError
from . import answer, context, grounding  # noqa: F401  (they register the deterministic metrics)
from .base import REGISTRY, Metric
from .judges import JUDGE_METRICS, make_judge_metric


def get_metrics(names: list[str] | None, judges: list[str] | None = None) -> list[Metric]:
    """Metrics by name (``None``: every deterministic metric); LLM-judge metrics need ``judges``."""
    if names is None:
        return [REGISTRY[n]() for n in REGISTRY]
    if len(set(names)) != len(names):
        raise DeclragError(f"metric named twice in {names}", hint="name each metric once")
    out = []
    for n in names:
        if n in REGISTRY:
            out.append(REGISTRY[n]())
        elif n in JUDGE_METRICS:
            if not judges:
                raise DeclragError(f"metric {n!r} needs an LLM judge",
                                   hint="add --judge ROUTE (e.g. --judge local/smollm2)")
            out.append(make_judge_metric(n, judges))
        else:
            known = sorted([*REGISTRY, *JUDGE_METRICS])
            raise DeclragError(f"unknown metric {n!r}", hint=f"known metrics: {', '.join(known)}")
    return out
