"""`declrag compile`: one Optuna study over retrieval settings and prompts, then DSPy prompt optimization,
then the held-out test, once; the result is the artifact `serve` runs.

runs/<name>/
  compile.json    the inputs (space, dataset, budgets): what `--resume` reads
  split.json      the seeded train / dev / test question ids
  study.journal   Optuna's storage (an append-only journal: a killed process loses at most its trial), and
  budget.sqlite3  the budget ledger; with --storage URL both live in that database instead (optimize/study.py)
  trials.jsonl    one line per finished trial: params, every metric, cost, time, state
  best/           the compiled program (declrag.load / declrag serve)
  manifest.json, summary.json, report.md, report.html, plots/

Efficiency: trial 0 is the naive baseline; retrieval is scored first where gold passages exist (no LM
call) and pruned on; LM trials answer growing slices of dev, reporting the deterministic part of the
objective to the pruner before any LLM judge is asked; every index, embedding, retrieval and LM call is
cached, so trials and runs share work.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import os
import socket
import threading
import time
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import optuna
from tqdm.auto import tqdm

from ..config import ProgramConfig
from ..embed import Embedder
from ..errors import DeclragError
from ..evaluate import correct, score_case
from ..golden import Example, GoldenSet
from ..ingest.corpus import checked, corpus_store
from ..lm import Meter, metering
from ..metrics.base import to_case
from ..metrics.catalog import get_metrics
from ..metrics.stats import mean_of
from ..pipeline.program import RAGProgram
from ..stores import Store, StoreCheck
from ..types import content_hash
from .space import Space, apply, grid, sample

if TYPE_CHECKING:
    from .study import Ledger

from .budget import Budget, BudgetReached, Spent, StepMedianPruner
from .splits import split_examples, split_note

log = logging.getLogger(__name__)
WORKER = f"{socket.gethostname()}:{os.getpid()}"  # who ran a trial (trials.jsonl)
optuna.logging.set_verbosity(optuna.logging.WARNING)


def weighted(values: dict[str, float | None], weights: dict[str, float]) -> float:
    """The weighted mean of the metrics that have a value (weights renormalised over them)."""
    got = {m: (v, w) for m, w in weights.items() if (v := values.get(m)) is not None}
    return sum(v * w for v, w in got.values()) / sum(w for _, w in got.values()) if got else 0.0


class Compiler:
    def __init__(self, space: Space, golden: GoldenSet, out: Path, budget: Budget, jobs: int = 1,
                 progress: bool = True, model: str | None = None, store: str | None = None):
        self.space, self.golden, self.out, self.budget, self.jobs = space, golden, Path(out), budget, jobs
        self.progress, self.model, self.store_home = progress, model, store
        self.splits = split_examples(golden, space)
        self.split_note = split_note(golden, space, self.splits)
        obj = space.objective
        self.metrics = get_metrics(list(obj.metrics), obj.judges or None)
        self.det = [m for m in self.metrics if m.tier == "deterministic"]
        self.judged = [m for m in self.metrics if m.tier == "llm"]
        self.has_gold = any(e.gold for e in self.splits["dev"])
        self.spent = Spent()  # this process's part (per-trial attributes); the study's total is in the ledger
        self.ledger: Ledger | None = None  # set by the run
        self.poll_s = 2.0  # how often a worker without work looks for others' trials coming back
        self._local = threading.local()
        self._lock = threading.Lock()
        self._embedders: dict[str, Embedder] = {}
        self._stores: dict[str, Store] = {}
        self._checks: dict[str, tuple[float, StoreCheck | None]] = {}  # store URI -> (when, its last check)
        self._grid: set[str] | None = None  # the grid sampler's programs, as `_program_key`s
        self.searching = True

    # -- programs -------------------------------------------------------------------------------------------
    def program(self, values: dict[str, Any]) -> RAGProgram:
        from ..pipeline.program import with_model

        cfg = apply(self.space.base, values, self.space.params)
        return self.program_for(with_model(cfg, self.model) if self.model else cfg)

    def program_for(self, cfg: ProgramConfig) -> RAGProgram:
        """The program of ``cfg`` over the golden corpus, its index built (or found) once per ingest setting."""
        key = json.dumps(cfg.ingest.embedder.identity(), sort_keys=True)
        with self._lock:
            emb = self._embedders.setdefault(key, Embedder(cfg.ingest.embedder))
            store = self._stores.get(cfg.ingest.digest())
        if store is None:  # built (or found) once per ingest setting; trials share the open store
            store, report = corpus_store(self.golden.documents, cfg.ingest, self.golden.name, embedder=emb,
                                         progress=self.progress, home=self.store_home)
            with self._lock:
                store = self._stores.setdefault(cfg.ingest.digest(), store)
                self._checks[store.uri] = (time.monotonic(), report.check)
        else:
            self._check_again(store)
        return RAGProgram(cfg, store=store, embedder=emb)

    def shipping(self, prog: RAGProgram) -> RAGProgram:
        """``prog`` as it ships, over the corpus's own documents: a set scored over a copy with text taken out (the
        inverse cloze's) ships a program over the documents with that text put back (`Document.original`)."""
        docs = [d.original() for d in self.golden.documents]
        if all(a is b for a, b in zip(docs, self.golden.documents)):
            return prog
        store, _ = corpus_store(docs, prog.config.ingest, self.golden.name, embedder=prog.embedder,
                                progress=self.progress, home=self.store_home)
        return RAGProgram(prog.config, store=store, embedder=prog.embedder).learned_from(prog)

    def _check_again(self, store: Store) -> None:
        """A store one of whose copies (a replicated server's node) did not answer at its last check is checked
        again, at most every 30 s, so that a node back from a crash is repaired before trials read it."""
        with self._lock:
            at, check = self._checks.get(store.uri, (0.0, None))
            if check is None or all(v is not None for v in check.copies.values()) or time.monotonic() - at < 30:
                return
            self._checks[store.uri] = (time.monotonic(), check)  # one thread checks; the others go on
        again = checked(store)
        with self._lock:
            self._checks[store.uri] = (time.monotonic(), again)

    # -- scoring -------------------------------------------------------------------------------------------
    def retrieval_scores(self, prog: RAGProgram, examples: list[Example]) -> dict[str, float | None]:
        """Retrieval metrics of the candidate pool on gold passages; no LM call unless the program rewrites
        queries or reranks with an LLM (those calls are counted)."""
        names = [m.name for m in self.det if m.name.startswith(("hit@", "ndcg@", "mrr@", "recall@", "precision@"))] \
            or ["ndcg@10", "hit@5"]
        metrics = get_metrics(names)
        rows, meter = [], Meter()
        prog.embedder.embed_queries([ex.question for ex in examples if ex.gold])  # batched, then from the cache
        for ex in examples:
            if not ex.gold:
                continue
            with metering(meter):
                pool = prog.retrieve_only(ex.question, history=ex.history)
            case = to_case(ex, {"passages": pool})
            rows.append({m.name: m.score(case).value for m in metrics})
        self._spend(meter.to_dict()["total"])
        return {n: mean_of([r[n] for r in rows]) for n in names}

    def answer(self, prog: RAGProgram, ex: Example) -> dict:
        self._check_budget()
        a = prog(question=ex.question, history=ex.history)
        self._spend(a.usage["total"])
        case = to_case(ex, a)
        values, _, _ = score_case(case, self.det)
        return {"id": ex.id, "case": case, "metrics": values, "latency_ms": a.latency_ms["total"],
                "cost_usd": a.usage["total"]["cost_usd"], "correct": correct(case)}

    def judge(self, rows: list[dict]) -> None:
        for r in rows:
            if any(m.name not in r["metrics"] for m in self.judged):
                self._check_budget()
                values, _, usage = score_case(r["case"], self.judged)
                self._spend(usage.get("total", {}))
                r["metrics"].update(values)

    def summarize(self, rows: list[dict]) -> dict[str, Any]:
        names = [m.name for m in self.metrics]
        out = {n: mean_of([r["metrics"].get(n) for r in rows]) for n in names}
        out["objective"] = weighted(out, self.space.objective.metrics)
        out["cost_usd"] = float(sum(r["cost_usd"] for r in rows))
        out["p95_latency_ms"] = float(np.percentile([r["latency_ms"] for r in rows], 95)) if rows else 0.0
        return out

    def evaluate(self, prog: RAGProgram, examples: list[Example], desc: str = "answering"
                 ) -> tuple[dict[str, Any], list[dict]]:
        """Every objective metric on ``examples`` (the full pipeline, or retrieval only)."""
        if self.space.objective.retrieval_only:
            scores = self.retrieval_scores(prog, examples)
            return {**scores, "objective": weighted(scores, self.space.objective.metrics)}, []
        bar = tqdm(examples, desc=desc, unit="q", leave=False, disable=not self.progress)
        rows = [self.answer(prog, ex) for ex in bar]
        self.judge(rows)
        return self.summarize(rows), rows

    # -- the study ------------------------------------------------------------------------------------------
    def sampler_and_pruner(self, seed: int | None = None) -> tuple[list[Literal["maximize", "minimize"]],
                                                                   optuna.samplers.BaseSampler, StepMedianPruner]:
        """The study's directions, sampler (the space's, seeded with its seed unless ``seed``) and pruner."""
        directions: list[Literal["maximize", "minimize"]] = ["maximize"]
        directions += ["minimize"] * len(self.space.objective.also)
        sampler = self.space.sampler.build(len(directions), self.space.split.seed if seed is None else seed)
        return directions, sampler, StepMedianPruner(self.space.fidelity.startup_trials)

    def open_study(self, place, identity: dict[str, Any], join: bool = False, adopt: bool = False
                   ) -> tuple[optuna.Study, bool]:
        """Create or join the study at ``place`` (`declrag.optimize.study.place`); its ledger holds this
        compiler's budgets from now on. Returns the study and whether it was created here."""
        from .study import create_or_join

        self.ledger = place.ledger
        study, created = create_or_join(place, identity, *self.sampler_and_pruner(), self.space.baseline_values(),
                                        self.budget, join=join, adopt=adopt)
        if not created:  # another worker, or a later sitting: a sampler seeded alike would propose the same points
            study.sampler = self.sampler_and_pruner(seed=zlib.crc32(f"{WORKER}:{time.time_ns()}".encode()))[1]
        return study, created

    def objective(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        t0 = time.perf_counter()
        if not self._charge(trial):
            trial.set_user_attr("stopped_by_budget", True)
            raise optuna.TrialPruned("max trials reached")
        trial.set_user_attr("worker", WORKER)  # host:pid, for the dashboard and the logs
        calls0, cost0 = self.spent.lm_calls, self.spent.cost_usd
        values = sample(trial, self.space)
        same = self._finished_with(trial)
        if same is not None:  # the sampler proposed a program already scored: its scores, no work
            metrics = same.user_attrs.get("metrics", {})
            for k, v in (("repeat_of", same.number), ("metrics", metrics), ("lm_calls", 0), ("cost_usd", 0.0)):
                trial.set_user_attr(k, v)
            self._log_trial(trial, values, metrics, f"repeat of {same.number}", time.perf_counter() - t0)
            return tuple(same.values) if len(same.values) > 1 else same.value
        prog = self.program(values)
        dev = self.splits["dev"]
        obj = self.space.objective
        multi = bool(obj.also)
        state, bar = "complete", None
        result: dict[str, Any] = {}
        try:
            if obj.retrieval_only:
                result, _ = self.evaluate(prog, dev)
            else:
                step = 0
                if self.has_gold and self.space.fidelity.retrieval_first and not multi:
                    retr = self.retrieval_scores(prog, dev)
                    result.update({f"retrieval:{k}": v for k, v in retr.items()})
                    trial.report(weighted(retr, {k: 1.0 for k in retr}), step)
                    step += 1
                    if trial.should_prune():
                        raise optuna.TrialPruned()
                rows: list[dict] = []
                det_weights = {m.name: w for m, w in ((m, obj.metrics[m.name]) for m in self.det)}
                bar = tqdm(total=len(dev), desc=f"trial {trial.number}", unit="q", leave=False,
                           disable=not self.progress)
                for frac in self.space.fidelity.slices:
                    n = max(1, math.ceil(len(dev) * frac))
                    for ex in dev[len(rows):n]:
                        rows.append(self.answer(prog, ex))
                        bar.update()
                    det = self.summarize(rows)
                    result.update(det)
                    if not multi:
                        trial.report(weighted(det, det_weights) if det_weights else det["objective"], step)
                        step += 1
                        if n < len(dev) and trial.should_prune():
                            raise optuna.TrialPruned()
                self.judge(rows)  # only trials that survived every slice reach the judges
                result.update(self.summarize(rows))
        except optuna.TrialPruned:
            state = "pruned"
            raise
        except BudgetReached as e:
            state = "stopped by budget"
            trial.set_user_attr("stopped_by_budget", True)
            raise optuna.TrialPruned("budget reached") from e
        finally:
            if bar is not None:
                bar.close()
            trial.set_user_attr("metrics", {k: v for k, v in result.items()})
            trial.set_user_attr("lm_calls", self.spent.lm_calls - calls0)
            trial.set_user_attr("cost_usd", self.spent.cost_usd - cost0)
            self._log_trial(trial, values, result, state, time.perf_counter() - t0)
        if multi:
            return (result["objective"], *[result[k] for k in obj.also])
        return result["objective"]

    @staticmethod
    def _finished_with(trial: optuna.Trial):
        """A complete trial with the same parameters as ``trial``, if any."""
        for t in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if t.number != trial.number and t.params == trial.params:
                return t
        return None

    def _log_trial(self, trial, values, result, state, secs) -> None:
        rec = {"number": trial.number, "state": state, "params": values,
               "metrics": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in result.items()},
               "lm_calls": trial.user_attrs.get("lm_calls"), "cost_usd": trial.user_attrs.get("cost_usd"),
               "seconds": round(secs, 2), "worker": WORKER}
        if "retry_of" in trial.user_attrs:
            rec["retry_of"] = trial.user_attrs["retry_of"]
        with self._lock, (self.out / "trials.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        if self.progress:
            obj = result.get("objective")
            retrieval = [(k.split(":", 1)[1], v) for k, v in result.items()
                         if k.startswith("retrieval:") and v is not None]
            score = f"objective {obj:.4f}" if obj is not None else \
                f"retrieval {retrieval[0][0]} {retrieval[0][1]:.4f}" if retrieval else "no score"  # pruned on retrieval
            led = (self.ledger.state() if self.ledger is not None
                   else {"lm_calls": self.spent.lm_calls, "max_lm_calls": None})
            budget = f"/{led['max_lm_calls']}" if led["max_lm_calls"] else ""
            retry = f" (retry of {rec['retry_of']})" if "retry_of" in rec else ""
            tqdm.write(f"trial {trial.number}{retry} {state}: {score}, {rec['lm_calls'] or 0} LM calls "
                       f"(study {led['lm_calls']}{budget}), {secs:.0f} s")

    def _check_budget(self) -> None:
        if not self.searching:  # the budgets bound the search; the final test scoring always runs
            return
        if self.ledger is not None and (reason := self.ledger.exhausted()):
            raise BudgetReached(reason)

    def _spend(self, usage: dict) -> None:
        self.spent.add(usage)
        if self.ledger is not None and self.searching:
            self.ledger.spend(int(usage.get("calls", 0) - usage.get("cached", 0)), int(usage.get("cached", 0)),
                              float(usage.get("cost_usd", 0.0)))

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

    def search(self, study: optuna.Study, patience=None) -> optuna.Study:
        """Work on ``study`` until its budgets are spent and no trial is left running anywhere: run the
        queued trials (the baseline, retries of killed trials) first, else take a slot and ask the sampler
        for a new trial, else wait for the other workers' trials (a killed one comes back as a retry). With
        ``jobs`` > 1, that many threads do this in this process. ``patience`` (`study.Patience`) rides out
        a lost database connection."""
        if self.ledger is None:
            raise RuntimeError("Compiler.search needs a ledger (declrag.optimize.study.Ledger)")
        if self.jobs > 1:
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
        else:
            self._work(study, patience)
        self.searching = False
        return study

    def _work(self, study: optuna.Study, patience) -> None:
        from .study import is_db_error

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
                    took = ledger.exhausted() is None and not self.grid_done(study) and ledger.take_trial()
                    if not took:
                        if study.get_trials(deepcopy=False, states=(states.RUNNING,)):
                            time.sleep(self.poll_s)  # others are still at work: a killed one's trial comes back
                            continue
                        return
                self._local.slot = took
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    study.optimize(self.objective, n_trials=1, catch=(DeclragError,), show_progress_bar=False)
            except Exception as e:
                if patience is None or not is_db_error(e):
                    raise
                patience.wait(e, "running the search")


    def grid_done(self, study: optuna.Study) -> bool:
        """With the grid sampler: whether every program of the grid has been scored (its sampler would only
        repeat them now, so the search ends there, within the trial budget)."""
        if self.space.sampler.resolved(self.space.objectives) != "grid":
            return False
        if self._grid is None:
            self._grid = {_program_key(c) for c in grid(self.space)}
        done = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
        return self._grid <= {_program_key(t.params) for t in study.get_trials(deepcopy=False, states=done)}


def _program_key(values: dict[str, Any]) -> str:
    """Parameter values as one comparable string (3 and 3.0 alike)."""
    return json.dumps({k: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                       for k, v in values.items()}, sort_keys=True, default=str)


def digest_of(obj: Any) -> str:
    return content_hash(json.dumps(obj, sort_keys=True, default=str))


def score(comp: Compiler, prog, examples, desc: str) -> tuple[dict, list[float | None]]:
    """Metrics on ``examples`` and the per-question objective (for paired intervals)."""
    if comp.space.objective.retrieval_only:
        rows = []
        prog.embedder.embed_queries([ex.question for ex in examples if ex.gold])  # batched, then from the cache
        for ex in examples:
            rows.append(comp.retrieval_scores(prog, [ex]))
        means = {k: mean_of([r[k] for r in rows]) for k in rows[0]} if rows else {}
        means["objective"] = weighted(means, comp.space.objective.metrics)
        # a question without gold passages has no retrieval score (None, left out of intervals), not a 0
        return means, [weighted(r, comp.space.objective.metrics) if any(v is not None for v in r.values()) else None
                       for r in rows]
    result, recs = comp.evaluate(prog, examples, desc)
    return result, [weighted(r["metrics"], comp.space.objective.metrics) for r in recs]


def tell(progress: bool, msg: str) -> None:
    if progress:
        tqdm.write(msg)
