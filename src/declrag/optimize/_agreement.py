"""`declrag compile --check-questions FILE`: how the compile's ranking of its trials agrees with a few real
questions of the user's (docs/guides/compile.md). Up to `MAX_TRIALS` distinct finished trials, spread over the
ranking, are run on them (retrieval only) and scored by nDCG@10 in each question's unit
(`declrag.metrics.passages`); Kendall tau against the trials' dev objective comes with a bootstrap interval.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from ..errors import DeclragError
from ..golden import Example, load_golden
from ..metrics.passages import passage_scores, unit_of
from ..metrics.stats import tau_with_interval
from ..types import GoldSpan
from ._objective import Objective
from ._space import tidy_params

MAX_TRIALS = 12
FEW = 20  # fewer questions than this: the interval is wide, and the summary says so


def check_questions(path: str | Path, documents: list) -> list[Example]:
    """The user's questions that can score retrieval on ``documents`` (short answers located in the gold documents,
    or anywhere in the corpus where none is named); one clear error when none can."""
    if not Path(path).expanduser().exists():
        raise DeclragError(f"--check-questions {path}: no such file",
                           hint="a JSONL file of your questions: {\"id\", \"question\", \"answers\"} per line")
    try:
        gs = load_golden(str(path))
    except DeclragError as err:
        raise DeclragError(f"--check-questions {path}: {err.message}", hint=err.hint) from None
    texts = {d.id: d.text for d in documents}
    out: list[Example] = []
    unknown = 0
    for e in [x for s in gs.splits.values() for x in s]:
        if e.gold and not set(e.gold) & set(texts):
            unknown += 1
            continue
        if not e.spans and e.answers:
            docs = {d: texts[d] for d, g in e.gold.items() if g > 0 and d in texts} or texts
            if found := GoldSpan.occurrences(e.answers, docs):
                e = replace(e, spans=found)
        if unit_of(list(e.gold_spans()), e.answers, e.gold) is not None:
            out.append(e)
    if not out:
        why = f" ({unknown} name gold documents that are not in the corpus)" if unknown else ""
        raise DeclragError(f"--check-questions {path}: no question has gold documents, spans or short answers to "
                           f"score retrieval against{why}",
                           hint="a JSONL golden file: one {\"question\", \"answers\"} per line (answers that occur "
                                "in your documents), or \"gold\" with the documents' ids")
    return out


def ndcg_on(prog, examples: list[Example]) -> list[float]:
    """Each question's nDCG@10 (in its unit) for the program's retrieval."""
    out = []
    for e in examples:
        got = passage_scores(prog.retrieve_only(e.question, history=e.history), list(e.gold_spans()), e.answers,
                             e.gold, ["ndcg@10"])
        out.append(got[0]["ndcg@10"] if got else 0.0)
    return out


def agreement(comp: Objective, trials: list[optuna.trial.FrozenTrial], examples: list[Example], seed: int = 13,
              progress: bool = False) -> dict[str, Any]:
    """Kendall tau between the trials' dev objective and their nDCG@10 on ``examples``, with its interval."""
    done = sorted((t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.values),
                  key=lambda t: -t.values[0])  # the first objective of a multi-objective study
    distinct: dict[str, optuna.trial.FrozenTrial] = {}
    for t in done:
        distinct.setdefault(repr(sorted(tidy_params(t.params).items())), t)
    ranked = list(distinct.values())
    picks = ranked if len(ranked) <= MAX_TRIALS else \
        [ranked[round(i * (len(ranked) - 1) / (MAX_TRIALS - 1))] for i in range(MAX_TRIALS)]
    if len(picks) < 3:
        return {"questions": len(examples), "trials": len(picks),
                "why": "fewer than 3 distinct finished trials: no ranking to compare"}
    scores = np.array([ndcg_on(comp.program(tidy_params(t.params)), examples) for t in picks])
    dev = np.array([t.values[0] for t in picks])
    return {"questions": len(examples), "trials": len(picks), **tau_with_interval(dev[:, None], scores, seed),
            "per_trial": [{"trial": t.number, "dev": round(float(t.values[0]), 4), "check_ndcg@10": round(float(s), 4)}
                          for t, s in zip(picks, scores.mean(axis=1))],
            **({"note": f"only {len(examples)} questions: a wide interval"} if len(examples) < FEW else {})}
