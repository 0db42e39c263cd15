"""The project's server scripts (scripts/weaviate.sh, scripts/postgres.sh), run by the benchmarks that need a
real server: the checkout's scripts/ folder, beside benchmarks/ (this distribution is installed from a checkout)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from declrag.errors import DeclragError

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def run_script(name: str, *args: str, timeout: float = 1800, hint: str = "") -> str:
    """Run ``scripts/NAME *args``; returns the last line it printed (the server's URI, for ``start``)."""
    script = SCRIPTS / name
    if not script.is_file():
        raise DeclragError(f"the server script {script} is not there",
                           hint="install declrag-bench from a declrag checkout (bash scripts/setup.sh does: "
                                "pip install -e ./benchmarks), whose scripts/ folder holds it")
    r = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise DeclragError(f"scripts/{name} {' '.join(args)} failed: {r.stderr.strip()[-800:]}",
                           hint=hint or "see the server's log in its folder")
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
