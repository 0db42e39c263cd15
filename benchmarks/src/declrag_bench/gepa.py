"""`declrag bench gepa`: does GEPA write better prompts when it is told what was wrong with each answer?

From the same default program on the local model (``ProgramConfig(lm=LMConfig(route=...))``), DSPy's GEPA runs twice
with the same budget (``max_metric_calls = trials x train questions``) and seed: once with the bare feedback
(``feedback: score``: the objective and the reference answer) and once with the grounding tier's findings
(``feedback: findings``, `declrag.metrics.feedback`). GEPA's train and validation set are the same ``n_train``
questions (its first full evaluation then costs ``n_train`` of the budget, not more). The un-optimized program and
both results then answer the same ``n_dev`` held-out questions, scored with the compile objective (token_match 0.4,
faithfulness 0.3, sia 0.3) and its three parts, with paired bootstrap intervals against the un-optimized program
and findings against score.

Questions: a seeded sample of SQuAD v2.0 dev, answerable and unanswerable as they come (about half each). Corpus:
the sampled questions' own paragraphs and, from their articles, ``distractors`` times as many other paragraphs, so
indexing stays short while retrieval still has to choose among paragraphs on the same subject.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from declrag.config import IngestConfig, LMConfig, ProgramConfig
from declrag.embed.embedder import Embedder
from declrag.evaluate.evaluation import score_case
from declrag.golden import Example, GoldenSet, load_golden
from declrag.ingest.corpus import corpus_store
from declrag.metrics.base import to_case
from declrag.metrics.stats import mean_of, paired_difference
from declrag.optimize._objective import weighted
from declrag.optimize._prompts import Scorer, optimize_prompts
from declrag.optimize._space import PromptOptimizer, Space
from declrag.pipeline.program import RAGProgram
from declrag.types import Document

log = logging.getLogger(__name__)
ARMS = ("unoptimized", "score", "findings")
METRICS = ("objective", "faithfulness", "sia", "token_match")
Feedback = Literal["score", "findings"]
PAIRS = (("unoptimized", "score"), ("unoptimized", "findings"), ("score", "findings"))


def questions(gs: GoldenSet, n: int, seed: int) -> list[Example]:
    """A seeded sample of ``n`` questions with one gold paragraph each, in the split's order."""
    pool = [e for e in gs.examples() if e.gold]
    keep = set(random.Random(seed).sample(range(len(pool)), min(n, len(pool))))
    return [e for i, e in enumerate(pool) if i in keep]


def corpus(gs: GoldenSet, picked: list[Example], distractors: float, seed: int) -> list[Document]:
    """The picked questions' paragraphs and, from the same articles (``Title#n``), a seeded sample of others."""
    gold = {d for e in picked for d in e.gold}
    articles = {d.split("#")[0] for d in gold}
    others = [d.id for d in gs.documents if d.id not in gold and d.id.split("#")[0] in articles]
    extra = set(random.Random(seed).sample(others, min(len(others), int(distractors * len(gold)))))
    return [d for d in gs.documents if d.id in gold or d.id in extra]


def space_for(kind: Feedback, trials: int, n_train: int) -> Space:
    return Space(name=f"bench-gepa-{kind}", params={}, prompt_optimizer=PromptOptimizer(
        name="gepa", trials=trials, max_examples=n_train, feedback=kind))


def instructions(prog: RAGProgram) -> dict[str, str]:
    return {name: p.signature.instructions for name, p in prog.named_predictors()}


def scores(prog: RAGProgram, examples: list[Example], scorer: Scorer, label: str,
           progress: bool = True) -> list[dict[str, float | None]]:
    """Each question's objective and its parts, as compile scores them."""
    rows = []
    for i, e in enumerate(examples):
        case = to_case(e, prog(question=e.question, history=e.history))
        values, _, _ = score_case(case, scorer.metrics)
        values["objective"] = weighted(values, scorer.space.objective.metrics)
        rows.append({m: values.get(m) for m in METRICS} | {"abstained": float(case.abstained)})
        if progress and (i + 1) % 8 == 0:
            print(f"  {label}: {i + 1}/{len(examples)}", flush=True)
    return rows


class _Steps(logging.Handler):
    """GEPA's own account of each iteration (what it proposed, and whether it kept it), as it logs it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.steps: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if any(k in msg for k in ("Proposed new text", "subsample score", "Found a better", "Base program full")):
            self.steps.append(msg[:400])


def _gepa_arm(kind: Feedback, make, train: list[Example], trials: int) -> tuple[RAGProgram, dict[str, Any]]:
    scorer = Scorer.of(space_for(kind, trials, len(train)))
    gepa_log, steps = logging.getLogger("dspy.teleprompt.gepa"), _Steps()
    gepa_log.addHandler(steps)
    t0 = time.perf_counter()
    try:
        new, info = optimize_prompts(make(), scorer, train, train)
    finally:
        gepa_log.removeHandler(steps)
    info = {**info, "wall_s": round(time.perf_counter() - t0, 1), "lm_calls": scorer.spent.lm_calls,
            "max_metric_calls": trials * len(train), "instructions": instructions(new), "steps": steps.steps}
    return new, info


def run(dataset: str = "squad-v2.0", n_train: int = 16, n_dev: int = 24, trials: int = 3,
        route: str = "local/smollm2", seed: int = 13, distractors: float = 2.0,
        progress: bool = True) -> dict[str, Any]:
    gs = load_golden(dataset)
    picked = questions(gs, n_train + n_dev, seed)
    random.Random(seed).shuffle(picked)
    train, test = picked[:n_train], picked[n_train:]
    docs = corpus(gs, picked, distractors, seed)
    embedder = Embedder(IngestConfig().embedder)
    t0 = time.perf_counter()
    store, _ = corpus_store(docs, IngestConfig(), f"{gs.name}-gepa", embedder=embedder, progress=progress)
    index_s = time.perf_counter() - t0

    def make() -> RAGProgram:
        return RAGProgram(ProgramConfig(lm=LMConfig(route=route)), store=store, embedder=embedder)

    base = make()
    programs: dict[str, RAGProgram] = {"unoptimized": base}
    gepa: dict[str, Any] = {}
    kinds: tuple[Feedback, ...] = ("score", "findings")
    for kind in kinds:
        if progress:
            print(f"GEPA, feedback={kind}: {trials} x {len(train)} metric calls", flush=True)
        programs[kind], gepa[kind] = _gepa_arm(kind, make, train, trials)
    scorer = Scorer.of(space_for("score", trials, n_train))
    rows, score_s = {}, {}
    for arm in ARMS:
        t0 = time.perf_counter()
        rows[arm] = scores(programs[arm], test, scorer, arm, progress)
        score_s[arm] = round(time.perf_counter() - t0, 1)
    return {
        "dataset": gs.name, "route": route, "seed": seed, "trials": trials, "documents": len(docs),
        "index_s": round(index_s, 1), "score_s": score_s,
        "train": {"n": len(train), "answerable": sum(e.answerable for e in train)},
        "test": {"n": len(test), "answerable": sum(e.answerable for e in test)},
        "objective_weights": scorer.space.objective.metrics, "gepa": gepa,
        "unoptimized_instructions": instructions(base),
        "arms": {arm: {m: mean_of([r[m] for r in rows[arm]]) for m in (*METRICS, "abstained")} for arm in ARMS},
        "diff": {f"{b}-{a}": {m: paired_difference([r[m] for r in rows[a]], [r[m] for r in rows[b]]) for m in METRICS}
                 for a, b in PAIRS},
        "per_question": {arm: rows[arm] for arm in ARMS}, "test_ids": [e.id for e in test],
    }


def _f(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ci(d: dict[str, Any]) -> str:
    if d.get("diff") is None:
        return "-"
    star = " *" if d.get("significant") else ""
    return f"{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]{star}"


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"GEPA with and without the findings: {r['dataset']} on {r['route']}, {r['train']['n']} train "
                    f"questions, {r['trials']} x {r['train']['n']} metric calls per arm, {r['test']['n']} held-out "
                    f"({r['test']['answerable']} answerable)")
    for col in ("arm", *METRICS, "abstained", "GEPA"):
        t.add_column(col)
    for arm in ARMS:
        info = r["gepa"].get(arm, {})
        note = "-" if arm == "unoptimized" else (info.get("error") or f"{info.get('wall_s')} s, "
                                                                       f"{info.get('lm_calls')} LM calls")
        t.add_row(arm, *[_f(r["arms"][arm][m]) for m in (*METRICS, "abstained")], note)
    console.print(t)
    t = Table(title="paired differences (B - A, mean [95% bootstrap CI]; * excludes 0)")
    t.add_column("B - A")
    for m in METRICS:
        t.add_column(m)
    for pair, cells in r["diff"].items():
        t.add_row(pair, *[_ci(cells[m]) for m in METRICS])
    console.print(t)
    for arm in ("score", "findings"):
        changed = {k: v for k, v in r["gepa"].get(arm, {}).get("instructions", {}).items()
                   if v != r["unoptimized_instructions"].get(k)}
        console.print(f"[bold]{arm}[/]: " + escape("; ".join(f"{k}: {v[:200]!r}" for k, v in changed.items())
                                                    if changed else "instructions unchanged"))
