"""Traces read back from a real Jaeger (built from its Go module by scripts/jaeger.sh): `declrag serve
--otlp-endpoint` answers a question (the real local model writing the answer) and a search, and Jaeger's query API
returns each trace under the caller's trace id with every stage in it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, wait_served

JAEGER = ROOT / "scripts" / "jaeger.sh"
BIN = Path(sys.executable).parent
STAGES = {"history", "rewrite", "retrieve", "rerank", "select", "generate", "judge"}
TEXT = ("Lake Baikal in Siberia is the deepest lake on Earth, 1,642 metres at its deepest point. "
        "It holds about a fifth of the fresh water in the world's lakes.\n")


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jaeger")
    port = free_port()
    while any(_busy(port + i) for i in range(1, 5)):
        port = free_port()
    r = subprocess.run(["bash", str(JAEGER), "start", "--dir", str(folder), "--port", str(port)], capture_output=True,
                       text=True, timeout=1800, stdin=subprocess.DEVNULL)
    if r.returncode == 3:
        pytest.skip("the Jaeger test needs Go (https://go.dev/dl) so that scripts/jaeger.sh can build Jaeger")
    assert r.returncode == 0, f"scripts/jaeger.sh start failed ({r.returncode}):\n{r.stderr[-3000:]}"
    otlp, query = r.stdout.split()[-2:]
    yield otlp, query
    subprocess.run(["bash", str(JAEGER), "stop", "--dir", str(folder), "--clean"], capture_output=True, timeout=60)


def _busy(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def post(url: str, body: dict, traceparent: str) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "traceparent": traceparent})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())


def trace_of(query: str, trace_id: str, want: set[str], timeout: float = 60.0) -> list[dict]:
    """The spans of ``trace_id`` from Jaeger's query API, once those named in ``want`` are all there; each sent by
    the service named in OTEL_SERVICE_NAME."""
    deadline, spans = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{query}/api/traces/{trace_id}", timeout=10) as resp:
                data = json.loads(resp.read())["data"]
            spans = data[0]["spans"] if data else []
        except urllib.error.HTTPError as e:  # 404 until the trace arrives
            assert e.code == 404, e
        if want <= {s["operationName"] for s in spans}:
            assert {p["serviceName"] for p in data[0]["processes"].values()} == {"declrag-test"}
            return spans
        time.sleep(1)
    pytest.fail(f"trace {trace_id}: {sorted({s['operationName'] for s in spans})} lacks {sorted(want)}")


def tags(span: dict) -> dict:
    return {t["key"]: t["value"] for t in span["tags"]}


@pytest.mark.slow
def test_a_served_answer_and_search_are_traced_into_jaeger_with_every_stage(jaeger, tmp_path):
    otlp, query = jaeger
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "baikal.txt").write_text(TEXT)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OTEL_SERVICE_NAME": "declrag-test"}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    store = tmp_path / "store"
    r = subprocess.run([str(BIN / "declrag"), "index", "docs", "--store", str(store)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([str(BIN / "declrag"), "serve", "--store", str(store), "--model", "local/smollm2",
                               "--port", str(port), "--otlp-endpoint", otlp], cwd=tmp_path, env=env, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_served(base, server, tmp_path / "serve.log")
        ask_id, search_id = os.urandom(16).hex(), os.urandom(16).hex()
        answer = post(f"{base}/v1/ask", {"question": "How deep is Lake Baikal?"}, f"00-{ask_id}-{'1' * 16}-01")
        assert answer["answer"]
        hits = post(f"{base}/v1/search", {"query": "deepest lake"}, f"00-{search_id}-{'2' * 16}-01")["hits"]
        assert hits
    finally:
        server.send_signal(signal.SIGTERM)  # uvicorn drains and exits; the last batch of spans goes out on exit
        code = server.wait(timeout=60)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()[-3000:]

    spans = trace_of(query, ask_id, {"POST /v1/ask", "answer", "hybrid search", "keyword leg", "vector leg"})
    stages = {tags(s).get("declrag.stage") for s in spans}
    assert STAGES <= stages, stages
    server_span = next(s for s in spans if s["operationName"] == "POST /v1/ask")
    assert server_span["references"][0]["spanID"] == "1" * 16  # the caller's span is its parent
    assert tags(server_span)["http.response.status_code"] == 200
    chat = [s for s in spans if s["operationName"].startswith("chat ")]
    assert chat, "no LM call span: the local model's generation was not traced"
    c = tags(chat[0])
    assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.request.model"].startswith("local/")
    assert c["gen_ai.usage.input_tokens"] > 0 and c["gen_ai.usage.output_tokens"] > 0
    retrieval = next(s for s in spans if tags(s).get("declrag.stage") == "retrieve")
    assert json.loads(tags(retrieval)["gen_ai.retrieval.documents"])[0]["id"].endswith("baikal.txt#0")
    assert "How deep" not in json.dumps(spans)  # no question text without --otlp-content

    spans = trace_of(query, search_id, {"POST /v1/search", "search", "hybrid search"})
    assert {"history", "rewrite", "retrieve", "rerank"} <= {tags(s).get("declrag.stage") for s in spans}
