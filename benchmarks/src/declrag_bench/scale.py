"""`declrag bench scale`: search at 100k to 1M chunks on the embedded store and on Weaviate, with real questions.

The corpus. The real corpora (SciFact's 5,183 abstracts and SQuAD v1.1 dev's 2,067 paragraphs, default chunking,
vectors from the default embedder) are padded with *distractor* chunks up to each size. Embedding 1M real chunks
would take this 2-core machine many hours, so each distractor is 3 to 7 sentences of those real corpora, drawn at
random (seeded) and joined: BM25 sees the corpora's real vocabulary and term statistics. Its vector is the
normalised mean of its sentences' vectors (every sentence embedded once, with the ``onnx-int8`` backend, and
cached), which lies in the same region of the embedding space as text on those topics. Limits: a distractor is not
coherent prose, the pool is a seeded sample of 20,000 of the corpora's sentences (embedding all of them takes
most of an hour here), and its vector is a mean rather than an embedding of the joined text, so absolute quality at 1M
says how well the real documents still surface among a million topical look-alikes, not how a real 1M corpus
would score. The real questions (SciFact test claims, and SQuAD v1.1 questions) keep their real gold documents.

Each store is written once per size (and reused by later runs): reported are the write time, the first search's
time (building, or loading when saved before, the BM25 index and, from `declrag.stores._ann.ANN_ROWS` chunks up,
the vector index) and the peak memory of each; then
p50/p95 of keyword, vector and hybrid search with the query vectors computed beforehand (the query embedding's
own latency is reported beside), recall@10 of the vector leg against the exact scan, and nDCG@10 of the real
questions.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import replace
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from declrag.config import AnnConfig, EmbedderConfig, IngestConfig
from declrag.embed.embedder import Embedder
from declrag.golden import load_golden
from declrag.ingest.chunkers import Chunker
from declrag.metrics.retrieval import doc_ranking, retrieval_scores
from declrag.metrics.stats import latency_ms
from declrag.runtime.folders import cache_dir
from declrag.runtime.process_memory import MemoryTracker
from declrag.stores import child_uri, open_store
from declrag.text.sentences import sentence_spans
from declrag.types import Chunk, Document

DATASETS = ("scifact", "squad-v1.1")
SEED = 13
DISTRACTOR_SENTENCES = (3, 7)
BATCH = 50_000
SENTENCES = 20_000  # the distractors' sentence pool: a seeded sample of the real corpora's sentences
EXACT = AnnConfig(mode="exact")
#: with ``--readers``, document number j is readable by group ``g{p}`` for each p here with j % (100 // p) == 0: a
#: caller of one group is kept to p% of the documents (about p% of the chunks: distractors are one chunk each)
READER_SHARES = (10, 50)


def readers_of(number: int) -> tuple[str, ...]:
    """The readers of document ``number`` in a store built with ``--readers`` (`READER_SHARES`)."""
    return tuple(f"g{p}" for p in READER_SHARES if number % (100 // p) == 0)


def _embed(embedder: Embedder, texts: list[str], what: str, progress: bool) -> np.ndarray:
    """Document vectors with a progress bar (cached: a rerun reads them back)."""
    with tqdm(total=len(texts), desc=what, disable=not progress, unit="text") as bar:
        return embedder.embed_documents(texts, progress=bar.update)


class Corpus:
    """The real chunks, their vectors and questions, and the sentence pool the distractors are drawn from."""

    def __init__(self, queries_per_set: int, progress: bool):
        ingest = IngestConfig()
        embedder = Embedder(ingest.embedder)
        chunker = Chunker(ingest.chunker, embedder.tokens)
        self.docs: list[Document] = []
        self.chunks: list[Chunk] = []
        self.questions: list[tuple[str, dict[str, float]]] = []
        rng = random.Random(SEED)
        for name in DATASETS:
            gs = load_golden(name)
            self.docs += [Document(id=f"{name}:{d.id}", text=d.text, source=d.source, title=d.title, page=d.page)
                          for d in gs.documents]
            split = "test" if "test" in gs.splits else next(iter(gs.splits))
            qs = [e for e in gs.split(split) if e.gold]
            for e in rng.sample(qs, min(queries_per_set, len(qs))):
                self.questions.append((e.question, {f"{name}:{g}": v for g, v in e.gold.items()}))
        for d in tqdm(self.docs, desc="chunking the real corpora", disable=not progress, unit="doc"):
            self.chunks += chunker(d)
        self.vectors = _embed(embedder, [c.text for c in self.chunks], "embedding the real chunks", progress)
        self.query_vectors = embedder.embed_queries([q for q, _ in self.questions])
        nonce, t = uuid.uuid4().hex, time.perf_counter()
        for q, _ in self.questions[:100]:
            embedder.embed_query(f"{q} {nonce}")  # texts never seen before: the cache never answers
        self.query_embed_ms = round(1000 * (time.perf_counter() - t) / min(100, len(self.questions)), 2)
        pool = [c.text[a:b] for c in self.chunks for a, b in sentence_spans(c.text) if len(c.text[a:b].split()) >= 4]
        self.sentences = sorted(set(random.Random(SEED).sample(pool, min(SENTENCES, len(pool)))))
        sent_embedder = Embedder(EmbedderConfig(backend="onnx-int8"))
        self.sentence_vectors = _embed(sent_embedder, self.sentences, "embedding sentences for distractors", progress)


def distractors(sentences: list[str], vectors: np.ndarray, start: int,
                count: int, first: int | None = None) -> tuple[list[Document], list[Chunk], np.ndarray]:
    """Distractors ``start`` .. ``start + count``: the same ones at every size and in every batch, because each
    is drawn by a generator seeded with its own number. ``first``: the document number of distractor 0, when the
    store's documents carry readers (`readers_of`); None: none do."""
    docs, chunks, vecs = [], [], np.zeros((count, vectors.shape[1]), dtype=np.float32)
    for j in range(count):
        i = start + j
        rng = np.random.default_rng((SEED, i))
        pick = rng.choice(len(sentences), rng.integers(*DISTRACTOR_SENTENCES, endpoint=True), replace=False)
        text = " ".join(sentences[p] for p in pick)
        v = vectors[pick].mean(axis=0)
        vecs[j] = v / np.linalg.norm(v)
        readers = readers_of(first + i) if first is not None else ()
        docs.append(Document(id=f"x{i}", text=text, source=f"/distractors/{i // 10_000}/{i}", title="",
                             readers=readers))
        chunks.append(Chunk(id=f"x{i}#0", doc_id=f"x{i}", text=text, start=0, end=len(text), position=0,
                            source=docs[-1].source, readers=readers))
    return docs, chunks, vecs


def _build(uri: str, corpus: Corpus, size: int, progress: bool, readers: bool = False) -> tuple[Any, dict[str, Any]]:
    """The store of ``size`` chunks: written unless a previous run left it complete. Its first search (loading the
    snapshot, and building or loading the BM25 and vector indexes) is timed and its memory measured either way.
    ``readers``: each document labelled with `readers_of` its number."""
    st, _ = open_store(uri, IngestConfig())
    have = st.count()
    tracker = MemoryTracker()
    info: dict[str, Any] = {"reused": have == size}
    if have != size:
        if have:
            st.drop()
            st, _ = open_store(uri, IngestConfig())
        t = time.perf_counter()
        with tracker.stage("write"):
            by_doc: dict[str, list[int]] = {}
            for i, c in enumerate(corpus.chunks):
                by_doc.setdefault(c.doc_id, []).append(i)
            rows = [i for d in corpus.docs for i in by_doc.get(d.id, [])]
            docs, chunks = corpus.docs, [corpus.chunks[i] for i in rows]
            if readers:
                label = {d.id: readers_of(j) for j, d in enumerate(docs)}
                docs = [replace(d, readers=label[d.id]) for d in docs]
                chunks = [replace(c, readers=label[c.doc_id]) for c in chunks]
            st.upsert(docs, chunks, corpus.vectors[rows])
            n_real = len(rows)
            bar = tqdm(total=size, initial=n_real, desc=f"writing {size:,} chunks", disable=not progress, unit="chunk")
            for start in range(0, size - n_real, BATCH):
                docs, chunks, vecs = distractors(corpus.sentences, corpus.sentence_vectors, start,
                                                 min(BATCH, size - n_real - start),
                                                 len(corpus.docs) if readers else None)
                st.upsert(docs, chunks, vecs)
                bar.update(len(chunks))
            bar.close()
            st.optimize()
            st.settle()
        info["write_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    with tracker.stage("first search"):
        st.hybrid_search(corpus.questions[0][0], corpus.query_vectors[0], 10)
    info["index_s"] = round(time.perf_counter() - t, 1)
    info["memory"] = tracker.to_dict()
    return st, info


def _measure(st, corpus: Corpus, ann: AnnConfig, progress: bool, label: str,
             truth: list[set[str]]) -> dict[str, Any]:
    """Latencies, recall and quality on ``st``. ``truth``: each question's exact top 10 (filled here when empty,
    from this store's exact scan; the embedded store is measured first, so Weaviate's HNSW is held to it)."""
    lat: dict[str, list[float]] = {"keyword": [], "vector": [], "vector_exact": [], "hybrid": []}
    recall: list[float] = []
    ndcg_h: list[float] = []
    ndcg_v: list[float] = []
    fill = not truth
    for (q, gold), v in tqdm(list(zip(corpus.questions, corpus.query_vectors)), desc=f"searching {label}",
                             disable=not progress, unit="q"):
        t0 = time.perf_counter()
        st.keyword_search(q, 10)
        t1 = time.perf_counter()
        approx = st.vector_search(v, 10, ann=ann)
        t2 = time.perf_counter()
        if fill:
            truth.append({h.chunk.id for h in st.vector_search(v, 10, ann=EXACT)})
        t3 = time.perf_counter()
        hybrid = st.hybrid_search(q, v, 10, 0.5, "relative", 100, None, ann)
        t4 = time.perf_counter()
        for k, dt in zip(lat, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            lat[k].append(dt)
        exact = truth[len(recall)]
        recall.append(len(exact & {h.chunk.id for h in approx}) / max(1, len(exact)))
        ndcg_h.append(retrieval_scores(doc_ranking(h.doc_id for h in hybrid), gold)["ndcg@10"])
        ndcg_v.append(retrieval_scores(doc_ranking(h.doc_id for h in approx), gold)["ndcg@10"])
    if not fill:
        del lat["vector_exact"]
    return {"latency_ms": {k: latency_ms(v) for k, v in lat.items()}, "recall@10": round(float(np.mean(recall)), 4),
            "ndcg@10": {"hybrid": round(float(np.mean(ndcg_h)), 4), "vector": round(float(np.mean(ndcg_v)), 4)}}


def _filtered(st, corpus: Corpus, ann: AnnConfig, progress: bool, label: str) -> dict[str, Any]:
    """For each share of `READER_SHARES`: a caller's searches, kept to that share of the store by a readers filter
    (inside the search, as `declrag serve --keys` keeps them): p50/p95 of keyword, vector (ANN) and hybrid search,
    the vector leg's recall@10 against the exact scan under the same filter, and how many hits came back."""
    out: dict[str, Any] = {}
    for p in READER_SHARES:
        where = {"readers": {"$in": [f"g{p}"]}}
        lat: dict[str, list[float]] = {"keyword": [], "vector": [], "hybrid": []}
        recall, short = [], 0
        for q, v in tqdm(list(zip((q for q, _ in corpus.questions), corpus.query_vectors)),
                         desc=f"searching {label}, {p}% readable", disable=not progress, unit="q"):
            t0 = time.perf_counter()
            st.keyword_search(q, 10, where)
            t1 = time.perf_counter()
            approx = st.vector_search(v, 10, where, ann=ann)
            t2 = time.perf_counter()
            hybrid = st.hybrid_search(q, v, 10, 0.5, "relative", 100, where, ann)
            t3 = time.perf_counter()
            for k, dt in zip(lat, (t1 - t0, t2 - t1, t3 - t2)):
                lat[k].append(dt)
            exact = {h.chunk.id for h in st.vector_search(v, 10, where, ann=EXACT)}
            recall.append(len(exact & {h.chunk.id for h in approx}) / max(1, len(exact)))
            short += len(hybrid) < 10 or any(f"g{p}" not in h.chunk.readers for h in hybrid)
        out[f"{p}%"] = {"latency_ms": {k: latency_ms(x) for k, x in lat.items()},
                        "recall@10": round(float(np.mean(recall)), 4), "short_or_foreign": short,
                        "chunks": st.count(where)}
    return out


def run(sizes: list[int], stores: list[str] | None = None, queries: int = 300, ann: AnnConfig | None = None,
        progress: bool = True, readers: bool = False) -> dict[str, Any]:
    """Each size on each store; ``readers``: the stores are built with readers (`readers_of`) and each run also
    measures searches kept to 10% and 50% of the store (`_filtered`)."""
    from declrag.runtime.process_memory import rss_bytes

    ann = ann or AnnConfig()
    t0 = time.perf_counter()
    corpus = Corpus(queries, progress)
    real = len(corpus.chunks)
    result: dict[str, Any] = {
        "real_chunks": real, "questions": len(corpus.questions), "sentences": len(corpus.sentences),
        "query_embedding_ms_mean": corpus.query_embed_ms, "ann": ann.model_dump(), "runs": []}
    for size in sorted(sizes):
        if size < real:
            raise ValueError(f"--chunks {size} is below the real corpora's {real} chunks")
        truth: list[set[str]] = []
        for where in ["embedded", *[s for s in stores or [] if s != "embedded"]]:
            base = str(cache_dir() / "bench-scale") if where == "embedded" else where
            uri = child_uri(base, f"scale-{size}" + ("-readers" if readers else ""))
            st, build = _build(uri, corpus, size, progress, readers)
            row = {"store": "embedded" if where == "embedded" else st.backend, "chunks": size, "build": build,
                   **_measure(st, corpus, ann, progress, f"{size:,} on {where}", truth)}
            if readers:
                row["filtered"] = _filtered(st, corpus, ann, progress, f"{size:,} on {where}")
            rss = rss_bytes()
            row["rss_mb_after"] = round(rss / 2**20) if rss else None
            result["runs"].append(row)
            st.close()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"Search at scale: {r['real_chunks']:,} real chunks + distractors, {r['questions']} real "
                    f"questions; latency in ms (p50 / p95) with query vectors precomputed (embedding a query: "
                    f"{r['query_embedding_ms_mean']} ms mean); ANN {r['ann']}")
    for c in ("store", "chunks", "build s", "peak MB", "keyword", "vector (ANN)", "vector exact", "hybrid",
              "recall@10", "nDCG@10 hybrid", "nDCG@10 vector"):
        t.add_column(c, justify="left" if c == "store" else "right")
    for row in r["runs"]:
        lat, b = row["latency_ms"], row["build"]
        peak = (b.get("memory") or {}).get("peak_mb")
        t.add_row(row["store"], f"{row['chunks']:,}",
                  f"{'reused' if b.get('reused') else b['write_s']} + {b['index_s']}", f"{peak or '-'}",
                  *(f"{lat[k]['p50']} / {lat[k]['p95']}" if k in lat else "-"
                    for k in ("keyword", "vector", "vector_exact", "hybrid")),
                  f"{row['recall@10']:.3f}", f"{row['ndcg@10']['hybrid']:.4f}", f"{row['ndcg@10']['vector']:.4f}")
    console.print(t)
    rows = [row for row in r["runs"] if row.get("filtered")]
    if not rows:
        return
    f = Table(title="A caller kept to a share of the store by a readers filter (inside the search): p50 in ms, and "
                    "as a ratio of the same search unfiltered")
    for c in ("store", "chunks", "readable", "keyword", "vector (ANN)", "hybrid", "recall@10", "short or foreign"):
        f.add_column(c, justify="left" if c == "store" else "right")
    for row in rows:
        for share, m in row["filtered"].items():
            cells = [f"{m['latency_ms'][k]['p50']} ({m['latency_ms'][k]['p50'] / row['latency_ms'][k]['p50']:.2f}x)"
                     for k in ("keyword", "vector", "hybrid")]
            f.add_row(row["store"], f"{row['chunks']:,}", f"{share} ({m['chunks']:,})", *cells,
                      f"{m['recall@10']:.3f}", str(m["short_or_foreign"]))
    console.print(f)
