"""The project's server scripts (scripts/weaviate.sh, scripts/postgres.sh), run by the benchmarks that need a
real server: they exist in a source checkout only."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..errors import DeclragError

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def run_script(name: str, *args: str, timeout: float = 1800, hint: str = "") -> str:
    """Run ``scripts/NAME *args``; returns the last line it printed (the server's URI, for ``start``)."""
    script = SCRIPTS / name
    if not script.exists():
        raise DeclragError(f"{script} is missing", hint=hint or "run this benchmark from a declrag source checkout")
    r = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise DeclragError(f"scripts/{name} {' '.join(args)} failed: {r.stderr.strip()[-800:]}",
                           hint=hint or "see the server's log in its folder")
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
