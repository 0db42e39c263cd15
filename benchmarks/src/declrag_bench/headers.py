"""`declrag bench headers`: does putting a chunk's document identity in front of it help retrieval?

For each golden set, the same corpus is indexed three times, ingest ``context`` ``none`` (the text alone),
``title`` and ``title+section`` (`declrag.ingest.headers`): the header goes into what is embedded and what BM25
indexes; the chunks' texts and spans are the same. The default program's retrieval (hybrid 0.5, fixed 256-token
chunks) answers the same seeded questions of the set's test split over each index; nDCG@10 and hit@5 over passages
(`declrag.metrics.passages`), each setting against ``none``, paired, with a 95% bootstrap interval.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.config import IngestConfig, ProgramConfig
from declrag.embed.embedder import Embedder
from declrag.golden import load_golden
from declrag.ingest.corpus import corpus_store
from declrag.metrics.base import to_case
from declrag.metrics.catalog import get_metrics
from declrag.pipeline.program import RAGProgram

from .common import over_sets, paired_arms, test_sample

SETS = ("squad-v1.1-articles", "nq-long")
CONTEXTS = ("none", "title", "title+section")
METRICS = ("ndcg@10", "hit@5")


def run_set(name: str, limit: int, seed: int, progress: bool = True) -> dict[str, Any]:
    gs = load_golden(name)
    split, examples = test_sample(gs, limit, seed, lambda e: bool(e.gold))
    embedder = Embedder(IngestConfig().embedder)
    metrics = get_metrics(list(METRICS))
    rows: dict[str, list[dict[str, float | None]]] = {}
    for context in CONTEXTS:
        ingest = IngestConfig(context=context)
        store, _ = corpus_store(gs.documents, ingest, gs.name, embedder=embedder, progress=progress)
        prog = RAGProgram(ProgramConfig(ingest=ingest), store=store, embedder=embedder)
        embedder.embed_queries([e.question for e in examples])
        rows[context] = []
        for e in examples:
            case = to_case(e, {"passages": prog.retrieve_only(e.question, history=e.history)})
            rows[context].append({m.name: m.score(case).value for m in metrics})
    return {"dataset": gs.name, "split": split, "questions": len(examples), "documents": len(gs.documents),
            "contexts": paired_arms(rows, METRICS, "none")}


def run(sets: list[str] | None = None, limit: int = 1000, seed: int = 13, progress: bool = True) -> dict[str, Any]:
    return over_sets(run_set, sets or SETS, limit, seed, progress)


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title="retrieval with each chunk's document identity in front (ingest context), default program; "
                    "each setting - none, paired, 95% interval")
    for col in ("set", "questions", "context", *METRICS, *(f"{m} - none" for m in METRICS)):
        t.add_column(col)
    for s in r["sets"].values():
        for context, c in s["contexts"].items():
            diffs = [c.get("vs_none", {}).get(m) for m in METRICS]
            t.add_row(s["dataset"], str(s["questions"]), context, *(f"{c[m]:.3f}" for m in METRICS),
                      *("" if d is None else f"{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
                        for d in diffs))
    console.print(t)
    console.print(f"{r['wall_s']} s in all")
