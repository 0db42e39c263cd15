"""The compile run around the study: start or resume, pick the best, optimize its prompts, score the
held-out test once, write the artifact, the manifest, the summary and the report.

runs/<name>/
  compile.json    the inputs (space, dataset, budgets): what `--resume` reads
  split.json      the seeded train / dev / test question ids
  study.journal   Optuna's storage (an append-only journal: a killed process loses at most its trial), and
  budget.sqlite3  the budget ledger; with --storage URL both live in that database instead (optimize/_study.py)
  trials.jsonl    one line per finished trial: params, every metric, cost, time, state (optimize/_trials.py)
  best/           the compiled program (declrag.load / declrag serve)
  manifest.json, summary.json, report.md, report.html, plots/

Trial 0 is the naive baseline; what a trial scores is `declrag.optimize._objective`, the loop that runs trials
`declrag.optimize._workers`.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import optuna

from ..errors import DeclragError
from ..golden import LABELS, labels_of, load_golden
from ..metrics.passages import unit_of
from ..metrics.stats import by_label, mean_ci, paired_difference
from ..runtime.about import versions
from ..runtime.process_memory import MemoryTracker
from ._agreement import agreement, ndcg_on
from ._budget import Budget, trial_counts
from ._context import budgeted
from ._finetune import finetune_stage
from ._mlflow_runs import MlflowRuns
from ._objective import Objective, digest_of, score, tell
from ._prompts import optimize_prompts
from ._report import write_report
from ._select import select, verdict_of_theirs
from ._space import Space, read_space, tidy_params
from ._study import (
    DISK_ERRNOS,
    DISK_WORDS,
    Patience,
    db_error,
    disk_stop,
    has_password,
    identity_of,
    is_db_error,
    place,
    redact,
    retry_killed,
    spent_before,
)
from ._usage import Theirs
from ._workers import Workers, optuna_quiet

log = logging.getLogger(__name__)


def _git_revision() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass
class CompileOptions:
    """What `compile` is asked to do: start a study (``space``, ``dataset``, ``name``), continue one (``resume``: a
    run folder) or join one (``join`` with ``storage``).

    ``store``: where the trials' indexes live (a folder or a Weaviate server, see `declrag.ingest.corpus.corpus_store`;
    default the cache folder). ``storage``: the study's database (any SQLAlchemy URL Optuna accepts; default the
    run folder's journal). Roles: the process that created the study, or ``--resume``s it, finalizes: once the
    budgets are spent and no trial is running anywhere, it optimizes the best program's prompts, scores the
    held-out test and writes ``best/`` and the report. Workers (``join``, or a second ``--name`` of the same study)
    search, then stop and say so; ``finalize`` makes a worker finalize too (when the creator's machine is gone).
    ``heartbeat_s``: a trial whose worker stops beating for 3x this is retried elsewhere; ``patience_s``: how long
    a worker retries a lost database before it stops. ``check_questions``: a golden file of the user's own
    questions; the result says how the trials' ranking agrees with them (`agreement`)."""

    space: str | Path | None = None
    dataset: str | None = None
    name: str | None = None
    runs: str | Path = "runs"
    budget: Budget | None = None
    jobs: int = 1
    resume: str | Path | None = None
    model: str | None = None
    progress: bool = True
    store: str | None = None
    storage: str | None = None
    join: str | None = None
    finalize: bool = False
    heartbeat_s: int = 10
    patience_s: float = 120.0
    check_questions: str | Path | None = None
    usage: str | Path | None = None  # a usage store or its export: rated questions judge what ships (`usage`)
    mlflow: str | None = None  # an MLflow tracking URI: the study and its trials logged there (`mlflow_runs`)
    mlflow_experiment: str = "declrag"
    context_budget: int | None = None  # characters: the space's kind@budget metrics score within it


@dataclass
class CompileResult:
    """What a compile did. A process that finalizes (``role`` ``"finalizer"``) has the whole ``summary`` (what
    ``summary.json`` holds) and its headline parts as fields; a worker that does not (``"worker"``) has the study's
    trial counts and ``mine``, the trials it ran."""

    role: Literal["finalizer", "worker"]
    study: str
    storage: str  # where the study lives, as it may be shown (no password)
    folder: Path  # the run folder: best/, report.html (a finalizer's)
    trials: int  # the study's trials, every worker's: all of them, finished (repeats included), pruned...
    complete: int
    pruned: int
    stopped_by_budget: int
    repeats: int
    wall_s: float
    memory: dict[str, Any]  # peak RSS per stage (`declrag.memory.MemoryTracker`)
    mine: int | None = None  # a worker: how many of the trials ran in this process
    lm_calls: int | None = None  # a finalizer: the study's LM calls (every worker's search, then prompts and test)
    cost_usd: float | None = None
    baseline: dict[str, Any] | None = None  # dev, test, params, trial, config
    best: dict[str, Any] | None = None  # the same, of the best trial
    gain_test: dict[str, Any] | None = None  # best minus baseline on test: diff, ci95, significant
    shipped: Literal["best", "baseline"] | None = None  # which program best/ holds
    selection: dict[str, Any] | None = None  # why: the held-out re-scoring and your questions (`optimize.select`)
    finetune: dict[str, Any] | None = None
    check_questions: dict[str, Any] | None = None  # agreement with the user's own questions, when given
    mlflow: dict[str, Any] | None = None  # the MLflow run: uri, experiment, run_id, program (the artifact's URI)
    summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def finalized(cls, summary: dict[str, Any], folder: Path) -> CompileResult:
        """The result of a finalizer, from its summary."""
        taken: dict[str, Any] = {f.name: summary.get(f.name) for f in fields(cls)
                                 if f.name not in ("role", "folder", "mine", "summary")}
        return cls(role="finalizer", folder=folder, summary=summary, **taken)


def compile(options: CompileOptions) -> CompileResult:  # the builtin's name, as the command's: `declrag compile`
    """Start, continue or join a compile (`CompileOptions`); returns what it did (`CompileResult`). Optuna's own
    log lines are silenced while it runs (`workers.optuna_quiet`) and its level put back after."""
    o = options
    folder = Path(o.resume) if o.resume else Path(o.runs) / o.name if o.name else None
    try:
        with optuna_quiet():
            plan = budgeted(plan_compile(o.space, o.dataset, o.name, o.runs, o.budget, o.resume, o.model, o.store,
                                         o.storage, o.join, o.heartbeat_s), o.context_budget)
            tracked = MlflowRuns(o.mlflow, o.mlflow_experiment, plan.name, _tracked_params(plan)) if o.mlflow else None
            try:
                return _compile_run(plan, o, tracked)
            except BaseException:
                if tracked is not None:
                    tracked.failed()
                raise
    except DeclragError as e:
        if folder is not None and any(w in e.message for w in DISK_WORDS):
            raise disk_stop(e.message, folder) from None
        raise
    except OSError as e:  # the run folder's disk full or read-only while writing
        if folder is None or e.errno not in DISK_ERRNOS:
            raise
        raise disk_stop(f"{e.strerror} writing {e.filename or folder}", folder) from None
    except Exception as e:  # a database error outside the search loop (which rides them out): one clear message
        if not is_db_error(e):
            raise
        if folder is not None and any(w in str(e) for w in DISK_WORDS):
            raise disk_stop(str(getattr(e, "orig", None) or e).splitlines()[0], folder) from None
        resume, storage = o.resume, o.storage
        saved = None if storage or not resume or not (Path(resume) / "compile.json").exists() else \
            json.loads((Path(resume) / "compile.json").read_text()).get("storage")
        raise db_error(e, storage or saved or "", "compiling") from None


@dataclass
class Plan:
    """What one compile call does, decided once from its arguments by `plan_compile`: its ``role`` (``new``: a
    study created here; ``resume``: one created here before, continued; ``join``: another machine's study, as a
    worker) and what the run reads: the space, dataset, model, store, budgets, the study's name and place."""

    role: Literal["new", "resume", "join"]
    space: Space
    dataset: str
    name: str
    out: Path
    budget: Budget
    model: str | None
    store: str | None
    storage: str | None
    place: Any  # declrag.optimize._study.Place


def plan_compile(space, dataset, name, runs, budget, resume, model, store, storage, join, heartbeat_s) -> Plan:
    """The `Plan` of a compile call: the role its arguments ask for, checked, and the inputs a resumed or joined
    study takes from where it was created (``compile.json`` or the study's database)."""
    budget = budget or Budget()
    given = {k: v for k, v in asdict(budget).items() if v is not None}
    if join:
        if not storage:
            raise DeclragError("--join needs --storage URL: the database the study lives in",
                               hint=f"declrag compile --join {join} --storage postgresql+psycopg://user@host/db")
        if given or space or dataset or resume:
            raise DeclragError("a worker takes the space, dataset, model and budgets from the study it joins",
                               hint="drop --space/--dataset/--max-*/--timeout; budgets are set where the study was "
                                    "created (or raised there with --resume)")
        out = Path(runs) / join
        p = place(out, join, storage, heartbeat_s)
        theirs = identity_of(p)
        if model and model != theirs["model"]:
            raise DeclragError(f"the study {join!r} routes its LM calls to "
                               f"{theirs['model'] or 'the configured model'}, not {model}",
                               hint="drop --model: a worker uses the study's")
        out.mkdir(parents=True, exist_ok=True)
        return Plan("join", Space.model_validate(theirs["space"]), theirs["dataset"], join, out, budget,
                    theirs["model"], store, storage, p)
    if resume:
        out = Path(resume)
        f = out / "compile.json"
        if not f.exists():
            raise DeclragError(f"{out} is not a compile run (no compile.json)",
                               hint="pass --resume runs/NAME where the study was created; "
                                    "a worker rejoins with --join NAME --storage URL")
        saved = json.loads(f.read_text())
        storage, name = storage or saved.get("storage"), saved.get("study", "declrag")  # runs before 0.2: "declrag"
        # the budgets the study started with, unless given again
        return Plan("resume", Space.model_validate(saved["space"]), saved["dataset"], name, out,
                    Budget(**{**saved.get("budget", {}), **given}), model or saved.get("model"),
                    store or saved.get("store"), storage, place(out, name, storage, heartbeat_s))
    if not space or not dataset or not name:
        raise DeclragError("compile needs --space, --dataset and --name (or --resume runs/NAME, or --join NAME)",
                           hint="e.g. declrag compile --space optimizers/default.yaml --dataset squad-v2.0 "
                                "--name first")
    sp = read_space(space)
    out = Path(runs) / name
    if (out / "compile.json").exists():
        raise DeclragError(f"{out} already holds a compile",
                           hint=f"continue it with --resume {out}, or pick another --name")
    out.mkdir(parents=True, exist_ok=True)
    return Plan("new", sp, dataset, name, out, budget, model, store, storage, place(out, name, storage, heartbeat_s))


def _tracked_params(plan: Plan) -> dict[str, Any]:
    return {"study": plan.name, "role": plan.role, "dataset": plan.dataset, "space": plan.space.name,
            "model": plan.model, "budget": asdict(plan.budget), "params": list(plan.space.params)}


def _compile_run(plan: Plan, o: CompileOptions, tracked: MlflowRuns | None = None) -> CompileResult:
    """Run the plan: open the study, search, then (where this process finalizes) the artifact and the report."""
    p, out, name = plan.place, plan.out, plan.name
    mem = MemoryTracker()  # peak RSS per stage: summary.json's "memory", the compile's closing lines
    with mem.stage("setup"):  # ends once the study is open (a failure on the way ends the run)
        # the user's questions are checked before the run folder is written: a bad file leaves nothing behind
        theirs = Theirs.read(o.check_questions, o.usage, plan.dataset)
        workers, study, creator, manifest = _open(plan, o.jobs, o.progress)
    comp = workers.objective
    if tracked is not None:
        comp.trial_log.sinks.append(tracked.trial)
    finalizes = creator or o.finalize
    if finalizes:
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    tell(o.progress, f"study {name!r} in {p.shown}: searching" + ("" if finalizes else
         " as a worker (the process that created the study writes the artifact)"))
    t0 = time.perf_counter()
    with mem.stage("search"):
        study = workers.search(study, Patience(p, o.patience_s, o.progress) if p.shared else None)
    if not finalizes:
        if tracked is not None:
            tracked.client.set_terminated(tracked.run_id, "FINISHED")
        counts: dict[str, Any] = trial_counts(study.trials)
        return CompileResult(role="worker", study=name, storage=p.shown, folder=out, **counts,
                             mine=comp.trial_log.mine(), wall_s=round(time.perf_counter() - t0, 1),
                             memory=mem.to_dict())
    led = p.ledger.state()  # the whole study's search, every worker
    here = (comp.spent.lm_calls, comp.spent.cached, comp.spent.cost_usd)
    summary = finish(comp, study, out, o.progress, mem, theirs)
    final = (comp.spent.lm_calls - here[0], comp.spent.cached - here[1], comp.spent.cost_usd - here[2])  # prompts, test
    summary.update(lm_calls=led["lm_calls"] + final[0], cached_calls=led["cached"] + final[1],
                   cost_usd=round(led["cost_usd"] + final[2], 6), lm_calls_search=led["lm_calls"],
                   study=name, storage=p.shown)
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    manifest.update(status="done", finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    hashes={**manifest["hashes"], "config": digest_of(summary["best"]["config"])})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    summary["memory"] = mem.to_dict()
    with mem.stage("report"):
        write_report(out, summary, study)
    summary["memory"] = mem.to_dict()  # and the report's own
    (out / "summary.json").write_text(json.dumps({k: v for k, v in summary.items() if k != "report"}, indent=2))
    if tracked is not None:
        summary["mlflow"] = {"uri": tracked.uri, "run_id": tracked.run_id, "program": tracked.finish(summary, out)}
    return CompileResult.finalized(summary, out)


def _open(plan: Plan, jobs: int, progress: bool) -> tuple[Workers, optuna.Study, bool, dict[str, Any]]:
    """The objective, its workers and its study, opened as the plan's role asks. Returns the workers (their
    objective), the study, whether this process created the study (or resumes it: it writes the run folder's
    files), and the manifest to write."""
    p, out, name, storage = plan.place, plan.out, plan.name, plan.storage
    if storage and has_password(storage):
        log.warning("the password in --storage is used by this process only and written nowhere; give it as "
                    "$PGPASSWORD or in ~/.pgpass so that --resume and other workers can connect")
    try:
        golden = load_golden(plan.dataset)
    except DeclragError as e:
        if plan.role != "join":
            raise
        raise DeclragError(f"the study {name!r} runs on the dataset {plan.dataset!r}, which is not here: {e.message}",
                           hint="make it available on this machine under the same name or path") from None
    comp = Objective(plan.space, golden, out, progress, plan.model, plan.store)
    workers = Workers(comp, plan.budget, jobs)
    if comp.split_note:
        log.warning("%s", comp.split_note)
    split = {k: [e.id for e in v] for k, v in comp.splits.items()}
    data = digest_of([d.hash for d in golden.documents] + [i for ids in split.values() for i in ids])
    # the study's identity: what makes two processes work on the same study (the dataset by content too)
    identity = {"space": plan.space.model_dump(mode="json"), "dataset": plan.dataset, "model": plan.model,
                "data": data, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    study, created = workers.open_study(p, identity, join=plan.role != "new", adopt=plan.role == "resume")
    creator = plan.role != "join"
    if plan.role == "new" and not created:  # the same study, started elsewhere: work on it as a worker
        creator = False
        tell(progress, f"the study {name!r} exists in {p.shown} with this space and dataset: joining it as a worker")
    if creator:
        inputs = {"space": plan.space.model_dump(mode="json"), "dataset": plan.dataset, "model": plan.model,
                  "store": plan.store, "budget": asdict(plan.budget), "study": name,
                  "storage": redact(storage) if storage else None}
        (out / "compile.json").write_text(json.dumps(inputs, indent=2))
        (out / "split.json").write_text(json.dumps(split))
        p.ledger.start(plan.budget, spent=spent_before(study))  # the clock of --timeout starts again
        if not p.shared:
            retry_killed(study)
    manifest = {"status": "running", "versions": versions(), "git": _git_revision(),
                "hashes": {"data": data, "space": digest_of(plan.space.model_dump(mode="json")),
                           "split": digest_of(split)},
                "dataset": golden.name, "study": name, "storage": p.shown,
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return workers, study, creator, manifest


def finish(comp: Objective, study: optuna.Study, out: Path, progress: bool, mem: MemoryTracker | None = None,
           theirs: Theirs | None = None) -> dict[str, Any]:
    """Choose the trial that holds up (`select`), optimize its prompts, fine-tune its embedder, score the held-out
    test once, and ship it unless the user's own questions (``theirs``: `--check-questions`, `--usage`) say otherwise.
    ``mem`` measures each of these stages' peak RSS."""
    mem = mem or MemoryTracker()
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise DeclragError("no trial finished within the budget",
                           hint="raise --max-trials / --timeout / the budgets, then --resume")
    baseline = next((t for t in complete if t.user_attrs.get("baseline")), complete[0])
    front = study.best_trials if len(study.directions) > 1 else []
    best = max(front or complete, key=lambda t: (t.values[0], -t.number))
    with mem.stage("selection"):
        best, selection = select(comp, complete, baseline, best, score, theirs.usage.gold if theirs and theirs.usage
                                 else ())
    base_values = tidy_params(baseline.params)
    best_prog, base_prog = comp.program(best.params), comp.program(base_values)
    splits = comp.splits
    dev_before = best.user_attrs.get("metrics", {})
    prompt_info: dict[str, Any] = {"optimizer": comp.space.prompt_optimizer.name}
    if comp.space.prompt_optimizer.name != "none" and not comp.space.objective.retrieval_only:
        with mem.stage("prompts"):
            best_prog, prompt_info, dev_best = _prompts(comp, best, best_prog, prompt_info)
    else:
        dev_best = dev_before
    finetune_info: dict[str, Any] = {"enabled": False}
    if comp.space.finetune.enabled:
        with mem.stage("finetune"):
            best_prog, finetune_info = finetune_stage(comp, best_prog, out, progress, mem)
        if finetune_info.get("kept") == "tuned":
            dev_best = finetune_info["dev"]["tuned"]
    with mem.stage("test"):
        test_base, q_base = score(comp, base_prog, splits["test"], "test, baseline")
        test_best, q_best = score(comp, best_prog, splits["test"], "test, best program")
        gain = paired_difference(q_base, q_best)
        legs = {}
        alpha_param = next((n for n, p in comp.space.params.items() if p.path == "retrieve.alpha"), None)
        if comp.space.objective.retrieval_only and alpha_param:  # the single legs, with the best settings otherwise
            for leg, a in (("keyword", 0.0), ("vector", 1.0)):
                prog = comp.program({**best.params, alpha_param: a})
                legs[leg] = score(comp, prog, splits["test"], f"test, {leg} leg")[0]
    ships, check = best.number != baseline.number, None
    if theirs is not None and (c := theirs.check):
        with mem.stage("check questions"):
            check = {"file": c[0], **agreement(comp, study.trials, c[1])}
            if ships:
                check["verdict"] = verdict_of_theirs(ndcg_on(base_prog, c[1]), ndcg_on(best_prog, c[1]), check)
                ships = check["verdict"]["ships"]
    comp.shipping(best_prog if ships else base_prog).save(out / "best")
    dev_base = baseline.user_attrs.get("metrics", {})
    return {
        "objective": {"metrics": comp.space.objective.metrics, "also": comp.space.objective.also,
                      "context_budget": comp.context_budget},
        "baseline": {"dev": dev_base, "test": test_base, "params": base_values, "trial": baseline.number,
                     "config": base_prog.config.model_dump(mode="json")},
        "best": {"dev": dev_best, "test": test_best, "params": tidy_params(best.params), "trial": best.number,
                 "config": best_prog.config.model_dump(mode="json")},
        "gain_test": gain, "test_ci": {"baseline": mean_ci(q_base), "best": mean_ci(q_best)}, "legs_test": legs,
        "test_by_label": by_label(labels_of(splits["test"]), {"baseline": q_base, "best": q_best}, LABELS),
        "dev_gain": (dev_best.get("objective") or 0) - (dev_base.get("objective") or 0),
        **trial_counts(study.trials),
        "pareto": [{"trial": t.number, "values": t.values, "params": tidy_params(t.params)} for t in front],
        "prompt_optimization": prompt_info, "splits": {k: len(v) for k, v in splits.items()},
        "synthetic": comp.golden.synthetic(),
        "split_note": comp.split_note, "finetune": finetune_info,
        "shipped": "best" if ships else "baseline", "selection": selection, "check_questions": check,
        "usage": theirs.usage.summary() if theirs and theirs.usage else None,
        "retrieval_unit": dict(Counter(
            str(unit_of(list(e.gold_spans()), e.answers, e.gold)) for e in splits["test"])),
    }


def _prompts(comp: Objective, best, best_prog, prompt_info: dict[str, Any]):
    """The prompt optimization stage: (the program kept, its report, the better dev scores)."""
    splits = comp.splits
    before, _ = score(comp, best_prog, splits["dev"], "dev, best program")
    best_prog, info = optimize_prompts(best_prog, comp, splits["train"], splits["dev"])
    after, _ = score(comp, best_prog, splits["dev"], "dev, optimized prompts")
    prompt_info.update(info, dev_before=before, dev_after=after)
    if after["objective"] < before["objective"]:  # keep the better program, and say so
        prompt_info["kept"] = "before (the optimizer did not improve dev)"
        best_prog = comp.program(best.params)
    else:
        prompt_info["kept"] = "after"
    return best_prog, prompt_info, max(before, after, key=lambda m: m["objective"])
