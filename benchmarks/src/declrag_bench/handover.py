"""`declrag bench handover`: how the passages are handed over, measured as a reader meets them.

For each golden set, the corpus is indexed once with the default settings, and the default program's retrieval
(`RAGProgram.search`: what an answer is made from) answers the same seeded questions with each way of handing the
passages over (`declrag.pipeline.stages.retrieve.hand_over`): ``best-first`` (each passage what matched; a lower one
gives up
what a higher one holds), ``merge`` (a document's passages that overlap or meet made one, at the best one's rank) and
``none`` (as found, overlaps repeated). Scored over passages (`declrag.metrics.passages`): hit@1 and hit@5; at a budget
(`declrag.metrics.budget`): hit and nDCG within the first 1,500 characters handed over; and the characters handed over.
Each arm against ``merge``, paired, with a 95% bootstrap interval.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.config import IngestConfig, ProgramConfig, default_config
from declrag.embed.embedder import Embedder
from declrag.golden import load_golden
from declrag.ingest.corpus import corpus_store
from declrag.metrics.base import to_case
from declrag.metrics.budget import characters
from declrag.metrics.catalog import get_metrics
from declrag.pipeline.program import RAGProgram

from .common import over_sets, paired_arms, test_sample

SETS = ("nq-long", "squad-v1.1-articles", "cmu-qa", "mtrag-un")
ARMS = ("merge", "best-first", "joined", "none")
METRICS = ("hit@1", "hit@5", "hit@1500c", "ndcg@1500c")


def run_set(name: str, limit: int, seed: int, progress: bool = True) -> dict[str, Any]:
    gs = load_golden(name)
    split, examples = test_sample(gs, limit, seed, lambda e: bool(e.gold or e.gold_spans()))
    embedder = Embedder(IngestConfig().embedder)
    metrics = get_metrics(list(METRICS))
    ingest = IngestConfig()
    store, _ = corpus_store(gs.documents, ingest, gs.name, embedder=embedder, progress=progress)
    embedder.embed_queries([e.question for e in examples])
    rows: dict[str, list[dict[str, float | None]]] = {}
    for arm in ARMS:
        base = default_config(ProgramConfig(ingest=ingest))
        config = base.model_copy(update={"retrieve": base.retrieve.model_copy(update={"handover": arm})})
        prog = RAGProgram(config, store=store, embedder=embedder)
        rows[arm] = []
        for e in examples:
            passages = prog.search(e.question, history=e.history)
            case = to_case(e, {"passages": passages})
            rows[arm].append({**{m.name: m.score(case).value for m in metrics},
                              "chars": float(characters(passages)), "passages": float(len(passages))})
    return {"dataset": gs.name, "split": split, "questions": len(examples), "documents": len(gs.documents),
            "arms": paired_arms(rows, METRICS, "merge", ("chars", "passages")), "rows": rows}


def run(sets: list[str] | None = None, limit: int = 300, seed: int = 13, progress: bool = True) -> dict[str, Any]:
    return over_sets(run_set, sets or SETS, limit, seed, progress)


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title="passages handed over by the default program's retrieval, per way of handing them over; "
                    "each arm - merge, paired, 95% interval")
    for col in ("set", "questions", "arm", *METRICS, "chars", "passages"):
        t.add_column(col)
    for s in r["sets"].values():
        for arm, a in s["arms"].items():
            t.add_row(s["dataset"], str(s["questions"]), arm, *(_cell(a, m) for m in METRICS),
                      f"{a['chars']:,.0f}", f"{a['passages']:.2f}")
    console.print(t)
    console.print(f"{r['wall_s']} s in all")


def _cell(a: dict[str, Any], m: str) -> str:
    d = a.get("vs_merge", {}).get(m)
    value = "" if a[m] is None else f"{a[m]:.3f}"
    return value if d is None else f"{value} ({d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}])"
