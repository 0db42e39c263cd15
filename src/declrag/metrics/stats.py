"""Honest statistics: bootstrap confidence intervals (scipy), paired differences, the RAG confusion matrix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SEED = 20240613
RESAMPLES = 2000


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95), scale: float = 1.0,
                digits: int = 2, suffix: str = "") -> dict[str, float | None]:
    """The ``qs``-th percentiles of ``values`` times ``scale``, rounded, keyed ``p50``, ``p95``, ... (+ ``suffix``);
    None for each when there are no values (NaNs are left out)."""
    xs = np.asarray(values, dtype=float)
    xs = xs[~np.isnan(xs)]
    found = np.percentile(xs, qs) if len(xs) else [None] * len(qs)
    return {f"p{q:g}{suffix}": None if v is None else round(scale * float(v), digits) for q, v in zip(qs, found)}


def latency_ms(seconds: Sequence[float], digits: int = 2, suffix: str = "") -> dict[str, float | None]:
    """p50 and p95 of durations given in seconds, in milliseconds."""
    return percentiles(seconds, (50, 95), 1000.0, digits, suffix)


def mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are not None (None when there are none)."""
    xs = [v for v in values if v is not None]
    return float(np.mean(xs)) if xs else None


def mean_ci(values: Sequence[float | None], confidence: float = 0.95) -> dict[str, Any]:
    """Mean and its percentile-bootstrap interval; values that are None are left out."""
    xs = np.asarray([v for v in values if v is not None], dtype=float)
    if len(xs) == 0:
        return {"mean": None, "ci95": [None, None], "n": 0}
    if len(xs) == 1 or np.all(xs == xs[0]):
        m = float(xs.mean())
        return {"mean": round(m, 4), "ci95": [round(m, 4), round(m, 4)], "n": int(len(xs))}
    from scipy.stats import bootstrap

    res = bootstrap((xs,), np.mean, confidence_level=confidence, n_resamples=RESAMPLES, method="percentile",
                    random_state=np.random.default_rng(SEED))
    lo, hi = res.confidence_interval
    return {"mean": round(float(xs.mean()), 4), "ci95": [round(float(lo), 4), round(float(hi), 4)], "n": int(len(xs))}


def paired_difference(a: Sequence[float | None], b: Sequence[float | None]) -> dict[str, Any]:
    """B - A on the questions both scored, with a paired bootstrap interval; ``significant`` when the
    interval excludes 0."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if not pairs:
        return {"diff": None, "ci95": [None, None], "n": 0, "significant": False}
    d = mean_ci([y - x for x, y in pairs])
    lo, hi = d["ci95"]
    return {"diff": d["mean"], "ci95": d["ci95"], "n": d["n"],
            "significant": bool(lo is not None and (lo > 0 or hi < 0))}


def by_label(labels: Sequence[dict[str, Any]], columns: dict[str, Sequence[float | None]], keys: Sequence[str]
             ) -> dict[str, dict[str, dict[str, Any]]]:
    """Means of each column broken down by label: ``{key: {label value: {column: mean, "n": count}}}`` for every
    key in ``keys`` that some row's ``labels`` carry (rows without it count under ``"(none)"``)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in keys:
        if not any(key in row for row in labels):
            continue
        groups: dict[str, list[int]] = {}
        for i, row in enumerate(labels):
            groups.setdefault(str(row.get(key, "(none)")), []).append(i)
        out[key] = {value: {**{c: mean_of([vals[i] for i in idx]) for c, vals in columns.items()}, "n": len(idx)}
                    for value, idx in sorted(groups.items())}
    return out


def confusion(rows: Sequence[tuple[bool | None, bool]]) -> dict[str, int]:
    """The RAG confusion matrix over (gold passage retrieved, answer correct); rows without gold are skipped."""
    out = {"retrieved_correct": 0, "retrieved_wrong": 0, "missed_correct": 0, "missed_wrong": 0}
    for retrieved, correct in rows:
        if retrieved is None:
            continue
        out[f"{'retrieved' if retrieved else 'missed'}_{'correct' if correct else 'wrong'}"] += 1
    return out


def tau_with_interval(a: np.ndarray, b: np.ndarray, seed: int = 13, rounds: int = 1000) -> dict[str, Any]:
    """Kendall tau between the mean scores of the same candidates (rows: configurations, trials) on two query
    sets (columns: queries), and its 95% bootstrap interval (each set's queries resampled with replacement; a set
    of one column, e.g. fixed dev objectives, stays as it is). ``tau`` is None where it is undefined."""
    from scipy.stats import kendalltau

    tau = float(kendalltau(a.mean(axis=1), b.mean(axis=1)).statistic)
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(rounds):
        ia, ib = rng.integers(0, a.shape[1], a.shape[1]), rng.integers(0, b.shape[1], b.shape[1])
        t = kendalltau(a[:, ia].mean(axis=1), b[:, ib].mean(axis=1)).statistic
        if not np.isnan(t):
            taus.append(float(t))
    lo, hi = np.percentile(taus, [2.5, 97.5]) if taus else (float("nan"), float("nan"))
    return {"tau": None if np.isnan(tau) else round(tau, 3), "ci95": [round(float(lo), 3), round(float(hi), 3)]}
