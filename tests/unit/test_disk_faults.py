"""Faults of the machine itself under the embedding cache: its folder full or read-only, its file locked by
another process or corrupt. The cache then writes nothing (or is off), says so once, and the vectors are
those of no cache at all; nothing raises. Full and read-only are real: a small tmpfs mounted, and remounted
read-only, by the test itself (as root; skipped otherwise, saying why)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from declrag.embed.embedder import EmbeddingCache

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs (a disk that fills up, or goes "
                                                         "read-only) needs root; run the tests as root to include it")


def _vec(i: int) -> np.ndarray:
    v = np.random.default_rng(i).normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


def _tmpfs(tmp_path, size: str):
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): the disk-fault tests need one")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """160 kB: the cache's 400 vectors of 1.5 kB cannot fit."""
    yield from _tmpfs(tmp_path, "160k")


@pytest.fixture
def run_disk(tmp_path):
    """2 MB: a whole 12-trial run (about 170 kB in 4 kB pages, more while files are replaced) fits once the filler
    is gone; the filler, not the disk's size, makes it full."""
    yield from _tmpfs(tmp_path, "2m")


@needs_root
def test_a_full_disk_turns_the_cache_writes_off_and_nothing_fails(small_disk, caplog):
    cache = EmbeddingCache(small_disk / "e.sqlite3")
    with caplog.at_level(logging.WARNING, logger="declrag.embed.embedder"):
        for i in range(0, 400, 10):  # 400 vectors of 1.5 kB cannot fit in 160 kB
            cache.put("m", [(f"h{j}", _vec(j)) for j in range(i, i + 10)])
    assert cache.fault is not None and cache.fault.startswith("writes off") and "full" in cache.fault
    said = [r for r in caplog.records if "embedding cache" in r.getMessage()]
    assert len(said) == 1 and "free space" in said[0].getMessage()  # once, with the fix
    got = cache.get("m", ["h0", "h1", "h399"])
    assert set(got) == {"h0", "h1"} and np.array_equal(got["h0"], _vec(0))  # what was written is still read


@needs_root
def test_a_read_only_cache_folder_is_read_and_never_written(small_disk):
    EmbeddingCache(small_disk / "e.sqlite3").put("m", [("a", _vec(1))])
    view = small_disk.parent / "read-only"  # the same files, through a read-only bind mount
    view.mkdir()
    assert subprocess.run(["mount", "--bind", str(small_disk), str(view)]).returncode == 0
    try:
        assert subprocess.run(["mount", "-o", "remount,ro,bind", str(view)]).returncode == 0
        _read_only(view)
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def _read_only(small_disk):
    cache = EmbeddingCache(small_disk / "e.sqlite3")
    assert np.array_equal(cache.get("m", ["a"]).get("a"), _vec(1)) or cache.fault is not None
    cache.put("m", [("b", _vec(2))])
    assert cache.fault is not None and cache.get("m", ["b"]) == {}
    # a folder that cannot even be created: the cache is off from the start
    off = EmbeddingCache(small_disk / "sub" / "e.sqlite3")
    assert off.fault is not None and off.fault.startswith("off") and off.get("m", ["a"]) == {}
    off.put("m", [("a", _vec(1))])
    assert off.count() == 0 and off.disk_bytes() == 0


def test_a_file_locked_by_another_process_is_a_miss_not_a_stall_of_a_minute(tmp_path):
    path = tmp_path / "e.sqlite3"
    writer = EmbeddingCache(path)
    writer.put("m", [("a", _vec(1))])
    writer.close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(path)!r}, isolation_level=None, timeout=30)\n"
        "db.execute('PRAGMA locking_mode=EXCLUSIVE'); db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        cache = EmbeddingCache(path)
        t0 = time.monotonic()
        assert cache.get("m", ["a"]) == {}  # a miss: the vector is computed, as without a cache
        cache.put("m", [("b", _vec(2))])  # skipped
        assert time.monotonic() - t0 < 20  # the busy timeout (5 s) per call, not a minute
        assert cache.fault is None or "locked" in cache.fault
    finally:
        holder.kill()
        holder.wait()
    cache = EmbeddingCache(path)  # the lock gone: read and written again
    assert np.array_equal(cache.get("m", ["a"])["a"], _vec(1))
    cache.put("m", [("b", _vec(2))])
    assert "b" in cache.get("m", ["b"]) and cache.fault is None


def test_a_corrupt_file_turns_the_cache_off_and_is_left_as_it_was(tmp_path, caplog):
    path = tmp_path / "e.sqlite3"
    path.write_bytes(b"this is not a database " * 200)
    with caplog.at_level(logging.WARNING, logger="declrag.embed.embedder"):
        cache = EmbeddingCache(path)
        assert cache.get("m", ["a"]) == {}
        cache.put("m", [("a", _vec(1))])
    assert cache.fault is not None and cache.fault.startswith("off") and cache.count() == 0
    assert any(str(path) in r.getMessage() and "remove a corrupt file" in r.getMessage() for r in caplog.records)
    assert path.read_bytes() == b"this is not a database " * 200  # nothing overwritten: the user decides


def test_an_embedder_over_a_failed_cache_gives_the_vectors_of_a_working_one(tmp_path):
    from declrag.embed.embedder import Embedder

    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"garbage" * 1000)
    texts = ["Where is the Eiffel Tower?", "Who wrote Hamlet?"]
    broken = Embedder(cache=EmbeddingCache(bad)).embed_queries(texts)
    fine = Embedder(cache=EmbeddingCache(tmp_path / "good.sqlite3")).embed_queries(texts)
    assert np.allclose(broken, fine, atol=1e-6)


# -- DSPy's response cache on disk ---------------------------------------------------------------------------
@pytest.fixture
def lm_cache_at():
    """Point DSPy's cache at a folder for one test; the process's cache and limits are restored afterwards."""
    import dspy

    from declrag.runtime.cache_limits import CacheLimits, current, set_current
    from declrag.lm import use_cache_limits
    from declrag.lm.registry import LM_DISK_FAULT

    before_cache, before_limits = dspy.cache, current()
    LM_DISK_FAULT.clear()
    yield lambda folder: use_cache_limits(CacheLimits(), folder=folder)
    set_current(before_limits)
    dspy.cache = before_cache
    LM_DISK_FAULT.clear()


@pytest.fixture
def answer(monkeypatch):
    """An LM call to an instant OpenAI-compatible stand-in on loopback: ``answer(question)``."""
    import threading
    from http.server import ThreadingHTTPServer

    from declrag.config import LMConfig
    from declrag.lm import make_lm
    from declrag.testing import _standin as standin

    monkeypatch.setenv("OPENAI_API_KEY", "standin")
    server = ThreadingHTTPServer(("127.0.0.1", 0), standin.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    lm = make_lm(LMConfig(route="openai/standin", api_base=f"http://127.0.0.1:{server.server_address[1]}/v1",
                          num_retries=0, adapter="plain"))
    yield lambda q: lm(q)
    server.shutdown()


@needs_root
def test_a_read_only_lm_cache_folder_leaves_the_memory_cache(tmp_path, lm_cache_at, answer, caplog):
    import dspy

    from declrag.lm.registry import LM_DISK_FAULT
    from declrag.testing import _standin as standin

    src, view = tmp_path / "src", tmp_path / "view"
    src.mkdir()
    view.mkdir()
    assert subprocess.run(["mount", "--bind", str(src), str(view)]).returncode == 0
    try:
        assert subprocess.run(["mount", "-o", "remount,ro,bind", str(view)]).returncode == 0
        with caplog.at_level(logging.WARNING, logger="declrag.lm.registry"):
            lm_cache_at(view / "dspy")
        assert not dspy.cache.enable_disk_cache and dspy.cache.enable_memory_cache and LM_DISK_FAULT
        assert any("memory cache only" in r.getMessage() for r in caplog.records)
        assert answer("a question") == [standin.ANSWER] and len(dspy.cache.memory_cache) == 1
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def test_a_corrupt_lm_cache_file_is_a_miss_and_the_call_is_answered(tmp_path, lm_cache_at, answer):
    import dspy

    from declrag.lm.registry import LM_DISK_FAULT
    from declrag.testing import _standin as standin

    lm_cache_at(tmp_path / "dspy")
    assert answer("first question") == [standin.ANSWER] and dspy.cache.enable_disk_cache
    dspy.cache.reset_memory_cache()
    for db in (tmp_path / "dspy").rglob("cache.db"):
        db.write_bytes(b"not a database " * 4096)
    got = []  # a thread of its own: diskcache opens each thread's connection on first use, on the corrupt file
    t = threading.Thread(target=lambda: got.append(answer("first question")))
    t.start()
    t.join()
    assert got == [[standin.ANSWER]]  # the read failed: asked again, not raised
    assert LM_DISK_FAULT and "a read failed" in LM_DISK_FAULT[0] and not dspy.cache.enable_disk_cache
    lm_cache_at(tmp_path / "dspy")  # a process starting on the corrupt folder: memory only from the start
    assert not dspy.cache.enable_disk_cache and answer("second question") == [standin.ANSWER]


# -- the run folder's disk full during a compile -------------------------------------------------------------
@needs_root
@pytest.mark.parametrize("free_kb", [40, 90], ids=["full-during-the-search", "full-while-writing-the-artifact"])
def test_a_compile_stops_on_a_full_run_disk_and_resumes_once_space_is_freed(run_disk, tmp_path, free_kb):
    import json

    from declrag.errors import DeclragError
    from declrag.lm import using_lm
    from declrag.optimize import Budget, CompileOptions, compile

    from tests.unit.optimize.test_compile import GOLD, SPACE, answers_by_prompt

    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    runs, filler = run_disk / "runs", run_disk / "filler"
    filler.write_bytes(b"x" * (os.statvfs(run_disk).f_bavail * os.statvfs(run_disk).f_frsize - free_kb * 1024))
    with using_lm(answers_by_prompt()), pytest.raises(DeclragError) as e:
        compile(CompileOptions(space, str(GOLD), "full", runs, Budget(max_trials=12), progress=False))
    run = runs / "full"
    assert f"compile stopped: the run folder {run} cannot be written" in e.value.message
    assert "\n" not in e.value.message and f"declrag compile --resume {run}" in e.value.hint
    trials = run / "trials.jsonl"
    before = [json.loads(x) for x in trials.read_text().splitlines()] if trials.exists() else []
    filler.unlink()  # space freed
    with using_lm(answers_by_prompt()):
        s = compile(CompileOptions(resume=run, progress=False))
    after = [json.loads(x) for x in trials.read_text().splitlines()]
    numbers = [r["number"] for r in after]
    assert len(numbers) == len(set(numbers)) and s.trials == 12  # none lost, none run twice
    for r in before:  # every trial finished before the disk filled is there, unchanged
        assert next(a for a in after if a["number"] == r["number"]) == r
    assert (run / "best" / "program.json").exists()
