"""`declrag bench nolabels`: is a compile with no labels never worse than the default program, on real questions?

Per corpus (a golden set with real questions), as a new user would: `declrag synth` on the corpus alone (the default
offline writer and size), `declrag compile --space retrieval` on that set (its shipped program chosen by
`declrag.optimize._select`), and the same compile on the real questions' own train/dev cut. Then, on the real
questions:

- the default program (the space's baseline), what the synthetic compile ships, and what the real compile ships,
  each scored by nDCG@10 (in each question's unit) on the real test split the real compile held out, with paired
  95% intervals; the synthetic compile (which read no real label) also on every real question;
- **what each check would have shipped**: the search's best trial as it was (no check), the best held-out lower
  bound alone, with every writer's mean gain at least 0 too, and the rule that ships (the lower bound above 0 on
  every writer's questions alone too), each with its real gain over the default program: the table that decides
  which check to keep;
- **transfer, per setting** (`declrag_bench.transfer`): each single change from the default program, its gain on
  the held-out synthetic questions (per writer, and per style probe: `declrag_bench.probes`) beside its gain on
  the real questions, at budget;
- **how questions share their passage's words**: the share of a question's content words found within 200
  characters of its gold span (or in its gold document where it has no span), for the real questions and for each
  synthetic writer's.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from declrag.golden import Example, GoldenSet, load_golden
from declrag.metrics.stats import paired_difference
from declrag.runtime.folders import cache_dir
from declrag.synth import synthesize
from declrag.synth._generate import content_words

from . import transfer
from .synth import _capped, _ci, _real_test

NEAR = 200  # characters either side of a gold span that count as "near the answer"
# a question's own words, which no passage needs to share (content_words keeps them)
ASKING = {"what", "when", "where", "who", "whom", "whose", "which", "why", "how", "did", "does", "do", "much", "many"}
RULES = ("search best, no check", "held-out lower bound", "+ every writer's mean gain >= 0",
         "+ every writer's lower bound > 0 (ships)")


def overlap(examples: Sequence[Example], texts: dict[str, str]) -> dict[str, Any]:
    """The mean share of each question's content words that occur near its gold (`NEAR` characters around its
    first gold span, else its first gold document), over the questions that have either."""
    shares = []
    for e in examples:
        spans = list(e.gold_spans())
        if spans and spans[0].doc in texts:
            s = spans[0]
            near = texts[s.doc][max(0, s.start - NEAR): s.end + NEAR]
        elif (doc := next((d for d, g in e.gold.items() if g > 0 and d in texts), None)) is not None:
            near = texts[doc]
        else:
            continue
        words = {w.lower() for w in content_words(e.question)} - ASKING
        if words:
            low = near.lower()
            shares.append(sum(w in low for w in words) / len(words))
    return {"questions": len(shares), "share": round(float(np.mean(shares)), 3) if shares else None}


def _params_of(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What each check would have shipped: rule -> the params of that program (the baseline's where none)."""
    base = summary["baseline"]["params"]
    sel = summary.get("selection") or {}
    rows = sel.get("candidates") or []
    first = next((r for r in rows if r["trial"] == sel.get("search_best")), None)
    holds = [r for r in rows if r["lower"] is not None and r["lower"] > 0]
    means = [r for r in holds if all(d >= 0 for d in r.get("by_writer", {}).values())]
    shipped = summary["best"]["params"] if summary["shipped"] == "best" else base

    def top(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return max(rows, key=lambda r: r["lower"])["params"] if rows else base

    return {RULES[0]: first["params"] if first else summary["best"]["params"], RULES[1]: top(holds),
            RULES[2]: top(means), RULES[3]: shipped}


def corpus(dataset: str, n: int, seed: int, trials: int, real_limit: int, space: str, progress: bool
           ) -> dict[str, Any]:
    """The measurements above on one corpus."""
    from declrag.optimize import Budget, CompileOptions, compile, score
    from declrag.optimize._objective import Objective
    from declrag.optimize._space import read_space

    t0 = time.perf_counter()
    gs: GoldenSet = load_golden(dataset)
    runs = cache_dir() / "bench-nolabels" / f"{gs.name}-{n}-{seed}-{trials}"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    capped = _capped(space, runs, real_limit)
    folder = runs / "synthetic-set"  # the compile's run folder is runs / "synthetic"
    report = synthesize(gs.documents, folder, n, seed=seed, force=True, progress=progress)
    syn = compile(CompileOptions(capped, str(folder), "synthetic", runs=runs, budget=Budget(max_trials=trials),
                                 progress=progress)).summary
    real = compile(CompileOptions(capped, dataset, "real", runs=runs, budget=Budget(max_trials=trials),
                                  progress=progress)).summary
    comp, test = _real_test(gs, capped, runs, progress)
    every = [e for e in gs.examples() if e.gold or e.gold_spans()]
    if len(every) > real_limit:
        every = [every[i] for i in sorted(random.Random(seed).sample(range(len(every)), real_limit))]
    cache: dict[str, dict[str, Any]] = {}

    def scored(params: dict[str, Any]) -> dict[str, Any]:
        key = json.dumps(params, sort_keys=True)
        if key not in cache:
            prog = comp.program(params)
            means, per_q = score(comp, prog, every, f"{gs.name}: every real question")
            cache[key] = {"test": score(comp, prog, test, f"{gs.name}: real test")[1], "all": per_q,
                          "chars": round(means.get("context_chars") or 0.0)}
        return cache[key]

    default = scored(syn["baseline"]["params"])
    picks = _params_of(syn)
    rules = {rule: {"params": p, "gain_all": paired_difference(default["all"], scored(p)["all"]),
                    "gain_test": paired_difference(default["test"], scored(p)["test"])}
             for rule, p in picks.items()}
    shipped, real_best = scored(picks[RULES[-1]]), scored(real["best"]["params"])

    def mean(xs: list[float | None]) -> float:
        return round(float(np.mean([x for x in xs if x is not None])), 4)

    syn_set = load_golden(str(folder))
    syn_comp = Objective(read_space(capped), syn_set, runs / "scoring-synthetic", progress=progress)
    moves = transfer.measure(syn_comp, syn["baseline"]["params"], lambda p: scored(p)["all"], score)
    syn_qs = [e for s in syn_set.splits.values() for e in s]
    syn_texts = {d.id: d.text for d in syn_set.documents}
    kinds = sorted({str(e.metadata.get("kind")) for e in syn_qs})
    return {
        "dataset": gs.name, "documents": len(gs.documents), "real_questions": len(every), "real_test": len(test),
        "metric": next(iter(comp.space.objective.metrics)), "context_budget": comp.context_budget,
        "context_chars": {"default": default["chars"], "synthetic": shipped["chars"], "real": real_best["chars"]},
        "synthetic": {"generator": report.generator, "questions": report.kept, "splits": report.splits},
        "default": {"test": mean(default["test"]), "all": mean(default["all"])},
        "synthetic_compile": {"shipped": syn["shipped"], "params": picks[RULES[-1]],
                              "selection": syn.get("selection"), "test": mean(shipped["test"]),
                              "all": mean(shipped["all"]),
                              "minus_default_all": paired_difference(default["all"], shipped["all"]),
                              "minus_default_test": paired_difference(default["test"], shipped["test"]),
                              "minus_real_test": paired_difference(real_best["test"], shipped["test"])},
        "real_compile": {"params": real["best"]["params"], "test": mean(real_best["test"]),
                         "minus_default_test": paired_difference(default["test"], real_best["test"])},
        "checks": rules, "transfer": moves,
        "word_overlap": {"real": overlap(every, {d.id: d.text for d in gs.documents}),
                         **{k: overlap([e for e in syn_qs if str(e.metadata.get("kind")) == k], syn_texts)
                            for k in kinds}},
        "wall_s": round(time.perf_counter() - t0, 1)}


def run(datasets: Sequence[str], n: int = 1000, seed: int = 13, trials: int = 20, real_limit: int = 1000,
        space: str = "retrieval", progress: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = [corpus(d, n, seed, trials, real_limit, space, progress) for d in datasets]
    return {"n": n, "seed": seed, "trials": trials, "space": space, "corpora": rows,
            "wall_s": round(time.perf_counter() - t0, 1)}


def print_report(r: dict[str, Any], console: Console) -> None:
    metric = ", ".join(sorted({c.get("metric", "ndcg@10") for c in r["corpora"]}))
    t = Table(title=f"compile with no labels ({r['n']} synthetic questions, {r['trials']} trials, space "
                    f"{r['space']}): {metric} on real questions, paired 95% intervals; characters handed over "
                    "(default / synthetic ships / real ships)")
    for col in ("corpus", "default (test)", "synthetic ships", "synthetic - default (every real q)",
                "synthetic - default (test)", "real compile - default (test)", "synthetic - real (test)",
                "characters"):
        t.add_column(col, justify="left" if col == "corpus" else "right")
    for c in r["corpora"]:
        s = c["synthetic_compile"]
        t.add_row(f"{c['dataset']} ({c['real_questions']} q, test {c['real_test']})", f"{c['default']['test']:.4f}",
                  s["shipped"], _ci(s["minus_default_all"]), _ci(s["minus_default_test"]),
                  _ci(c["real_compile"]["minus_default_test"]), _ci(s["minus_real_test"]),
                  " / ".join(f"{v:,}" for v in c.get("context_chars", {}).values()))
    console.print(t)
    k = Table(title="what each check would have shipped: its real gain over the default program (every real "
                    "question)")
    k.add_column("corpus")
    for rule in RULES:
        k.add_column(rule, justify="right")
    for c in r["corpora"]:
        k.add_row(c["dataset"], *(_ci(c["checks"][rule]["gain_all"]) for rule in RULES))
    console.print(k)
    w = Table(title="share of a question's content words within 200 characters of its gold")
    w.add_column("corpus")
    kinds = sorted({k for c in r["corpora"] for k in c["word_overlap"]} - {"real"})
    for col in ("real", *kinds):
        w.add_column(col, justify="right")
    for c in r["corpora"]:
        o = c["word_overlap"]
        w.add_row(c["dataset"], *(f"{o[x]['share']:.2f}" if x in o and o[x]["share"] is not None else "-"
                                  for x in ("real", *kinds)))
    console.print(w)
    for c in r["corpora"]:
        if moves := c.get("transfer"):
            _print_transfer(c["dataset"], moves, console)
    for c in r["corpora"]:
        if sel := c["synthetic_compile"].get("selection"):
            console.print(f"{c['dataset']}: {sel['why']}", markup=False, highlight=False)
    console.print(f"{r['wall_s']} s")


def _print_transfer(name: str, moves: dict[str, Any], console: Console) -> None:
    writers = sorted({w for row in moves["changes"] for w in row["by_writer"]})
    t = Table(title=f"{name}: each single change from the default, its gain on {moves['held_out']} held-out synthetic "
                    f"questions (and {moves['probes']} style probes) beside its real gain, at budget")
    for col in ("change", "synthetic (writers)", *writers, "real, every real q", "same sign"):
        t.add_column(col, justify="left" if col == "change" else "right")
    for row in moves["changes"]:
        t.add_row(row["change"], _g(row["synthetic"]), *(_g(row["by_writer"].get(w)) for w in writers),
                  _ci(row["real"]), {True: "yes", False: "NO", None: "-"}[row["agrees"]])
    console.print(t)
    console.print(f"{name}: which questions predict the real sign: " + "; ".join(
        f"{w} {v['same_sign']}/{v['changes']} (r {v['pearson']})" for w, v in moves["predicts"].items()),
        markup=False, highlight=False)
    if held := moves.get("alone"):
        console.print(f"{name}: the default with each single change that holds alone ({held['params']}): real gain "
                      f"{_ci(held['real'])}", markup=False, highlight=False)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:+.4f}"
