"""Approximate vector search in the embedded store: recall against the exact scan, exact scores, filters that
stay exact, the index saved with its version, and the settings checked."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pydantic import ValidationError

from declrag.config import AnnConfig, RetrieveConfig
from declrag.stores._ann import nlist_for
from declrag.stores.base import Filter
from declrag.stores._lancedb import LanceStore
from declrag.types import Chunk, Document

N, DIM, CLUSTERS = 6000, 64, 40


def clustered(n: int, seed: int) -> np.ndarray:
    """Unit vectors around a few centres, as text embeddings are (not uniform on the sphere)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CLUSTERS, DIM))
    v = centres[rng.integers(0, CLUSTERS, n)] + 0.6 * rng.standard_normal((n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = LanceStore(tmp_path_factory.mktemp("ann") / "s")
    vecs = clustered(N, 7)
    docs = [Document(id=f"d{i}", text=f"doc {i}", source=f"/data/{'a' if i % 3 == 0 else 'b'}/{i}.txt",
                     title=f"T{i % 5}", page=i % 7) for i in range(N)]
    chunks = [Chunk(id=f"d{i}#0", doc_id=f"d{i}", text=f"doc {i}", start=0, end=5, position=0, source=d.source,
                    title=d.title, page=d.page) for i, d in enumerate(docs)]
    s.upsert(docs, chunks, vecs)
    return s


def ids(hits) -> list[str]:
    return [h.chunk.id for h in hits]


def recall(store, queries, ann: AnnConfig, where=None, k: int = 10) -> float:
    exact = AnnConfig(mode="exact")
    found = [len(set(ids(store.vector_search(q, k, where, ann))) & set(ids(store.vector_search(q, k, where, exact))))
             / max(1, len(store.vector_search(q, k, where, exact))) for q in queries]
    return float(np.mean(found))


def test_recall_against_the_exact_scan_and_nprobe_trades_it(store):
    queries = clustered(100, 99)
    lists = nlist_for(N)
    full = recall(store, queries, AnnConfig(mode="ivf", nprobe=lists))
    default = recall(store, queries, AnnConfig(mode="ivf"))
    one = recall(store, queries, AnnConfig(mode="ivf", nprobe=1, refine=1))
    assert full >= 0.99  # every list searched: only the 8-bit codes' preselection is approximate
    assert default >= 0.95
    assert one < default  # fewer lists: faster and worse, which is the knob compile turns


def test_scores_are_exact_and_the_index_is_saved_with_the_version(store):
    q = clustered(1, 3)[0]
    hits = store.vector_search(q, 10, ann=AnnConfig(mode="ivf"))
    vec = {c: v for c, v in zip([f"d{i}#0" for i in range(N)], clustered(N, 7))}
    assert [h.score for h in hits] == pytest.approx([float(vec[h.chunk.id] @ q) for h in hits], abs=1e-5)
    saved = list((store.path / "search").glob("ann-v*-sq8.faiss"))
    assert len(saved) == 1
    again = LanceStore(store.path)  # a second handle loads the saved index instead of building it
    assert ids(again.vector_search(q, 10, ann=AnnConfig(mode="ivf"))) == ids(hits)
    assert "ivf" in again._snapshot().__dict__ and saved[0].stat().st_mtime_ns == \
        next((store.path / "search").glob("ann-v*-sq8.faiss")).stat().st_mtime_ns


@pytest.mark.parametrize("where", [
    {"doc_id": {"$nin": [f"d{i}" for i in range(0, N, 2)]}},
    {"$and": [{"title": "T2"}, {"page": {"$gte": 3}}]},
    {"title": {"$in": ["T0", "T4"]}},
    {"page": 6, "title": "T1"},  # rare: about 1 row in 35 passes
])
def test_filters_under_ann_are_exact(store, where):
    f = Filter.of(where)
    queries = clustered(30, 5)
    for q in queries:
        for hits in (store.vector_search(q, 10, where, AnnConfig(mode="ivf")),
                     store.hybrid_search("doc", q, 10, 0.7, "relative", 100, where, AnnConfig(mode="ivf"))):
            assert hits and all(f.matches(dataclasses.asdict(h.chunk)) for h in hits)
    assert recall(store, queries, AnnConfig(mode="ivf"), where) >= 0.9


def test_small_stores_stay_exact_under_auto(store):
    q = clustered(1, 11)[0]
    assert ids(store.vector_search(q, 10)) == ids(store.vector_search(q, 10, ann=AnnConfig(mode="exact")))
    assert not store._snapshot().approximate(AnnConfig(), N)


def test_ann_settings_out_of_range_are_refused_by_name():
    for bad in ({"nprobe": 0}, {"refine": 0}, {"mode": "hnsw"}):
        with pytest.raises(ValidationError) as e:
            RetrieveConfig.model_validate({"ann": bad})
        assert next(iter(bad)) in str(e.value)


def test_compile_can_search_the_embedder_backend_and_the_ann_settings(tmp_path):
    from declrag.errors import DeclragError
    from declrag.optimize._space import apply, read_space

    space = tmp_path / "scale.yaml"
    space.write_text("""
name: scale
objective: {metrics: {ndcg@10: 1.0}}
params:
  backend: {path: ingest.embedder.backend, type: categorical, choices: [onnx, onnx-int8]}
  nprobe:  {path: retrieve.ann.nprobe, type: categorical, choices: [64, 384]}
  refine:  {path: retrieve.ann.refine, type: int, low: 1, high: 8}
""")
    sp = read_space(space)
    cfg = apply(sp.base, {"backend": "onnx-int8", "nprobe": 64, "refine": 2}, sp.params)
    assert cfg.ingest.embedder.backend == "onnx-int8" and (cfg.retrieve.ann.nprobe, cfg.retrieve.ann.refine) == (64, 2)
    assert cfg.ingest.digest() != apply(sp.base, {"backend": "onnx"}, sp.params).ingest.digest()  # another index
    space.write_text(space.read_text().replace("[64, 384]", "[0, 384]"))
    with pytest.raises(DeclragError) as e:
        read_space(space)
    assert "params.nprobe" in str(e.value) and "retrieve.ann.nprobe" in str(e.value)
