"""Transfer, per setting (issue 57, item 3): each single change of the retrieval space from the default program, its
gain on the synthetic set's held-out questions (each writer's, and each style probe's: `declrag_bench.probes`)
beside its gain on the corpus's real questions, all at the context budget of each side's default program.

A change whose synthetic gain has the sign of its real gain transfers; one that the writers reward and real
questions punish is what a compile on synthetic questions must not ship. Which writer (or probe) predicts the real
sign best is what the selection rule should listen to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from declrag.golden import Example
from declrag.metrics.stats import paired_difference
from declrag.optimize._select import ALPHA, held_out, lower_bound, writers_of
from declrag.optimize._space import Param

from .probes import STYLES as PROBES  # the style probes' writer names: not writers of the set
from .probes import probe

ALPHAS = (0.0, 0.25, 0.75, 1.0)  # alpha's values tried beside the default's


def _values(name: str, p: Param, current: Any) -> list[Any]:
    if p.type == "categorical":
        return [c for c in p.choices or [] if c != current]
    if name == "alpha":
        return [a for a in ALPHAS if current is None or abs(a - float(current)) > 1e-9]
    lo, hi = p.low or 0, p.high if p.high is not None else 0
    return [v for v in ({int(lo), int(hi)} if p.type == "int" else {lo, hi}) if v != current]


def one_changes(params: dict[str, Param], base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, params) of every program that differs from ``base`` in one parameter (a parameter active only under
    another's value, `when`, is left at the product's default)."""
    out = []
    for name, p in params.items():
        if p.when and name not in base:
            continue
        for v in _values(name, p, base.get(name)):
            out.append((f"{name}={v}", {**base, name: v}))
    return out


def _mean(xs: list[float]) -> float | None:
    return round(float(np.mean(xs)), 4) if xs else None


def measure(syn_comp, base: dict[str, Any], real_scores: Callable[[dict[str, Any]], list[float | None]],
            score: Callable) -> dict[str, Any]:
    """Every one change's synthetic gain (overall and per writer and probe, on the held-out synthetic questions)
    and real gain (``real_scores(params)``: per real question, paired with the default's)."""
    held: list[Example] = held_out(syn_comp.golden, syn_comp.space)
    probes, skipped = probe(held, syn_comp.golden, syn_comp.space.split.seed)
    asked = held + probes
    writers = writers_of(asked)
    _, base_syn = score(syn_comp, syn_comp.program(base), asked, "transfer: the default")
    base_real = real_scores(base)
    rows = []
    for label, params in one_changes(syn_comp.space.params, base):
        _, syn = score(syn_comp, syn_comp.program(params), asked, f"transfer: {label}")
        diffs = [(w, y - x) for w, x, y in zip(writers, base_syn, syn) if x is not None and y is not None]
        by = {w: _mean([d for ww, d in diffs if ww == w]) for w in sorted(set(writers))}
        plain = [d for w, d in diffs if w not in PROBES]
        real = paired_difference(base_real, real_scores(params))
        lowers = {w: lower_bound([d for ww, d in diffs if ww == w], ALPHA / len(base)) for w in sorted(set(writers))}
        rows.append({"change": label, "params": params, "synthetic": _mean(plain), "by_writer": by,
                     "lower": lower_bound(plain, ALPHA / len(base)),
                     "writer_lower": {w: None if v is None else round(v, 4) for w, v in lowers.items()},
                     "real": real, "agrees": _agrees(_mean(plain), real.get("diff"))})
    held_alone = alone(rows, base)
    return {"held_out": len(held), "probes": len(probes), "skipped": skipped, "changes": rows,
            "predicts": _predicts(rows),
            "alone": {"params": held_alone, "real": paired_difference(base_real, real_scores(held_alone))}}


def alone(rows: list[dict[str, Any]], base: dict[str, Any]) -> dict[str, Any]:
    """The default with every single change that holds on its own (issue 57, item 4's candidate rule): its lower
    bound above 0 on the writers' questions together and on each writer's (probes aside), at the level shared by
    the parameters; of two values of one parameter, the higher lower bound."""
    best: dict[str, tuple[float, Any]] = {}
    for r in rows:
        name, value = next((k, v) for k, v in r["params"].items() if base.get(k) != v)
        writers = [v for w, v in r["writer_lower"].items() if w not in PROBES]
        if r["lower"] is not None and r["lower"] > 0 and writers and all(v is not None and v > 0 for v in writers):
            if name not in best or r["lower"] > best[name][0]:
                best[name] = (r["lower"], value)
    return {**base, **{k: v for k, (_, v) in best.items()}}


def _agrees(syn: float | None, real: float | None, tie: float = 0.005) -> bool | None:
    """The synthetic gain's sign is the real one's (a gain within ``tie`` of 0 counts as 0)."""
    if syn is None or real is None:
        return None
    return int(np.sign(syn) if abs(syn) > tie else 0) == int(np.sign(real) if abs(real) > tie else 0)


def _predicts(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per writer (and probe, and the writers together): of the changes, how many have its synthetic gain's sign
    the same as the real gain's, and the correlation of the two gains over the changes."""
    out: dict[str, dict[str, Any]] = {}
    who = sorted({w for r in rows for w in r["by_writer"]}) + ["writers together"]
    for w in who:
        pairs = [(r["synthetic"] if w == "writers together" else r["by_writer"].get(w), r["real"].get("diff"))
                 for r in rows]
        pairs = [(s, t) for s, t in pairs if s is not None and t is not None]
        if not pairs:
            continue
        agree = sum(bool(_agrees(s, t)) for s, t in pairs)
        xs, ys = np.array([s for s, _ in pairs]), np.array([t for _, t in pairs])
        corr = float(np.corrcoef(xs, ys)[0, 1]) if len(pairs) > 2 and xs.std() > 0 and ys.std() > 0 else float("nan")
        out[w] = {"changes": len(pairs), "same_sign": agree,
                  "pearson": None if np.isnan(corr) else round(corr, 3)}
    return out
