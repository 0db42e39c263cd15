"""Compile's budgets (trials, time, cost, LM calls), what a process has spent, and the pruner that stops a
trial at the first step where it falls below the median of the finished trials."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna

if TYPE_CHECKING:
    from ._study import Ledger


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


@dataclass
class Account:
    """Where a compile's LM usage is charged: this process's tally (``spent``: per-trial attributes, the summary)
    and, once a study is open, the study's ``ledger`` (`declrag.optimize._study.Ledger`), whose budgets every
    worker reads. The budgets bound the search: once it ends (``searching`` False) the final scoring (prompts,
    test) is tallied here but neither checked nor charged to the ledger."""

    spent: Spent = field(default_factory=Spent)
    ledger: Ledger | None = None
    searching: bool = True

    def check(self) -> None:
        """Raise `BudgetReached` when the search has spent a budget."""
        if not self.searching:
            return
        if self.ledger is not None and (reason := self.ledger.exhausted()):
            raise BudgetReached(reason)

    def spend(self, usage: dict) -> None:
        """Add one call's (or one stage's) usage: ``{"calls", "cached", "cost_usd"}``."""
        self.spent.add(usage)
        if self.ledger is not None and self.searching:
            self.ledger.spend(int(usage.get("calls", 0) - usage.get("cached", 0)), int(usage.get("cached", 0)),
                              float(usage.get("cost_usd", 0.0)))

    def state(self) -> dict[str, Any]:
        """The study's LM calls and their budget (the ledger's, else this process's calls and no budget)."""
        return self.ledger.state() if self.ledger is not None else {"lm_calls": self.spent.lm_calls,
                                                                    "max_lm_calls": None}


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

