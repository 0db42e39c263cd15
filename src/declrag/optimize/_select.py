"""Which program a compile ships (docs/guides/compile.md, "What ships"): not the luckiest trial, but the one whose
gain holds up.

The search ranks its trials on the questions it reads; with 20 trials and a few dozen questions, the top of that
ranking is partly luck. After the search, the `TOP` leading distinct candidates and the baseline are re-scored on
**held-out** questions (`held_out`: the golden splits that neither the search nor the test reads; a synthetic set's
``dev`` under the retrieval space). A candidate qualifies when

- the one-sided lower bound of its paired gain over the baseline there is above 0, at level `ALPHA` shared by the
  candidates re-scored (Bonferroni: having tried many is paid for), and
- on a set made by several writers (``mixed``: inverse-cloze and keyword questions), the gain holds on **every
  writer's questions** alone: the same lower bound, at the same level, above 0 on each writer's held-out questions.
  A keyword question copies its passage's words, so a lexical setting always wins on keyword questions; where the
  inverse-cloze questions (which share no sentence with their passage) cannot confirm the gain, the set cannot
  support the change (SciFact: +.043 held out, keywords +.058 [lower +.020], inverse cloze +.030 [lower -.047]; on
  the real claims that program lost .065).

Of those that qualify, the highest lower bound ships; where none does, the baseline ships (shrinking to the
default when the gains are within noise). With ``--check-questions`` (the user's own questions), `verdict_of_theirs`
decides last: the program ships only if it is not worse than the baseline on them by more than `CHECK_MARGIN`
(one-sided 95%) and the trials' ranking agrees with theirs (Kendall tau's interval above 0).

With ``--usage`` (a served program's rated questions, `declrag.optimize._usage`), `by_usage`: real questions outrank
synthetic ones. With `DECIDES` or more fair ones (rated on explored answers, or corrected), they choose among the
rankers they were explored with, by the held-out rule (the highest lower bound above 0, the level shared by the
rankers); with fewer, every rated question can only keep the baseline.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import optuna

from ..golden import Example
from ._space import tidy_params
from ._usage import DECIDES, rankers

TOP = 5  # leading distinct candidates re-scored on the held-out questions
ALPHA = 0.05  # one-sided, shared by the candidates re-scored
WRITER_MIN = 20  # a writer's held-out questions needed for its own verdict
DOCUMENT_MARGIN = 0.01  # how many fewer of the fair questions' documents a program the users' ratings chose may find
CHECK_MARGIN = 0.03  # nDCG@10: how much worse than the baseline on the user's questions a program may be
RESAMPLES = 4000
SEED = 13
Scorer = Callable[[Any, Any, list, str], tuple[dict, list[float | None]]]


def held_out(golden, space) -> list[Example]:
    """The questions of the golden splits that neither the search nor the test reads (none where the splits were
    cut from one pool)."""
    source = space.split.source or next(iter(golden.splits))
    if source not in golden.splits:
        return []
    used = {source, space.split.test_split}
    return [e for name, split in golden.splits.items() if name not in used for e in split]


def lower_bound(diffs: Sequence[float], alpha: float) -> float | None:
    """The one-sided (1 - ``alpha``) percentile-bootstrap lower bound of the mean of ``diffs`` (seeded)."""
    xs = np.asarray(diffs, dtype=float)
    if len(xs) == 0:
        return None
    if np.all(xs == xs[0]):
        return float(xs[0])
    rng = np.random.default_rng(SEED)
    means = xs[rng.integers(0, len(xs), (RESAMPLES, len(xs)))].mean(axis=1)
    return float(np.quantile(means, alpha))


def _pairs(base: Sequence[float | None], cand: Sequence[float | None]) -> list[tuple[int, float]]:
    return [(i, y - x) for i, (x, y) in enumerate(zip(base, cand)) if x is not None and y is not None]


def writers_of(examples: Sequence[Example]) -> list[str]:
    """Each question's writer (``metadata.kind``: ``ict``, ``keywords``...); "" for a question of no writer."""
    return [str(e.metadata.get("kind", "")) if e.metadata.get("synthetic") else "" for e in examples]


def leading(trials: Sequence[optuna.trial.FrozenTrial], baseline: optuna.trial.FrozenTrial,
            top: int = TOP) -> list[optuna.trial.FrozenTrial]:
    """The ``top`` best finished trials by their (first) objective, one per distinct program, the baseline's
    program left out."""
    base_key = repr(sorted(tidy_params(baseline.params).items()))
    seen, out = {base_key}, []
    for t in sorted(trials, key=lambda t: (-t.values[0], t.number)):
        key = repr(sorted(tidy_params(t.params).items()))
        if key not in seen:
            seen.add(key)
            out.append(t)
        if len(out) == top:
            break
    return out


def judge(base: Sequence[float | None], cands: Mapping[int, Sequence[float | None]], writers: Sequence[str],
          alpha: float = ALPHA) -> dict[str, Any]:
    """The rule above on per-question scores: ``base`` (the baseline's), ``cands`` (trial -> its scores, in the
    search's order) and each question's writer. Returns ``{"chosen": trial or None, "candidates": [...], "why"}``."""
    level = alpha / max(len(cands), 1)
    present = Counter(w for w in writers if w)
    kinds = {w for w, n in present.items() if n >= WRITER_MIN}
    if len(present) > 1 and (few := {w: n for w, n in sorted(present.items()) if n < WRITER_MIN}):
        # a writer too few to have a verdict of its own: the rule cannot be applied, and a change is not shipped
        shown = ", ".join(f"{w} has {n}" for w, n in few.items())
        return {"chosen": None, "candidates": [], "level": level, "too_few": few,
                "why": f"the baseline ships: the set is too small to judge a change ({shown} held-out questions; "
                       f"each writer needs {WRITER_MIN})"}
    rows: list[dict[str, Any]] = []
    for trial, scores in cands.items():
        pairs = _pairs(base, scores)
        diffs = [d for _, d in pairs]
        lo = lower_bound(diffs, level)
        own = {w: [d for i, d in pairs if writers[i] == w] for w in sorted(kinds)} if len(kinds) > 1 else {}
        by_writer = {w: round(float(np.mean(ds)), 4) for w, ds in own.items() if ds}
        writer_lower = {w: round(float(lower_bound(ds, level) or 0.0), 4) for w, ds in own.items() if ds}
        against = [w for w, wl in writer_lower.items() if wl <= 0]
        why = ("no question scored" if lo is None else
               f"lower bound {lo:+.4f} is not above 0" if lo <= 0 else
               "the " + ", ".join(f"{w} questions' gain does not hold ({by_writer[w]:+.4f}, lower bound "
                                  f"{writer_lower[w]:+.4f})" for w in against) if against else "qualifies")
        rows.append({"trial": trial, "n": len(diffs), "gain": round(float(np.mean(diffs)), 4) if diffs else None,
                     "lower": None if lo is None else round(lo, 4), "by_writer": by_writer,
                     "writer_lower": writer_lower,
                     "qualifies": why == "qualifies", "why": why})
    ok = [r for r in rows if r["qualifies"]]
    order = list(cands)
    chosen = max(ok, key=lambda r: (r["lower"], -order.index(r["trial"]))) if ok else None
    conf = f"one-sided {1 - level:.3f} (alpha {alpha} shared by {len(cands)} candidates)"
    why = (f"trial {chosen['trial']} ships: its held-out gain {chosen['gain']:+.4f} has the highest lower bound "
           f"({chosen['lower']:+.4f}, {conf})" + ("; its gain holds on every writer's questions" if chosen["by_writer"]
                                              else "")
           if chosen else
           f"the baseline ships: no candidate's held-out gain holds ({conf}"
           + (", on every writer's questions" if kinds and len(kinds) > 1 else "") + ")")
    return {"chosen": chosen["trial"] if chosen else None, "candidates": rows, "why": why, "level": level}


def select(comp, trials: Sequence[optuna.trial.FrozenTrial], baseline: optuna.trial.FrozenTrial,
           best: optuna.trial.FrozenTrial, score: Scorer, usage: Sequence[Example] = ()
           ) -> tuple[optuna.trial.FrozenTrial, dict[str, Any]]:
    """The trial to ship (the baseline, or a leading candidate that holds up on the held-out questions) and the
    record of how it was chosen (summary.json's ``selection``). Without held-out questions, the search's best.
    ``usage``: real questions with gold from a served program's users (`declrag.optimize._usage`), re-scored beside
    the held-out ones: `DECIDES` or more decide alone (`by_usage`), fewer can only keep the baseline."""
    held = held_out(comp.golden, comp.space)
    fair = [e for e in usage if e.metadata.get("fair")]
    decides = len(fair) >= DECIDES
    if not held and not decides:
        why = "no held-out questions (the splits were cut from one pool): the search's best trial ships"
        if not usage or best.number == baseline.number:
            return best, {"applied": False, "why": why}
        _, base = score(comp, comp.program(tidy_params(baseline.params)), list(usage), "usage, baseline")
        _, mine = score(comp, comp.program(best.params), list(usage), f"usage, trial {best.number}")
        ruled = by_usage({"chosen": best.number, "candidates": [], "why": why}, base, {best.number: mine},
                         [e.id for e in usage], False)
        return (best if ruled["chosen"] is not None else baseline), {"applied": True, "held_out": 0, **ruled}
    if not comp.space.objective.retrieval_only and len(held) > len(comp.splits["dev"]):  # LM calls: one trial's worth
        held = [held[i] for i in sorted(random.Random(comp.space.split.seed).sample(range(len(held)),
                                                                                    len(comp.splits["dev"])))]
    writers = writers_of(held)
    ruled = judge([], {}, writers)
    if (too_few := ruled.get("too_few")) and not decides:  # known before any re-scoring
        total = sum(len(split) for split in comp.golden.splits.values())
        need = math.ceil(total * WRITER_MIN / min(too_few.values()) / 100) * 100
        return baseline, {"applied": True, "held_out": len(held), "search_best": best.number, **ruled,
                          "why": f"{ruled['why']}: make a set of about {need} questions (declrag synth --n {need}; "
                                 "it writes one a passage at most, so a small corpus may not have that many)"}
    finished = [t for t in trials if t.values]
    shippable = finished if not any(writers) else synthetic_shippable(finished, baseline, comp.space)
    top = leading(shippable, baseline, TOP if comp.space.objective.retrieval_only else 1)
    if not top and not decides and shippable is not finished:  # the rule is applied: nothing it may ship was tried
        return baseline, {"applied": True, "held_out": len(held), "search_best": best.number, "chosen": None,
                          "candidates": [], "why": "the baseline ships: no finished trial differs from it only in "
                          f"{', '.join(comp.space.synthetic_ships or [])} (the space's synthetic_ships: what "
                          "synthetic questions alone may change)"}
    if not top and not decides:
        return baseline, {"applied": False, "why": "every finished trial is the baseline's program"}
    pool = explored_trials(comp.space, baseline, fair, finished) if decides else top
    judged = fair if decides else list(usage)  # the fair questions choose; every gold question can only veto
    asked, n = [*held, *judged], len(held)
    _, base = score(comp, comp.program(tidy_params(baseline.params)), asked, "held out, baseline")
    cands = {t.number: score(comp, comp.program(t.params), asked, f"held out, trial {t.number}")[1] for t in top}
    ruled = judge(base[:n], {k: v[:n] for k, v in cands.items()}, writers) if held and top else \
        {"chosen": None, "candidates": [], "why": "no synthetic held-out question" if not held else
         "no finished trial the synthetic set may ship"}
    for row, t in zip(ruled["candidates"], top):
        row.update(params=tidy_params(t.params), search=round(float(t.values[0]), 4))
    if judged:
        theirs = {t.number: cands[t.number][n:] if t.number in cands else
                  score(comp, comp.program(t.params), judged, f"usage, {t.user_attrs.get('ranker') or t.number}")[1]
                  for t in pool}
        ruled = by_usage(ruled, base[n:], theirs, [e.id for e in judged], decides,
                         {t.number: t.user_attrs["ranker"] for t in pool if "ranker" in t.user_attrs})
    chosen = next((t for t in pool if t.number == ruled["chosen"]), baseline)
    if decides and chosen is not baseline:
        ruled = by_document(ruled, comp, score, baseline, pool, judged)
        chosen = next((t for t in pool if t.number == ruled["chosen"]), baseline)
    return chosen, {"applied": True, "held_out": len(held), "search_best": best.number, **ruled}


def by_document(ruled: dict[str, Any], comp, score: Scorer, baseline: optuna.trial.FrozenTrial,
                pool: Sequence[optuna.trial.FrozenTrial], judged: Sequence[Example]) -> dict[str, Any]:
    """The fair questions' choice, checked on the same questions by their documents (the cited passage's document
    is the gold): of the rankers whose gain holds (``ruled``, `by_usage`), highest lower bound first, the first
    that does not find fewer of them than the baseline by more than `DOCUMENT_MARGIN` (one-sided, at `ALPHA`) ships;
    none: the baseline. A rating's gold is the words the answer took; a program that hands over wider passages
    finds those words more often and, within the same budget, fewer documents, which on a corpus whose users want
    the document is a loss (SciFact, every answer rated: a window of 1 gained on the words and lost .011 on real
    claims by their documents)."""
    held = sorted((r for r in ruled["usage"]["candidates"] if r["lower"] is not None and r["lower"] > 0),
                  key=lambda r: (r["lower"], r["gain"] or 0), reverse=True)
    docs = [replace(e, spans=(), answers=(), answer_starts=()) for e in judged]
    _, base = score(comp, comp.program(tidy_params(baseline.params)), docs, "usage by document, baseline")
    checked, out = [], {**ruled, "chosen": None}
    for row in held:
        trial = next(t for t in pool if t.number == row["trial"])
        _, mine = score(comp, comp.program(trial.params), docs, f"usage by document, {row['name']}")
        g, lo, k = paired_gain(base, mine)
        checked.append({"name": row["name"], "n": k, "lower": None if lo is None else round(lo, 4),
                        "gain": None if g is None else round(g, 4)})
        if lo is None or lo >= -DOCUMENT_MARGIN:
            out["chosen"] = row["trial"]
            break
    out["usage"] = {**ruled["usage"], "chosen": out["chosen"], "by_document": checked}
    fewer = [c for c in checked if c["lower"] is not None and c["lower"] < -DOCUMENT_MARGIN]
    if fewer:
        said = "; ".join(f"{c['name']} finds fewer of their documents (gain {c['gain']:+.4f}, lower bound "
                         f"{c['lower']:+.4f} below -{DOCUMENT_MARGIN})" for c in fewer)
        then = f"{checked[-1]['name']} ships" if out["chosen"] is not None else "the baseline ships"
        out["why"] = f"{ruled['why']}; but by their documents {said}: {then}"
    return out


def explored_trials(space, baseline: optuna.trial.FrozenTrial, fair: Sequence[Example],
                    trials: Sequence[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The rankers the ``fair`` questions were explored with (`declrag.optimize._usage.rankers`) as trials: the
    study's own where one has the same program, else one made for it (numbered after the study's, its label in
    ``user_attrs["ranker"]``)."""
    by_params = {repr(sorted(tidy_params(t.params).items())): t for t in trials}
    after = max((t.number for t in trials), default=0) + 1
    out = []
    for i, (label, values) in enumerate(rankers(space, tidy_params(baseline.params), list(fair))):
        found = by_params.get(repr(sorted(values.items())))
        if found is None:
            found = optuna.trial.create_trial(
                params=values, distributions={k: optuna.distributions.CategoricalDistribution([v])
                                              for k, v in values.items()},
                values=[0.0] * len(baseline.values), user_attrs={"ranker": label})
            found.number = after + i
        out.append(found)
    return out


def synthetic_shippable(trials: Sequence[optuna.trial.FrozenTrial], baseline: optuna.trial.FrozenTrial,
                        space) -> list[optuna.trial.FrozenTrial]:
    """The trials that differ from the baseline only in the space's ``synthetic_ships`` parameters (all of them
    where it names none): on synthetic questions alone, the changes whose synthetic gains did not carry over to real
    questions are not shipped (docs/benchmarks/nolabels.md: bigger passages won both writers' questions on SciFact
    and lost its real claims)."""
    if space.synthetic_ships is None:
        return list(trials)
    base, free = tidy_params(baseline.params), set(space.synthetic_ships)
    return [t for t in trials if all(k in free for k, v in tidy_params(t.params).items() if base.get(k) != v)
            and all(k in free for k in set(base) - set(tidy_params(t.params)))]


def paired_gain(base: Sequence[float | None], cand: Sequence[float | None]) -> tuple[float | None, float | None, int]:
    """A candidate's mean paired gain over the baseline on the questions both scored, its one-sided lower bound (at
    `ALPHA`) and how many questions that is."""
    diffs = [y - x for x, y in zip(base, cand) if x is not None and y is not None]
    return (float(np.mean(diffs)) if diffs else None), lower_bound(diffs, ALPHA), len(diffs)


def by_usage(ruled: dict[str, Any], base: Sequence[float | None], cands: Mapping[int, Sequence[float | None]],
             ids: Sequence[str], decides: bool, labels: Mapping[int, str] | None = None) -> dict[str, Any]:
    """The verdict with the users' rated questions (``base`` and ``cands``: per-question scores on them, ``ids``
    their ids) beside the held-out one (``ruled``).

    With `DECIDES` or more fair ones (explored answers' and corrections': ``cands`` are then the rankers they were
    explored with, `explored_trials`) they decide as the held-out questions do (`judge`): of the candidates whose
    paired gain's lower bound is above 0 (one-sided, `ALPHA` shared by the candidates), the highest lower bound
    ships. With fewer, the held-out choice ships only if it is not worse on every gold question than the baseline
    by more than `CHECK_MARGIN` (one-sided, at `ALPHA`). ``labels``: how the text names each candidate (default:
    "trial N")."""
    name = {t: (labels or {}).get(t) or f"trial {t}" for t in cands}
    rows: list[dict[str, Any]] = []
    for trial in cands:
        g, lo, k = paired_gain(base, cands[trial])
        rows.append({"trial": trial, "name": name[trial], "n": k, "gain": None if g is None else round(g, 4),
                     "lower": None if lo is None else round(lo, 4)})
    out = {**ruled, "usage": {"questions": len(ids), "decides": decides, "candidates": rows}}
    if decides:  # the held-out rule (`judge`) on the fair questions: every candidate's paired gain, Bonferroni
        fair = judge(base, cands, [""] * len(ids))
        top = max(fair["candidates"], key=lambda r: (r["lower"] if r["lower"] is not None else -1, r["gain"] or 0),
                  default=None)
        out["chosen"] = fair["chosen"]
        for row, mine in zip(rows, fair["candidates"]):
            row["lower"] = mine["lower"]  # at the shared level
        out["usage"].update(chosen=fair["chosen"], level=fair["level"])
        said = (f"{name[top['trial']]} has the highest lower bound ({top['gain']:+.4f}, lower bound "
                f"{top['lower']:+.4f}, one-sided {1 - fair['level']:.3f}: alpha {ALPHA} shared by {len(cands)})"
                if top is not None and top["gain"] is not None else "no candidate was scored")
        out["why"] = (f"your users' fair rated questions decide ({len(ids)}): {said}: "
                      + ("it ships" if fair["chosen"] is not None else "not above 0, the baseline ships"))
        return out
    c = ruled["chosen"]
    mine = next((r for r in rows if r["trial"] == c), None) if c is not None else None
    if mine is not None and mine["lower"] is not None and mine["lower"] < -CHECK_MARGIN:
        out["chosen"] = None
        out["why"] = (f"the baseline ships: {name[c]} qualified on the held-out questions, but on your users' "
                      f"{mine['n']} rated questions it may be worse (gain {mine['gain']:+.4f}, lower bound "
                      f"{mine['lower']:+.4f} below -{CHECK_MARGIN})")
    return out


def verdict_of_theirs(base: Sequence[float], best: Sequence[float], agreement: dict[str, Any]) -> dict[str, Any]:
    """Whether the user's own questions let the chosen program ship: not worse than the baseline on them by more
    than `CHECK_MARGIN` (paired, one-sided 95%) and the ranking agreeing with theirs (tau's interval above 0)."""
    diffs = [y - x for x, y in zip(base, best)]
    lo = lower_bound(diffs, ALPHA)
    tau_lo = (agreement.get("ci95") or [None])[0] if agreement.get("tau") is not None else None
    not_worse = lo is not None and lo >= -CHECK_MARGIN
    agrees = tau_lo is not None and tau_lo > 0
    gain = float(np.mean(diffs)) if diffs else None
    said = (f"on your {len(diffs)} questions its gain is {gain:+.4f} (one-sided 95% lower bound {lo:+.4f}, margin "
            f"-{CHECK_MARGIN})" if gain is not None and lo is not None else "none of your questions was scored")
    tau = (f"the ranking's tau interval starts at {tau_lo:+.3f}" if tau_lo is not None
           else "no ranking agreement could be measured")
    ok = not_worse and agrees
    return {"ships": ok, "gain": None if gain is None else round(gain, 4),
            "lower": None if lo is None else round(lo, 4), "margin": CHECK_MARGIN, "tau_lower": tau_lo,
            "why": (f"your questions let it ship: {said}; {tau}" if ok else
                    f"your questions keep the baseline: {said}" + ("" if not_worse else ", worse than the margin")
                    + f"; {tau}" + ("" if agrees else " (it must be above 0)"))}
