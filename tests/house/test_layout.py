"""The size rule of src/declrag and benchmarks/ (import cycles are test_house.py's): no file over 450 lines and no
function over 80 lines, except the few named here with the reason each is allowed to be."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"declrag": REPO / "src" / "declrag", "bench": REPO / "benchmarks" / "src" / "declrag_bench"}
MAX_FILE_LINES, MAX_FUNCTION_LINES = 450, 80
LONG_FILES = {  # file -> why it may be longer
}
LONG_FUNCTIONS = {  # (file, function) -> why it may be longer
    ("declrag:optimize/finetune.py", "finetune_model"): "one sentence-transformers training run, configured in sequence",
    ("bench:cluster.py", "_scenario"): "one fault scenario's script: load, kill, restart, count, in time order",
    ("bench:retrieval.py", "run"): "the benchmark's arms in the order they are measured and reported",
}


def test_files_and_functions_stay_small_enough_to_read():
    too_long = []
    files = [(p, f"{name}:{p.relative_to(root).as_posix()}") for name, root in ROOTS.items() for p in root.rglob("*.py")]
    for p, rel in files:
        text = p.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES and rel not in LONG_FILES:
            too_long.append(f"{rel}: {len(text.splitlines())} lines")
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                length = n.end_lineno - n.lineno + 1
                if length > MAX_FUNCTION_LINES and (rel, n.name) not in LONG_FUNCTIONS:
                    too_long.append(f"{rel}:{n.lineno} {n.name}: {length} lines")
    assert not too_long, "split these, or name them and why in tests/house/test_layout.py: " + "; ".join(too_long)
    for rel in [*LONG_FILES, *(f for f, _ in LONG_FUNCTIONS)]:  # an exception that no longer applies goes
        name, _, path = rel.partition(":")
        assert (ROOTS[name] / path).exists(), rel
