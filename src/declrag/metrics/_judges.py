"""The LLM-judge tier: each judge is itself a DSPy program (prompts in signatures/judge_*.yaml) on any
LiteLLM route. Several judges are averaged; calls are cached like every LM call; their usage is metered
under ``judge:<metric>`` so an evaluation reports judge cost apart from the program's.

The abstention rules are applied before any judge is asked, exactly as in the deterministic tier.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from ..config import LMConfig
from ..lm import registry
from ..lm.prompts import LMPrompt, spec
from ..text.normalize import strip_citations
from ._embedding import shared_embedder
from .base import Case, Metric, Score
from .context import AGGREGATES
from .grounding import answer_retrieved

JUDGE_METRICS = ["correctness_llm", "faithfulness_llm", "hallucination_llm", "sia_llm", "answer_relevancy_llm",
                 "context_relevance_llm", "context_relevance_llm:max", "context_relevance_llm:first",
                 "coherence_llm", "fluency_llm", "triad_llm"]


# a grade or a yes/no needs a few tokens; lists a few lines. Small models ramble until the limit, so it
# is kept tight: it bounds the judge's cost.
JUDGE_MAX_TOKENS = {"judge_correctness": 8, "judge_verify": 8, "judge_context": 8, "judge_coherence": 8,
                    "judge_fluency": 8, "judge_claims": 80, "judge_sia": 48, "judge_questions": 64}


class Judge:
    """One judge route: runs the judge prompts under ``judge:<metric>`` metering."""

    def __init__(self, route: str):
        self.route = route
        self._stages = {name: LMPrompt("judge", spec(name), spec(name).default,
                                    LMConfig(route=route, temperature=0.0, max_tokens=tokens, adapter="auto"))
                        for name, tokens in JUDGE_MAX_TOKENS.items()}

    def ask(self, metric: str, prompt: str, **inputs):
        return self._stages[prompt].run(metered_as=f"judge:{metric}", **inputs)

    # -- one value per judge ---------------------------------------------------------------------------
    def correctness(self, case: Case) -> float:
        scores = [self.ask("correctness_llm", "judge_correctness", question=case.question, reference=r,
                           answer=strip_citations(case.answer)).score for r in case.references]
        return max(_rubric(s) for s in scores)

    def faithfulness(self, case: Case) -> tuple[float, list[str]]:
        claims = self.ask("faithfulness_llm", "judge_claims", answer=strip_citations(case.answer)).claims or []
        claims = [c for c in claims if c.strip()][:10] or [strip_citations(case.answer)]
        bad = [c for c in claims
               if not self.ask("faithfulness_llm", "judge_verify", context=case.context, claim=c).supported]
        return 1 - len(bad) / len(claims), bad

    def sia(self, case: Case) -> tuple[float, list[str]]:
        out = self.ask("sia_llm", "judge_sia", context=case.context,
                       answer=strip_citations(case.answer)).unsupported or []
        bad = [d for d in out if d.strip() and d.strip().lower().strip(".") not in ("none", "no", "n/a", "nothing")]
        return (0.0 if bad else 1.0), bad

    def answer_relevancy(self, case: Case) -> float:
        qs = self.ask("answer_relevancy_llm", "judge_questions", answer=strip_citations(case.answer)).questions or []
        qs = [q for q in qs if q.strip()][:3]
        if not qs:
            return 0.0
        vecs = shared_embedder().embed_documents([case.question, *qs])
        return float(np.clip(np.mean(vecs[1:] @ vecs[0]), 0.0, 1.0))

    def context_relevance(self, case: Case, agg: str) -> float:
        per = [1.0 if self.ask("context_relevance_llm", "judge_context", question=case.question,
                               passage=p.text).relevant
               else 0.0 for p in (case.passages[:1] if agg == "first" else case.passages)]
        return float(AGGREGATES[agg](per)) if per else 0.0

    def rubric(self, metric: str, prompt: str, case: Case) -> float:
        inputs = {"answer": strip_citations(case.answer)}
        if prompt == "judge_coherence":
            inputs["question"] = case.question
        return _rubric(self.ask(metric, prompt, **inputs).score)


def _rubric(score) -> float:
    """1-5 -> [0, 1]; a reply that is not a number in range counts as the lowest grade."""
    try:
        s = int(score)
    except (TypeError, ValueError):
        return 0.0
    return (min(max(s, 1), 5) - 1) / 4


def _correctness_rules(case: Case) -> Score | None:
    if not case.answerable:
        return Score(1.0 if case.abstained else 0.0, {"rule": "abstention rules"})
    if case.abstained:
        return Score(0.0, {"rule": "abstained on an answerable question"})
    if not case.references:
        return Score(None, {"rule": "no reference answer"})
    return None


def _sia_rules(case: Case) -> Score | None:
    if not case.answerable:
        return Score(1.0 if case.abstained else 0.0, {"rule": "abstention rules"})
    if case.abstained:
        return Score(0.0 if answer_retrieved(case) else 1.0, {"rule": "abstention rules"})
    return None


class JudgeMetric(Metric):
    tier = "llm"

    def __init__(self, name: str, judges: list[Judge], fn: Callable[[Judge, Case], tuple[float, list] | float],
                 rules: Callable[[Case], Score | None] | None = None, higher_is_better: bool = True):
        self.name, self.judges, self._fn, self._rules, self.higher_is_better = name, judges, fn, rules, higher_is_better

    def score(self, case: Case) -> Score:
        if self._rules and (fixed := self._rules(case)) is not None:
            return fixed
        values, details = [], {}
        for j in self.judges:
            out = self._fn(j, case)
            value, flagged = out if isinstance(out, tuple) else (out, None)
            values.append(value)
            details[j.route] = {"value": round(value, 4), **({"flagged": flagged} if flagged else {})}
        return Score(float(np.mean(values)), details)


def make_judge_metric(name: str, routes: list[str]) -> JudgeMetric:
    judges = [registry.shared("judge", r, partial(Judge, r)) for r in routes]  # one per route, process-wide
    base, _, agg = name.partition(":")
    agg = agg or "mean"
    faithful_abstain = lambda c: Score(1.0, {"rule": "abstention: no claims"}) if c.abstained else None  # noqa: E731
    table = {
        "correctness_llm": (lambda j, c: j.correctness(c), _correctness_rules, True),
        "faithfulness_llm": (lambda j, c: j.faithfulness(c), faithful_abstain, True),
        "hallucination_llm": (lambda j, c: (1 - j.faithfulness(c)[0], j.faithfulness(c)[1]),
                              lambda c: Score(0.0, {"rule": "abstention"}) if c.abstained else None, False),
        "sia_llm": (lambda j, c: j.sia(c), _sia_rules, True),
        "answer_relevancy_llm": (lambda j, c: j.answer_relevancy(c),
                                 lambda c: Score(None if not c.answerable else 0.0) if c.abstained else None, True),
        "context_relevance_llm": (lambda j, c: j.context_relevance(c, agg), None, True),
        "coherence_llm": (lambda j, c: j.rubric("coherence_llm", "judge_coherence", c), None, True),
        "fluency_llm": (lambda j, c: j.rubric("fluency_llm", "judge_fluency", c), None, True),
        "triad_llm": (lambda j, c: float(np.mean([j.context_relevance(c, agg),
                                                  1.0 if c.abstained else j.faithfulness(c)[0],
                                                  0.0 if c.abstained else j.answer_relevancy(c)])), None, True),
    }
    fn, rules, hib = table[base]
    return JudgeMetric(name, judges, fn, rules, hib)
