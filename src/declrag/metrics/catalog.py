"""Every metric by name: the deterministic ones (registered in `base.REGISTRY` by `answer`, `context` and
`grounding`) and the LLM-judge tier (`judges`). It sits above both, so neither needs the other."""

from __future__ import annotations

from ..errors import DeclragError
from . import answer, context, grounding  # noqa: F401  (they register the deterministic metrics)
from ._judges import JUDGE_METRICS, make_judge_metric
from .base import REGISTRY, FnMetric, Metric, Score
from .budget import budget_scores, is_budget_metric
from .retrieval import is_retrieval


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
        elif is_budget_metric(n):
            out.append(budget_metric(n))
        elif is_retrieval(n) and n.partition("@")[2].isdigit():  # a registered kind at a depth of its own
            out.append(context.passages_metric(n))
        elif n in JUDGE_METRICS:
            if not judges:
                raise DeclragError(f"metric {n!r} needs an LLM judge",
                                   hint="add --judge ROUTE (e.g. --judge local/smollm2)")
            out.append(make_judge_metric(n, judges))
        else:
            known = sorted([*REGISTRY, *JUDGE_METRICS])
            raise DeclragError(f"unknown metric {n!r}", hint=f"known metrics: {', '.join(known)}; at a context "
                               "budget of B characters: ndcg@Bc, recall@Bc, hit@Bc (e.g. ndcg@5000c)")
    return out


def budget_metric(name: str) -> Metric:
    """``kind@Bc`` (`declrag.metrics.budget`): the evidence within the first B characters the passages hand over."""
    if name.endswith("@budget"):
        raise DeclragError(f"metric {name!r} needs a context budget", hint="give --context-budget CHARS")

    def fn(case) -> Score:
        scored = budget_scores(case.passages, case.gold_spans(), case.references, case.gold, [name])
        if scored is None:
            return Score(None, {"rule": "no gold spans, short answers or gold documents"})
        values, unit = scored
        return Score(values[name], {"unit": unit})

    return FnMetric(name, fn, f"{name.split('@')[0]} of the evidence within the first {name.split('@')[1][:-1]} "
                              "characters handed over, each once (declrag.metrics.budget)")
