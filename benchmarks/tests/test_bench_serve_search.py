"""`declrag bench serve`'s search arm: each question asked once, through /v1/search."""

from __future__ import annotations

import os

import httpx
from tests.unit.serve.test_serve import CountingLM, app_for, real_server
from tests.unit.serve.test_serve_conversation import prog  # noqa: F401, F811  (fixtures)


def test_the_serve_benchmark_search_arm_asks_each_question_once(prog):
    from declrag_bench.serve import _load

    questions = [f"capital number {i}" for i in range(12)]
    with real_server(app_for(prog, lm=CountingLM())) as (base, _):
        r = _load(base, questions, clients=2, duration_s=30, search=True, server_pid=os.getpid())
        seen_metrics = httpx.get(base + "/metrics", timeout=10).text
    assert r["errors"] == 0 and r["requests"] == len(questions) and r["questions_exhausted"] is True
    assert r["p50_ms"] > 0 and r["server_program_p50_ms"] is not None and r["wall_s"] < 30
    assert 'declrag_requests_total{route="/v1/search",status="200"} 12.0' in seen_metrics
