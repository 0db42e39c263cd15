"""Compile: search a declared space of RAG programs for the best one on a golden set (`compile`).

The surface is the names below (docs/development.md maps the modules behind them). Importing this package loads
none of them: each name is imported on first use (PEP 562), so that ``declrag.optimize._space`` stays light.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING

# name -> the module that defines it, imported on first use
_LAZY = {
    **dict.fromkeys(("compile", "CompileOptions", "CompileResult"), "run"),
    **dict.fromkeys(("Budget", "Spent"), "budget"),
    **dict.fromkeys(("Objective", "score", "weighted"), "objective"),
    "Workers": "workers",
    **dict.fromkeys(("TrialLog", "WORKER"), "trials"),
    **dict.fromkeys(("Space", "read_space"), "space"),
    **dict.fromkeys(("OPTIMIZERS", "Optimizer", "optimize_prompts", "register"), "prompts"),
}

__all__ = ["OPTIMIZERS", "WORKER", "Budget", "CompileOptions", "CompileResult", "Objective", "Optimizer", "Space",
           "Spent", "TrialLog", "Workers", "compile", "optimize_prompts", "read_space", "register", "score", "weighted"]

if TYPE_CHECKING:
    from ._budget import Budget, Spent
    from ._objective import Objective, score, weighted
    from ._prompts import OPTIMIZERS, Optimizer, optimize_prompts, register
    from ._run import CompileOptions, CompileResult, compile
    from ._space import Space, read_space
    from ._trials import WORKER, TrialLog
    from ._workers import Workers


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f"._{_LAZY[name]}", __name__), name)
        globals()[name] = value  # the next look-up does not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
