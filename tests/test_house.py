"""The house: no import circles inside declrag.

Every module of src/declrag is parsed (nothing is imported); every ``from .x import y``, ``from declrag.x
import y`` and ``import declrag.x`` is an edge, wherever it is written: at module level, inside a function
(the usual way a circle is hidden), or under ``if TYPE_CHECKING``. A circle of any length fails the test,
listed with the file and line of each of its imports. The parent packages Python runs implicitly on an
import (``declrag/__init__.py``, ``declrag/stores/__init__.py``...) are not edges.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

Edges = dict[str, dict[str, list[str]]]  # importer -> imported -> ["path:line", ...]


def modules(root: Path, package: str = "declrag") -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):  # every level: module, class, function, if/try bodies
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def import_graph(root: Path = SRC, package: str = "declrag") -> Edges:
    mods = modules(root, package)

    def known(name: str) -> str | None:
        """The module ``name`` is, or the module that defines it (``declrag.metrics.base.Case`` -> ``...base``)."""
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: Edges = {}
    for mod, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    stem = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    stem = node.module or ""
                # ``from .pkg import sub`` names the submodule when there is one, else a name in ``pkg``
                targets = [f"{stem}.{a.name}" for a in node.names]
            for t in targets:
                if t != package and not t.startswith(package + "."):
                    continue
                if (dst := known(t)) is not None and dst != mod:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    seen = edges.setdefault(mod, {}).setdefault(dst, [])
                    if where not in seen:
                        seen.append(where)
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted({*edges, *(w for ws in edges.values() for w in ws)}):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(comp: list[str], edges: Edges) -> str:
    lines = [" <-> ".join(comp)]
    for a in comp:
        for b, where in sorted(edges.get(a, {}).items()):
            if b in comp:
                lines.append(f"    {a} -> {b}  ({', '.join(where)})")
    return "\n".join(lines)


def test_declrag_has_no_import_cycles():
    edges = import_graph()
    assert edges, "no imports found: the graph builder is broken"
    bad = list(cycles(edges))
    assert not bad, "import cycles in src/declrag:\n" + "\n".join(describe(c, edges) for c in bad)


def test_the_graph_sees_imports_hidden_in_functions(tmp_path):
    pkg = tmp_path / "declrag"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import A\n")
    (pkg / "sub" / "a.py").write_text("class A:\n    def f(self):\n        from .b import B\n        return B\n")
    (pkg / "sub" / "b.py").write_text("from declrag.sub.c import C\nB = C\n")
    (pkg / "sub" / "c.py").write_text("import declrag.sub.a\nC = 1\n")
    (pkg / "d.py").write_text("from .sub import a\nfrom . import sub\n")
    edges = import_graph(tmp_path)
    assert cycles(edges) == [["declrag.sub.a", "declrag.sub.b", "declrag.sub.c"]]
    assert set(edges["declrag.d"]) == {"declrag.sub.a", "declrag.sub"}
    assert "declrag/sub/a.py:3" in describe(cycles(edges)[0], edges)
