"""`declrag bench usage`: does a program get better from being used?

Per corpus (a golden set with real questions), as a user's program would live:

1. `declrag compile --space retrieval` on a synthetic set of the corpus (no labels: what a new user ships), and the
   same compile on the real questions' own train/dev cut (the reference: what real labels buy). Both are taken from
   `declrag bench nolabels`' run folder when it holds them for the same corpus, size, seed and trials.
2. `declrag serve` of the synthetic compile's artifact, recording to a usage store and exploring a share of the
   questions (``--explore``: their passages multileaved from its and its neighbours' rankings), is asked the corpus's
   real questions over HTTP (``POST /v1/ask``, with a conversation's earlier turns), never one of the real test split.
   A simulated user rates a share of the answers (``POST /v1/feedback``): helpful when a citation covers the
   reference span (or its gold document, where the set has no spans) or the answer holds a short reference answer,
   naming that citation; a share of ratings flipped, as people misclick; on a "not helpful", a share of users type
   the right answer (where the set has a short one) as the correction.
3. For each size (the first 25, 50, 100, 200 recorded questions): `declrag usage export` of those records, and
   `declrag compile --resume` of a copy of the synthetic compile with ``--usage`` that export: the same search, its
   selection now with the users' rated questions.
4. Every program scored on the real test split (the space's metric, at the context budget), paired with the default
   program: the gain of each, and the share of the real-labels compile's gain that usage keeps.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from declrag.golden import Example, GoldenSet, load_golden
from declrag.metrics.stats import paired_difference
from declrag.runtime.folders import cache_dir
from declrag.text.normalize import squad_normalize

from .serve import _free_port, _stop
from .synth import _capped, _real_test

SIZES = (25, 50, 100, 200)
BIN = Path(sys.executable).parent


def _holds(e: Example, resp: dict[str, Any]) -> int | None:
    """Which citation ([n]) holds the reference, 0 when only the answer's words do, None when nothing does."""
    spans = e.gold_spans()
    docs = {d for d, g in e.gold.items() if g > 0}
    for c in resp.get("citations") or []:
        start, end = c["span"]
        if any(s.doc == c["doc_id"] and s.start < end and start < s.end for s in spans) or \
                (not spans and c["doc_id"] in docs):
            return int(c["n"])
    said = squad_normalize(resp.get("answer") or "")
    if not resp.get("abstained") and any(a and len(a.split()) <= 12 and squad_normalize(a) in said
                                         for a in e.answers):
        return 0
    return None


def replay(program: Path, asked: Sequence[Example], db: Path, rated: float, flip: float, correct: float, seed: int,
           progress: bool, explore: float = 0.0) -> dict[str, Any]:
    """``asked`` through a real `declrag serve` of ``program`` that records to ``db`` and explores a share
    ``explore`` of them, rated as the module says."""
    port = _free_port()
    log = (db.parent / "serve.log").open("w")
    proc = subprocess.Popen([str(BIN / "declrag"), "serve", str(program), "--port", str(port), "--record", str(db),
                             "--explore", str(explore), "--explore-seed", str(seed)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base, rng = f"http://127.0.0.1:{port}", random.Random(seed)
    counts = dict.fromkeys(("asked", "held", "rated", "helpful", "flipped", "corrected"), 0)
    found: dict[str, bool] = {}  # per answer id: whether the reference was in a citation or the answer
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"declrag serve exited: {(db.parent / 'serve.log').read_text()[-1500:]}")
            try:
                if httpx.get(base + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("declrag serve was not ready in 600 s")
            time.sleep(0.5)
        with httpx.Client(base_url=base, timeout=300) as c:
            for i, e in enumerate(asked):
                body = {"question": e.question,
                        "history": [{"role": t.role, "content": t.content} for t in e.history] or None}
                resp = c.post("/v1/ask", json=body).raise_for_status().json()
                counts["asked"] += 1
                holds = _holds(e, resp)
                counts["held"] += holds is not None
                found[resp["id"]] = holds is not None
                if rng.random() >= rated:
                    continue
                helpful = holds is not None
                if rng.random() < flip:
                    helpful, counts["flipped"] = not helpful, counts["flipped"] + 1
                fb: dict[str, Any] = {"id": resp["id"], "helpful": helpful}
                if helpful and holds:
                    fb["citation"] = holds
                short = [a for a in e.answers if a and len(a.split()) <= 12]
                if not helpful and holds is None and short and rng.random() < correct:
                    fb["correction"], counts["corrected"] = short[0], counts["corrected"] + 1
                c.post("/v1/feedback", json=fb).raise_for_status()
                counts["rated"] += 1
                counts["helpful"] += helpful
                if progress and (i + 1) % 25 == 0:
                    print(f"  replayed {i + 1}/{len(asked)} ({counts['rated']} rated)", flush=True)
    finally:
        _stop(proc)  # SIGTERM: the recorder flushes before the server exits
        log.close()
    return {**counts, "found": found}


def _compiles(gs: GoldenSet, dataset: str, capped: str, runs: Path, n: int, seed: int, trials: int,
              progress: bool) -> tuple[Path, dict[str, Any]]:
    """The synthetic compile's run folder and the real compile's summary (bench nolabels' where it has them)."""
    from declrag.optimize import Budget, CompileOptions, compile
    from declrag.synth import synthesize

    done = cache_dir() / "bench-nolabels" / f"{gs.name}-{n}-{seed}-{trials}"
    if (done / "synthetic" / "summary.json").is_file() and (done / "real" / "summary.json").is_file():
        shutil.copytree(done / "synthetic", runs / "synthetic")
        shutil.copytree(done / "synthetic-set", runs / "synthetic-set")
        inputs = json.loads((runs / "synthetic" / "compile.json").read_text())  # the study reads its set from here
        inputs["dataset"] = str(runs / "synthetic-set")
        (runs / "synthetic" / "compile.json").write_text(json.dumps(inputs, indent=2))
        return runs / "synthetic", json.loads((done / "real" / "summary.json").read_text())
    synthesize(gs.documents, runs / "synthetic-set", n, seed=seed, force=True, progress=progress)
    compile(CompileOptions(capped, str(runs / "synthetic-set"), "synthetic", runs=runs,
                           budget=Budget(max_trials=trials), progress=progress))
    real = compile(CompileOptions(capped, dataset, "real", runs=runs, budget=Budget(max_trials=trials),
                                  progress=progress)).summary
    return runs / "synthetic", real


def corpus(dataset: str, sizes: Sequence[int], rated: float, flip: float, correct: float, n: int, seed: int,
           trials: int, real_limit: int, space: str, progress: bool, explore: float = 0.0) -> dict[str, Any]:
    from declrag.optimize import CompileOptions, compile, score
    from declrag.usage import UsageStore, export

    t0 = time.perf_counter()
    gs = load_golden(dataset)
    runs = cache_dir() / "bench-usage" / f"{gs.name}-{n}-{seed}-{trials}"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    capped = _capped(space, runs, real_limit)
    syn_run, real = _compiles(gs, dataset, capped, runs, n, seed, trials, progress)
    comp, test = _real_test(gs, capped, runs, progress)
    held = {e.id for e in test}
    pool = [e for e in gs.examples() if e.id not in held and (e.gold or e.gold_spans())]
    random.Random(seed).shuffle(pool)
    asked = pool[:max(sizes)]
    db = runs / "usage.sqlite3"
    counts = replay(syn_run / "best", asked, db, rated, flip, correct, seed, progress, explore)
    store = UsageStore(db, create=False)
    records = [r for r in store.records() if r["answer"] is not None]
    store.close()
    found = counts.pop("found")  # what exploring cost its users: the reference found, explored or not
    explored = [found.get(r["id"], False) for r in records if r.get("explored")]
    plain = [found.get(r["id"], False) for r in records if not r.get("explored")]
    counts.update(explored=len(explored), held_explored=sum(explored), held_plain=sum(plain))
    syn = json.loads((syn_run / "summary.json").read_text())
    cache: dict[str, list[float | None]] = {}

    def scored(params: dict[str, Any]) -> list[float | None]:
        key = json.dumps(params, sort_keys=True)
        if key not in cache:
            cache[key] = score(comp, comp.program(params), test, f"{gs.name}: real test")[1]
        return cache[key]

    default = scored(syn["baseline"]["params"])
    real_gain = paired_difference(default, scored(real["best"]["params"]))
    arms: dict[str, Any] = {}
    for size in [s for s in sizes if s <= len(records)]:
        exported = runs / f"usage-{size}.jsonl"
        export(records[:size], exported)
        copy = runs / f"with-usage-{size}"
        shutil.copytree(syn_run, copy)
        s = compile(CompileOptions(resume=copy, usage=str(exported), progress=progress)).summary
        params = s["best"]["params"] if s["shipped"] == "best" else s["baseline"]["params"]
        gain = paired_difference(default, scored(params))
        kept = (round(gain["diff"] / real_gain["diff"], 3)
                if real_gain["diff"] and real_gain["diff"] >= 0.02 and gain["diff"] is not None else None)
        ruled = (s["selection"].get("usage") or {}).get("candidates") or []
        arms[str(size)] = {"params": params, "usage": s["usage"], "why": s["selection"]["why"], "gain": gain,
                           "kept_of_real": kept, "candidates": ruled}
    syn_params = syn["best"]["params"] if syn["shipped"] == "best" else syn["baseline"]["params"]
    ceiling = _ceiling(comp, syn["baseline"]["params"], records, scored, default)
    return {"dataset": gs.name, "real_test": len(test), "metric": next(iter(comp.space.objective.metrics)),
            "replay": counts, "default": syn["baseline"]["params"],
            "synthetic": {"params": syn_params, "gain": paired_difference(default, scored(syn_params))},
            "real": {"params": real["best"]["params"], "gain": real_gain}, "usage": arms, "rankers": ceiling,
            "wall_s": round(time.perf_counter() - t0, 1)}


def _ceiling(comp, base: dict[str, Any], records: list[dict[str, Any]], scored, default: list[float | None]
             ) -> list[dict[str, Any]]:
    """Each ranker the server explored with, scored on the real test: what compile from usage can ship at best
    (it chooses among them), whatever its users rate."""
    from declrag.optimize._usage import rankers

    record = next((r["explored"] for r in records if r.get("explored")), None)
    if record is None:
        return []
    fake = Example(id="explored", question="", metadata={"explored": record})
    return [{"ranker": label, "params": values, "gain": paired_difference(default, scored(values))}
            for label, values in rankers(comp.space, base, [fake])]


def run(datasets: Sequence[str], sizes: Sequence[int] = SIZES, rated: float = 0.3, flip: float = 0.1,
        correct: float = 0.5, n: int = 1000, seed: int = 13, trials: int = 20, real_limit: int = 1000,
        space: str = "retrieval", progress: bool = True, explore: float = 0.0) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = [corpus(d, sizes, rated, flip, correct, n, seed, trials, real_limit, space, progress, explore)
            for d in datasets]
    return {"sizes": list(sizes), "rated": rated, "flip": flip, "correct": correct, "explore": explore, "n": n,
            "seed": seed,
            "trials": trials, "corpora": rows, "wall_s": round(time.perf_counter() - t0, 1)}


def _ci(d: dict[str, Any]) -> str:
    return f"{d['diff']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]" if d.get("diff") is not None else "n/a"


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"compile from usage: real test gain over the default program (paired 95% intervals); "
                    f"{r.get('explore', 0):.0%} of questions explored, {r['rated']:.0%} of answers rated, "
                    f"{r['flip']:.0%} of ratings flipped, {r['correct']:.0%} of 'not helpful' corrected")
    for col in ("corpus", "program", "gain over default", "of the real compile's", "gold used", "ships because"):
        t.add_column(col, justify="left" if col in ("corpus", "program", "ships because") else "right")
    for c in r["corpora"]:
        name = f"{c['dataset']} ({c['metric']}, test {c['real_test']})"
        t.add_row(name, "synthetic compile", _ci(c["synthetic"]["gain"]), "", "", "")
        t.add_row("", "real-labels compile", _ci(c["real"]["gain"]), "", "", "")
        for size, a in c["usage"].items():
            u = a["usage"]
            t.add_row("", f"usage, {size} recorded", _ci(a["gain"]),
                      "" if a["kept_of_real"] is None else f"{a['kept_of_real']:.0%}",
                      f"{u['gold']} ({u.get('fair', 0)} fair{', decide' if u['decides'] else ''})", a["why"][:110])
    console.print(t)
    for c in r["corpora"]:
        if c.get("rankers"):  # the ceiling: the best usage can ship is one of these
            console.print(f"{c['dataset']}: the explored rankers on the real test (what usage chooses among): "
                          + "; ".join(f"{k['ranker']} {_ci(k['gain'])}" for k in c["rankers"]),
                          markup=False, highlight=False)
    for c in r["corpora"]:
        p = c["replay"]
        console.print(f"{c['dataset']}: replayed {p['asked']} real questions over HTTP; the reference in a citation "
                      f"or the answer for {p['held']} ({p.get('held_explored', 0)} of the {p.get('explored', 0)} "
                      f"explored, {p.get('held_plain', 0)} of the {p['asked'] - p.get('explored', 0)} not); "
                      f"{p['rated']} rated ({p['helpful']} helpful, {p['flipped']} "
                      f"flipped, {p['corrected']} corrected); {c['wall_s']} s", markup=False, highlight=False)
