"""`declrag bench conversation`: does a follow-up question find its passages, and is it answered well, when the
turns before it are used?

Retrieval, on the answerable and partial tasks with gold passages: recall@5 and nDCG@10 of the program's
retrieval for each way of making the search query from the conversation (`declrag.pipeline.stages.history`): ``last``
(the last user turn alone: ``history.query: off``), ``joined`` (every user turn in the window joined),
``deterministic`` and ``condense`` (the LM, here the local model), by multi-turn label (Follow-up, Clarification,
N/A, all), each with a paired bootstrap interval against ``last``; and what each mode costs: the extra latency
per turn against ``last`` (the median of the per-turn differences, every text's embedding cached first, as the
earlier turns of a live conversation are, having each been the question once) and the LM calls per turn.

Generation, on a seeded sample of every task (UNANSWERABLE and UNDERSPECIFIED included): the default program on
the local model answering each last turn with its history, and without (the question alone, ``history.query:
off``): faithfulness, SIA, token F1 against the reference, and the abstention rate, by answerability, with
paired intervals. On UNANSWERABLE tasks the abstention is the right answer; on UNDERSPECIFIED a clarifying
question is (their reference), so neither arm can be right by abstaining there.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from declrag.config import IngestConfig, LMConfig, ProgramConfig
from declrag.embed.embedder import Embedder
from declrag.golden import Example, load_golden
from declrag.ingest.corpus import corpus_store
from declrag.lm import Meter, metering
from declrag.metrics.base import to_case
from declrag.metrics.catalog import get_metrics
from declrag.metrics.stats import mean_of, paired_difference, percentiles
from declrag.pipeline.program import RAGProgram

MODES = {"last": "off", "joined": "joined", "deterministic": "deterministic", "condense": "condense"}
LABELS = ("Follow-up", "Clarification", "N/A", "all")
RETRIEVAL = ("recall@5", "ndcg@10")
GENERATION = ("faithfulness", "sia", "f1", "abstained")


def _retrieval_set(examples: list[Example]) -> list[Example]:
    """Answerable and partial tasks with gold passages (sets without the MTRAG label: answerable ones)."""
    return [e for e in examples if e.gold and e.answerable
            and e.metadata.get("answerability", "ANSWERABLE") in ("ANSWERABLE", "PARTIAL")]


def _label(e: Example) -> str:
    return str(e.metadata.get("multi_turn") or ("Follow-up" if e.history else "N/A"))


def _program(store, embedder: Embedder, route: str, **history: Any) -> RAGProgram:
    cfg = ProgramConfig(lm=LMConfig(route=route), history=history)
    return RAGProgram(cfg, store=store, embedder=embedder)


def retrieval(examples: list[Example], store, embedder: Embedder, route: str, modes: list[str],
              progress: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(retrieval.<mode>.<label>, cost.<mode>)`` as the module docstring says."""
    metrics = get_metrics(list(RETRIEVAL))
    texts = {e.question for e in examples} | {t.content for e in examples for t in e.history if t.role == "user"}
    embedder.embed_queries(sorted(texts))  # every mode then reads the same cached vectors
    scores: dict[str, list[dict[str, float]]] = {}
    cost: dict[str, Any] = {}
    wall: dict[str, list[float]] = {}
    for mode in modes:
        prog = _program(store, embedder, route, query=MODES[mode])
        meter = Meter()
        rows, ms = [], []
        for i, e in enumerate(examples):
            t0 = time.perf_counter()
            with metering(meter):
                pool = prog.retrieve_only(e.question, history=e.history, depth=10)
            ms.append(1000 * (time.perf_counter() - t0))
            case = to_case(e, {"passages": pool})
            rows.append({m.name: float(m.score(case).value or 0.0) for m in metrics})
            if progress and (i + 1) % 50 == 0:
                print(f"  {mode}: {i + 1}/{len(examples)} turns", flush=True)
        scores[mode], wall[mode] = rows, ms
        u = meter.to_dict()["total"]
        cost[mode] = {"latency_ms": percentiles(ms, digits=2), "lm_cached_calls": int(u["cached"]),
                      "lm_calls_per_turn": round(u["calls"] / len(examples), 3)}
    base = wall.get("last")
    for mode in modes:
        if base is not None:
            cost[mode]["extra_ms_p50"] = round(float(np.median(np.subtract(wall[mode], base))), 2)
    return _by_label(examples, scores), cost


def _by_label(examples: list[Example], scores: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    groups = {lab: [i for i, e in enumerate(examples) if lab == "all" or _label(e) == lab] for lab in LABELS}
    out: dict[str, Any] = {}
    for mode, rows in scores.items():
        out[mode] = {}
        for lab, idx in groups.items():
            cell: dict[str, Any] = {m: mean_of([rows[i][m] for i in idx]) for m in RETRIEVAL}
            cell["n"] = len(idx)
            if mode != "last" and "last" in scores:
                cell["vs_last"] = {m: paired_difference([scores["last"][i][m] for i in idx], [rows[i][m] for i in idx])
                                   for m in RETRIEVAL}
            out[mode][lab] = cell
    return out


def generation(examples: list[Example], store, embedder: Embedder, route: str, n: int, seed: int = 0,
               progress: bool = True) -> dict[str, Any]:
    """The default program on ``route`` over a seeded sample of ``n`` tasks, with the history and without."""
    sample = sorted(random.Random(seed).sample(range(len(examples)), min(n, len(examples))))
    picked = [examples[i] for i in sample]
    metrics = get_metrics(list(GENERATION))
    arms = {"with_history": _program(store, embedder, route), "without": _program(store, embedder, route, query="off")}
    rows: dict[str, list[dict[str, Any]]] = {}
    for arm, prog in arms.items():
        rows[arm] = []
        for i, e in enumerate(picked):
            a = prog(question=e.question, history=e.history if arm == "with_history" else None)
            case = to_case(e, a)
            vals = {m.name: m.score(case).value for m in metrics}
            rows[arm].append({**vals, "latency_ms": a.latency_ms["total"], "calls": a.usage["total"]["calls"]})
            if progress and (i + 1) % 10 == 0:
                print(f"  generation {arm}: {i + 1}/{len(picked)}", flush=True)
    labels = sorted({str(e.metadata.get("answerability", "ANSWERABLE")) for e in picked}) + ["all"]
    out: dict[str, Any] = {"n": len(picked), "seed": seed, "route": route, "by_answerability": {}}
    for lab in labels:
        idx = [i for i, e in enumerate(picked) if lab == "all" or e.metadata.get("answerability", "ANSWERABLE") == lab]
        cell: dict[str, Any] = {"n": len(idx)}
        for arm in arms:
            cell[arm] = {m: mean_of([rows[arm][i][m] for i in idx]) for m in GENERATION}
        cell["diff"] = {m: paired_difference([rows["without"][i][m] for i in idx],
                                             [rows["with_history"][i][m] for i in idx]) for m in GENERATION}
        out["by_answerability"][lab] = cell
    for arm in arms:
        out[f"{arm}_latency_ms"] = percentiles([r["latency_ms"] for r in rows[arm]], digits=1)
        out[f"{arm}_lm_calls_per_turn"] = round(float(np.mean([r["calls"] for r in rows[arm]])), 3)
    return out


def run(dataset: str = "mtrag-un", route: str = "local/smollm2", modes: list[str] | None = None,
        generate: int = 60, progress: bool = True) -> dict[str, Any]:
    gs = load_golden(dataset)
    examples = gs.examples()
    embedder = Embedder(IngestConfig().embedder)
    store, _ = corpus_store(gs.documents, IngestConfig(), gs.name, embedder=embedder, progress=progress)
    retr = _retrieval_set(examples)
    modes = modes or list(MODES)
    t0 = time.perf_counter()
    by_mode, cost = retrieval(retr, store, embedder, route, modes, progress)
    out: dict[str, Any] = {
        "dataset": gs.name, "documents": len(gs.documents), "tasks": len(examples), "retrieval_tasks": len(retr),
        "route": route, "modes": {m: MODES[m] for m in modes}, "retrieval": by_mode, "cost": cost,
        "retrieval_s": round(time.perf_counter() - t0, 1),
        "targets": {"follow_up_recall@5_best": 0.93, "follow_up_recall@5_deterministic": 0.90,
                    "n/a_max_loss": 0.01, "deterministic_extra_ms_p50": 5.0, "condense_lm_calls_per_turn": 1.0}}
    if generate:
        t0 = time.perf_counter()
        out["generation"] = generation(examples, store, embedder, route, generate, progress=progress)
        out["generation_s"] = round(time.perf_counter() - t0, 1)
    return out


def _f(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ci(d: dict[str, Any]) -> str:
    return f"{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]" if d.get("diff") is not None else "-"


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"conversation retrieval: {r['dataset']}, {r['retrieval_tasks']} answerable/partial turns with "
                    f"gold passages, {r['documents']} passages (recall@5 / nDCG@10; vs last: recall@5 diff, 95% CI)")
    t.add_column("mode")
    for lab in LABELS:
        t.add_column(f"{lab} (n={r['retrieval']['last'][lab]['n'] if 'last' in r['retrieval'] else '?'})")
    t.add_column("extra ms p50")
    t.add_column("LM calls/turn")
    for mode, cells in r["retrieval"].items():
        row = [mode]
        for lab in LABELS:
            c = cells[lab]
            vs = f"\n{_ci(c['vs_last']['recall@5'])}" if "vs_last" in c else ""
            row.append(f"{_f(c['recall@5'])} / {_f(c['ndcg@10'])}{vs}")
        cost = r["cost"][mode]
        row += [_f(cost.get("extra_ms_p50"), 2), _f(cost["lm_calls_per_turn"], 2)]
        t.add_row(*row)
    console.print(t)
    if g := r.get("generation"):
        t = Table(title=f"generation on {g['route']}: {g['n']} sampled tasks, with the history and without "
                        "(mean; diff = with - without, paired 95% CI)")
        for col in ("answerability", "n", *[f"{m} with / without / diff" for m in GENERATION]):
            t.add_column(col)
        for lab, c in g["by_answerability"].items():
            t.add_row(lab, str(c["n"]), *[f"{_f(c['with_history'][m])} / {_f(c['without'][m])}\n{_ci(c['diff'][m])}"
                                          for m in GENERATION])
        console.print(t)
