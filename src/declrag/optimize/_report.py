"""The compile report: what won, by how much over the naive baseline (dev and test, with intervals), how
the search went, and which choices matter (parameter importances and a per-parameter analysis of
variance), so a user learns what to change, not only what won."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from ..evaluate.report import _html, label_tables
from ..metrics.passages import UNIT_WORDS
from ._space import tidy, tidy_params


def _complete(study: optuna.Study) -> list:
    """Scored trials, without the repeats of an earlier one."""
    return [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.values
            and "repeat_of" not in t.user_attrs]


def _f(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4f}"
    return str(x)


def anova(study: optuna.Study) -> list[dict[str, Any]]:
    """Per parameter: the mean objective at each value (numbers in up to 4 quantile bins) and a one-way
    ANOVA F and p over those groups (finished trials, incl. the baseline)."""
    from scipy.stats import f_oneway

    trials = _complete(study)
    out = []
    names = sorted({k for t in trials for k in t.params})
    for name in names:
        pairs = [(tidy(t.params[name]), t.values[0]) for t in trials if name in t.params]
        if len(pairs) < 3:
            continue
        xs = [p for p, _ in pairs]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs) and len(set(xs)) > 4:
            edges = np.unique(np.quantile(xs, [0, 0.25, 0.5, 0.75, 1.0]))
            label = lambda x, e=edges: f"{e[max(0, np.searchsorted(e, x, side='right') - 1)]:g}+"  # noqa: E731
        else:
            label = str
        groups: dict[str, list[float]] = {}
        for x, y in pairs:
            groups.setdefault(label(x), []).append(y)
        f = p = None
        if len(groups) >= 2 and len(pairs) > len(groups):  # two groups at least, one with two values
            with np.errstate(all="ignore"):
                res = f_oneway(*groups.values())
            f, p = (float(res.statistic), float(res.pvalue)) if np.isfinite(res.statistic) else (None, None)
        out.append({"param": name, "F": f, "p": p,
                    "levels": {k: {"mean": float(np.mean(v)), "n": len(v)} for k, v in sorted(groups.items())}})
    return sorted(out, key=lambda r: (r["p"] is None, r["p"] if r["p"] is not None else 1))


def importances(study: optuna.Study) -> dict[str, float]:
    """fANOVA importances over the scored trials, each program once (a repeat would weigh it twice)."""
    scored = optuna.create_study(directions=study.directions)
    for t in _complete(study):
        try:
            scored.add_trial(t)
        except ValueError:  # a baseline value outside the searched range (e.g. k 5 when k is 1-3)
            pass
    fanova = optuna.importance.FanovaImportanceEvaluator(seed=0)  # the same study gives the same report
    try:
        if len(study.directions) == 1:  # the evaluator reads the study's direction
            imp = optuna.importance.get_param_importances(scored, evaluator=fanova)
        else:  # quality is maximised: give the evaluator a target where low is good
            imp = optuna.importance.get_param_importances(scored, evaluator=fanova, target=lambda t: -t.values[0])
        return {k: float(v) for k, v in imp.items()}
    except Exception:  # too few finished trials, or a constant objective
        return {}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _saved(fig, out: Path, name: str) -> Path:
    """``fig`` written to ``out/plots/name.png`` (and closed)."""
    (out / "plots").mkdir(exist_ok=True)
    path = out / "plots" / f"{name}.png"
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def _plot_history(study: optuna.Study, out: Path) -> Path | None:
    plt = _pyplot()
    done = _complete(study)
    if not done:
        return None
    fig, ax = plt.subplots(figsize=(8, 3.2))
    xs = [t.number for t in done]
    ys = [t.values[0] for t in done]
    ax.scatter(xs, ys, s=18, label="complete", color="#4c78a8")
    # a pruned trial's objective on the part of dev it answered (none when pruned on its retrieval score)
    partial = [(t.number, t.user_attrs.get("metrics", {}).get("objective")) for t in study.trials
               if t.state == optuna.trial.TrialState.PRUNED]
    if shown := [(n, v) for n, v in partial if v is not None]:
        ns, vs = zip(*shown)
        ax.scatter(ns, vs, s=14, marker="x", color="#e45756", label="pruned (objective on the slice answered)")
    if base := [t for t in done if t.user_attrs.get("baseline")]:
        ax.scatter([base[0].number], [base[0].values[0]], s=60, facecolors="none", edgecolors="#f58518",
                   label="naive baseline")
    best = np.maximum.accumulate(ys)
    ax.plot(xs, best, color="#54a24b", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("dev objective")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _saved(fig, out, "history")


def _context_points(study: optuna.Study) -> list[tuple[int, float, float, bool]]:
    """(trial, dev objective, characters handed over, is the baseline) of every scored trial that logged them."""
    return [(t.number, t.values[0], c, bool(t.user_attrs.get("baseline"))) for t in _complete(study)
            if (c := t.user_attrs.get("metrics", {}).get("context_chars")) is not None]


def context_front(points: list[tuple[int, float, float, bool]]) -> list[tuple[int, float, float, bool]]:
    """The ``points`` (`_context_points`) that no other beats on both, a higher objective at no more context;
    fewest characters first."""
    return sorted([p for p in points if not any(q[1] >= p[1] and q[2] <= p[2] and (q[1], q[2]) != (p[1], p[2])
                                                for q in points)], key=lambda p: p[2])


def _plot_context(points, front, out: Path, budget: int | None) -> Path:
    """The dev objective of each trial against the characters it hands over, its front and the budget."""
    fig, ax = _pyplot().subplots(figsize=(8, 3.2))
    ax.scatter([p[2] for p in points], [p[1] for p in points], s=18, color="#4c78a8", label="trial")
    ax.plot([p[2] for p in front], [p[1] for p in front], color="#54a24b", label="front")
    ax.scatter([p[2] for p in points if p[3]], [p[1] for p in points if p[3]], s=60, facecolors="none",
               edgecolors="#f58518", label="naive baseline")
    if budget:
        ax.axvline(budget, color="#999999", linestyle="--", linewidth=1, label=f"budget {budget}")
    ax.set_xlabel("characters handed over (k passages, each character once)")
    ax.set_ylabel("dev objective")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _saved(fig, out, "context")


def _context_lines(study: optuna.Study, out: Path, budget: int | None) -> list[str]:
    points = _context_points(study)
    front = context_front(points)
    if not front:
        return []
    lines = ["", "## Quality against context", "",
             (f"Retrieval is scored within {budget} characters handed over, in rank order, each character once: a "
              "program gains only by finding the evidence sooner, not by handing over more text. " if budget else "")
             + "The trials that no other beats on both, quality and context:", "",
             "| trial | dev objective | characters handed over |", "|---|---|---|"]
    lines += [f"| {n} | {_f(y)} | {c:,.0f} |" for n, y, c, _ in front]
    plot = _plot_context(points, front, out, budget)
    return [*lines, "", f"![quality against context]({plot.relative_to(out)})"]


def _finetune_lines(ft: dict[str, Any]) -> list[str]:
    """The fine-tuning stage: what was trained, how long it took, and dev and test for both models."""
    if not ft.get("enabled"):
        return []
    lines = ["", "## Embedding model fine-tuned on the train split", ""]
    if ft.get("skipped"):
        return lines + [f"Skipped: {ft['skipped']}."]
    tr, pairs = ft["training"], ft["pairs"]
    lines += [f"Base model {ft['base_model']}; {pairs['questions']} train questions (positive from the candidate "
              f"pool {pairs['positive_from_pool']}, from the gold document {pairs['positive_from_document']}); "
              f"{tr['steps']} steps of batch {tr['batch_size']} in {tr['seconds']} s"
              + (f" (stopped by the {tr['stopped_by']})" if tr.get("stopped_by") else "")
              + f"; loss {_f(tr.get('loss_first'))} -> {_f(tr.get('loss_last'))}; mining {ft['mining_s']} s, "
              f"re-embedding the corpus {ft['reembed_s']} s. Kept: the **{ft['kept']}** model "
              "(tuned only if the dev gain's paired bootstrap interval excludes 0).", "",
              "| | base model | tuned model | gain [95% CI] |", "|---|---|---|---|"]
    for part in ("dev", "test"):
        d, g = ft[part], ft[part]["gain"]
        lines.append(f"| {part} objective | {_f(d['base'].get('objective'))} | {_f(d['tuned'].get('objective'))} | "
                     f"{_f(g['diff'])} [{_f(g['ci95'][0])}, {_f(g['ci95'][1])}] |")
    legs = ft["test"].get("vector_leg")
    if legs:
        lines.append(f"| test, vector leg alone | {_f(legs['base'].get('objective'))} | "
                     f"{_f(legs['tuned'].get('objective'))} | |")
    return lines


def _memory_lines(memory: dict[str, Any]) -> list[str]:
    """Each stage's peak resident memory (`declrag.runtime.process_memory`): what a larger corpus will need more of."""
    stages = {k: v for k, v in (memory.get("stages") or {}).items() if v.get("peak_mb") is not None}
    if not stages:
        return []
    how = {"vmhwm": "the kernel's high-water mark (VmHWM), reset at the start of each stage",
           "sampled": "RSS sampled every 50 ms"}.get(memory.get("method", ""), memory.get("method", ""))
    lines = ["", "## Memory", "", f"Peak resident memory per stage ({how}); an indented stage is part of the one "
             "above it.", "", "| stage | peak RSS MB | at start MB | after, freed MB | s |", "|---|---|---|---|---|"]
    for name, v in stages.items():
        shown = f"&nbsp;&nbsp;{name}" if "." in name else name
        lines.append(f"| {shown} | {v['peak_mb']:.0f} | {v['start_mb']:.0f} | {v['released_mb']:.0f} | "
                     f"{v['seconds']} |")
    return lines


def _what_ships(s: dict[str, Any]) -> list[str]:
    """The unit test retrieval was scored over, and which program ships and why (`declrag.optimize._select`)."""
    lines = []
    if units := s.get("retrieval_unit"):
        lines += ["Retrieval metrics on test scored over " + ", ".join(
            f"{UNIT_WORDS.get(u, u)} ({n} questions)" for u, n in sorted(units.items())) + ".", ""]
    sel = s.get("selection") or {}
    if sel.get("applied") and sel.get("candidates"):
        lines += [f"**Shipped in `best/`: the {s['shipped']} program.** The search's {len(sel['candidates'])} "
                  f"leading programs were re-scored on {sel['held_out']} held-out questions it never read: "
                  f"{sel['why']}.", "", "| trial | search | held-out gain | lower bound | by writer | verdict |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {c['trial']} | {_f(c.get('search'))} | {_f(c['gain'])} | {_f(c['lower'])} | "
                  + (", ".join(f"{w} {d:+.4f}" for w, d in c["by_writer"].items()) or "-")
                  + f" | {c['why']} |" for c in sel["candidates"]]
        lines.append("")
    elif sel:
        lines += [f"**Shipped in `best/`: the {s['shipped']} program.** {sel['why']}.", ""]
    if c := s.get("check_questions"):
        lines += [f"**Your questions** (`{c['file']}`, {c['questions']}): " + (
            f"the trials' ranking on dev agrees with theirs with Kendall tau {c['tau']:+.3f} "
            f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] over {c['trials']} trials (nDCG@10)"
            + (f"; {c['note']}" if c.get("note") else "") + "." if c.get("tau") is not None
            else c.get("why", "no agreement could be measured") + ".")
                  + (f" **{c['verdict']['why']}.**" if c.get("verdict") else ""), ""]
    return lines


def write_report(out: Path, summary: dict[str, Any], study: optuna.Study) -> None:
    s = summary
    obj = " + ".join(f"{w} x {m}" for m, w in s["objective"]["metrics"].items())
    g = s["gain_test"]
    also = f"; also minimised: {', '.join(s['objective']['also'])}" if s["objective"]["also"] else ""
    base, best = s["baseline"], s["best"]
    verdict = ("holds: the interval excludes 0." if g["significant"]
               else "is not distinguishable from noise: the interval includes 0.")
    lines = [f"# Compile report: {out.name}", "",
             f"Objective: {obj}" + also,
             f"Splits: {s['splits']}; trials {s['trials']} ({s['complete']} complete, {s['pruned']} pruned, "
             f"{s.get('stopped_by_budget', 0)} stopped by a budget); "
             f"LM calls {s['lm_calls']} (+{s['cached_calls']} cached); cost ${s['cost_usd']:.4f}; "
             f"wall {s.get('wall_s', '-')} s.", ""]
    if syn := s.get("synthetic"):
        lines += [f"**Synthetic set**: {syn['questions']} of its {syn['of']} questions were generated "
                  f"({', '.join(syn['generators'])}): scores measure agreement with generated questions. "
                  f"{syn['description']}", ""]
    lines += [f"## Gain over the naive baseline (trial {base['trial']})", "",
              "| | baseline | best | gain |", "|---|---|---|---|",
              f"| dev objective | {_f(base['dev'].get('objective'))} | {_f(best['dev'].get('objective'))} | "
              f"{_f(s['dev_gain'])} |",
              f"| test objective | {_f(base['test'].get('objective'))} | {_f(best['test'].get('objective'))} | "
              f"{_f(g['diff'])} [{_f(g['ci95'][0])}, {_f(g['ci95'][1])}] |", "",
              f"On test ({g['n']} questions, paired bootstrap 95% interval) the gain " + verdict, ""]
    lines += _what_ships(s)
    metric_names = sorted({k for k in s["best"]["test"] if k != "objective"})
    if metric_names:
        lines += ["| test metric | baseline | best |", "|---|---|---|"]
        lines += [f"| {m} | {_f(base['test'].get(m))} | {_f(best['test'].get(m))} |" for m in metric_names]
        lines.append("")
    if s.get("test_by_label"):
        lines += ["Test objective per question, by label (baseline against best):"] + \
            label_tables(s["test_by_label"]) + [""]
    if s.get("legs_test"):
        lines += ["Single legs on test with the best settings otherwise: " + "; ".join(
            f"{leg} {_f(v.get('objective'))}" for leg, v in s["legs_test"].items()), ""]
    lines += ["## Best configuration", "", "```json", json.dumps(s["best"]["params"], indent=2), "```", "",
              "## Leaderboard (dev)", "", "| trial | objective | params |", "|---|---|---|"]
    done = sorted(_complete(study), key=lambda t: -t.values[0])[:15]
    for t in done:
        tag = " (baseline)" if t.user_attrs.get("baseline") else ""
        lines.append(f"| {t.number}{tag} | {_f(t.values[0])} | {json.dumps(tidy_params(t.params))} |")
    imp = importances(study)
    if imp:
        lines += ["", "## Parameter importances (fANOVA)", "", "| param | importance |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in imp.items()]
    rows = anova(study)
    if rows:
        lines += ["", "## Which choices matter (one-way ANOVA of the dev objective per parameter)", "",
                  "| param | F | p | mean objective by value (n) |", "|---|---|---|---|"]
        for r in rows:
            levels = "; ".join(f"{k}: {v['mean']:.3f} ({v['n']})" for k, v in r["levels"].items())
            lines.append(f"| {r['param']} | {_f(r['F'])} | {_f(r['p'])} | {levels} |")
    if s["pareto"]:
        lines += ["", "## Pareto front", "", "| trial | objectives | params |", "|---|---|---|"]
        lines += [f"| {p['trial']} | {', '.join(_f(v) for v in p['values'])} | {json.dumps(p['params'])} |"
                  for p in s["pareto"]]
    lines += _context_lines(study, out, s["objective"].get("context_budget"))
    po = s["prompt_optimization"]
    if po.get("optimizer") != "none":
        lines += ["", f"## Prompt optimization ({po['optimizer']})", ""]
        if po.get("error"):
            lines.append(f"The optimizer failed with this model and the program was kept as searched: {po['error']}")
        if "dev_before" in po:
            lines.append(f"dev objective before {_f(po['dev_before'].get('objective'))}, "
                         f"after {_f(po['dev_after'].get('objective'))}; "
                         f"kept: {po.get('kept')}; demos per predictor: {po.get('demos')}")
    lines += _finetune_lines(s.get("finetune") or {})
    lines += _memory_lines(s.get("memory") or {})
    if s.get("split_note"):
        lines += ["", "## Splits", "", s["split_note"]]
    hist = _plot_history(study, out)
    if hist:
        lines += ["", "## Optimization history", "", f"![history]({hist.relative_to(out)})"]
    md = "\n".join(lines) + "\n"
    (out / "report.md").write_text(md)
    (out / "report.html").write_text(_html(md, out))
