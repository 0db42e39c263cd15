"""`declrag bench embed`: throughput and retrieval quality of each embedder backend, in one run.

Speed: the chunks `declrag index --dataset squad-v2.0` makes (the demo's corpus, default chunking) are embedded
by every backend into a throw-away cache, so nothing is read from the real one. The chunks are cut into slices
and the backends take turns on each slice, so that a machine busy with other work slows every backend alike.
Reported: chunks/s (wall clock) and chunks per CPU-second of this process (steadier on a shared machine),
the time the tokenizer alone takes (the same tokenizer for every backend), single-query latency on distinct
questions, and each backend's cosine to the first backend's vectors (torch by default).

Quality: `declrag bench retrieval` (keyword, vector and tuned hybrid nDCG@10 on held-out queries) on each
dataset, once per backend, with the same chunking.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from declrag.config import ChunkerConfig, EmbedderConfig, IngestConfig
from declrag.embed._onnx_backend import BACKENDS
from declrag.embed.embedder import Embedder, EmbeddingCache
from declrag.golden import load_golden
from declrag.ingest.chunkers import Chunker
from declrag.metrics.stats import latency_ms


def _chunks(dataset: str, ingest: IngestConfig, embedder: Embedder) -> tuple[list[str], list[str]]:
    gs = load_golden(dataset)
    chunker = Chunker(ingest.chunker, embedder.tokens)
    texts = [c.text for d in gs.documents for c in chunker(d)]
    questions = list(dict.fromkeys(e.question for s in gs.splits for e in gs.split(s)))
    return texts, questions


def speed(backends: tuple[str, ...], dataset: str = "squad-v2.0", batch_size: int = 64, slices: int = 4,
          queries: int = 200, progress: bool = True) -> dict[str, Any]:
    ingest = IngestConfig()
    base = Embedder(ingest.embedder)  # its tokenizer only: no weights are loaded
    texts, questions = _chunks(dataset, ingest, base)
    order = np.random.default_rng(13).permutation(len(texts))  # slices of like length mix
    parts = [[texts[i] for i in order[j::slices]] for j in range(slices)]
    rows: dict[str, dict[str, Any]] = {}
    vectors: dict[str, dict[str, np.ndarray]] = {b: {} for b in backends}
    with tempfile.TemporaryDirectory() as tmp:
        embedders = {}
        for b in backends:
            cfg = EmbedderConfig(backend=b, batch_size=batch_size)  # type: ignore[arg-type]
            e = Embedder(cfg, EmbeddingCache(Path(tmp) / f"{b}.sqlite3"))
            t = time.perf_counter()
            e.embed_queries(["warm-up: load (and, the first time, export) the model"])
            embedders[b] = e
            rows[b] = {"load_s": round(time.perf_counter() - t, 2), "wall_s": 0.0, "cpu_s": 0.0}
        bar = tqdm(total=len(texts) * len(backends), desc="embedding", unit="chunk", disable=not progress)
        for part in parts:
            for b, e in embedders.items():
                t, c = time.perf_counter(), time.process_time()
                v = e.embed_documents(part)
                rows[b]["wall_s"] += time.perf_counter() - t
                rows[b]["cpu_s"] += time.process_time() - c
                vectors[b].update(zip(part, v))
                bar.update(len(part))
        bar.close()
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(base.folder))  # the tokenizer every backend calls
        t = time.perf_counter()
        for i in range(0, len(texts), batch_size):
            tok(texts[i : i + batch_size], padding=True, truncation=True, max_length=256)
        tokenize_s = time.perf_counter() - t
        qs = questions[:queries]
        for b, e in embedders.items():
            lat = []
            for q in qs:  # distinct questions: the cache never answers
                t = time.perf_counter()
                e.embed_query(q)
                lat.append(time.perf_counter() - t)
            rows[b]["query_ms"] = latency_ms(lat)
    ref = np.stack([vectors[backends[0]][t] for t in texts])
    for b in backends:
        r = rows[b]
        cos = (np.stack([vectors[b][t] for t in texts]) * ref).sum(axis=1)
        r.update(chunks_per_s=round(len(texts) / r["wall_s"], 1), chunks_per_cpu_s=round(len(texts) / r["cpu_s"], 1),
                 wall_s=round(r["wall_s"], 1), cpu_s=round(r["cpu_s"], 1),
                 cosine_to_first={"min": round(float(cos.min()), 4), "mean": round(float(cos.mean()), 5)})
        r["speedup"] = round(rows[backends[0]]["wall_s"] / r["wall_s"], 2)
        r["speedup_cpu"] = round(rows[backends[0]]["cpu_s"] / r["cpu_s"], 2)
    return {"dataset": dataset, "chunks": len(texts), "batch_size": batch_size, "slices": slices,
            "tokenize_s": round(tokenize_s, 2), "queries": len(qs), "backends": rows}


def quality(backends: tuple[str, ...], datasets: tuple[str, ...], progress: bool = True) -> dict[str, Any]:
    from .retrieval import run as retrieval_run

    out: dict[str, Any] = {}
    for ds in datasets:
        out[ds] = {}
        for b in backends:
            ingest = IngestConfig(chunker=ChunkerConfig(), embedder=EmbedderConfig(backend=b))  # type: ignore[arg-type]
            r = retrieval_run(ds, ingest=ingest, progress=progress)
            out[ds][b] = {"queries": r["queries"], "split": r["split"], "chunks": r["chunks"],
                          "vector_ndcg@10": r["modes"]["vector"]["ndcg@10"],
                          "hybrid_ndcg@10": r["modes"]["hybrid"]["ndcg@10"],
                          "hybrid_alpha": r["modes"]["hybrid"]["alpha"], "index_s": r["seconds"]["index"]}
        first = out[ds][backends[0]]
        for b in backends:
            for m in ("vector_ndcg@10", "hybrid_ndcg@10"):
                out[ds][b][f"delta_{m}"] = round(out[ds][b][m] - first[m], 4)
    return out


def run(backends: tuple[str, ...] = BACKENDS, datasets: tuple[str, ...] = ("scifact", "squad-v1.1"),
        batch_size: int = 64, queries: int = 200, skip_quality: bool = False, progress: bool = True) -> dict[str, Any]:
    import os

    t0 = time.perf_counter()
    result: dict[str, Any] = {"load_avg_start": round(os.getloadavg()[0], 2),
                              "speed": speed(backends, batch_size=batch_size, queries=queries, progress=progress)}
    if not skip_quality:
        result["quality"] = quality(backends, datasets, progress)
    result["load_avg_end"] = round(os.getloadavg()[0], 2)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result


def print_report(r: dict[str, Any], console: Console) -> None:
    s = r["speed"]
    t = Table(title=f"Embedding {s['chunks']} chunks of {s['dataset']} (default chunking, batch {s['batch_size']}; "
                    f"load average {r['load_avg_start']} -> {r['load_avg_end']})")
    for c in ("backend", "chunks/s", "x", "chunks/CPU-s", "x CPU", "query p50 ms", "cosine to first (min / mean)",
              "load s"):
        t.add_column(c, justify="left" if c == "backend" else "right")
    for b, row in s["backends"].items():
        t.add_row(b, f"{row['chunks_per_s']}", f"{row['speedup']}", f"{row['chunks_per_cpu_s']}",
                  f"{row['speedup_cpu']}", f"{row['query_ms']['p50']}",
                  f"{row['cosine_to_first']['min']} / {row['cosine_to_first']['mean']}", f"{row['load_s']}")
    console.print(t)
    first = next(iter(s["backends"].values()))
    console.print(f"tokenizing alone: {s['tokenize_s']} s of the first backend's {first['wall_s']} s")
    for ds, rows in r.get("quality", {}).items():
        q = Table(title=f"Retrieval quality on {ds} (nDCG@10, held-out queries)")
        for c in ("backend", "vector", "delta", "hybrid", "delta", "index s"):
            q.add_column(c, justify="left" if c == "backend" else "right")
        for b, row in rows.items():
            q.add_row(b, f"{row['vector_ndcg@10']:.4f}", f"{row['delta_vector_ndcg@10']:+.4f}",
                      f"{row['hybrid_ndcg@10']:.4f}", f"{row['delta_hybrid_ndcg@10']:+.4f}", f"{row['index_s']}")
        console.print(q)
