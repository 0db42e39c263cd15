"""`declrag bench soak`: questions that never repeat, and a short soak's JSON and plot with no 5xx."""

from __future__ import annotations


def test_questions_never_repeat_even_from_a_uniform_base():
    from declrag_bench.soak import Questions

    qs = Questions(["What is it?", "What is it?"[::-1]], seed=1)
    asked = [qs.next() for _ in range(500)]
    assert len(set(asked)) == 500


def test_a_short_soak_writes_its_json_and_png_with_no_5xx(tmp_path, texts_store):
    import json

    from declrag_bench.soak import run, write

    questions = [f"What is said about {w} in the corpus, question {i}?" for i, w in
                 enumerate(["energy", "Rome", "wind power", "the capital", "solar panels"] * 40)]
    r = run(duration_s=12, clients=4, store=str(texts_store), questions=questions, progress=False,
            serve_args=("--lm-cache-entries", "10", "--embedding-rows", "50", "--record-rows", "30"))
    s = r["summary"]
    for key in ("distinct_questions", "rss_mb_start", "rss_mb_after_warmup", "rss_mb_end", "growth_pct",
                "status_counts", "errors", "growth_mb_per_10k_questions"):
        assert key in s, key
    assert s["errors"] == {"5xx": 0, "dropped": 0} and s["hostile_not_4xx"] == 0
    assert s["distinct_questions"] > 0 and len(r["samples"]) >= 3
    routes = {k.split()[0] for k in s["status_counts"]}
    assert {"ask", "ask/stream", "chat", "chat/stream", "search"} <= routes
    assert any(k.startswith("chat ") and k.endswith(" 200") for k in s["status_counts"])  # the served model's name
    gauges = r["samples"][-1]["gauges"]
    assert gauges['declrag_cache_entries{cache="lm_memory"}'] <= 10
    assert gauges['declrag_cache_entries{cache="embeddings"}'] <= 50
    # the server recorded to a fresh usage store in the run's folder, kept within its bound of 30 answers
    assert gauges['declrag_usage_records{state="written"}'] > 30 and gauges['declrag_usage_records{state="dropped"}'] == 0
    assert 0 < s["usage_rows_end"] <= 30 and 0 < s["usage_bytes_end"] <= s["usage_bytes_max"]
    js, png = write(r, tmp_path / "out")
    assert json.loads(js.read_text())["summary"] == s and png.stat().st_size > 1000


def test_a_soak_of_two_server_processes_reports_each_process(tmp_path, texts_store):
    """``--serve-arg=--processes=2``: the server's memory is summed over its processes, and each server process that
    lived through the run has its own start, after-warm-up and end RSS (the per-process bound). Served to three
    callers (``callers=3``: every process checks their keys): no response names a document its caller may not
    read."""
    from declrag_bench.soak import run, write

    questions = [f"Which place is question {i} about: {w}?" for i, w in enumerate(["Rome", "energy", "wind"] * 60)]
    r = run(duration_s=12, clients=6, store=str(texts_store), questions=questions, progress=False,
            serve_args=("--processes", "2"), callers=3)
    s = r["summary"]
    assert s["errors"] == {"5xx": 0, "dropped": 0} and s["distinct_questions"] > 0 and s["hostile_not_4xx"] == 0
    assert r["callers"] == 3 and s["leaks"] == 0 and s["checked"] > 30
    # the server processes: not the supervisor (the server's own process), nor multiprocessing's resource tracker
    big = {pid: p for pid, p in s["processes"].items() if pid != str(r["server_pid"]) and p["rss_mb_end"] > 100}
    assert len(big) == 2, s["processes"]
    for p in big.values():
        assert p["rss_mb_start"] > 0 and p["rss_mb_after_warmup"] > 0 and isinstance(p["growth_pct"], float)
    last = r["samples"][-1]
    assert abs(last["rss_mb"] - sum(last["rss_mb_by_process"].values())) < 1
    js, png = write(r, tmp_path / "out")
    assert js.exists() and png.stat().st_size > 1000



def test_the_leak_check_counts_a_document_its_caller_may_not_read():
    from declrag_bench.soak_callers import Callers

    c = Callers(["k0", "k1"], [frozenset({"a.txt"}), frozenset({"b.txt"})])
    body = b'{"citations":[{"doc_id":"a.txt"},{"doc_id":"b.txt"}]}\n\nevent: answer\ndata: {"doc_id": "b.txt"}'
    assert c.leaked(0, body) == 2 and c.leaked(1, body) == 1 and c.leaked(0, b'{"hits":[]}') == 0
