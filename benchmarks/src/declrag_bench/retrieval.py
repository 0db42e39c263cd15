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
import re
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from declrag.config import Fusion, IngestConfig
from declrag.embed.embedder import Embedder
from declrag.errors import DeclragError
from declrag.golden import Example, find_spec, load_golden
from declrag.ingest.corpus import corpus_store
from declrag.ingest.indexer import Indexer
from declrag.metrics.passages import UNIT_WORDS, passage_scores, unit_of
from declrag.metrics.retrieval import RETRIEVAL_METRICS
from declrag.metrics.stats import latency_ms, percentiles
from declrag.stores import child_uri, open_store
from declrag.stores.fusion import MIN_CANDIDATES, fuse
from declrag.types import Hit

ALPHAS = tuple(round(a, 2) for a in np.arange(0.1, 0.91, 0.1))
FUSIONS: tuple[Fusion, ...] = ("relative", "ranked")
SELECT_BY = "ndcg@10"


def _halves(examples: list[Example], seed: int = 13) -> tuple[list[Example], list[Example]]:
    rng = random.Random(seed)
    coin = [rng.random() < 0.5 for _ in examples]
    return [e for e, c in zip(examples, coin) if c], [e for e, c in zip(examples, coin) if not c]


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {m: round(float(np.mean([r[m] for r in rows])), 4) for m in RETRIEVAL_METRICS} if rows else {}


def passage(h: Hit) -> tuple[str, int, int, str]:
    """A hit as passage-level scoring reads it: document, character span, text."""
    return h.doc_id, h.start, h.end, h.text


def scores_of(passages: list[tuple[str, int, int, str]], e: Example) -> dict[str, float]:
    """Every retrieval metric of a ranked list of passages for ``e``, in its unit: over the passages covering its
    gold spans, or holding its short answer, else over its gold documents (`declrag.metrics.passages`)."""
    scored = passage_scores(passages, list(e.gold_spans()), e.answers, e.gold)
    return scored[0] if scored else dict.fromkeys(RETRIEVAL_METRICS, 0.0)


def _questions(gs: Any, split: str | None, limit: int | None) -> tuple[str, list, list, str]:
    """The split reported on, the questions (with gold) the hybrid setting is chosen on and those it is reported
    on, and what it was chosen on: the train split when the report is on test, else a seeded half."""
    report_split = split or ("test" if "test" in gs.splits else next(iter(gs.splits)))
    report_q = [e for e in gs.split(report_split) if e.gold]
    if report_split == "test" and "train" in gs.splits:
        tune_q, tuned_on = [e for e in gs.split("train") if e.gold], "train split"
    else:
        tune_q, report_q = _halves(report_q)
        tuned_on = "a seeded half of the split (seed 13); figures are on the other half"
    if limit:
        tune_q, report_q = tune_q[:limit], report_q[:limit]
    if not tune_q or not report_q:
        raise DeclragError(f"{gs.name}: {len(tune_q) + len(report_q)} question(s) with gold documents in "
                           f"{report_split!r}: too few to choose the hybrid setting on some and report on others",
                           hint="use a set with at least two questions that have gold (declrag synth --n 50 or more)")
    return report_split, tune_q, report_q, tuned_on


def run(dataset: str, split: str | None = None, ingest: IngestConfig | None = None, limit: int | None = None,
        progress: bool = True, store: str | None = None) -> dict[str, Any]:
    """The benchmark on the embedded store; with ``store`` (e.g. ``weaviate://host:port/``) that backend is
    measured beside it (see `compare`)."""
    other = store
    t_start = time.perf_counter()
    gs = load_golden(dataset)
    try:
        reference = find_spec(dataset).reference
    except Exception:
        reference = {}
    report_split, tune_q, report_q, tuned_on = _questions(gs, split, limit)

    ingest = ingest or IngestConfig()
    embedder = Embedder(ingest.embedder)
    t0 = time.perf_counter()
    st, report = corpus_store(gs.documents, ingest, gs.name, embedder=embedder, progress=progress)
    t_index = time.perf_counter() - t0

    k = MIN_CANDIDATES
    legs: dict[str, dict[str, Any]] = {}
    for name, qs in (("tune", tune_q), ("report", report_q)):
        vecs = embedder.embed_queries([e.question for e in qs])
        kw, vec, seen = [], [], []
        for e, v in tqdm(list(zip(qs, vecs)), desc=f"searching ({name})", disable=not progress, unit="q"):
            by_kw, by_vec = st.keyword_search(e.question, k), st.vector_search(v, k)
            kw.append([(h.chunk.id, h.score) for h in by_kw])
            vec.append([(h.chunk.id, h.score) for h in by_vec])
            seen.append({h.chunk.id: passage(h) for h in (*by_kw, *by_vec)})
        legs[name] = {"kw": kw, "vec": vec, "vecs": vecs, "q": qs, "seen": seen}

    def score(name: str, ranked_lists: list[list[str]]) -> dict[str, float]:
        leg = legs[name]
        return _mean([scores_of([seen[c] for c in r], e) for r, e, seen in zip(ranked_lists, leg["q"], leg["seen"])])

    def hybrid_lists(name: str, alpha: float, fusion: Fusion) -> list[list[str]]:
        return [[str(c) for c, _ in fuse(kw, vec, alpha, fusion)]
                for kw, vec in zip(legs[name]["kw"], legs[name]["vec"])]

    sweep: list[dict[str, Any]] = []
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
        hits = st.hybrid_search(e.question, v, k, best["alpha"], best["fusion"])
        lat.append(time.perf_counter() - t)
        ranked.append(scores_of([passage(h) for h in hits], e))
    hybrid = _mean(ranked)
    if abs(hybrid[SELECT_BY] - best["report"]) > 1e-3:
        raise AssertionError(f"store hybrid ({hybrid[SELECT_BY]}) disagrees with the sweep ({best['report']})")
    modes = {
        "keyword": score("report", [[c for c, _ in kw] for kw in legs["report"]["kw"]]),
        "vector": score("report", [[c for c, _ in vec] for vec in legs["report"]["vec"]]),
        "hybrid": {"alpha": best["alpha"], "fusion": best["fusion"], **hybrid},
    }
    result = {
        "dataset": gs.name, "split": report_split, "queries": len(report_q), "tune_queries": len(tune_q),
        "tuned_on": tuned_on, "documents": len(gs.documents), "chunks": st.count(),
        "ingest": ingest.model_dump(mode="json"), "modes": modes, "sweep": sweep, "reference": reference,
        "unit": dict(Counter(str(unit_of(list(e.gold_spans()), e.answers, e.gold)) for e in report_q)),
        "hybrid_latency_ms": latency_ms(lat) if lat else {},
        "seconds": {"index": round(t_index, 1), "embedded": report.embedded,
                    "total": round(time.perf_counter() - t_start, 1)},
    }
    if other:
        result["backends"] = compare(gs.documents, ingest, embedder, legs["report"], modes, other, progress)
    return result


def _index_fresh(uri: str, documents, ingest: IngestConfig, embedder: Embedder, progress: bool):
    """A new store at ``uri`` holding ``documents``; the seconds spent chunking and writing (embeddings are
    cached by then, so both backends are timed on the same, embedding-free work)."""
    st, meta = open_store(uri, ingest)
    rep = Indexer(st, meta.ingest, embedder, progress=progress).index_documents(documents)
    st.optimize()
    st.settle()  # Weaviate: let keyword search see every write before measuring (not counted as indexing)
    return st, rep.seconds["chunk"] + rep.seconds["write"], rep.chunks


def compare(documents, ingest: IngestConfig, embedder: Embedder, report: dict[str, list], modes: dict[str, Any],
            base: str, progress: bool = True) -> dict[str, Any]:
    """The embedded store (the anchor) and the store at ``base`` side by side, each built fresh from the same
    chunks and vectors: keyword, vector and the chosen hybrid on the report queries (quality, mean top-10
    overlap with the anchor per query, latency p50/p95) and indexing throughput (chunks/s).

    The arms run back to back on each query (embedded, the store, and on Weaviate the same search through
    the client library's query API), so that load from elsewhere on the machine falls on all of them alike.
    On Weaviate a second pass breaks each query down (see `_breakdown`)."""
    out: dict[str, Any] = {}
    name = f"bench-{uuid.uuid4().hex[:8]}"
    alpha, fusion = modes["hybrid"]["alpha"], modes["hybrid"]["fusion"]
    k = MIN_CANDIDATES
    tops: dict[str, dict[str, list[list[str]]]] = {}
    stores: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for label, uri in (("embedded", str(Path(tmp) / name)), ("other", child_uri(base, name))):
                st, secs, n_chunks = _index_fresh(uri, documents, ingest, embedder, progress)
                stores[label] = st
                out[label] = {"store": st.uri, "backend": st.backend, "chunks": n_chunks, "index_s": round(secs, 2),
                              "chunks_per_s": round(n_chunks / secs, 1) if secs else None}
            arms: dict[str, Any] = {label: st for label, st in stores.items()}
            if stores["other"].backend == "weaviate":
                arms["client_api"] = stores["other"]
            runs = {
                "keyword": lambda st, e, v: st.keyword_search(e.question, k),
                "vector": lambda st, e, v: st.vector_search(v, k),
                "hybrid": lambda st, e, v: st.hybrid_search(e.question, v, k, alpha, fusion),
            }
            qv = list(zip(report["q"], report["vecs"]))
            for mode, fn in runs.items():
                lat: dict[str, list[float]] = {a: [] for a in arms}
                ranked: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
                top: dict[str, list[list[str]]] = {a: [] for a in arms}
                for e, v in tqdm(qv, desc=f"{mode}: {' / '.join(arms)}", disable=not progress, unit="q"):
                    for arm, st in arms.items():
                        t = time.perf_counter()
                        hits = (_client_search(st, mode, e.question, v, k, alpha, fusion) if arm == "client_api"
                                else fn(st, e, v))
                        lat[arm].append(time.perf_counter() - t)
                        ranked[arm].append(scores_of([passage(h) for h in hits], e))
                        top[arm].append([h.chunk.id for h in hits[:10]])
                for arm in arms:
                    tops.setdefault(arm, {})[mode] = top[arm]
                    row = {**_mean(ranked[arm]),
                           **latency_ms(lat[arm], suffix="_ms")}
                    if arm == "client_api":
                        out["other"].setdefault("client_api", {})[mode] = row
                    else:
                        out[arm][mode] = row
                if "client_api" in arms:
                    out["other"].setdefault("breakdown", {})[mode] = _breakdown(
                        stores["other"], lambda e, v, st=stores["other"], fn=fn: fn(st, e, v), qv, progress, mode)
        finally:
            if "other" in stores:
                stores["other"].drop()
            for st in stores.values():
                st.close()
    for mode in ("keyword", "vector", "hybrid"):
        for arm, row in (("other", out["other"][mode]), ("client_api", out["other"].get("client_api", {}).get(mode))):
            if row is None:
                continue
            a, b = tops["embedded"][mode], tops[arm][mode]
            row["top10_overlap"] = round(float(np.mean(
                [len(set(x) & set(y)) / max(len(x), len(y), 1) for x, y in zip(a, b)])), 4)
            row["max_metric_diff"] = round(max(abs(row[m] - out["embedded"][mode][m]) for m in RETRIEVAL_METRICS), 4)
    return out


_SEARCH_METRIC = re.compile(r'^weaviate_grpc_server_request_duration_seconds_(sum|count)\{grpc_service="weaviate\.v1\.'
                            r'Weaviate",method="Search",status="OK"\} (\S+)$', re.M)


def _server_seconds(url: str) -> tuple[float, float]:
    """The server's own total time in gRPC Search handlers and their count, from its Prometheus metrics."""
    with urllib.request.urlopen(url, timeout=10) as r:
        found = dict(_SEARCH_METRIC.findall(r.read().decode()))
    return float(found.get("sum", 0.0)), float(found.get("count", 0.0))


METRICS_PORT_OFFSET = 400  # scripts/weaviate.sh serves node N's Prometheus metrics at its REST port + 400


def _metrics_url(st) -> str | None:
    """The server's Prometheus metrics at scripts/weaviate.sh's port for the node (its REST port + 400), when
    they answer there with Weaviate's gRPC timings; else None (the breakdown then has no server times)."""
    t = st.target
    url = f"{'https' if t.secure else 'http'}://{t.host}:{t.port + METRICS_PORT_OFFSET}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return url if b"weaviate_grpc_server_request_duration_seconds" in r.read() else None
    except (OSError, ValueError):
        return None


class _TimedStub:
    """The store's gRPC stub with each ``Search`` call timed (the call as the client sees it)."""

    def __init__(self, stub, calls: list[float]):
        self._stub, self._calls = stub, calls

    def Search(self, *args, **kwargs):  # noqa: N802 (gRPC's method name)
        t0 = time.perf_counter()
        try:
            return self._stub.Search(*args, **kwargs)
        finally:
            self._calls.append(time.perf_counter() - t0)


def _time_searches(st, calls: list[float]) -> None:
    """Wrap the store's stub (the bench's own timer: the store carries none); `del st.search_stub` undoes it."""
    stub_of = st.search_stub
    st.search_stub = lambda: _TimedStub(stub_of(), calls)


def _breakdown(st, fn, qv: list, progress: bool, mode: str) -> dict[str, Any]:
    """Each query of a second pass on a Weaviate store split into: the server's own time (its gRPC Search
    handler, read from the server's Prometheus metrics before and after the query, where scripts/weaviate.sh's
    numbering finds them), the transport (the gRPC call as the client sees it, minus the server's time: the
    round trip, HTTP/2, message encoding on both sides, the gRPC library) and declrag's own code (the call
    minus the gRPC call: building the request, reading the reply into hits). p50 of each part, and of
    everything on top of the server's time (the parts' p50s need not add up)."""
    url = _metrics_url(st)
    total: list[float] = []
    server: list[float] = []
    calls: list[float] = []
    _time_searches(st, calls)
    try:
        for e, v in tqdm(qv, desc=f"{mode}: breakdown", disable=not progress, unit="q"):
            s0, n0 = _server_seconds(url) if url else (0.0, 0.0)
            t0 = time.perf_counter()
            fn(e, v)
            total.append(time.perf_counter() - t0)
            if url:
                s1, n1 = _server_seconds(url)
                if n1 - n0 != 1:  # another client searched meanwhile: this query's server time is unknown
                    server.append(float("nan"))
                else:
                    server.append(s1 - s0)
    finally:
        del st.search_stub  # the store's own method again
    if len(calls) != len(total):  # a retried request: the gRPC times do not pair with the queries
        return {"error": "requests were retried during the breakdown pass; rerun it"}
    T, G = np.array(total), np.array(calls)

    def p50(x) -> float | None:
        return percentiles(x, (50,), 1000.0, 3)["p50"]

    out: dict[str, Any] = {"total_ms": p50(T), "grpc_call_ms": p50(G), "declrag_ms": p50(T - G), "server_ms": None,
                           "transport_ms": None, "above_server_ms": None}
    if url:
        S = np.array(server)
        out.update(server_ms=p50(S), transport_ms=p50(G - S), above_server_ms=p50(T - S),
                   unpaired=int(np.isnan(S).sum()))
    return out


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
    console.print("scored over " + ", ".join(f"{UNIT_WORDS.get(u, u)} ({n} queries)"
                                             for u, n in sorted(r.get("unit", {}).items())))
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
        row = [f"{s['tune']:.4f} / {s['report']:.4f}"
               for f in FUSIONS for s in r["sweep"] if s["alpha"] == a and s["fusion"] == f]
        sw.add_row(f"{a:.1f}", *row)
    console.print(sw)
    best_single = max(r["modes"]["keyword"]["ndcg@10"], r["modes"]["vector"]["ndcg@10"])
    if r.get("backends"):
        print_backends(r["backends"], console)
    best_hit1 = max(r['modes']['keyword']['hit@1'], r['modes']['vector']['hit@1'])
    console.print(f"hybrid - best single leg, nDCG@10: {r['modes']['hybrid']['ndcg@10'] - best_single:+.4f}; "
                  f"hit@1: {r['modes']['hybrid']['hit@1'] - best_hit1:+.4f}; "
                  f"hybrid p50 {r['hybrid_latency_ms'].get('p50')} ms; indexing {r['seconds']['index']} s "
                  f"({r['seconds']['embedded']} texts embedded)")


def print_backends(b: dict[str, Any], console: Console) -> None:
    a, o = b["embedded"], b["other"]
    t = Table(title=f"embedded ({a['store']}) beside {o['backend']} ({o['store']}): same chunks and vectors, "
                    "report queries")
    for col in ("mode", "metric", "embedded", o["backend"], "difference", "top-10 overlap"):
        t.add_column(col, justify="left" if col in ("mode", "metric") else "right")
    for mode in ("keyword", "vector", "hybrid"):
        for i, m in enumerate(("ndcg@10", "hit@1", "hit@5", "hit@20", "recall@10")):
            t.add_row(mode if i == 0 else "", m, f"{a[mode][m]:.4f}", f"{o[mode][m]:.4f}",
                      f"{o[mode][m] - a[mode][m]:+.4f}", f"{o[mode]['top10_overlap']:.3f}" if i == 0 else "")
    console.print(t)
    api = o.get("client_api")
    lt = Table(title="query latency (ms, one client; the arms run back to back on each query) and indexing "
                     "throughput (chunking + writing; embeddings cached)")
    cols = ["", "embedded p50 / p95", f"{o['backend']} p50 / p95", "ratio"]
    if api:
        cols += ["client API p50 / p95", "ratio", "overlap"]
    for col in cols:
        lt.add_column(col, justify="right")
    for mode in ("keyword", "vector", "hybrid"):
        row = [mode, f"{a[mode]['p50_ms']:.2f} / {a[mode]['p95_ms']:.2f}",
               f"{o[mode]['p50_ms']:.2f} / {o[mode]['p95_ms']:.2f}",
               f"{o[mode]['p50_ms'] / max(a[mode]['p50_ms'], 1e-9):.1f}x"]
        if api:
            row += [f"{api[mode]['p50_ms']:.2f} / {api[mode]['p95_ms']:.2f}",
                    f"{api[mode]['p50_ms'] / max(a[mode]['p50_ms'], 1e-9):.1f}x", f"{api[mode]['top10_overlap']:.3f}"]
        lt.add_row(*row)
    lt.add_row("indexing, chunks/s", f"{a['chunks_per_s']}", f"{o['chunks_per_s']}",
               f"{(o['chunks_per_s'] or 0) / max(a['chunks_per_s'] or 1e-9, 1e-9):.2f}x", *([""] * 3 if api else []))
    console.print(lt)
    if o.get("breakdown"):
        bt = Table(title=f"{o['backend']} query breakdown, ms p50 (a second pass): server = its gRPC Search handler "
                         "(Prometheus); transport = the gRPC call minus that; declrag = the search minus the call")
        for col in ("", "total", "server", "transport", "declrag", "above server"):
            bt.add_column(col, justify="right")
        for mode, b in o["breakdown"].items():
            if "error" in b:
                bt.add_row(mode, b["error"], "", "", "", "")
                continue
            bt.add_row(mode, *(f"{b[c]:.2f}" if b.get(c) is not None else "-" for c in
                               ("total_ms", "server_ms", "transport_ms", "declrag_ms", "above_server_ms")))
        console.print(bt)
        if all(b.get("server_ms") is None for b in o["breakdown"].values()):
            console.print("no server times: the server's Prometheus metrics were not found at its REST port + "
                          f"{METRICS_PORT_OFFSET} (where scripts/weaviate.sh serves them)")


def _client_search(st, mode: str, query: str, vector, k: int, alpha: float, fusion: Fusion) -> list[Hit]:
    """The same search on a `WeaviateStore` through the client library's query API (``collection.query``,
    its objects turned into hits), as the store ran it before it sent its own gRPC requests: the reference
    arm of the breakdown."""
    from weaviate.classes.query import HybridFusion, MetadataQuery

    from declrag.stores.weaviate._wire import chunk_of, chunk_properties

    coll, props = st.collection(st.name), chunk_properties(st.layout)
    query, field = st.layout.query(query), st.layout.keyword  # sent as the store sends it
    if mode == "keyword":
        res = coll.query.bm25(query=query, query_properties=[field], limit=k, return_properties=props,
                              return_metadata=MetadataQuery(score=True))
        return [Hit.of(chunk_of(o), float(o.metadata.score), keyword=float(o.metadata.score))
                for o in res.objects if (o.metadata.score or 0) > 0]
    q = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
    if mode == "vector":
        res = coll.query.near_vector(near_vector=q, limit=k, return_properties=props,
                                     return_metadata=MetadataQuery(distance=True))
        return [Hit.of(chunk_of(o), 1.0 - float(o.metadata.distance), vector=1.0 - float(o.metadata.distance))
                for o in res.objects]
    res = coll.query.hybrid(query=query, vector=q, alpha=alpha, limit=k, query_properties=[field],
                            fusion_type=HybridFusion.RELATIVE_SCORE if fusion == "relative" else HybridFusion.RANKED,
                            return_metadata=MetadataQuery(score=True), return_properties=props)
    return [Hit.of(chunk_of(o), float(o.metadata.score)) for o in res.objects[:k]]
