"""`declrag bench compile`: on one fixed space (optimizers/bench.yaml), the exhaustive grid and declrag's
search, side by side, each starting from a cold LM cache (indexes and embeddings are built once, before
both). The search gets at most a quarter of the grid's LM calls; we report whether it reaches 95% of
the grid's best dev objective, and both counts and wall times. When the space fine-tunes the embedder
(``finetune: {enabled: true}``), the search's best program then goes through compile's fine-tune stage. Every
stage's peak resident memory is measured (`declrag.runtime.process_memory`) and reported beside its time."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.golden import load_golden
from declrag.lm import use_lm_cache
from declrag.optimize._budget import Budget, trial_counts
from declrag.optimize._objective import Objective
from declrag.optimize._space import grid, read_space
from declrag.optimize._study import place
from declrag.optimize._workers import Workers
from declrag.runtime.process_memory import MemoryTracker, describe

SPACE = "bench"  # optimizers/bench.yaml, found like every space (declrag.runtime.resources)


def run(dataset: str = "squad-v2.0", space: str | Path = SPACE, share: float = 0.25,
        progress: bool = True) -> dict[str, Any]:
    sp = read_space(space)
    mem = MemoryTracker()
    finetune: dict[str, Any] | None = None
    with mem.stage("setup"):
        golden = load_golden(dataset)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        # indexes first, for both arms
        with mem.stage("indexes"):
            warm = Objective(sp, golden, tmp / "warm", progress=progress)
            for combo in grid(sp):
                warm.program(combo)
        # the grid: every program on the whole dev set, cold LM cache
        use_lm_cache(tmp / "lm-grid")
        with mem.stage("grid"):
            g = Objective(sp, golden, tmp / "grid", progress=progress)
            t0 = time.perf_counter()
            scores = []
            for combo in grid(sp):
                res, _ = g.evaluate(g.program(combo), g.splits["dev"])
                scores.append({"params": combo, "dev": res["objective"]})
            grid_wall = time.perf_counter() - t0
        best_grid = max(scores, key=lambda s: s["dev"])
        # declrag's search, cold LM cache, at most `share` of the grid's LM calls
        use_lm_cache(tmp / "lm-search")
        (tmp / "search").mkdir()
        budget = Budget(max_lm_calls=max(1, int(share * g.spent.lm_calls)), max_trials=len(scores))
        with mem.stage("search"):
            s = Objective(sp, golden, tmp / "search", progress=progress)
            w = Workers(s, budget)
            t0 = time.perf_counter()
            study = w.search(w.open_study(place(tmp / "search", "search"), {"data": golden.name})[0])
            search_wall = time.perf_counter() - t0
        trials = study.trials  # read now: the study's journal goes with the temporary folder
        complete = [(t.value, t) for t in trials if t.state.name == "COMPLETE" and t.value is not None]
        best_value, best_search = max(complete, key=lambda vt: vt[0]) if complete else (None, None)
        if sp.finetune.enabled and best_search is not None:  # compile's last stage, on the search's best program
            from declrag.optimize._finetune import finetune_stage

            with mem.stage("finetune"):
                _, info = finetune_stage(s, s.program(best_search.params), tmp / "search", progress, mem)
            finetune = {k: info.get(k) for k in ("training", "mining_s", "reembed_s", "stage_s", "kept", "skipped")}
            if "dev" in info:
                finetune["dev"] = {k: info["dev"][k]["objective"] for k in ("base", "tuned")}
    result: dict[str, Any] = {
        "dataset": golden.name, "space": str(space), "dev_questions": len(g.splits["dev"]), "programs": len(scores),
        "grid": {"best_dev": round(best_grid["dev"], 4), "lm_calls": g.spent.lm_calls, "wall_s": round(grid_wall, 1),
                 "best_params": best_grid["params"]},
        "search": {"best_dev": round(best_value, 4) if best_value is not None else None, "lm_calls": s.spent.lm_calls,
                   "wall_s": round(search_wall, 1), **trial_counts(trials),
                   "best_params": best_search.params if best_search else None},
        "all_grid_scores": scores, "finetune": finetune, "memory": mem.to_dict(),
    }
    bg, bs = result["grid"]["best_dev"], result["search"]["best_dev"] or 0.0
    result["search_reaches"] = round(bs / bg, 4) if bg else None
    result["call_share"] = round(result["search"]["lm_calls"] / max(1, result["grid"]["lm_calls"]), 4)
    result["targets"] = {"reach": 0.95, "call_share": share}
    return result


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"bench compile: {r['programs']} programs, {r['dev_questions']} dev questions of {r['dataset']} "
                    "(cold LM caches)")
    for col in ("", "best dev objective", "LM calls", "wall s", "programs tried"):
        t.add_column(col, justify="right")
    t.add_row("exhaustive grid", f"{r['grid']['best_dev']:.4f}", str(r["grid"]["lm_calls"]),
              f"{r['grid']['wall_s']:.0f}", str(r["programs"]))
    srch = r["search"]
    t.add_row("declrag search", f"{(srch['best_dev'] or 0):.4f}", str(srch["lm_calls"]), f"{srch['wall_s']:.0f}",
              f"{srch['trials']} ({srch['complete']} complete, {srch['pruned']} pruned, "
              f"{srch['stopped_by_budget']} stopped by the budget)")
    console.print(t)
    console.print(f"search reaches {r['search_reaches']:.0%} of the grid's best with {r['call_share']:.0%} of its "
                  f"LM calls (targets: >= 95% with <= 25%)")
    ft = r.get("finetune")
    if ft and ft.get("training"):
        tr = ft["training"]
        dev = ft.get("dev") or {}
        console.print(f"fine-tune: {tr['steps']} steps of {tr['batch_size']} ({tr['loss']}), {ft['stage_s']} s; "
                      f"dev {dev.get('base', 0):.4f} -> {dev.get('tuned', 0):.4f}, kept the {ft['kept']} model")
    print_memory(r.get("memory") or {}, console)


def print_memory(memory: dict[str, Any], console: Console) -> None:
    """The peak resident memory of each stage (`declrag.runtime.process_memory.MemoryTracker.to_dict`) as a table."""
    stages = memory.get("stages") or {}
    if not any(v.get("peak_mb") is not None for v in stages.values()):
        console.print(describe(memory))
        return
    t = Table(title=f"peak resident memory per stage ({memory['method']})")
    for col in ("stage", "peak RSS MB", "at start MB", "after, freed MB", "s"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for name, v in stages.items():
        t.add_row(("  " if "." in name else "") + name, f"{v['peak_mb']:.0f}", f"{v['start_mb']:.0f}",
                  f"{v['released_mb']:.0f}", f"{v['seconds']:.0f}")
    console.print(t)
