"""What one trial of a compile scores, and how: the program of a point of the space over the golden corpus (its
index built, or found, once per ingest setting and shared by the trials), every objective metric on dev, and the
trial's steps for the pruner (retrieval first, then growing slices of dev, then the LLM judges). The loop that
runs trials is `declrag.optimize._workers`; the trial log is `declrag.optimize._trials`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from tqdm.auto import tqdm

from ..config import ProgramConfig, with_model
from ..embed.embedder import Embedder
from ..evaluate.evaluation import correct, score_case
from ..golden import Example, GoldenSet
from ..ingest.corpus import checked, corpus_store
from ..lm import Meter, metering
from ..metrics.base import to_case
from ..metrics.budget import characters
from ..metrics.catalog import get_metrics
from ..metrics.retrieval import is_retrieval
from ..metrics.stats import mean_of
from ..pipeline.program import RAGProgram
from ..runtime import tracing
from ..stores import Store, StoreCheck
from ..types import content_hash
from ._budget import Account, BudgetReached, Spent
from ._context import at_budget
from ._space import Space, apply, sample
from ._splits import split_examples, split_note
from ._trials import TrialLog


def weighted(values: dict[str, float | None], weights: dict[str, float]) -> float:
    """The weighted mean of the metrics that have a value (weights renormalised over them)."""
    got = {m: (v, w) for m, w in weights.items() if (v := values.get(m)) is not None}
    return sum(v * w for v, w in got.values()) / sum(w for _, w in got.values()) if got else 0.0


class Objective:
    """The objective of a compile's study (``objective(trial)``), and the scorer of every later stage (prompts,
    fine-tune, test): the space and the golden set split, the programs and their stores, the metrics, the
    trial log in ``out``, and the `Account` its LM usage is charged to."""

    def __init__(self, space: Space, golden: GoldenSet, out: Path, progress: bool = True, model: str | None = None,
                 store: str | None = None):
        self.space, self.golden, self.out = space, golden, Path(out)
        self.progress, self.model, self.store_home = progress, model, store
        self.splits = split_examples(golden, space)
        self.split_note = split_note(golden, space, self.splits)
        self._lock = threading.Lock()
        self._embedders: dict[str, Embedder] = {}
        self._stores: dict[str, Store] = {}
        self._checks: dict[str, tuple[float, StoreCheck | None]] = {}  # store URI -> (when, its last check)
        self.space, self.context_budget = at_budget(self)  # kind@budget metrics named at their budget
        obj = self.space.objective
        self.metrics = get_metrics(list(obj.metrics), obj.judges or None)
        self.det = [m for m in self.metrics if m.tier == "deterministic"]
        self.judged = [m for m in self.metrics if m.tier == "llm"]
        self.has_gold = any(e.gold for e in self.splits["dev"])
        self.account = Account()  # its ledger is set when a study is opened (`declrag.optimize._workers`)
        self.trial_log = TrialLog(self.out, progress)
        self.known_in_a_row = 0  # trials in a row whose program was already finished (`Workers` ends the search)

    @property
    def spent(self) -> Spent:
        """This process's LM usage (the study's total is in the ledger)."""
        return self.account.spent

    # -- programs -------------------------------------------------------------------------------------------
    def program(self, values: dict[str, Any]) -> RAGProgram:
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
        names = [m.name for m in self.det if is_retrieval(m.name)] or ["ndcg@10", "hit@5"]
        metrics = get_metrics(names)
        rows, meter, k = [], Meter(), prog.config.retrieve.k
        prog.embedder.embed_queries([ex.question for ex in examples if ex.gold])  # batched, then from the cache
        for ex in examples:
            if not ex.gold:
                continue
            with metering(meter):
                pool = prog.retrieve_only(ex.question, history=ex.history)
            case = to_case(ex, {"passages": pool})
            # what the program hands over: its first k passages, each character once (`declrag.metrics.budget`)
            rows.append({**{m.name: m.score(case).value for m in metrics},
                         "context_chars": float(characters(pool[:k]))})
        self.account.spend(meter.to_dict()["total"])
        return {n: mean_of([r[n] for r in rows]) for n in [*names, "context_chars"]}

    def answer(self, prog: RAGProgram, ex: Example) -> dict:
        self.account.check()
        a = prog(question=ex.question, history=ex.history)
        self.account.spend(a.usage["total"])
        case = to_case(ex, a)
        values, _, _ = score_case(case, self.det)
        return {"id": ex.id, "case": case, "metrics": values, "latency_ms": a.latency_ms["total"],
                "cost_usd": a.usage["total"]["cost_usd"], "correct": correct(case)}

    def judge(self, rows: list[dict]) -> None:
        for r in rows:
            if any(m.name not in r["metrics"] for m in self.judged):
                self.account.check()
                values, _, usage = score_case(r["case"], self.judged)
                self.account.spend(usage.get("total", {}))
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

    # -- one trial ------------------------------------------------------------------------------------------
    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        """One trial under its span (`declrag.runtime.tracing`): its questions and LM calls are the span's children."""
        with tracing.span(f"trial {trial.number}", {"declrag.trial": trial.number}):
            return self._trial(trial)

    def _trial(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        """Score the program ``trial`` samples on dev (a repeat of a finished trial takes its scores); log it."""
        t0 = time.perf_counter()
        calls0, cost0 = self.spent.lm_calls, self.spent.cost_usd
        values = sample(trial, self.space)
        tracing.annotate({f"declrag.param.{k}": v for k, v in values.items()})
        same, tried = _finished_with(trial)
        self.known_in_a_row = self.known_in_a_row + 1 if tried else 0
        if same is not None:  # the sampler proposed a program already scored: its scores, no work
            metrics = same.user_attrs.get("metrics", {})
            for k, v in (("repeat_of", same.number), ("metrics", metrics), ("lm_calls", 0), ("cost_usd", 0.0)):
                trial.set_user_attr(k, v)
            self.trial_log.write(trial, values, metrics, f"repeat of {same.number}", time.perf_counter() - t0,
                              self.account.state())
            return tuple(same.values) if len(same.values) > 1 else same.values[0]
        prog = self.program(values)
        obj = self.space.objective
        state = "complete"
        result: dict[str, Any] = {}
        try:
            if obj.retrieval_only:
                result, _ = self.evaluate(prog, self.splits["dev"])
            else:
                self._steps(trial, prog, result)
        except optuna.TrialPruned:
            state = "pruned"
            raise
        except BudgetReached as e:
            state = "stopped by budget"
            trial.set_user_attr("stopped_by_budget", True)
            raise optuna.TrialPruned("budget reached") from e
        finally:
            trial.set_user_attr("metrics", {k: v for k, v in result.items()})
            trial.set_user_attr("lm_calls", self.spent.lm_calls - calls0)
            trial.set_user_attr("cost_usd", self.spent.cost_usd - cost0)
            self.trial_log.write(trial, values, result, state, time.perf_counter() - t0, self.account.state())
        if obj.also:
            return (result["objective"], *[result[k] for k in obj.also])
        return result["objective"]

    def _steps(self, trial: optuna.Trial, prog: RAGProgram, result: dict[str, Any]) -> None:
        """The full pipeline on dev, step by step into ``result``: retrieval first (where gold passages exist),
        then growing slices of dev, each reported to the pruner (one objective only), then the LLM judges."""
        dev, obj = self.splits["dev"], self.space.objective
        multi, step = bool(obj.also), 0
        if self.has_gold and self.space.fidelity.retrieval_first and not multi:
            retr = self.retrieval_scores(prog, dev)
            result.update({f"retrieval:{k}": v for k, v in retr.items()})
            # the pruner reads quality alone: context_chars is what the program costs, not how well it retrieves
            trial.report(weighted(retr, {k: 1.0 for k in retr if k != "context_chars"}), step)
            step += 1
            if trial.should_prune():
                raise optuna.TrialPruned()
        rows: list[dict] = []
        det_weights = {m.name: w for m, w in ((m, obj.metrics[m.name]) for m in self.det)}
        with tqdm(total=len(dev), desc=f"trial {trial.number}", unit="q", leave=False,
                  disable=not self.progress) as bar:
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


def _finished_with(trial: optuna.Trial) -> tuple[optuna.trial.FrozenTrial | None, bool]:
    """A complete trial with the same parameters as ``trial``, if any; and whether any other trial already finished
    (scored or pruned) that program."""
    done = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
    same = [t for t in trial.study.get_trials(deepcopy=False, states=done)
            if t.number != trial.number and t.params == trial.params]
    return next((t for t in same if t.state == optuna.trial.TrialState.COMPLETE), None), bool(same)


def digest_of(obj: Any) -> str:
    return content_hash(json.dumps(obj, sort_keys=True, default=str))


def score(comp: Objective, prog, examples, desc: str) -> tuple[dict, list[float | None]]:
    """Metrics on ``examples`` and the per-question objective (for paired intervals). Users' rated questions (kind
    ``usage``) are asked of the program as it ships, over the documents they were asked of (`Objective.shipping`);
    the set's own questions of ``prog``, over its copy. With both, the metrics are given per part."""
    examples = list(examples)
    theirs = [i for i, ex in enumerate(examples) if ex.metadata.get("kind") == "usage"]
    if theirs and (served := comp.shipping(prog)) is not prog:
        ours = [i for i in range(len(examples)) if i not in set(theirs)]
        per: list[float | None] = [None] * len(examples)
        parts = {}
        for part, idx, program in (("golden", ours, prog), ("usage", theirs, served)):
            if idx:
                parts[part], got = _score(comp, program, [examples[i] for i in idx], desc)
                for i, v in zip(idx, got):
                    per[i] = v
        return (parts["usage"] if not ours else {"parts": parts}), per
    return _score(comp, prog, examples, desc)


def _score(comp: Objective, prog, examples, desc: str) -> tuple[dict, list[float | None]]:
    if comp.space.objective.retrieval_only:
        prog.embedder.embed_queries([ex.question for ex in examples if ex.gold])  # batched, then from the cache
        rows = [comp.retrieval_scores(prog, [ex]) for ex in examples]
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
