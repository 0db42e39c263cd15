"""`declrag serve --processes 2`, the real command on a real index: two server processes on one port answer, one
`/metrics` sums what both counted (prometheus_client's multiprocess mode), and SIGTERM stops them all with exit 0,
leaving nothing behind. `declrag bench serve --processes 1,2` measures the throughput side by side."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, wait_served

SCRIPT = Path(sys.executable).parent / "declrag"
TEXT = {"lakes.txt": "Lake Baikal is the deepest lake on Earth. Lake Superior is the largest of the Great Lakes.",
        "rivers.txt": "The Amazon carries more water than any other river. The Nile flows north."}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                out.append(int(d))
        except OSError:
            pass
    return out


@pytest.mark.slow
def test_two_processes_answer_and_one_metrics_route_counts_both(tmp_path):
    (tmp_path / "docs").mkdir()
    for name, text in TEXT.items():
        (tmp_path / "docs" / name).write_text(text)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([str(SCRIPT), "index", "docs", "--store", "store", "-q"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([str(SCRIPT), "serve", "--store", "store", "--port", str(port), "--processes", "2",
                             "--workers", "1"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        wait_served(base, proc, tmp_path / "serve.log", in_a_row=20)  # every process ready
        workers = children(proc.pid)
        servers = [p for p in workers if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]  # not the tracker
        assert len(servers) == 2, workers
        before = {p: cpu_s(p) for p in servers}
        n = 60
        for i in range(n):  # a new connection each: the kernel hands them to whichever process accepts first
            r = httpx.post(f"{base}/v1/search", json={"query": f"deepest lake {i}", "k": 1}, timeout=60)
            assert r.status_code == 200 and r.json()["hits"][0]["source"] == "lakes.txt", r.text
        busy = [p for p in servers if cpu_s(p) - before[p] > 0.02]
        assert len(busy) >= 2, f"only {busy} of {servers} answered"
        for _ in range(3):  # whichever process answers the scrape, it reports both processes' counts
            metrics = httpx.get(f"{base}/metrics", timeout=30).text
            got = re.search(r'declrag_requests_total\{route="/v1/search",status="200"\} (\S+)', metrics)
            assert got and float(got.group(1)) == n, metrics[:2000]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=90)
        log.close()
    text = (tmp_path / "serve.log").read_text()
    assert code == 0 and "stopped; requests in flight were answered first" in text, text[-3000:]
    assert "in each of 2 processes" in text
    deadline = time.monotonic() + 15  # the multiprocessing resource tracker ends just after its parent
    while [p for p in workers if Path(f"/proc/{p}").exists()] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in workers if Path(f"/proc/{p}").exists()], "a server process outlived the server"
