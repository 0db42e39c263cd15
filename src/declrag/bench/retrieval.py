"""`declrag bench retrieval`: keyword-only, vector-only and hybrid retrieval on a golden set.

The hybrid setting (alpha and fusion) is chosen on tuning queries and reported on others, never on the
queries it is reported for: BEIR sets tune on ``train`` and report on ``test``; a set with one split
(SQuAD) is cut by a seeded coin into two halves, tuned on one and reported on the other. Documents are
ranked by their best chunk. The sweep fuses each query's two legs with `declrag.stores.fusion.fuse`
(the function the store itself uses); the chosen setting is then run through the store's own
``hybrid_search`` on the report queries, and the two must agree.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from ..api import corpus_store
from ..config import IngestConfig
from ..embed import Embedder
from ..golden import Example, find_spec, load_golden
from ..metrics.retrieval import RETRIEVAL_METRICS, doc_ranking, retrieval_scores
from ..stores.fusion import MIN_CANDIDATES, fuse

ALPHAS = tuple(round(a, 2) for a in np.arange(0.1, 0.91, 0.1))
FUSIONS = ("relative", "ranked")
SELECT_BY = "ndcg@10"


def _halves(examples: list[Example], seed: int = 13) -> tuple[list[Example], list[Example]]:
    rng = random.Random(seed)
    coin = [rng.random() < 0.5 for _ in examples]
    return [e for e, c in zip(examples, coin) if c], [e for e, c in zip(examples, coin) if not c]


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {m: round(float(np.mean([r[m] for r in rows])), 4) for m in RETRIEVAL_METRICS} if rows else {}


def run(dataset: str, split: str | None = None, ingest: IngestConfig | None = None, limit: int | None = None,
        progress: bool = True) -> dict[str, Any]:
    t_start = time.perf_counter()
    gs = load_golden(dataset)
    try:
        reference = find_spec(dataset).reference
    except Exception:
        reference = {}
    report_split = split or ("test" if "test" in gs.splits else next(iter(gs.splits)))
    report_q = [e for e in gs.split(report_split) if e.gold]
    if report_split == "test" and "train" in gs.splits:
        tune_q, tuned_on = [e for e in gs.split("train") if e.gold], "train split"
    else:
        tune_q, report_q = _halves(report_q)
        tuned_on = "a seeded half of the split (seed 13); figures are on the other half"
    if limit:
        tune_q, report_q = tune_q[:limit], report_q[:limit]

    ingest = ingest or IngestConfig()
    embedder = Embedder(ingest.embedder)
    t0 = time.perf_counter()
    store, report = corpus_store(gs.documents, ingest, gs.name, embedder=embedder, progress=progress)
    t_index = time.perf_counter() - t0

    k = MIN_CANDIDATES
    legs: dict[str, dict[str, list]] = {}
    for name, qs in (("tune", tune_q), ("report", report_q)):
        vecs = embedder.embed_queries([e.question for e in qs])
        kw, vec = [], []
        for e, v in tqdm(list(zip(qs, vecs)), desc=f"searching ({name})", disable=not progress, unit="q"):
            kw.append([(h.chunk.id, h.score, h.doc_id) for h in store.keyword_search(e.question, k)])
            vec.append([(h.chunk.id, h.score, h.doc_id) for h in store.vector_search(v, k)])
        legs[name] = {"kw": kw, "vec": vec, "vecs": vecs, "q": qs}

    def score(name: str, ranked_lists: list[list[str]]) -> dict[str, float]:
        return _mean([retrieval_scores(r, e.gold) for r, e in zip(ranked_lists, legs[name]["q"])])

    def hybrid_lists(name: str, alpha: float, fusion: str) -> list[list[str]]:
        out = []
        for kw, vec in zip(legs[name]["kw"], legs[name]["vec"]):
            doc_of = {cid: d for cid, _, d in kw + vec}
            fused = fuse([(c, s) for c, s, _ in kw], [(c, s) for c, s, _ in vec], alpha, fusion)
            out.append(doc_ranking(doc_of[c] for c, _ in fused))
        return out

    sweep = []
    for fusion in FUSIONS:
        for alpha in ALPHAS:
            sweep.append({"alpha": alpha, "fusion": fusion,
                          "tune": score("tune", hybrid_lists("tune", alpha, fusion))[SELECT_BY],
                          "report": score("report", hybrid_lists("report", alpha, fusion))[SELECT_BY]})
    best = max(sweep, key=lambda s: (s["tune"], -abs(s["alpha"] - 0.5)))

    # the chosen setting through the store's own hybrid search, timed
    lat, ranked = [], []
    for e, v in zip(report_q, legs["report"]["vecs"]):
        t = time.perf_counter()
        hits = store.hybrid_search(e.question, v, k, best["alpha"], best["fusion"])
        lat.append(time.perf_counter() - t)
        ranked.append(doc_ranking(h.doc_id for h in hits))
    hybrid = score("report", ranked)
    if abs(hybrid[SELECT_BY] - best["report"]) > 1e-3:
        raise AssertionError(f"store hybrid ({hybrid[SELECT_BY]}) disagrees with the sweep ({best['report']})")
    modes = {
        "keyword": score("report", [doc_ranking(d for *_, d in kw) for kw in legs["report"]["kw"]]),
        "vector": score("report", [doc_ranking(d for *_, d in vec) for vec in legs["report"]["vec"]]),
        "hybrid": {"alpha": best["alpha"], "fusion": best["fusion"], **hybrid},
    }
    return {
        "dataset": gs.name, "split": report_split, "queries": len(report_q), "tune_queries": len(tune_q),
        "tuned_on": tuned_on, "documents": len(gs.documents), "chunks": store.count(),
        "ingest": ingest.model_dump(mode="json"), "modes": modes, "sweep": sweep, "reference": reference,
        "hybrid_latency_ms": {"p50": round(1000 * float(np.percentile(lat, 50)), 2),
                              "p95": round(1000 * float(np.percentile(lat, 95)), 2)} if lat else {},
        "seconds": {"index": round(t_index, 1), "embedded": report.embedded,
                    "total": round(time.perf_counter() - t_start, 1)},
    }


def print_report(r: dict[str, Any], console: Console) -> None:
    metrics = list(RETRIEVAL_METRICS)
    t = Table(title=f"{r['dataset']} {r['split']}: {r['queries']} queries over {r['documents']} documents "
                    f"({r['chunks']} chunks); hybrid tuned on {r['tune_queries']} queries ({r['tuned_on']})")
    t.add_column("mode")
    for m in metrics:
        t.add_column(m, justify="right")
    for mode, vals in r["modes"].items():
        label = mode if mode != "hybrid" else f"hybrid (alpha {vals['alpha']}, {vals['fusion']})"
        t.add_row(label, *(f"{vals[m]:.4f}" for m in metrics))
    console.print(t)
    if r["reference"]:
        ref = Table(title="published reference figures (measured elsewhere)")
        ref.add_column("figure")
        ref.add_column("value", justify="right")
        for name, v in r["reference"].items():
            ref.add_row(name, f"{v:.3f}")
        console.print(ref)
    sw = Table(title=f"hybrid sweep ({'nDCG@10'}): tuning queries / report queries")
    sw.add_column("alpha")
    for f in FUSIONS:
        sw.add_column(f, justify="right")
    for a in ALPHAS:
        row = [f"{s['tune']:.4f} / {s['report']:.4f}" for f in FUSIONS for s in r["sweep"] if s["alpha"] == a and s["fusion"] == f]
        sw.add_row(f"{a:.1f}", *row)
    console.print(sw)
    best_single = max(r["modes"]["keyword"]["ndcg@10"], r["modes"]["vector"]["ndcg@10"])
    console.print(f"hybrid - best single leg, nDCG@10: {r['modes']['hybrid']['ndcg@10'] - best_single:+.4f}; "
                  f"hit@1: {r['modes']['hybrid']['hit@1'] - max(r['modes']['keyword']['hit@1'], r['modes']['vector']['hit@1']):+.4f}; "
                  f"hybrid p50 {r['hybrid_latency_ms'].get('p50')} ms; indexing {r['seconds']['index']} s "
                  f"({r['seconds']['embedded']} texts embedded)")
