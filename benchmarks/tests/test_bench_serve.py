"""`declrag bench serve`: the load generator reads answers, as plain JSON and streamed, and counts errors."""

from __future__ import annotations

import os

import pytest
from tests.unit.serve.test_serve import KEY, Q, app_for, prog, real_server  # noqa: F401, F811  (fixtures)


@pytest.mark.parametrize("stream", [False, True])
def test_the_serve_benchmark_load_generator_reads_answers(prog, stream):
    """`declrag bench serve`'s HTTP client against a real server: every answer read (plain JSON, or streamed to
    its final event) and counted, none as an error; a refused request counts as an error."""
    from declrag_bench.serve import _load

    with real_server(app_for(prog)) as (base, _):
        r = _load(base, [Q, "Where is the Eiffel Tower?"], clients=2, duration_s=0.5, stream=stream,
                  server_pid=os.getpid())
    assert r["errors"] == 0 and r["requests"] >= 2 and r["stream"] is stream
    assert r["p50_ms"] > 0 and r["first_token_p50_ms"] > 0 and r["server_program_p50_ms"] is not None
    assert r["client_cpu_ms"] is not None and r["server_cpu_ms"] is not None
    with real_server(app_for(prog, api_key=KEY)) as (base, _):  # no key sent: every request is a 401
        r = _load(base, [Q], clients=1, duration_s=0.2, stream=stream)
    assert r["requests"] >= 1 and r["errors"] == r["requests"] and r["rps"] == 0


# ---------------------------------------------------------------------------------------- the bench


def test_an_embed_arm_runs_its_backend_with_an_empty_cache_of_its_own(tmp_path, texts_store):
    """``--embed-backend torch,onnx``: each arm's server embeds every new query with that backend (its own empty
    embedding cache, nothing found there), on the same index, and both backends find the same passages."""
    from declrag_bench.serve import _program

    found = {}
    for backend in ("torch", "onnx"):
        prog, _ = _program("search", str(texts_store), (backend, tmp_path / "arm"))
        assert prog.embedder.config.backend == backend
        assert prog.embedder.cache.path == tmp_path / "arm" / f"embeddings-{backend}.sqlite3"
        found[backend] = [h.chunk.id for h in prog.search("Where does the wind blow?")]
        assert prog.embedder.calls == 1  # the query was embedded, not found in a cache
    assert found["torch"] == found["onnx"] and found["torch"]
