"""The project's server scripts (scripts/weaviate.sh, scripts/postgres.sh), run by the benchmarks that need a
real server: packaged with declrag (declrag/scripts/), or the checkout's scripts/ in an editable install."""

from __future__ import annotations

import subprocess

from ..errors import DeclragError
from ..resources import script as packaged_script


def run_script(name: str, *args: str, timeout: float = 1800, hint: str = "") -> str:
    """Run ``scripts/NAME *args``; returns the last line it printed (the server's URI, for ``start``)."""
    script = packaged_script(name)
    r = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise DeclragError(f"scripts/{name} {' '.join(args)} failed: {r.stderr.strip()[-800:]}",
                           hint=hint or "see the server's log in its folder")
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
