"""The GPU check (benchmarks/scripts/gpu_check.py, run by scripts/gpu-check.sh) exercised on the CPU: a small slice of
SciFact indexed, the vectors and the index address checked, two fine-tuning steps; and a GPU asked for where there
is none refused in one line with exit status 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import shared

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"
REPO = SCRIPT.parents[2]


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    # from the repository root, where ./datasets declares scifact; the script sets its own temporary caches
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_the_gpu_check_runs_on_the_cpu_and_writes_every_number(tmp_path):
    shared("scifact", "corpus.jsonl")
    out = tmp_path / "gpu-check.json"
    p = _run("--device", "cpu", "--limit", "30", "--steps", "2", "--questions", "8", "--batch-size", "4",
             "--sample", "32", "--json", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["environment"]["device"] == "cpu" and r["environment"]["torch"]
    ix = r["indexing"]
    assert ix["documents"] == 30 and ix["chunks"] >= 30 and ix["embedded"] == ix["chunks"]  # a cold cache
    assert ix["chunks_per_s"] > 0 and ix["documents_per_s"] > 0
    assert r["vectors"]["chunks"] == 32 and r["vectors"]["min_cosine"] >= 0.999 and r["vectors"]["ok"]
    a = r["address"]
    assert a["same"] and a["digest_cuda"] == a["digest_cpu"] == a["store_meta_digest"]
    assert a["cpu_config_store"] == a["store"] and a["cpu_config_embedded"] == 0
    assert r["finetune"]["steps"] == 2 and r["finetune"]["device"] == "cpu" and r["finetune"]["seconds"] > 0
    assert r["ok"] is True
    table = [line for line in p.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| measure | this device (cpu) | CPU figure (2 cores) | speed-up |" and len(table) == 8
    assert "| pass |" in table[-1] and "| pass |" in table[-2]


def test_a_gpu_asked_for_where_there_is_none_is_refused_in_one_line():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    p = _run("--device", "cuda", timeout=120)
    assert p.returncode == 3
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cuda" in lines[0] and "--device cpu" in lines[0], p.stderr
