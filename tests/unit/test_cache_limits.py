"""Every process-wide cache is bounded by declrag (`declrag.runtime.cache_limits.CacheLimits`), enforced with tiny limits: DSPy's
in-memory response cache and its LM histories (through a real LM route to an instant stand-in on loopback), the
embedding SQLite file (oldest rows deleted first, files from before the bound included), the gauges of
``GET /metrics``; and a short `declrag bench soak` against a real `declrag serve` (the harness's JSON, no 5xx)."""

from __future__ import annotations

import sqlite3
import threading
from http.server import ThreadingHTTPServer

import dspy
import numpy as np
import pytest
from dspy.clients import base_lm

from declrag.runtime.cache_limits import CacheLimits, current, set_current
from declrag.config import LMConfig
from declrag.embed.embedder import EmbeddingCache
from declrag.lm import Meter, cache_sizes, make_lm, metering, use_cache_limits
from declrag.lm.registry import LM_DISK_PAGE_CACHE
from declrag.testing import _standin as standin


@pytest.fixture
def lm_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), standin.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture
def limited(tmp_path):
    """Apply limits for one test; the process's DSPy cache and limits are restored afterwards."""
    before_cache, before_limits = dspy.cache, current()

    def apply(**limits):
        return use_cache_limits(CacheLimits(**limits), folder=tmp_path / "dspy")

    yield apply
    set_current(before_limits)
    dspy.cache = before_cache
    base_lm.GLOBAL_HISTORY.clear()


def _lm(base: str):
    return make_lm(LMConfig(route="openai/standin", api_base=base, num_retries=0, adapter="plain"))


def test_lm_cache_and_history_keep_their_bounds_and_metering_still_counts(lm_server, limited, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "standin")
    limited(lm_cache_entries=10, lm_history=5, lm_cache_disk_mb=1)
    lm, meter = _lm(lm_server), Meter()
    with metering(meter):
        for i in range(50):
            assert lm(f"distinct question {i}") == [standin.ANSWER]
    assert len(dspy.cache.memory_cache) == 10
    assert len(lm.history) == 5 and len(base_lm.GLOBAL_HISTORY) <= 5
    assert lm.history[-1]["prompt"] == "distinct question 49"
    assert meter.total().calls == 50
    sizes = cache_sizes()
    assert sizes["lm_memory"] == {"entries": 10} and sizes["lm_history_global"]["entries"] <= 5
    assert 0 < sizes["lm_disk"]["bytes"] <= 4 * 2**20  # diskcache culls to its limit (plus SQLite's own pages)
    # each connection to it (one per shard per thread) has a small page cache and no memory map
    assert dspy.cache.disk_cache.reset("sqlite_cache_size") == LM_DISK_PAGE_CACHE == 32
    assert dspy.cache.disk_cache.reset("sqlite_mmap_size") == 0


def test_no_history_kept_at_zero_and_no_disk_cache_at_zero(lm_server, limited, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "standin")
    base_lm.GLOBAL_HISTORY.clear()
    limited(lm_history=0, lm_cache_disk_mb=0)
    lm, meter = _lm(lm_server), Meter()
    with metering(meter):
        for i in range(5):
            lm(f"another question {i}")
    assert lm.history == [] and base_lm.GLOBAL_HISTORY == []
    assert meter.total().calls == 5
    assert "lm_disk" not in cache_sizes() and not dspy.cache.enable_disk_cache


def _vec(i: int) -> np.ndarray:
    return np.full(4, i, dtype=np.float32)


def test_embedding_cache_deletes_the_oldest_rows_beyond_its_bound(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite3", max_rows=10)
    for i in range(0, 50, 5):
        cache.put("m", [(f"h{j}", _vec(j)) for j in range(i, i + 5)])
    assert cache.count() == 10 and cache.rows == 10 and cache.evicted == 40
    kept = cache.get("m", [f"h{j}" for j in range(50)])
    assert sorted(kept, key=lambda h: int(h[1:])) == [f"h{j}" for j in range(40, 50)]
    assert np.array_equal(kept["h49"], _vec(49)) and cache.disk_bytes() > 0


def test_a_file_from_before_the_bound_is_bounded_too_its_rows_first(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE vectors (model TEXT, hash TEXT, vec BLOB, PRIMARY KEY (model, hash)) WITHOUT ROWID")
    db.executemany("INSERT INTO vectors VALUES (?, ?, ?)", [("m", f"old{i}", _vec(i).tobytes()) for i in range(8)])
    db.commit()
    db.close()
    cache = EmbeddingCache(path, max_rows=6)
    assert len(cache.get("m", [f"old{i}" for i in range(8)])) == 8  # read as before
    cache.put("m", [(f"new{i}", _vec(i)) for i in range(4)])
    assert cache.count() == 6 and set(cache.get("m", [f"new{i}" for i in range(4)])) == {f"new{i}" for i in range(4)}


def test_the_process_limits_reach_a_new_embedding_cache_and_a_library_has_none(tmp_path):
    before = current()
    try:
        set_current(None)
        assert EmbeddingCache(tmp_path / "a.sqlite3").max_rows is None  # a library process: unbounded, as before
        set_current(CacheLimits(embedding_rows=123))
        assert EmbeddingCache(tmp_path / "b.sqlite3").max_rows == 123
    finally:
        set_current(before)


def test_bad_limits_are_refused_naming_the_flag(capsys):
    from declrag.cli import main

    code = main(["serve", "--lm-cache-entries", "0", "--store", "/nonexistent"])
    err = capsys.readouterr().err
    assert code == 2 and "lm_cache_entries" in err and "Traceback" not in err, err


def test_metrics_report_every_cache_with_its_bound(limited, tmp_path):
    from fastapi.testclient import TestClient

    from declrag.config import ProgramConfig
    from declrag.pipeline.program import RAGProgram
    from declrag.serve import ServeSettings, create_app
    from declrag.stores._lancedb import LanceStore
    from declrag.testing import HashEmbedder, ScriptedLM
    from declrag.testing.store_contract import corpus

    limited(lm_cache_entries=7, lm_history=3, embedding_rows=99)
    store = LanceStore(tmp_path / "store")
    store.upsert(*corpus(HashEmbedder()))
    emb = HashEmbedder()
    emb.cache = EmbeddingCache(tmp_path / "q.sqlite3")  # type: ignore[attr-defined]
    prog = RAGProgram(ProgramConfig(), store=store, embedder=emb)
    app = create_app(prog, "demo", settings=ServeSettings(cache_threshold=0.99, cache_size=5),
                     lm_override=lambda: ScriptedLM({}, {"answer": "Rome [1]."}))
    with TestClient(app) as c:
        while c.get("/readyz").status_code != 200:
            pass
        assert c.post("/v1/ask", json={"question": "What is the capital of Italy?"}).status_code == 200
        text = c.get("/metrics").text
    lines = {ln.split(" ")[0]: float(ln.split(" ")[1]) for ln in text.splitlines() if ln.startswith("declrag_cache_")}
    assert lines['declrag_cache_limit{cache="lm_memory"}'] == 7
    assert lines['declrag_cache_limit{cache="lm_history"}'] == 3
    assert lines['declrag_cache_limit{cache="embeddings"}'] == 99
    assert lines['declrag_cache_limit{cache="answers"}'] == 5
    assert lines['declrag_cache_entries{cache="answers"}'] == 1
    assert 'declrag_cache_entries{cache="lm_memory"}' in lines and 'declrag_cache_bytes{cache="lm_disk"}' in lines
    assert 'declrag_cache_entries{cache="embeddings"}' in lines and 'declrag_cache_bytes{cache="embeddings"}' in lines
    assert lines['declrag_cache_fault{cache="embeddings"}'] == 0 and lines['declrag_cache_fault{cache="lm_disk"}'] == 0


def test_an_older_declrag_still_writes_a_bounded_cache_file(tmp_path):
    """The write order lives in a table of its own: the `vectors` table keeps the layout older versions insert
    into positionally, so a cache folder shared by two versions keeps working for both."""
    import sqlite3

    from declrag.embed.embedder import EmbeddingCache

    path = tmp_path / "e.sqlite3"
    cache = EmbeddingCache(path, max_rows=5)
    cache.put("m", [(f"h{i}", _vec(i)) for i in range(3)])
    db = sqlite3.connect(path)
    db.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", ("m", "from-old", _vec(9).tobytes()))  # as 0.x did
    db.commit()
    assert [r[1] for r in db.execute("PRAGMA table_info(vectors)")] == ["model", "hash", "vec"]
    cache.put("m", [(f"n{i}", _vec(i)) for i in range(4)])
    kept = {h for (h,) in db.execute("SELECT hash FROM vectors")}
    assert len(kept) == 5 and "from-old" not in kept and {"n0", "n1", "n2", "n3"} <= kept
