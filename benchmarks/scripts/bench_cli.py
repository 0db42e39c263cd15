"""How fast the `declrag` command answers what a newcomer types first, side by side with `python -c pass` (the
interpreter's own start): --help, --version, usage errors and every command's --help, each run N times (median, min,
max, in seconds), and the time until `declrag index` prints its first progress line. Target: <= 0.5 s median for
each of the first kind, <= 2 s to the first line of index, on a 2-core machine.

    .venv/bin/python benchmarks/scripts/bench_cli.py            # 10 runs each; Markdown on stdout
    .venv/bin/python benchmarks/scripts/bench_cli.py --runs 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECLRAG = str(Path(sys.executable).parent / "declrag")
COMMANDS = ["version", "index", "synth", "search", "ask", "serve", "mcp", "eval", "datasets", "init", "compile",
            "indexes", "bench"]
CASES = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("declrag --help", [DECLRAG, "--help"]),
    ("declrag --version", [DECLRAG, "--version"]),
    ("declrag (no arguments)", [DECLRAG]),
    ("declrag complie (a typo)", [DECLRAG, "complie"]),
    ("declrag index --nosuch", [DECLRAG, "index", "--nosuch"]),
    ("declrag search (missing argument)", [DECLRAG, "search"]),
    ("declrag compile --max-trials abc", [DECLRAG, "compile", "--max-trials", "abc"]),
    *[(f"declrag {c} --help", [DECLRAG, c, "--help"]) for c in COMMANDS],
]


def timed(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def first_line(env: dict, folder: Path) -> float:
    """Seconds from starting `declrag index README.md` until it prints its first line (stdout or stderr)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([DECLRAG, "index", str(ROOT / "README.md"), "--store", str(folder / "store")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    assert p.stdout is not None
    p.stdout.read(1)
    took = time.perf_counter() - t0
    p.kill()
    p.wait()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    n = ap.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DECLRAG_CACHE": str(Path(tmp) / "cache"), "HOME": tmp}
        timed([DECLRAG, "--version"], env)  # the first --version reads the library once (remembered after)
        print(f"| command ({n} runs each) | median s | min s | max s | median - python's |")
        print("|---|---|---|---|---|")
        base = None
        for name, argv in CASES:
            runs = [timed(argv, env) for _ in range(n)]
            med = statistics.median(runs)
            base = med if base is None else base
            print(f"| `{name}` | {med:.3f} | {min(runs):.3f} | {max(runs):.3f} | {med - base:+.3f} |", flush=True)
        runs = [first_line(env, Path(tmp) / str(i)) for i in range(min(n, 5))]
        print(f"| `declrag index README.md`: first line | {statistics.median(runs):.3f} | {min(runs):.3f} | "
              f"{max(runs):.3f} | {statistics.median(runs) - base:+.3f} |")


if __name__ == "__main__":
    main()
