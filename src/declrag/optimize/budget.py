"""Compile's budgets (trials, time, cost, LM calls), what a process has spent, and the pruner that stops a
trial at the first step where it falls below the median of the finished trials."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
import optuna


@dataclass
class Budget:
    max_trials: int | None = None
    timeout_s: float | None = None
    max_cost_usd: float | None = None
    max_lm_calls: int | None = None


@dataclass
class Spent:
    lm_calls: int = 0  # LM calls made (cache misses)
    cached: int = 0
    cost_usd: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, usage: dict) -> None:
        with self.lock:
            self.lm_calls += int(usage.get("calls", 0) - usage.get("cached", 0))
            self.cached += int(usage.get("cached", 0))
            self.cost_usd += float(usage.get("cost_usd", 0.0))


class BudgetReached(Exception):
    pass


class StepMedianPruner(optuna.pruners.BasePruner):
    """Prune a trial whose value at its latest step is worse than the median of the finished trials' values
    at that same step. Optuna's MedianPruner compares the trial's best value over all its steps instead,
    which fits learning curves but not these steps, which measure different things (a retrieval score, then
    the objective on growing slices of dev): a good retrieval score would shield every later slice."""

    def __init__(self, n_startup_trials: int = 3):
        self.n_startup_trials = n_startup_trials

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        others = [t.intermediate_values[step] for t in done if step in t.intermediate_values]
        if len(others) < self.n_startup_trials:  # repeats and trials scored without this step do not count
            return False
        value, median = trial.intermediate_values[step], float(np.nanmedian(others))
        if math.isnan(value):
            return True
        return value < median if study.direction == optuna.study.StudyDirection.MAXIMIZE else value > median


def trial_counts(trials: list[optuna.trial.FrozenTrial]) -> dict[str, int]:
    """How a study's trials ended: finished (repeats included), pruned, stopped by a budget, repeats."""
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    return {"trials": len(trials), "complete": len([t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]),
            "pruned": len([t for t in pruned if not t.user_attrs.get("stopped_by_budget")]),
            "stopped_by_budget": len([t for t in pruned if t.user_attrs.get("stopped_by_budget")]),
            "repeats": len([t for t in trials if "repeat_of" in t.user_attrs])}

