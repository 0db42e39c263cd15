"""The embedded LanceDB store: the shared contract, plus persistence and crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from declrag.config import IngestConfig
from declrag.errors import DeclragError
from declrag.stores import open_store
from declrag.stores._lancedb import LanceStore, vector_scores
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import StoreContract, corpus


class TestLanceStore(StoreContract):
    @pytest.fixture
    def make_store(self, tmp_path):
        n = iter(range(1000))
        return lambda: LanceStore(tmp_path / f"s{next(n)}")


def test_reopen_sees_committed_data(tmp_path):
    emb = HashEmbedder()
    s, _ = open_store(tmp_path / "s", IngestConfig())
    s.upsert(*corpus(emb))
    again, meta = open_store(tmp_path / "s")
    assert again.count() == 10 and meta.ingest == IngestConfig()
    assert again.keyword_search("Colosseum")[0].chunk.id == "rome#1"


def test_a_store_made_before_sections_and_headers_reads_and_takes_new_chunks(tmp_path):
    import dataclasses
    import json

    emb = HashEmbedder()
    docs, chunks, vecs = corpus(emb)
    s, _ = open_store(tmp_path / "s", IngestConfig(context="none"))
    s.upsert(docs[:1], chunks[:3], vecs[:3])
    table = s._table("chunks")  # as a store of format 1 wrote it: no section, header or readers column
    table.drop_columns(["section", "header", "readers"])
    s._table("documents").drop_columns(["readers"])
    meta = json.loads((tmp_path / "s" / "store.json").read_text())
    meta["format"] = 1
    del meta["ingest"]["context"]
    (tmp_path / "s" / "store.json").write_text(json.dumps(meta))
    old, read = open_store(tmp_path / "s")
    assert read.ingest.context == "none" and old.count() == 3
    assert old.get([chunks[0].id])[0] == dataclasses.replace(chunks[0], readers=())  # missing columns: '' and ()
    assert old.count({"readers": "*unlabelled"}) == 3 and old.documents()["paris"].readers == ()
    old.upsert(docs[1:], [dataclasses.replace(c, section="Intro") for c in chunks[3:]], vecs[3:])
    assert old.count() == 10 and old.get([chunks[3].id])[0].section == "Intro"
    assert old.keyword_search("Colosseum")[0].chunk.id == "rome#1"
    assert old.get([chunks[0].id, chunks[3].id])[1].readers == chunks[3].readers == ("eng", "hr")
    assert old.relabel({"paris": ("hr",)}) == 3 and old.count({"readers": "hr"}) == 5  # paris's 3, berlin's 2


def test_a_second_handle_sees_new_commits(tmp_path):
    emb = HashEmbedder()
    a, b = LanceStore(tmp_path / "s"), LanceStore(tmp_path / "s")
    docs, chunks, vecs = corpus(emb)
    a.upsert(docs[:1], chunks[:3], vecs[:3])
    assert b.count() == 3
    a.upsert(docs[1:], chunks[3:], vecs[3:])
    assert b.count() == 10


def test_store_refuses_other_ingest_settings_and_wrong_dimensions(tmp_path):
    open_store(tmp_path / "s", IngestConfig())
    other = IngestConfig.model_validate({"chunker": {"name": "recursive"}})
    with pytest.raises(DeclragError, match="other ingest settings"):
        open_store(tmp_path / "s", other)
    s = LanceStore(tmp_path / "s")
    s.upsert(*corpus(HashEmbedder(64)))
    docs, chunks, vecs = corpus(HashEmbedder(32))
    with pytest.raises(DeclragError, match="dimension"):
        s.upsert(docs, chunks, vecs)
    with pytest.raises(DeclragError, match="dimension"):
        s.vector_search(np.ones(32, dtype=np.float32))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file").write_text("x")
    with pytest.raises(DeclragError, match="not a declrag store"):
        open_store(tmp_path / "junk")


def test_metrics_rank_alike():
    sims = np.array([0.9, 0.1, -0.3, 0.5])
    orders = {m: list(np.argsort(-vector_scores(sims, m))) for m in ("cosine", "dot", "l2")}
    assert orders["cosine"] == orders["dot"] == orders["l2"] == [0, 3, 1, 2]


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from declrag.config import IngestConfig, ChunkerConfig
    from declrag.ingest.indexer import Indexer
    from declrag.stores import open_store
    from declrag.testing import HashEmbedder

    class Slow(HashEmbedder):
        def embed_documents(self, texts, progress=None):
            time.sleep(0.3)
            return super().embed_documents(texts, progress)

    ingest = IngestConfig(chunker=ChunkerConfig(chunk_size=16, overlap=0))
    store, meta = open_store(sys.argv[1], ingest)
    Indexer(store, meta.ingest, Slow(), progress=False, batch_chunks=40).index_paths([sys.argv[2]])
""")


def test_killed_indexing_leaves_a_usable_store_and_resumes(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(60):
        (docs / f"d{i:02d}.txt").write_text(" ".join(f"word{i} token{j} filler" for j in range(30)))
    store_dir = tmp_path / "store"
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(store_dir), str(docs)])
    versions = store_dir / "lance" / "chunks.lance" / "_versions"
    deadline = time.time() + 120
    while time.time() < deadline and not (versions.exists() and len(os.listdir(versions)) >= 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store, _ = open_store(store_dir)
    partial = store.count()
    assert 0 < partial < 60 * 6
    recs = store.documents()
    for rec in recs.values():  # every recorded document has exactly its chunks
        assert store.count({"doc_id": rec.id}) == rec.chunks
    assert store.keyword_search("word3 token1")
    # the rerun finishes the job and equals a clean build
    subprocess.run([sys.executable, str(script), str(store_dir), str(docs)], check=True)
    subprocess.run([sys.executable, str(script), str(tmp_path / "clean"), str(docs)], check=True)
    done, clean = open_store(store_dir)[0], open_store(tmp_path / "clean")[0]
    assert done.count() == clean.count() and len(done.documents()) == 60


def test_keyword_index_is_saved_and_reused(tmp_path):
    emb = HashEmbedder()
    s = LanceStore(tmp_path / "s")
    s.upsert(*corpus(emb))
    first = [h.chunk.id for h in s.keyword_search("capital of France")]
    saved = list((tmp_path / "s" / "search").glob("bm25-*"))
    assert len(saved) == 1 and (saved[0] / "rows.json").exists()
    again = LanceStore(tmp_path / "s")
    assert [h.chunk.id for h in again.keyword_search("capital of France")] == first
    docs, chunks, vecs = corpus(emb)
    again.upsert(docs[:1], chunks[:1], vecs[:1])  # a new version gets a new index; the old one goes
    again.keyword_search("capital")
    assert [p.name for p in (tmp_path / "s" / "search").glob("bm25-*")] != [saved[0].name]
    assert len(list((tmp_path / "s" / "search").glob("bm25-*"))) == 1


def test_large_store_vector_search_matches_exact_search(tmp_path, monkeypatch):
    """Above EXACT_ROWS the float16 pre-selection is used; results equal an exact float32 scan."""
    import declrag.stores._snapshot as mod

    monkeypatch.setattr(mod, "EXACT_ROWS", 100)
    rng = np.random.default_rng(0)
    n, dim = 3000, 64
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    from declrag.types import Chunk, Document

    docs = [Document(id=f"d{i}", text=f"text {i}") for i in range(n)]
    chunks = [Chunk(id=f"d{i}#0", doc_id=f"d{i}", text=f"text {i}", start=0, end=len(f"text {i}"), position=0)
              for i in range(n)]
    s = LanceStore(tmp_path / "s")
    s.upsert(docs, chunks, vecs)
    for q in vecs[:20] + 0.1 * rng.standard_normal((20, dim)).astype(np.float32):
        q = q / np.linalg.norm(q)
        exact = np.argsort(-(vecs @ q))[:50]
        hits = s.vector_search(q, 50)
        assert [h.chunk.id for h in hits] == [f"d{i}#0" for i in exact]
        assert hits[0].score == pytest.approx(float(vecs[exact[0]] @ q), abs=1e-6)
        filtered = s.vector_search(q, 10, {"doc_id": {"$in": [f"d{i}" for i in range(0, n, 2)]}})
        assert all(int(h.doc_id[1:]) % 2 == 0 for h in filtered) and len(filtered) == 10


def test_a_store_of_another_embedder_backend_is_refused_and_the_message_says_which(tmp_path):
    from declrag.config import EmbedderConfig

    open_store(tmp_path / "s", IngestConfig(embedder=EmbedderConfig(backend="onnx-int8")))
    with pytest.raises(DeclragError) as e:
        open_store(tmp_path / "s", IngestConfig())
    assert "backend=onnx-int8) than asked" in e.value.message and e.value.message.endswith("backend=onnx)")
    assert "--backend" in e.value.hint


def test_backends_come_from_one_table_and_local_folders_are_a_capability(tmp_path):
    from declrag.stores import local_folder
    from declrag.stores._opening import _backend
    from declrag.stores.backends import BACKENDS
    from declrag.stores.base import StoreMeta
    from declrag.stores.weaviate import WeaviateStore

    assert _backend(str(tmp_path)) is LanceStore and _backend("file:///x") is LanceStore
    assert _backend("weaviate://h:1/C") is WeaviateStore and _backend("WEAVIATES://h:1/C") is WeaviateStore
    assert {name for name, _ in BACKENDS.values()} == {"lancedb", "weaviate"}
    assert local_folder(tmp_path / "s") == tmp_path / "s" and local_folder(f"file://{tmp_path}/s") == tmp_path / "s"
    assert local_folder("weaviate://127.0.0.1:8080/C") is None and local_folder("s3://bucket/x") is None
    with pytest.raises(DeclragError, match="no backend for s3://"):
        _backend("s3://bucket/x")
    with pytest.raises(ValueError, match="unknown backend 'milvus'"):
        StoreMeta(backend="milvus")


def test_warm_up_builds_the_search_indexes_before_the_first_search(tmp_path):
    s, _ = open_store(tmp_path / "s", IngestConfig())
    s.upsert(*corpus(HashEmbedder()))
    again = LanceStore(tmp_path / "s")
    again.warm_up()
    snap = again._snapshot()
    assert "keyword" in vars(snap)  # loaded by warm_up, not by a search
    assert list((tmp_path / "s" / "search").glob("bm25-*"))


@pytest.mark.parametrize("n", [1_000, 60_000, 300_000])
def test_top_k_is_exact_with_its_sampled_threshold(n):
    """Long arrays take the sampled-threshold path: the same k values as a full sort, and the same rows above
    the k-th value, on dense, sparse, tied and negative scores."""
    from declrag.stores.bm25 import top_k

    rng = np.random.default_rng(n)
    cases = [rng.random(n), rng.standard_normal(n), np.where(rng.random(n) < 0.2, rng.integers(1, 4, n), 0),
             np.where(rng.random(n) < 0.001, rng.random(n), 0.0)]  # fewer positives than k: the fallback
    for s in (c.astype(np.float32) for c in cases):
        for k in (1, 10, 100, 500):
            for positive in (False, True):
                rows, vals = top_k(s, k, positive)
                keep = np.flatnonzero(s > 0) if positive else np.arange(n)
                ref = keep[np.lexsort((keep, -s[keep]))][:k]
                assert np.array_equal(vals, s[ref])
                assert np.array_equal(s[rows], vals) and len(set(rows)) == len(rows)
                if len(vals):
                    above = vals > vals[-1]
                    assert np.array_equal(rows[above], ref[above])


def test_a_store_missing_chunks_its_records_count_is_refused_before_anyone_measures_on_it(tmp_path):
    from declrag.ingest.corpus import checked

    store, _ = open_store(str(tmp_path / "s"), IngestConfig())
    docs, chunks, vecs = corpus(HashEmbedder())
    store.upsert(docs, chunks, vecs)
    assert checked(store).ok
    store._table("chunks").delete("doc_id = 'rome'")  # a lost write: the chunks gone, the record still there
    check = store.verify()
    assert not check.ok and check.expected == 10 and check.copies == {store.uri: 7}
    with pytest.raises(DeclragError) as e:
        checked(store)
    assert f"store {store.uri} is incomplete" in e.value.message and "holds 7 chunks" in e.value.message
    assert "declrag indexes rm" in e.value.hint


@pytest.mark.parametrize("lost", ["written again", "beyond repair"])
def test_a_store_a_copy_lost_chunks_of_while_it_was_written_is_built_again(tmp_path, monkeypatch, lost):
    """corpus_store: when the check right after writing a store had to write chunks again (a replicated server's
    node killed mid-write), the store is dropped and built from scratch, so that it scores as a clean build does
    (chunks written again move Weaviate's keyword statistics); a store found built is not built again."""
    from pathlib import Path

    from declrag.golden import load_golden
    from declrag.ingest.corpus import corpus_store

    real, checks = LanceStore.verify, []

    def lossy(self):
        check = real(self)
        checks.append(check)
        if len(checks) == 1 and lost == "written again":  # the check after the first build: a copy had lost 3
            check.repaired = 3  # chunks, written again
        elif len(checks) == 1:  # or it could not get them back
            check.problems.append("node n1 holds 10 of 10 chunks, 3 of them without their vector")
        return check

    monkeypatch.setattr(LanceStore, "verify", lossy)
    docs = load_golden(Path(__file__).parents[2] / "data" / "tiny" / "gold.jsonl").documents
    st, report = corpus_store(docs, IngestConfig(), "tiny", embedder=HashEmbedder(), progress=False, home=tmp_path)
    # built again from nothing (every document indexed anew, not found unchanged) and checked again
    assert report.rebuilt and report.indexed == len(docs) and report.unchanged == 0, report
    assert len(checks) == 2 and report.check is checks[1] and report.check.ok and report.check.repaired == 0
    assert st.count() == report.check.expected == report.chunks
    again, found = corpus_store(docs, IngestConfig(), "tiny", embedder=HashEmbedder(), progress=False, home=tmp_path)
    assert not found.rebuilt and found.indexed == 0 and again.count() == st.count()
