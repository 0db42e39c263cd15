"""`declrag bench speed`: indexing throughput and query latency, beside bm25s and NumPy brute force.

Measured in one run, on the same machine and the same queries:
- indexing throughput on SciFact documents with a cold embedding cache, and the share of time per
  stage (read, chunk, embed, write);
- keyword, vector and hybrid latency (p50/p95, query embedding excluded) on the SciFact store and on a
  large store: every shared corpus chunked small, replicated until it holds ``large_chunks`` chunks;
- the same queries on bm25s (its own tokenizer and retrieve, k = 100) and on a NumPy brute-force
  matrix-vector product with top-100 selection.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from declrag.config import ChunkerConfig, EmbedderConfig, IngestConfig
from declrag.embed.embedder import Embedder, EmbeddingCache
from declrag.golden import load_golden
from declrag.ingest.chunkers import Chunker
from declrag.ingest.corpus import corpus_store
from declrag.ingest.indexer import Indexer
from declrag.metrics.stats import latency_ms
from declrag.stores import open_store
from declrag.stores.bm25 import top_k
from declrag.stores.fusion import MIN_CANDIDATES

K = MIN_CANDIDATES


def _time(fn, items, warmup: int = 5) -> dict[str, float | None]:
    for it in items[:warmup]:
        fn(it)
    lat = []
    for it in items:
        t = time.perf_counter()
        fn(it)
        lat.append(time.perf_counter() - t)
    return latency_ms(lat, 3)


def _rows(store) -> tuple[list[str], np.ndarray]:
    """The embedded store's texts and vectors, read from its Lance table, to build the baselines on the same rows."""
    import lancedb

    table = lancedb.connect(str(store.path / "lance")).open_table("chunks").to_arrow()
    return table.column("text").to_pylist(), np.stack(table.column("vector").to_numpy(zero_copy_only=False))


def _latencies(store, texts: list[str], vecs: np.ndarray) -> dict[str, Any]:
    import bm25s

    corpus, vectors = _rows(store)
    t0 = time.perf_counter()
    ref = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    ref.index(bm25s.tokenize(corpus, stopwords=None, show_progress=False), show_progress=False)
    bm25s_build = time.perf_counter() - t0
    matrix = np.ascontiguousarray(vectors)
    items = list(range(len(texts)))

    def bm25s_query(i):
        toks = bm25s.tokenize([texts[i]], stopwords="en", show_progress=False)
        return ref.retrieve(toks, k=min(K, len(corpus)), show_progress=False, n_threads=1)

    pre = [bm25s.tokenize([t], stopwords="en", show_progress=False) for t in texts]

    def bm25s_retrieve(i):
        return ref.retrieve(pre[i], k=min(K, len(corpus)), show_progress=False, n_threads=1)

    def numpy_query(i):
        return top_k(matrix @ vecs[i], K)

    return {
        "chunks": len(corpus),
        "keyword": _time(lambda i: store.keyword_search(texts[i], K), items),
        "vector": _time(lambda i: store.vector_search(vecs[i], K), items),
        "hybrid": _time(lambda i: store.hybrid_search(texts[i], vecs[i], 10, 0.5, "relative"), items),
        "bm25s": _time(bm25s_query, items),
        "bm25s_retrieve_only": _time(bm25s_retrieve, items),
        "numpy_bruteforce": _time(numpy_query, items),
        "bm25s_index_s": round(bm25s_build, 2),
    }


def run(large_chunks: int = 100_000, n_queries: int = 200, index_docs: int = 500,
        progress: bool = True) -> dict[str, Any]:
    embedder = Embedder(EmbedderConfig())
    scifact = load_golden("scifact")
    queries = [e.question for e in scifact.split("test")][:n_queries]
    squad = load_golden("squad-v1.1")
    dev = squad.split("dev")
    queries += [e.question for e in dev[:: max(1, len(dev) // n_queries)]][: max(0, n_queries - len(queries))]
    qvecs = embedder.embed_queries(queries)

    # 1. indexing throughput, cold embedding cache
    with tempfile.TemporaryDirectory() as tmp:
        ingest = IngestConfig()
        cold = Embedder(ingest.embedder, cache=EmbeddingCache(Path(tmp) / "emb.sqlite3"))
        st, meta = open_store(Path(tmp) / "store", ingest)
        docs = scifact.documents[:index_docs]
        t = time.perf_counter()
        rep = Indexer(st, meta.ingest, cold, progress=progress).index_documents(docs)
        wall = time.perf_counter() - t
        indexing = {"documents": len(docs), "chunks": rep.chunks, "wall_s": round(wall, 1),
                    "docs_per_s": round(len(docs) / wall, 2), "chunks_per_s": round(rep.chunks / wall, 2),
                    "share": {k: round(v / wall, 3) for k, v in rep.seconds.items()}}

    # 2. latency on the SciFact store (whole abstracts, the retrieval benchmark's default)
    sci_store, _ = corpus_store(scifact.documents, IngestConfig(chunker=ChunkerConfig(chunk_size=512, overlap=64)),
                                "scifact", embedder=embedder, progress=progress)
    small = _latencies(sci_store, queries, qvecs)

    # 3. latency on a large store: every shared corpus chunked small, replicated up to large_chunks
    base = [*scifact.documents, *squad.documents, *load_golden("squad-v2.0").documents,
            *load_golden("cmu-qa").documents]
    small_chunks = IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=48, overlap=8))
    chunker = Chunker(small_chunks.chunker, embedder.tokens)
    chunks_per_copy = sum(len(chunker(d)) for d in base)
    copies = max(1, -(-large_chunks // chunks_per_copy))
    docs = [d if r == 0 else replace(d, id=f"{d.id}~copy{r}") for r in range(copies) for d in base]
    big_store, _ = corpus_store(docs, small_chunks, f"bench-large-{large_chunks}", embedder=embedder, progress=progress)
    large = _latencies(big_store, queries, qvecs)
    return {"queries": len(queries), "indexing": indexing, "scifact": small, "large": large,
            "targets": {"hybrid_p50_ms_large": 15.0, "keyword_vs_bm25s_max_ratio": 3.0}}


def print_report(r: dict[str, Any], console: Console) -> None:
    ix = r["indexing"]
    console.print(f"indexing (cold embedding cache): {ix['documents']} SciFact documents, {ix['chunks']} chunks in "
                  f"{ix['wall_s']} s = {ix['docs_per_s']} docs/s, {ix['chunks_per_s']} chunks/s; time share: "
                  + ", ".join(f"{k} {v:.0%}" for k, v in ix["share"].items()))
    t = Table(title=f"query latency, ms p50 / p95, {r['queries']} queries, top {K}, query embedding excluded")
    t.add_column("measure")
    for name in ("scifact", "large"):
        t.add_column(f"{name} ({r[name]['chunks']:,} chunks)", justify="right")
    rows = [("declrag keyword", "keyword"), ("bm25s: tokenize + retrieve", "bm25s"),
            ("bm25s: retrieve only", "bm25s_retrieve_only"), ("declrag vector", "vector"),
            ("NumPy brute force", "numpy_bruteforce"), ("declrag hybrid (top 10)", "hybrid")]
    for label, key in rows:
        t.add_row(label, *(f"{r[n][key]['p50']:.2f} / {r[n][key]['p95']:.2f}" for n in ("scifact", "large")))
    t.add_row("keyword / bm25s (p50)",
              *(f"{r[n]['keyword']['p50'] / r[n]['bm25s']['p50']:.2f}x" for n in ("scifact", "large")))
    console.print(t)
    lg = r["large"]
    console.print(f"targets: hybrid p50 at {lg['chunks']:,} chunks {lg['hybrid']['p50']:.2f} ms (< 15); "
                  f"keyword / bm25s p50 {lg['keyword']['p50'] / lg['bm25s']['p50']:.2f}x (< 3)")
