"""The Weaviate backend against a live server (started by scripts/weaviate.sh): the shared store contract,
the URI, ingest checks, crash-and-resume indexing, and the errors a user sees."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from declrag.config import IngestConfig
from declrag.errors import DeclragError
from declrag.stores import child_uri, list_stores, open_store
from declrag.stores.weaviate import Target, WeaviateStore
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import StoreContract, corpus

from tests.unit.stores.test_store_lancedb import KILL_SCRIPT


def _fresh(base: str) -> str:
    return child_uri(base, f"t{uuid.uuid4().hex[:12]}")


@pytest.mark.weaviate
class TestWeaviateStore(StoreContract):
    @pytest.fixture
    def make_store(self, weaviate_url):
        made: list[WeaviateStore] = []

        def make() -> WeaviateStore:
            made.append(WeaviateStore(_fresh(weaviate_url)))
            return made[-1]

        yield make
        for s in made:
            s.close()  # a test may have closed it already (closing twice is harmless); drop through a new handle
            again = WeaviateStore(s.uri)
            again.drop()
            again.close()


@pytest.mark.weaviate
def test_a_collection_made_before_format_5_keeps_its_word_tokens_and_is_searched_as_before(weaviate_url):
    """A format-4 collection (no ``language`` property, ``searched`` word-tokenized by Weaviate) is written and
    searched in its own layout: its chunks carry no language, and keyword and vector search find what they did."""
    from declrag.stores.base import StoreMeta

    s = WeaviateStore(_fresh(weaviate_url))
    try:
        s.create(StoreMeta(backend="weaviate", format=4))
        assert not s.layout.tokens and not s.layout.language
        emb = HashEmbedder()
        docs, chunks, vecs = corpus(emb)
        s.upsert(docs, chunks, vecs)
        again = WeaviateStore(s.uri)  # read back from the collection's own metadata
        assert not again.layout.tokens
        [hit, *_] = again.keyword_search("the Colosseum", 3)
        assert hit.chunk.id == "rome#1" and hit.chunk.language == ""
        assert again.vector_search(emb.embed_query("Colosseum amphitheatre"), 1)[0].chunk.id == "rome#1"
        # nor readers: a search for a caller's groups would match nothing, so it is refused, as is relabelling
        assert not again.layout.readers and hit.chunk.readers == ()
        for refused in (lambda: again.count({"readers": "hr"}), lambda: again.keyword_search("Rome", 3, {"readers": "*"}),
                        lambda: again.relabel({"rome": ("hr",)})):
            with pytest.raises(DeclragError, match="made before documents had readers"):
                refused()
        again.close()
    finally:
        s.drop()
        s.close()


# -- without a server --------------------------------------------------------------------------------------
@pytest.mark.parametrize("uri, message", [
    ("weaviate://h:8080/Docs?colour=red", "unknown option 'colour'"),
    ("weaviate://h:8080/9lives", "not a usable collection name"),
    ("weaviate://h:8080/Docs_docs", "not a usable collection name"),
    ("weaviate://user:secret@h:8080/Docs", "credentials do not belong"),
    ("weaviate://h:8080/Docs?index=ivf", "flat or hnsw"),
    ("weaviate://h:8080/Docs?grpc=x", "integers"),
    ("redis://h:6379/x", "no backend for redis://"),
])
def test_bad_uris_are_named(uri, message):
    with pytest.raises(DeclragError, match=message):
        open_store(uri)


def test_uri_round_trip():
    t = Target.parse("weaviates://example.org/docs?grpc=443&replicas=3&consistency=quorum")
    assert (t.secure, t.host, t.port, t.collection, t.grpc, t.replicas, t.consistency) == \
        (True, "example.org", 443, "Docs", 443, 3, "QUORUM")
    assert Target.parse(t.uri()) == t
    assert child_uri("weaviate://h:1/?grpc=2", "scifact-abc.1") == "weaviate://h:1/Declrag_scifact_abc_1?grpc=2"
    assert child_uri("weaviate://h:1/Bench?grpc=2", "x") == "weaviate://h:1/Bench_x?grpc=2"


def test_unreachable_server_is_one_clear_error():
    with pytest.raises(DeclragError, match=r"cannot reach a Weaviate server at weaviate://127.0.0.1:9") as e:
        open_store("weaviate://127.0.0.1:9/Docs?grpc=10")
    assert "scripts/weaviate.sh start" in e.value.hint


# -- with a server -----------------------------------------------------------------------------------------
@pytest.mark.weaviate
def test_open_store_checks_ingest_settings_inside_the_server(weaviate_url):
    uri = _fresh(weaviate_url)
    s, meta = open_store(uri, IngestConfig())
    try:
        s.upsert(*corpus(HashEmbedder()))
        again, meta2 = open_store(uri)
        assert meta2 == meta and meta2.backend == "weaviate" and again.count() == 10
        other = IngestConfig.model_validate({"chunker": {"name": "recursive"}})
        with pytest.raises(DeclragError, match="other ingest settings"):
            open_store(uri, other)
        with pytest.raises(DeclragError, match="no store at"):
            open_store(_fresh(weaviate_url), create=False)
        assert (s.uri, meta, 10) in list_stores(weaviate_url)
        again.close()
    finally:
        s.drop()


@pytest.mark.weaviate
def test_killed_indexing_resumes_without_duplicates(tmp_path, weaviate_url):
    """Per-object writes: a kill mid-index leaves complete documents recorded; the rerun finishes the job
    and the store equals a clean build, with no chunk twice."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(60):
        (docs / f"d{i:02d}.txt").write_text(" ".join(f"word{i} token{j} filler" for j in range(30)))
    uri, clean_uri = _fresh(weaviate_url), _fresh(weaviate_url)
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), uri, str(docs)])
    deadline = time.time() + 120
    probe = None
    while time.time() < deadline:
        time.sleep(0.2)
        try:
            probe = probe or open_store(uri, create=False)[0]
        except DeclragError:
            continue
        if len(probe.documents()) >= 10:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = open_store(uri)[0]
    recs = store.documents()
    assert 0 < len(recs) < 60
    for rec in recs.values():  # every recorded document has exactly its chunks
        assert store.count({"doc_id": rec.id}) == rec.chunks
    subprocess.run([sys.executable, str(script), uri, str(docs)], check=True)
    subprocess.run([sys.executable, str(script), clean_uri, str(docs)], check=True)
    clean = open_store(clean_uri)[0]
    try:
        assert store.count() == clean.count() and len(store.documents()) == 60
        ids = [h.chunk.id for h in store.vector_search(np.ones(64, dtype=np.float32) / 8.0, 1000)]
        assert len(ids) == len(set(ids)) == clean.count()
    finally:
        store.drop()
        clean.drop()
