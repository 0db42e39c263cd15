"""The public surface stays put: every command's ``--help`` and the HTTP API's OpenAPI schema match the copy in
``tests/data/surface.json``. A change that means to alter them regenerates it
(``.venv/bin/python scripts/surface.py > tests/data/surface.json``) and the diff shows a reviewer what moved."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _surface() -> dict:
    spec = importlib.util.spec_from_file_location("declrag_surface", ROOT / "scripts" / "surface.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return json.loads(json.dumps(mod.surface()))


def test_every_help_and_the_openapi_schema_are_unchanged():
    kept = json.loads((ROOT / "tests" / "data" / "surface.json").read_text())
    now = _surface()
    assert sorted(now["help"]) == sorted(kept["help"]), "commands were added or removed"
    changed = [cmd for cmd in kept["help"] if now["help"][cmd] != kept["help"][cmd]]
    assert not changed, f"--help changed for: {changed}"
    assert now["openapi"] == kept["openapi"], "the OpenAPI schema changed"
