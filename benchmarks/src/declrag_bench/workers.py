"""`declrag bench workers`: the same compile (space, dataset, seed, trial budget) run by one worker and by two
workers sharing one study in PostgreSQL, each worker a `declrag compile` process pinned to one CPU and one
thread. Reports wall time and the best program's dev and test scores of both, side by side.

Every index the space can ask for is built first (warm caches for both arms), so the arms measure the
search, not embedding. The database is ``storage`` if given, else a temporary PostgreSQL started with
scripts/postgres.sh (a source checkout and Debian's postgresql package needed) and removed afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from declrag.errors import DeclragError
from declrag.golden import load_golden
from declrag.optimize._objective import Objective
from declrag.optimize._space import grid, read_space

from .servers import run_script

ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                               "TOKENIZERS_PARALLELISM", "DECLRAG_LOCAL_THREADS", "RAYON_NUM_THREADS")}
ONE_THREAD["TOKENIZERS_PARALLELISM"] = "false"


def _postgres(*args: str) -> str:
    return run_script("postgres.sh", *args, timeout=900, hint="give --storage URL of a PostgreSQL server of yours")


def warm(space: Path, dataset: str, progress: bool = True) -> int:
    """Build every index the space's ingest parameters can ask for; returns how many."""
    sp = read_space(space)
    ingest_only = sp.model_copy(update={"params": {k: p for k, p in sp.params.items() if p.path.startswith("ingest.")}})
    golden = load_golden(dataset)
    with tempfile.TemporaryDirectory() as tmp:
        comp = Objective(sp, golden, Path(tmp), progress=progress)
        return len({id(comp.program(combo).store) for combo in grid(ingest_only)})  # one store per ingest setting


def _compile(args: list[str], cpu: int | None, log: Path) -> subprocess.Popen:
    """A `declrag compile` process with one thread per library, pinned to ``cpu`` by taskset (util-linux)."""
    env = {**os.environ, **ONE_THREAD}
    pin = ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []
    return subprocess.Popen([*pin, sys.executable, "-m", "declrag.cli", "compile", *args, "-q"], env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _study_ready(url: str, name: str) -> bool:
    import optuna

    try:
        return "declrag" in optuna.load_study(study_name=name, storage=url).user_attrs
    except KeyError:
        return False


def arm(workers: int, space: Path, dataset: str, trials: int, url: str, runs: Path) -> dict[str, Any]:
    name = f"bench-{workers}w-{uuid.uuid4().hex[:6]}"
    runs.mkdir(parents=True, exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    t0 = time.perf_counter()
    first = _compile(["--space", str(space), "--dataset", dataset, "--name", name, "--runs", str(runs),
                      "--storage", url, "--max-trials", str(trials)], cpus[0], runs / f"{name}-0.log")
    others = []
    for i in range(1, workers):
        while not _study_ready(url, name):
            if first.poll() is not None:
                break
            time.sleep(0.2)
        others.append(_compile(["--join", name, "--storage", url, "--runs", str(runs / f"worker{i}")],
                               cpus[i % len(cpus)], runs / f"{name}-{i}.log"))
    codes = [p.wait() for p in [first, *others]]
    wall = time.perf_counter() - t0
    if any(codes):
        bad = next(i for i, c in enumerate(codes) if c)
        raise DeclragError(f"worker {bad} of the {workers}-worker arm failed:\n"
                           + (runs / f"{name}-{bad}.log").read_text()[-1500:])
    s = json.loads((runs / name / "summary.json").read_text())
    metric = next(iter(s["objective"]["metrics"]))
    return {"workers": workers, "study": name, "wall_s": round(wall, 1), "trials": s["trials"],
            "complete": s["complete"], "pruned": s["pruned"], "repeats": s["repeats"],
            "best_trial": s["best"]["trial"], "best_params": s["best"]["params"],
            "best_dev": round(s["best"]["dev"].get("objective") or 0, 4),
            f"best_test_{metric}": round(s["best"]["test"].get(metric) or 0, 4),
            "baseline_test": round(s["baseline"]["test"].get(metric) or 0, 4), "metric": metric,
            "gain_test": s["gain_test"]}  # best over baseline on test, paired bootstrap


def run(space: str | Path = "optimizers/retrieval.yaml", dataset: str = "scifact", trials: int = 20,
        storage: str | None = None, progress: bool = True) -> dict[str, Any]:
    space = Path(space)
    t0 = time.perf_counter()
    indexes = warm(space, dataset, progress)
    warm_s = time.perf_counter() - t0
    folder = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if storage is None:
                folder = Path(tempfile.mkdtemp(prefix="declrag-pg-bench-", dir="/tmp"))
                storage = _postgres("start", "--dir", str(folder), "--port", "15499")
            arms = [arm(n, space, dataset, trials, storage, Path(tmp) / f"arm{n}") for n in (1, 2)]
        finally:
            if folder is not None:
                _postgres("stop", "--dir", str(folder), "--clean")
    one, two = arms
    return {"dataset": dataset, "space": str(space), "trials": trials, "indexes_warmed": indexes,
            "warm_s": round(warm_s, 1), "cpus": os.cpu_count(), "pinned": bool(shutil.which("taskset")), "arms": arms,
            "speedup": round(one["wall_s"] / two["wall_s"], 2) if two["wall_s"] else None,
            "test_difference": round(arms[1][f"best_test_{one['metric']}"] - one[f"best_test_{one['metric']}"], 4)}


def print_report(r: dict[str, Any], console) -> None:
    from rich.table import Table

    m = r["arms"][0]["metric"]
    t = Table(title=f"{r['dataset']}: one study, {r['trials']} trials, each worker one CPU and one thread "
                    f"({r['indexes_warmed']} indexes built first, {r['warm_s']} s)")
    for col in ("workers", "wall s", "complete", "pruned", "repeats", "best trial", "best dev", f"best test {m}",
                f"baseline test {m}"):
        t.add_column(col, justify="right")
    for a in r["arms"]:
        t.add_row(str(a["workers"]), f"{a['wall_s']:.1f}", str(a["complete"]), str(a["pruned"]), str(a["repeats"]),
                  str(a["best_trial"]),
                  f"{a['best_dev']:.4f}", f"{a[f'best_test_{m}']:.4f}", f"{a['baseline_test']:.4f}")
    console.print(t)
    for a in r["arms"]:
        g = a["gain_test"]
        console.print(f"{a['workers']} worker(s): best over baseline on test {g['diff']:+.4f} "
                      f"[{g['ci95'][0]:+.4f}, {g['ci95'][1]:+.4f}] (paired bootstrap, 95%)")
    console.print(f"speed-up with two workers: {r['speedup']}x; "
                  f"best test {m} two minus one: {r['test_difference']:+.4f}")
