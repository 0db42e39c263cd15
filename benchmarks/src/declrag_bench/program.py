"""`declrag bench program`: the program's own overhead per question, every stage on.

Overhead is everything but LM calls and embedding: retrieval, fusion, autocut, expansion, reranking
bookkeeping, MMR, prompt formatting and parsing, citation handling, the judge's bookkeeping. The LM is an
instant scripted one (DSPy's DummyLM, timed apart), so what remains is declrag's own time; embedding time
is measured by the program and taken out too.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.config import IngestConfig, ProgramConfig
from declrag.embed.embedder import Embedder
from declrag.golden import load_golden
from declrag.ingest.corpus import corpus_store
from declrag.lm import using_lm
from declrag.metrics.stats import percentiles
from declrag.pipeline.program import RAGProgram
from declrag.testing import ScriptedLM

ALL_ON = {
    "rewrite": {"mode": "multi-query", "n": 3},
    "retrieve": {"k": 5, "autocut": 1, "window": 1, "mmr": True, "order": "lost-in-the-middle"},
    "rerank": {"mode": "llm", "candidates": 10},
    "judge": {"mode": "llm", "policy": "regenerate"},
}


SCRIPT = {"search queries": {"queries": "first variant\nsecond variant\nthird variant"},
          "Does the passage": {"relevant": "yes"}, "Check the answer": {"supported": "yes"}}


def run(n_questions: int = 200, dataset: str = "squad-v2.0", progress: bool = True) -> dict[str, Any]:
    gs = load_golden(dataset)
    embedder = Embedder(IngestConfig().embedder)
    store, _ = corpus_store(gs.documents, IngestConfig(), gs.name, embedder=embedder, progress=progress)
    prog = RAGProgram(ProgramConfig.model_validate(ALL_ON), store=store, embedder=embedder)
    every = max(1, len(gs.documents) // n_questions)
    questions = [e.question for e in gs.split(next(iter(gs.splits)))][::every][:n_questions]
    lm: Any = ScriptedLM(SCRIPT, {"answer": "It is stated in the passage [1]."})  # an LM class made on the fly
    rows = []
    with using_lm(lm):
        for q in questions[:5]:  # warm-up: models loaded, query embeddings cached
            prog(question=q)
        for q in questions:
            before = lm.ms
            a = prog(question=q)
            lm_ms = lm.ms - before
            total, embed = a.latency_ms["total"], a.latency_ms["embed"]
            rows.append({"total": total, "lm": lm_ms, "embed": embed, "overhead": total - lm_ms - embed,
                         **{f"stage:{k}": v for k, v in a.latency_ms.items() if k not in ("total", "embed")}})

    def pct(key: str) -> dict[str, float | None]:
        return percentiles([r[key] for r in rows], digits=3)

    return {"dataset": gs.name, "questions": len(rows), "chunks": store.count(), "stages": ALL_ON,
            "overhead_ms": pct("overhead"), "total_ms": pct("total"), "lm_ms": pct("lm"), "embed_ms": pct("embed"),
            "stage_ms": {k.split(":", 1)[1]: pct(k) for k in rows[0] if k.startswith("stage:")} if rows else {},
            "target_ms": 20.0}


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"program overhead per question, every stage on: {r['questions']} {r['dataset']} questions, "
                    f"{r['chunks']:,} chunks (ms, p50 / p95)")
    t.add_column("measure")
    t.add_column("ms", justify="right")
    for label, key in (("overhead (total - LM - embedding)", "overhead_ms"), ("total", "total_ms"),
                       ("inside the (instant) LM", "lm_ms"), ("embedding", "embed_ms")):
        t.add_row(label, f"{r[key]['p50']:.2f} / {r[key]['p95']:.2f}")
    for stage, v in r["stage_ms"].items():
        t.add_row(f"  stage {stage} (wall, LM included)", f"{v['p50']:.2f} / {v['p95']:.2f}")
    console.print(t)
    console.print(f"target: overhead p50 < {r['target_ms']} ms -> {r['overhead_ms']['p50']:.2f} ms")
