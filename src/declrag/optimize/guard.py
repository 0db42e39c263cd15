"""A compile on a synthetic set ships what its set can support, and no more (docs/guides/compile.md).

A synthetic set's questions share its generator's habits (a cloze question favours keyword matching), so a best
trial chosen on them can beat the baseline on that set alone. `second_set_check` draws a second set from the same
documents with another seed and generator, and accepts the best program only when the paired 95% interval of its
gain there lies above 0. Applied to retrieval objectives only (a set drawn with no model has no answers).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..golden import load_golden
from ..metrics.stats import paired_difference
from .objective import Objective

CHECK_QUESTIONS = 200  # questions of the second set: enough for a paired interval of a few hundredths
# the second set's generator: the first of these that did not make the set (no model, and the corpus unchanged, so
# that the compile's own indexes score it: not the inverse cloze, whose set has its sentences removed)
CHECK_GENERATORS = ("keywords", "cloze")
Scorer = Callable[[Objective, Any, list, str], tuple[dict, list[float | None]]]


def second_set_check(comp: Objective, base_prog: Any, best_prog: Any, same: bool, score: Scorer,
                     progress: bool = False) -> dict[str, Any]:
    """Whether the best program's gain over the baseline holds on a second, independently drawn synthetic set:
    ``{"applied", "accepted", "why", "gain", "check_set"}``. ``score`` is the compile's own scorer."""
    syn = comp.golden.synthetic()
    if syn is None:
        return {"applied": False, "accepted": True, "why": "the golden set is not synthetic"}
    if same:
        return {"applied": False, "accepted": True, "why": "the best trial is the baseline"}
    if not comp.space.objective.retrieval_only:
        return {"applied": False, "accepted": True,
                "why": "the objective reads answers, which a second set drawn with no model does not have"}
    from ..synth import synthesize  # the synth pipeline (its filters search an index): only for synthetic sets

    made = [e.metadata for s in comp.golden.splits.values() for e in s if e.metadata.get("synthetic")]
    seeds = [int(m.get("seed", 13)) for m in made if str(m.get("seed", "")).lstrip("-").isdigit()]
    seed = max(seeds, default=13) + 1
    used = {str(m.get("generator", "")).split(" ")[0] for m in made}
    generator = next(g for g in CHECK_GENERATORS if g not in used or g == CHECK_GENERATORS[-1])
    with tempfile.TemporaryDirectory(prefix="declrag-check-") as tmp:
        report = synthesize(comp.golden.documents, Path(tmp) / "check", CHECK_QUESTIONS, model=None, seed=seed,
                            generator=generator, progress=progress)
        check = load_golden(str(Path(tmp) / "check"))
    questions = [e for s in check.splits.values() for e in s]
    _, q_base = score(comp, base_prog, questions, "second synthetic set, baseline")
    _, q_best = score(comp, best_prog, questions, "second synthetic set, best program")
    gain = paired_difference(q_base, q_best)
    accepted = gain["ci95"][0] is not None and gain["ci95"][0] > 0
    lo, hi = gain["ci95"]
    why = (f"its gain holds on a second synthetic set ({report.generator}, seed {seed}, {gain['n']} questions): "
           f"{gain['diff']:+.4f} [{lo:+.4f}, {hi:+.4f}]" if accepted else
           f"its gain does not hold on a second synthetic set ({report.generator}, seed {seed}, {gain['n']} "
           f"questions): " + (f"{gain['diff']:+.4f} [{lo:+.4f}, {hi:+.4f}], an interval not above 0"
                              if lo is not None else "no question of it could be scored")
           + "; the baseline ships instead")
    return {"applied": True, "accepted": accepted, "why": why, "gain": gain,
            "check_set": {"questions": len(questions), "generator": report.generator, "seed": seed}}
