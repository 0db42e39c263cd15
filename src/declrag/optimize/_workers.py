"""The loop that runs a compile's trials, kept apart from what a trial scores (`declrag.optimize._objective`), as
Optuna keeps its run loop (``study/_optimize.py``) apart from the objective it calls: the study opened with its
sampler and pruner, trial slots taken from the study's ledger (--max-trials, shared by every worker of a study
on any machine), the queued trials (the baseline, retries of killed trials) run first, and ``jobs`` threads."""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import optuna

from ..errors import DeclragError
from ._budget import Budget, StepMedianPruner
from ._objective import Objective
from ._space import Space, grid
from ._study import Ledger, Patience, Place, create_or_join, is_db_error
from ._trials import WORKER

KNOWN_MAX = 50  # programs in a row already scored or pruned that end a search (`Workers.converged`)
log = logging.getLogger(__name__)


@contextmanager
def optuna_quiet() -> Iterator[None]:
    """Optuna's INFO lines (a study created, each trial finished: the trial log says it better) silenced while a
    compile runs; Optuna's level is put back as it was after."""
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(max(before, optuna.logging.WARNING))
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)


def sampler_and_pruner(space: Space, seed: int | None = None) -> tuple[list[Literal["maximize", "minimize"]],
                                                                      optuna.samplers.BaseSampler, StepMedianPruner]:
    """The study's directions, sampler (the space's, seeded with its seed unless ``seed``) and pruner."""
    directions: list[Literal["maximize", "minimize"]] = ["maximize"]
    directions += ["minimize"] * len(space.objective.also)
    sampler = space.sampler.build(len(directions), space.split.seed if seed is None else seed)
    return directions, sampler, StepMedianPruner(space.fidelity.startup_trials)


class Workers:
    """This process's workers on a study of ``objective``: ``jobs`` threads, each taking a trial slot, then
    asking the sampler for a trial and scoring it, until the budgets are spent and no trial runs anywhere."""

    def __init__(self, objective: Objective, budget: Budget, jobs: int = 1):
        self.objective, self.budget, self.jobs = objective, budget, jobs
        self.poll_s = 2.0  # how often a worker without work looks for others' trials coming back
        self._local = threading.local()  # a thread's slot, taken before it asks for a new trial
        self._said_converged = False
        self._grid: set[str] | None = None  # the grid sampler's programs, as `_program_key`s

    @property
    def ledger(self) -> Ledger | None:
        return self.objective.account.ledger

    def open_study(self, place: Place, identity: dict[str, Any], join: bool = False, adopt: bool = False
                   ) -> tuple[optuna.Study, bool]:
        """Create or join the study at ``place`` (`declrag.optimize._study.place`); its ledger holds the
        objective's budgets from now on. Returns the study and whether it was created here."""
        space = self.objective.space
        self.objective.account.ledger = place.ledger
        with optuna_quiet():
            study, created = create_or_join(place, identity, *sampler_and_pruner(space),
                                            space.baseline_values(self.objective.model),
                                            self.budget, join=join, adopt=adopt)
        if not created:  # another worker, or a later sitting: a sampler seeded alike would propose the same points
            study.sampler = sampler_and_pruner(space, seed=zlib.crc32(f"{WORKER}:{time.time_ns()}".encode()))[1]
        return study, created

    def search(self, study: optuna.Study, patience: Patience | None = None) -> optuna.Study:
        """Work on ``study`` until its budgets are spent and no trial is left running anywhere: run the
        queued trials (the baseline, retries of killed trials) first, else take a slot and ask the sampler
        for a new trial, else wait for the other workers' trials (a killed one comes back as a retry). With
        ``jobs`` > 1, that many threads do this in this process. ``patience`` rides out a lost database
        connection. The budgets bound the search only: the objective's later scoring is not charged."""
        if self.ledger is None:
            raise RuntimeError("Workers.search needs a study opened with open_study (its ledger)")
        with optuna_quiet():
            if self.jobs > 1:
                self._threads(study, patience)
            else:
                self._work(study, patience)
        self.objective.account.searching = False
        return study

    def _threads(self, study: optuna.Study, patience: Patience | None) -> None:
        errors: list[BaseException] = []

        def work():
            try:
                self._work(study, patience)
            except BaseException as e:  # noqa: BLE001 (raised again below, in the caller's thread)
                errors.append(e)

        # each thread starts from this context (an LM chosen with `using_lm` holds in all of them)
        threads = [threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True)
                   for _ in range(self.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def _work(self, study: optuna.Study, patience: Patience | None) -> None:
        ledger = self.ledger
        assert ledger is not None, "search checks it"
        states = optuna.trial.TrialState
        while True:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(study)  # killed workers' trials: failed, queued again once
                took = False
                if not study.get_trials(deepcopy=False, states=(states.WAITING,)):
                    took = ledger.exhausted() is None and not self.grid_done(study) and not self.converged() \
                        and ledger.take_trial()
                    if not took:
                        if study.get_trials(deepcopy=False, states=(states.RUNNING,)):
                            time.sleep(self.poll_s)  # others are still at work: a killed one's trial comes back
                            continue
                        return
                self._local.slot = took
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    study.optimize(self._trial, n_trials=1, catch=(DeclragError,), show_progress_bar=False)
            except Exception as e:
                if patience is None or not is_db_error(e):
                    raise
                patience.wait(e, "running the search")

    def _trial(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        """One trial: its slot charged, then the objective."""
        if not self._charge(trial):
            trial.set_user_attr("stopped_by_budget", True)
            raise optuna.TrialPruned("max trials reached")
        trial.set_user_attr("worker", WORKER)  # host:pid, for the dashboard and the logs
        return self.objective(trial)

    def _charge(self, trial: optuna.Trial) -> bool:
        """Count ``trial`` against --max-trials once. The worker took a slot before asking for a new trial;
        a queued trial (the baseline) takes its slot here; a retry of a killed trial is free (the killed one
        took it). False: no slot left (another worker took the last one a moment ago)."""
        ledger = self.ledger
        assert ledger is not None, "set by open_study"
        held, self._local.slot = getattr(self._local, "slot", False), False
        frozen = next((t for t in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                       if t.number == trial.number), None)
        if frozen is not None and "failed_trial" in frozen.system_attrs:
            trial.set_user_attr("retry_of", frozen.system_attrs["failed_trial"])
            if held:
                ledger.give_back_trial()
            return True
        return held or ledger.take_trial()

    def converged(self) -> bool:
        """Whether the sampler proposed `KNOWN_MAX` programs in a row that were already scored or pruned: a repeat
        and a retrieval-first prune cost no LM call, so a search bounded by LM calls alone would sample them for
        ever (a TPE sampler on a small space can circle for thousands of trials without finding its last few
        programs). The search ends there, and says so."""
        if self.objective.known_in_a_row < KNOWN_MAX:
            return False
        if not self._said_converged:
            self._said_converged = True
            log.warning("the search ends: the sampler proposed %d programs in a row that were already scored",
                        KNOWN_MAX)
        return True

    def grid_done(self, study: optuna.Study) -> bool:
        """With the grid sampler: whether every program of the grid has been scored (its sampler would only
        repeat them now, so the search ends there, within the trial budget)."""
        space = self.objective.space
        if space.sampler.resolved(space.objectives) != "grid":
            return False
        if self._grid is None:
            self._grid = {_program_key(c) for c in grid(space)}
        done = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
        return self._grid <= {_program_key(t.params) for t in study.get_trials(deepcopy=False, states=done)}


def _program_key(values: dict[str, Any]) -> str:
    """Parameter values as one comparable string (3 and 3.0 alike)."""
    return json.dumps({k: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                       for k, v in values.items()}, sort_keys=True, default=str)
