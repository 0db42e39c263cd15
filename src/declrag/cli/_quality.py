"""Commands that measure and improve a program: eval and compile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..errors import DeclragError
from ._app import app
from ._common import (
    ConfigOpt,
    EmbeddingRowsOpt,
    LmCacheDiskOpt,
    LmCacheEntriesOpt,
    LmHistoryOpt,
    ProgramOpt,
    StoreOpt,
    apply_cache_limits,
    out,
)

if TYPE_CHECKING:
    from ..optimize import CompileResult


@app.command("eval")
def eval_(
    dataset: Annotated[str | None, typer.Option(help="golden set: a name (see `declrag datasets`) or a path")] = None,
    program: ProgramOpt = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
    split: Annotated[str | None, typer.Option(
        help="split to evaluate (default: dev, else test, else the first)")] = None,
    limit: Annotated[int | None, typer.Option(help="a seeded sample of N questions")] = None,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 13,
    metrics: Annotated[str | None, typer.Option(
        help="comma-separated metric names "
             "(default: every deterministic one, plus the judge metrics with --judge)")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="LLM judge route; repeat to average several")] = None,
    threads: Annotated[int, typer.Option(help="questions evaluated in parallel")] = 1,
    name: Annotated[str | None, typer.Option(
        help="run folder name under --runs (default: derived from the inputs)")] = None,
    runs: Annotated[Path, typer.Option(help="where run folders go")] = Path("runs"),
    closed_book: Annotated[bool, typer.Option(
        "--closed-book", help="also answer with no retrieval (lower bound)")] = False,
    oracle: Annotated[bool, typer.Option(
        "--oracle", help="also answer from the gold passage only (upper bound)")] = False,
    probes: Annotated[bool, typer.Option("--probes", help="robustness probes: no context, irrelevant context")] = False,
    model: Annotated[str | None, typer.Option(
        help="route every program LM call here (default: $DECLRAG_MODEL)")] = None,
    compare: Annotated[tuple[Path, Path] | None, typer.Option(
        help="compare two eval runs: --compare RUN_A RUN_B")] = None,
    modes: Annotated[str | None, typer.Option(
        help="comma-separated generate modes to evaluate side by side (lm, extractive, verified), each a run "
             "folder NAME-MODE; the table compares each with the first")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    lm_cache_entries: LmCacheEntriesOpt = None,
    lm_cache_disk_mb: LmCacheDiskOpt = None,
    lm_history: LmHistoryOpt = None,
    embedding_rows: EmbeddingRowsOpt = None,
):
    """Evaluate a program on a golden set: per-question records, a summary with 95% CIs, a report."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..evaluate.evaluation import DEFAULT_JUDGE_METRICS, DEFAULT_METRICS, EvalSpec, Evaluation
    from ..evaluate.evaluation import compare as compare_runs

    apply_cache_limits(lm_cache_entries, lm_cache_disk_mb, lm_history, embedding_rows)
    if compare:
        _print_compare(compare_runs(*compare))
        return
    if not dataset:
        raise DeclragError("--dataset is required", hint="e.g. declrag eval --dataset squad-v2.0 --limit 50")
    chosen = _modes(modes)
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..answering.selection import select_program
    from ..golden import load_golden

    golden = load_golden(dataset)
    split = split or next((s for s in ("dev", "test") if s in golden.splits), next(iter(golden.splits)))
    golden.split(split)
    if limit is not None and limit < 1:
        raise DeclragError(f"--limit must be at least 1, got {limit}")
    names = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else \
        DEFAULT_METRICS + (DEFAULT_JUDGE_METRICS if judge else [])
    prog = select_program(program, config, store, model, corpus=golden, progress=not quiet).load().warm_up()
    spec = EvalSpec(dataset=golden.name, split=split, limit=limit, seed=seed, metrics=names, judges=judge or [],
                    threads=threads, closed_book=closed_book, oracle=oracle, probes=probes)
    run_name = name or f"eval-{golden.name}-{split}-{limit or 'all'}-{prog.config.digest()[:8]}"
    if chosen:
        folders = [runs / f"{run_name}-{mode}" for mode in chosen]
        for mode, folder in zip(chosen, folders):
            out.print(f"generate mode {mode}")
            Evaluation(prog.generating(mode).warm_up(), golden, spec, folder, progress=not quiet).run()
        _print_modes(chosen, folders)
        return
    _print_eval(run_name, Evaluation(prog, golden, spec, runs / run_name, progress=not quiet).run(), runs)


def _print_eval(run_name: str, summary: dict, runs: Path) -> None:
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..metrics.passages import UNIT_WORDS

    t = Table(title=f"{run_name}: {summary['n']} questions, {summary['wall_s']} s")
    for col in ("metric", "mean", "95% CI", "n"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for n, v in summary["metrics"].items():
        if v["mean"] is not None:
            t.add_row(n, f"{v['mean']:.4f}", f"[{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]", str(v["n"]))
    out.print(t)
    if units := summary.get("retrieval_unit"):
        out.print("retrieval scored over " + ", ".join(f"{UNIT_WORDS.get(u, u)} ({n})"
                                                       for u, n in sorted(units.items())))
    u = summary["usage"]
    out.print(f"program: {int(u['program']['calls'])} LM calls ({int(u['program']['cached'])} cached), "
              f"${u['program']['cost_usd']:.4f}; judges: {int(u['judges']['calls'])} calls "
              f"({int(u['judges']['cached'])} cached), ${u['judges']['cost_usd']:.4f}")
    out.print(f"report: {runs / run_name / 'report.html'}")


def _modes(text: str | None) -> list[str]:
    """``--modes``: generate modes, each known, none twice; checked before any work."""
    if text is None:
        return []
    known = ("lm", "extractive", "verified")
    chosen = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    if bad := [m for m in chosen if m not in known]:
        raise DeclragError(f"--modes: unknown generate mode {bad[0]!r}", hint=f"choose from {', '.join(known)}")
    if not chosen:
        raise DeclragError("--modes is empty", hint="e.g. --modes lm,extractive,verified")
    return chosen


def _print_modes(modes: list[str], folders: list[Path]) -> None:
    """One row per metric, one column per mode, and each mode minus the first with its paired interval."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..evaluate.evaluation import compare as compare_runs

    first = modes[0]
    diffs = {m: compare_runs(folders[0], f) for m, f in zip(modes[1:], folders[1:])}
    summaries = [json.loads((f / "summary.json").read_text()) for f in folders]
    t = Table(title=f"generate modes over {summaries[0]['n']} questions; paired bootstrap 95% CI against {first}")
    t.add_column("metric")
    for m in modes:
        t.add_column(m, justify="right")
    for m in modes[1:]:
        t.add_column(f"{m} - {first}", justify="right")
    for metric in summaries[0]["metrics"]:
        means = [s["metrics"].get(metric, {}).get("mean") for s in summaries]
        if all(v is None for v in means):
            continue
        cells = ["-" if v is None else f"{v:.4f}" for v in means]
        for m in modes[1:]:
            d = diffs[m]["metrics"].get(metric) or {}
            cells.append("-" if d.get("diff") is None else
                         f"{d['diff']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]")
        t.add_row(metric, *cells)
    t.add_row("abstained", *[f"{s['abstention']['all']:.4f}" for s in summaries], *[""] * (len(modes) - 1))
    t.add_row("latency p50 ms", *[f"{s['latency_ms']['p50']:.1f}" for s in summaries], *[""] * (len(modes) - 1))
    out.print(t)
    out.print("runs: " + ", ".join(str(f) for f in folders))


def _print_compare(r: dict) -> None:
    t = Table(title=f"B - A over {r['n']} shared questions (A = {r['a']}, B = {r['b']}); paired bootstrap 95% CI")
    for col in ("metric", "A", "B", "B - A", "95% CI", "real?"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for n, v in r["metrics"].items():
        if v["diff"] is None:
            continue
        t.add_row(n, f"{v['a']:.4f}", f"{v['b']:.4f}", f"{v['diff']:+.4f}",
                  f"[{v['ci95'][0]:+.4f}, {v['ci95'][1]:+.4f}]", "yes" if v["significant"] else "noise")
    out.print(t)


@app.command("compile")
def compile_(
    space: Annotated[Path | None, typer.Option(
        help="search space: a YAML path, or a name found in $DECLRAG_OPTIMIZERS, ./optimizers or the packaged "
             "defaults (e.g. retrieval)")] = None,
    dataset: Annotated[str | None, typer.Option(help="golden set: a name or a path")] = None,
    name: Annotated[str | None, typer.Option(help="run folder name under --runs")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the compile in this run folder")] = None,
    runs: Annotated[Path, typer.Option(help="where run folders go")] = Path("runs"),
    max_trials: Annotated[int | None, typer.Option(
        help="stop after this many trials in all (incl. earlier ones)")] = None,
    timeout: Annotated[float | None, typer.Option(help="stop the search after this many seconds")] = None,
    max_cost_usd: Annotated[float | None, typer.Option(help="stop when LM spending reaches this")] = None,
    max_lm_calls: Annotated[int | None, typer.Option(help="stop after this many (uncached) LM calls")] = None,
    jobs: Annotated[int, typer.Option(help="trials run in parallel")] = 1,
    store: Annotated[str | None, typer.Option(
        "--store", help="where the trials' indexes live: a folder (one sub-folder per ingest setting) or "
                        "weaviate://host:port/ (one collection per ingest setting) "
                        "(default: the cache folder)")] = None,
    model: Annotated[str | None, typer.Option(
        help="route every LM call of every trial here (default: $DECLRAG_MODEL)")] = None,
    storage: Annotated[str | None, typer.Option(
        help="the study's database, shared by workers on many machines: any SQLAlchemy URL Optuna accepts, e.g. "
             "postgresql+psycopg://user@host/db (password from $PGPASSWORD or ~/.pgpass) "
             "(default: the run folder's journal)")] = None,
    join: Annotated[str | None, typer.Option(
        help="add a worker to the study NAME in --storage (space, dataset, model and budgets are the study's)")] = None,
    finalize: Annotated[bool, typer.Option(
        "--finalize", help="with --join: also write the artifact and report here when the search ends "
                           "(if the creating machine is gone)")] = False,
    heartbeat: Annotated[int, typer.Option(
        help="with --storage: seconds between a running trial's heartbeats; "
             "a trial silent for 3x this is retried by another worker")] = 10,
    patience: Annotated[float, typer.Option(
        help="with --storage: seconds a worker retries a lost database (with backoff) before it stops")] = 120.0,
    check_questions: Annotated[Path | None, typer.Option(
        help="a JSONL file of your own questions (answers or gold ids): the compile reports how its ranking of the "
             "trials agrees with theirs (Kendall tau, interval), and ships the default program unless the chosen one "
             "is not worse on them and the ranking agrees")] = None,
    usage: Annotated[str | None, typer.Option(
        help="the usage store `declrag serve` records to, or its export (JSONL): 20 or more rated questions with "
             "gold decide what ships, fewer can only keep the default")] = None,
    mlflow: Annotated[str | None, typer.Option(
        help="log the study (parent run), each trial (child runs) and the best program (artifact) to this MLflow "
             "tracking server, e.g. http://127.0.0.1:5000 (needs declrag[mlflow])")] = None,
    mlflow_experiment: Annotated[str, typer.Option(help="the MLflow experiment the runs go to")] = "declrag",
    context_budget: Annotated[int | None, typer.Option(
        help="score retrieval within this many characters handed over (the space's kind@budget metrics; default: "
             "what the baseline hands over)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    lm_cache_entries: LmCacheEntriesOpt = None,
    lm_cache_disk_mb: LmCacheDiskOpt = None,
    lm_history: LmHistoryOpt = None,
    embedding_rows: EmbeddingRowsOpt = None,
):
    """Search the declared space for the best program on a golden set; write runs/NAME/best. With --storage,
    workers on other machines join the same study with --join NAME."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..answering.selection import model_route
    from ..optimize import Budget, CompileOptions, compile

    apply_cache_limits(lm_cache_entries, lm_cache_disk_mb, lm_history, embedding_rows)
    budget = Budget(max_trials=max_trials, timeout_s=timeout, max_cost_usd=max_cost_usd, max_lm_calls=max_lm_calls)
    if heartbeat < 1 or patience < 0:
        raise DeclragError("--heartbeat is a whole number of seconds >= 1 and --patience >= 0",
                           hint="e.g. --heartbeat 10 --patience 120")
    s = compile(CompileOptions(space, dataset, name, runs, budget, jobs, resume,
                               model if join else model_route(model), progress=not quiet, store=store,
                               storage=storage, join=join, finalize=finalize, heartbeat_s=heartbeat,
                               patience_s=patience, check_questions=check_questions, usage=usage, mlflow=mlflow,
                               mlflow_experiment=mlflow_experiment, context_budget=context_budget))
    if s.role == "worker":
        out.print(f"worker done: the study {s.study!r} in {s.storage} has {s.complete} finished and "
                  f"{s.pruned} pruned trials ({s.mine} of them run here, in {s.wall_s} s); the process that "
                  "created it writes the artifact and the report", markup=False, highlight=False)
        return
    _print_compile(s)
    out.print(f"program: {s.folder / 'best'}   report: {s.folder / 'report.html'}")
    if m := s.mlflow:
        out.print(f"MLflow: run {m['run_id']} at {m['uri']}; serve it from there: MLFLOW_TRACKING_URI={m['uri']} "
                  f"declrag serve {m['program']}", markup=False, highlight=False)


def _print_compile(s: CompileResult) -> None:
    """What a finished compile says: dev and test of the baseline and the best, the gain, what ships and why, how
    its ranking agrees with the user's own questions, peak memory."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..runtime.process_memory import describe

    assert s.baseline is not None and s.best is not None and s.gain_test is not None, "a finalizer's result"
    g, base, best = s.gain_test, s.baseline, s.best
    t = Table(title=f"compile: {s.trials} trials ({s.pruned} pruned, {s.stopped_by_budget} stopped by a "
                    f"budget), {s.lm_calls} LM calls, ${s.cost_usd or 0:.4f}, {s.wall_s} s")
    for col in ("", f"baseline (trial {base['trial']})", f"best (trial {best['trial']})"):
        t.add_column(col, justify="right")
    t.add_row("dev objective", f"{base['dev'].get('objective', 0):.4f}", f"{best['dev'].get('objective', 0):.4f}")
    t.add_row("test objective", f"{base['test'].get('objective', 0):.4f}", f"{best['test'].get('objective', 0):.4f}")
    out.print(t)
    gain = (f"test gain {g['diff']:+.4f} [{g['ci95'][0]:+.4f}, {g['ci95'][1]:+.4f}] "
            f"({'holds' if g['significant'] else 'not distinguishable from noise'})" if g["diff"] is not None else
            "test gain: none (no test question could be scored; a larger set gives one)")
    out.print(f"{gain}; best params: {json.dumps(best['params'])}")
    if sel := s.selection:
        out.print(f"shipped in best/: the {s.shipped} program: {sel['why']}", markup=False, highlight=False)
    if c := s.check_questions:
        out.print(f"your {c['questions']} questions: " + (
            f"the trials' ranking agrees with theirs, Kendall tau {c['tau']:+.3f} [{c['ci95'][0]:+.3f}, "
            f"{c['ci95'][1]:+.3f}] over {c['trials']} trials" + (f" ({c['note']})" if c.get("note") else "")
            if c.get("tau") is not None else c.get("why", "no agreement measured"))
                  + (f"; {c['verdict']['why']}" if c.get("verdict") else ""), markup=False, highlight=False)
    if u := s.summary.get("usage"):
        out.print(f"usage {u['source']}: {u['questions']} questions ({u['helpful']} rated helpful, "
                  f"{u['not_helpful']} not, {u['unrated']} unrated); {u['gold']} with gold in this corpus, "
                  f"{u.get('fair', 0)} of them fair (explored answers, corrections)"
                  + (f"; {u['stale']} dropped: their answers' documents since "
                     + " or ".join(f"{n} {why}" for why in ("deleted", "changed") if (n := u.get(why)))
                     if u["stale"] else "")
                  + ("" if u["decides"] else f" (fewer than {u['need']} fair: they can only keep the default; "
                     "declrag serve --explore makes fair ones)"),
                  markup=False, highlight=False)
    out.print(describe(s.memory), markup=False, highlight=False)
