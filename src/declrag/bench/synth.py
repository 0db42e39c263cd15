"""`declrag bench synth`: does a synthetic set rank retrieval configurations as the real golden set does?

On a set that has real questions, a synthetic set is made from its corpus only (`declrag.synth`), then 16
retrieval configurations (keyword, vector, and hybrid at alpha 0.25 / 0.5 / 0.75 with both fusions, each at
chunk sizes 256 and 512) are scored by nDCG@10 on the synthetic questions and on the real ones, over the same
indexes (both sets' gold ids are the corpus's own). Kendall tau between the two orderings of the configurations
is reported with a bootstrap interval (queries of both sets resampled), for the synthetic set's judged gold and
for seed-only gold (only the document a question was written from counts), as published evidence says the
difference matters (tau 0.157 seed-only vs 0.82-0.86 judged, Rahmani et al., SIGIR 2024). The grader that
judges the synthetic set's pools (a pooled document containing the reference answer is relevant) is run on the
real questions too and compared with their real judgements.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import kendalltau
from tqdm.auto import tqdm

from ..api import corpus_store
from ..config import ChunkerConfig, IngestConfig
from ..embed import Embedder, cache_dir
from ..golden import Example, load_golden
from ..metrics.retrieval import doc_ranking, ndcg_at_k
from ..synth.filters import QueryVectors, grader_agreement

CHUNK_SIZES = (256, 512)
LEGS: tuple[tuple[str, float | None, str], ...] = (
    ("keyword", None, ""), ("vector", None, ""),
    *(("hybrid", a, f) for a in (0.25, 0.5, 0.75) for f in ("relative", "ranked")))
DEPTH = 100  # chunks retrieved per query (documents ranked by their best chunk)
BOOTSTRAP = 1000


def configs() -> list[dict[str, Any]]:
    return [{"chunk_size": cs, "mode": m, "alpha": a, "fusion": f} for cs in CHUNK_SIZES for m, a, f in LEGS]


def label(c: dict[str, Any]) -> str:
    leg = c["mode"] if c["mode"] != "hybrid" else f"hybrid a={c['alpha']} {c['fusion']}"
    return f"{leg} @{c['chunk_size']}"


def _scores(store, vecs: np.ndarray, examples: list[Example], golds: list[dict[str, int]],
            cfgs: list[dict[str, Any]], progress: bool, what: str) -> np.ndarray:
    """nDCG@10 per (configuration, query); ``vecs``: the questions' embeddings."""
    out = np.zeros((len(cfgs), len(examples)))
    for j, (e, v) in enumerate(tqdm(list(zip(examples, vecs)), desc=what, unit="q", disable=not progress)):
        for i, c in enumerate(cfgs):
            if c["mode"] == "keyword":
                hits = store.keyword_search(e.question, DEPTH)
            elif c["mode"] == "vector":
                hits = store.vector_search(v, DEPTH)
            else:
                hits = store.hybrid_search(e.question, v, DEPTH, c["alpha"], c["fusion"])
            out[i, j] = ndcg_at_k(doc_ranking(h.doc_id for h in hits), golds[j], 10)
    return out


def tau_with_interval(a: np.ndarray, b: np.ndarray, seed: int = 13, rounds: int = BOOTSTRAP) -> dict[str, Any]:
    """Kendall tau between the configurations' mean scores on two query sets (rows: configurations, columns:
    queries), and its 95% bootstrap interval (each set's queries resampled with replacement)."""
    tau = float(kendalltau(a.mean(axis=1), b.mean(axis=1)).statistic)
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(rounds):
        ia, ib = rng.integers(0, a.shape[1], a.shape[1]), rng.integers(0, b.shape[1], b.shape[1])
        t = kendalltau(a[:, ia].mean(axis=1), b[:, ib].mean(axis=1)).statistic
        if not np.isnan(t):
            taus.append(float(t))
    lo, hi = np.percentile(taus, [2.5, 97.5]) if taus else (float("nan"), float("nan"))
    return {"tau": round(tau, 3), "ci95": [round(float(lo), 3), round(float(hi), 3)]}


def run(dataset: str, model: str | None = None, n: int = 300, seed: int = 13, real_split: str | None = None,
        real_limit: int = 1000, out: Path | None = None, progress: bool = True) -> dict[str, Any]:
    from ..synth import synthesize

    t0 = time.perf_counter()
    gs = load_golden(dataset)
    split = real_split or ("test" if "test" in gs.splits else next(iter(gs.splits)))
    real = [e for e in gs.split(split) if e.gold]
    if len(real) > real_limit:  # a seeded sample: every configuration scores the same questions
        real = [real[i] for i in sorted(random.Random(seed).sample(range(len(real)), real_limit))]
    folder = out or cache_dir() / "bench-synth" / f"{gs.name}-{(model or 'none').replace('/', '_')}-{n}-{seed}"
    report = synthesize(gs.documents, folder, n, model=model, seed=seed, force=True, progress=progress)
    syn = load_golden(str(folder))
    synthetic = [e for s in syn.splits.values() for e in s if e.gold]  # every split: no tuning happens here
    seed_only = [{e.metadata["source_doc"]: 1} for e in synthetic]
    embedder = Embedder()
    cfgs = configs()
    real_scores, syn_scores = np.zeros((len(cfgs), len(real))), np.zeros((len(cfgs), len(synthetic)))
    seed_scores = np.zeros_like(syn_scores)
    vectors = QueryVectors(embedder)  # each question embedded once: the chunk size does not change it
    real_vecs = vectors.embed_queries([e.question for e in real])
    syn_vecs = vectors.embed_queries([e.question for e in synthetic])
    for cs in CHUNK_SIZES:
        rows = [i for i, c in enumerate(cfgs) if c["chunk_size"] == cs]
        ingest = IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=cs, overlap=cs // 8))
        store, _ = corpus_store(gs.documents, ingest, gs.name, embedder=embedder, progress=progress)
        sub = [cfgs[i] for i in rows]
        real_scores[rows] = _scores(store, real_vecs, real, [e.gold for e in real], sub, progress, f"real @{cs}")
        syn_scores[rows] = _scores(store, syn_vecs, synthetic, [e.gold for e in synthetic], sub, progress,
                                   f"synthetic @{cs}")
        seed_scores[rows] = _scores(store, syn_vecs, synthetic, seed_only, sub, progress, f"seed-only @{cs}")
    with_answers = [e for e in real if e.answers]
    by_id = {d.id: d.text for d in gs.documents}
    agreement = grader_agreement([e.question for e in with_answers], [e.answers for e in with_answers],
                                 [e.gold for e in with_answers], store, vectors, by_id.__getitem__) \
        if with_answers else None
    return {
        "dataset": gs.name, "real_split": split, "real_questions": len(real), "synthetic_questions": len(synthetic),
        "generator": report.generator, "seed": seed, "synth": {"removed": report.removed, "kept": report.kept,
                                                               "judged_gold_added": report.judged_gold_added,
                                                               "lm": report.lm, "wall_s": report.wall_s},
        "configs": [{"config": label(c), "real": round(float(r.mean()), 4), "synthetic": round(float(s.mean()), 4),
                     "synthetic_seed_only": round(float(o.mean()), 4)}
                    for c, r, s, o in zip(cfgs, real_scores, syn_scores, seed_scores)],
        "grader_vs_qrels": agreement,
        "kendall_tau": {"judged_gold": tau_with_interval(syn_scores, real_scores, seed),
                        "seed_only_gold": tau_with_interval(seed_scores, real_scores, seed)},
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"{r['dataset']}: nDCG@10 of 16 retrieval configurations on {r['real_questions']} real "
                    f"({r['real_split']}) and {r['synthetic_questions']} synthetic questions ({r['generator']})")
    for col in ("configuration", "real", "synthetic", "synthetic, seed-only gold"):
        t.add_column(col, justify="left" if col == "configuration" else "right")
    for c in r["configs"]:
        t.add_row(c["config"], f"{c['real']:.4f}", f"{c['synthetic']:.4f}", f"{c['synthetic_seed_only']:.4f}")
    console.print(t)
    for k, v in r["kendall_tau"].items():
        console.print(f"Kendall tau, synthetic ({k.replace('_', ' ')}) vs real: {v['tau']:+.3f} "
                      f"[{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]")
    if g := r.get("grader_vs_qrels"):
        console.print(f"the answer-in-document grader against the real qrels, on the pools of {g['questions']} real "
                      f"questions: precision {g['precision']}, recall {g['recall']}")
    console.print(f"{r['wall_s']} s")
