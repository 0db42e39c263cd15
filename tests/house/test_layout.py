"""The size rule of src/declrag and benchmarks/ (import cycles are test_house.py's): no file over 450 lines and no
function over 80 lines, with no exception; and a package's ``__init__.py`` only hands names on (under 60 lines, no
function or class of its own; the root's lazy public surface aside)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"declrag": REPO / "src" / "declrag", "bench": REPO / "benchmarks" / "src" / "declrag_bench"}
MAX_FILE_LINES, MAX_FUNCTION_LINES = 450, 80


def test_files_and_functions_stay_small_enough_to_read():
    too_long = []
    files = [(p, f"{name}:{p.relative_to(root).as_posix()}") for name, root in ROOTS.items() for p in root.rglob("*.py")]
    for p, rel in files:
        text = p.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            too_long.append(f"{rel}: {len(text.splitlines())} lines")
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                length = n.end_lineno - n.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{n.lineno} {n.name}: {length} lines")
    assert not too_long, "split these: " + "; ".join(too_long)


def test_package_init_files_only_hand_names_on():
    """Every subpackage's ``__init__.py`` is its surface: imports, ``__all__``, and for a lazy one (PEP 562) the
    name -> module table and ``__getattr__``/``__dir__`` that hand names on; its logic lives in named modules."""
    bad = []
    for root in ROOTS.values():
        for init in sorted(root.rglob("__init__.py")):
            if init.parent == root:
                continue  # the root's lazy public surface (declrag.load, declrag.search...) may be longer
            text = init.read_text()
            rel = init.relative_to(root.parent).as_posix()
            if len(text.splitlines()) >= 60:
                bad.append(f"{rel}: {len(text.splitlines())} lines")
            for n in ast.parse(text).body:
                if isinstance(n, ast.ClassDef) or (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                                                   and n.name not in ("__getattr__", "__dir__")):
                    bad.append(f"{rel}:{n.lineno} defines {n.name}")
    assert not bad, "move the logic into a named module of the package: " + "; ".join(bad)
