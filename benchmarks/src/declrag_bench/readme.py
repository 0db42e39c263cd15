"""`declrag bench readme`: the README's five minutes, as a new user runs them, and what the served program answers.

In a new folder holding a copy of declrag's documentation (``docs/``), the README's commands run as
written: ``declrag index docs/ --store .declrag/store``, ``declrag synth docs/ --out my-set --n 300``, ``declrag
compile --space retrieval --dataset my-set --name first --max-trials 3``; then ``declrag serve runs/first`` is
asked the guides' hand-written questions (`declrag_bench.files.questions`: each names its guide and has an exact
answer) over HTTP, once for each serve arm (`SERVE_ARMS`): as the README says (no model named), and with the small
local model writing (``--model local/smollm2``: what the compiled program served before ``generate.mode: auto``,
now with its echoes caught). Beside them, ``declrag ask`` on the same store (the default program, in process).

Per question: the reference in the answer (normalised as SQuAD does), an abstention, an answer that repeats the
prompt (`declrag.pipeline.stages.generate.caught` on what was served), the LM output caught and what replaced it,
latency. Each served arm is compared with ``ask``, paired, with a 95% interval.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.errors import DeclragError
from declrag.metrics.stats import mean_of, paired_difference
from declrag.pipeline.stages.generate._echo import caught
from declrag.text.normalize import squad_normalize, strip_citations

from .files import FILES, SETS, questions
from .serve import _free_port

BIN = Path(sys.executable).parent
STEPS = ("declrag index docs/ --store .declrag/store",
         "declrag synth docs/ --out my-set --n 300",
         "declrag compile --space retrieval --dataset my-set --name first --max-trials 3")
# arm -> the serve command's extra arguments
SERVE_ARMS: dict[str, list[str]] = {"served": [], "served-smollm2": ["--model", "local/smollm2"]}
SCORES = ("contains", "abstained", "echo", "caught")


def _run(cmd: str, cwd: Path, progress: bool) -> float:
    t0 = time.perf_counter()
    if progress:
        print(f"  $ {cmd}", flush=True)
    r = subprocess.run([str(BIN / cmd.split()[0]), *cmd.split()[1:]], cwd=cwd, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if r.returncode:
        raise DeclragError(f"{cmd} exited {r.returncode}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}",
                           hint="run it by hand in a copy of docs/ to see why")
    return round(time.perf_counter() - t0, 1)


def _post(port: int, question: str) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/ask", data=json.dumps({"question": question}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read()), time.perf_counter() - t0


def _serve(work: Path, extra: list[str], port: int) -> tuple[subprocess.Popen, list[str]]:
    log = (work / f"serve-{port}.log").open("w")
    proc = subprocess.Popen([str(BIN / "declrag"), "serve", "runs/first", "--port", str(port), *extra], cwd=work,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DeclragError(f"declrag serve exited {proc.returncode}",
                               hint=(work / f"serve-{port}.log").read_text()[-500:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
                if resp.status == 200:
                    return proc, (work / f"serve-{port}.log").read_text().splitlines()[:3]
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise DeclragError("declrag serve was not ready in 600 s", hint="see its log")


def _row(q: dict[str, Any], answer: str, abstained: bool, got: dict | None, seconds: float) -> dict[str, Any]:
    ref = squad_normalize(q["answer"])
    return {"id": q["id"], "answer": answer, "abstained": float(abstained),
            "contains": float(not abstained and ref in squad_normalize(strip_citations(answer))),
            "echo": float(caught(answer, q["question"], []) is not None),
            "caught": float(got is not None), "caught_kind": (got or {}).get("kind"),
            "replaced_by": (got or {}).get("replaced_by"), "ms": round(1000 * seconds, 1)}


def run(n: int = 40, arms: list[str] | None = None, seed: int = 0, progress: bool = True) -> dict[str, Any]:
    from declrag.answering.selection import select_program

    arms = arms or list(SERVE_ARMS)
    pool = [q for path in SETS for q in questions(path)]
    asked = random.Random(seed).sample(pool, min(n, len(pool)))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="declrag-readme-") as tmp:
        work = Path(tmp)
        shutil.copytree(FILES.parent, work / "docs")  # docs/, as the README uses it
        steps = {cmd: _run(cmd, work, progress) for cmd in STEPS}
        prog = select_program(store=str(work / ".declrag" / "store")).load().warm_up()  # `declrag ask --store ...`
        rows: dict[str, list[dict[str, Any]]] = {"ask": []}
        for q in asked:
            t = time.perf_counter()
            a = prog(question=q["question"])
            rows["ask"].append(_row(q, a.answer, a.abstained, a.caught, time.perf_counter() - t))
        starts: dict[str, list[str]] = {}
        for arm in arms:
            port = _free_port()
            proc, starts[arm] = _serve(work, SERVE_ARMS[arm], port)
            try:
                rows[arm] = []
                for i, q in enumerate(asked, 1):
                    payload, took = _post(port, q["question"])
                    rows[arm].append(_row(q, payload["answer"], payload["abstained"], payload.get("caught"), took))
                    if progress and i % 10 == 0:
                        print(f"  {arm}: {i}/{len(asked)}", flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=120)
    first = rows["ask"]
    return {"files": str(FILES), "n": len(asked), "seed": seed, "steps_s": steps, "serve_start": starts,
            "arms": {arm: {**{s: mean_of([r[s] for r in rs]) for s in SCORES},
                           "ms_p50": sorted(r["ms"] for r in rs)[len(rs) // 2],
                           "replaced_by": {k: sum(r["replaced_by"] == k for r in rs)
                                           for k in ("extractive", "retry", "abstention")},
                           "vs_ask": {s: paired_difference([r[s] for r in first], [r[s] for r in rs])
                                      for s in ("contains", "abstained")}}
                     for arm, rs in rows.items()},
            "rows": rows, "wall_s": round(time.perf_counter() - t0, 1)}


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"the README's path on declrag's docs/: {r['n']} hand-written questions, served over HTTP and "
                    "asked with declrag ask on the same store; paired difference from ask, 95% interval")
    for col in ("arm", "reference in the answer", "abstains", "repeats the prompt", "LM output caught (replaced by)",
                "ms p50"):
        t.add_column(col)
    for arm, a in r["arms"].items():
        vs = a["vs_ask"]
        by = ", ".join(f"{k} {v}" for k, v in a["replaced_by"].items() if v)
        t.add_row(arm, f"{a['contains']:.3f}" + _vs(vs["contains"], arm), f"{a['abstained']:.3f}"
                  + _vs(vs["abstained"], arm), f"{a['echo']:.3f}", f"{a['caught']:.3f}" + (f" ({by})" if by else ""),
                  f"{a['ms_p50']:.0f}")
    console.print(t)
    for arm, lines in r["serve_start"].items():
        console.print(f"{arm}: " + " | ".join(line for line in lines if line.startswith("answers:")))
    console.print(f"{r['wall_s']} s in all (index, synth, compile: "
                  + ", ".join(f"{v} s" for v in r["steps_s"].values()) + ")")


def _vs(d: dict[str, Any], arm: str) -> str:
    return "" if arm == "ask" or d["diff"] is None else f"\n{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
