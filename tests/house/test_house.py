"""The house: no import circles inside declrag, layers it only imports down, and imports where a reader sees them.

Every module of src/declrag is parsed (nothing is imported); every ``from .x import y``, ``from declrag.x
import y`` and ``import declrag.x`` is an edge, wherever it is written: at module level, inside a function
(the usual way a circle is hidden), or under ``if TYPE_CHECKING``. A circle of any length fails the test,
listed with the file and line of each of its imports. The parent packages Python runs implicitly on an
import (``declrag/__init__.py``, ``declrag/stores/__init__.py``...) are not edges.

The layers, lowest first (`LAYERS`): a module imports its own layer and those below, never one above; nothing
in the product imports the benchmarks (``benchmarks/``, package ``declrag_bench``). An import of declrag's own
modules inside a function says why on its line or the line above (start-up time, an optional dependency).
The benchmarks (``benchmarks/src/declrag_bench``) are held to the same: no circle, and their own layers
(`BENCH_LAYERS`: helpers, benchmarks, the commands).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "src"

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


def test_the_benchmarks_have_no_import_cycles():
    edges = import_graph(BENCH, "declrag_bench")
    assert edges, "no imports found in benchmarks/src: the graph builder is broken"
    bad = list(cycles(edges))
    assert not bad, "import cycles in benchmarks/src/declrag_bench:\n" + "\n".join(describe(c, edges) for c in bad)


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


# lowest first: the first part of a module's dotted name below ``declrag`` ("" is the package's own facade)
LAYERS: list[tuple[str, set[str]]] = [
    ("types, config, errors, text, runtime", {"types", "config", "errors", "inputs", "payloads", "text", "runtime"}),
    ("embed, lm, stores, access", {"embed", "lm", "stores", "access"}),
    ("ingest, golden, usage", {"ingest", "golden", "usage"}),
    ("pipeline", {"pipeline", "api"}),
    ("evaluation, optimize", {"metrics", "evaluate", "optimize", "synth", "testing"}),
    ("answering", {"answering"}),
    ("serve, cli", {"serve", "cli", ""}),
]


# the benchmarks' layers: shared helpers, then one module per benchmark, then the commands that run them (`cli`
# registers the others' commands); None: every module not named in another layer
BENCH_LAYERS: list[tuple[str, set[str] | None]] = [
    ("bench helpers", {"common", "servers", "probes", "rounds"}),
    ("benchmarks", None),
    ("bench commands", {"cli", "nolabels_cli", "rayindex_cli", "usage_cli"}),
]

Layers = list[tuple[str, set[str] | None]]


def layer_of(module: str, layers: Layers | None = None) -> int:
    layers = LAYERS if layers is None else layers  # type: ignore[assignment]
    head = module.split(".")[1] if "." in module else ""
    for i, (_, names) in enumerate(layers):
        if names is not None and head in names:
            return i
    for i, (_, names) in enumerate(layers):
        if names is None:
            return i
    raise AssertionError(f"{module} has no layer: add {head!r} to LAYERS in tests/house/test_house.py")


def upward(edges: Edges, layers: Layers | None = None) -> list[str]:
    layers = LAYERS if layers is None else layers  # type: ignore[assignment]
    return [f"{a} ({layers[layer_of(a, layers)][0]}) imports {b} ({layers[layer_of(b, layers)][0]}) at "
            f"{', '.join(where)}"
            for a, targets in sorted(edges.items()) for b, where in sorted(targets.items())
            if layer_of(b, layers) > layer_of(a, layers)]


def test_no_module_imports_up_a_layer():
    bad = upward(import_graph())
    assert not bad, "imports that go up a layer:\n" + "\n".join(bad)


def test_no_benchmark_imports_up_a_layer():
    edges = import_graph(BENCH, "declrag_bench")
    bad = upward(edges, BENCH_LAYERS)
    assert not bad, "benchmark imports that go up a layer:\n" + "\n".join(bad)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    pkg = tmp_path / "declrag"
    (pkg / "pipeline").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "pipeline" / "__init__.py").write_text("")
    (pkg / "types.py").write_text("def f():\n    from .pipeline import program\n")
    (pkg / "pipeline" / "program.py").write_text("from ..types import f\n")
    bad = upward(import_graph(tmp_path))
    assert len(bad) == 1 and bad[0].startswith("declrag.types (types, config, errors, text, runtime) imports "
                                               "declrag.pipeline.program (pipeline)") and "types.py:2" in bad[0]


# the front ends that answer questions: every module of serve (HTTP, MCP) and the CLI's ask and serving commands
FRONT_ENDS = ("declrag.serve", "declrag.cli._query", "declrag.cli._serving", "declrag.cli._mcp_serving")
# a program's calls (`declrag.answering.Program`, `RAGProgram`'s public methods); ``search`` only on these receivers
PROGRAM_CALLS = {"warm_up", "search", "forward", "retrieve_only", "with_settings", "generating", "learned_from"}
SEARCHERS = {"service", "api"}  # the answering service; `declrag.api.search` searches a store, not a program


def front_ends_past_the_service(root: Path = SRC) -> list[str]:
    """Where a front end reaches the program other than through the answering service: any import of
    `declrag.pipeline` (which program to run is `declrag.answering.selection`'s, handed to the service as a loader),
    or a call of a program's method (on anything but the service, or `declrag.api` for ``search``)."""
    bad = []
    for mod, targets in sorted(import_graph(root).items()):
        if mod.startswith(FRONT_ENDS):
            bad += [f"{mod} imports {t} at {', '.join(w)}" for t, w in sorted(targets.items())
                    if t.startswith("declrag.pipeline")]
    for mod, (path, _) in sorted(modules(root).items()):
        if not mod.startswith(FRONT_ENDS):
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and isinstance(f := n.func, ast.Attribute) and f.attr in PROGRAM_CALLS:
                receiver = f.value.id if isinstance(f.value, ast.Name) else ast.unparse(f.value)
                if receiver not in SEARCHERS:
                    bad.append(f"{mod} calls {ast.unparse(f)}() at {path.relative_to(root.parent)}:{n.lineno}")
    return bad


def test_the_front_ends_reach_the_program_only_through_the_answering_service():
    bad = front_ends_past_the_service()
    assert not bad, "front ends that reach the program past declrag.answering:\n" + "\n".join(bad)


def test_the_front_end_check_sees_a_program_called_directly(tmp_path):
    pkg = tmp_path / "declrag"
    for sub in ("serve", "pipeline", "cli", "answering"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "pipeline" / "program.py").write_text("class RAGProgram: ...\n")
    (pkg / "answering" / "selection.py").write_text("def select_program(): ...\n")
    (pkg / "serve" / "mcp.py").write_text("from ..pipeline.program import RAGProgram\n"
                                          "def tool(program, service):\n    service.search('q')\n"
                                          "    return program.search('q')\n")
    (pkg / "cli" / "_query.py").write_text("from ..answering.selection import select_program\n"
                                          "def ask():\n    select_program().load().warm_up()\n")
    bad = front_ends_past_the_service(tmp_path)
    assert len(bad) == 3, bad
    assert bad[0].startswith("declrag.serve.mcp imports declrag.pipeline.program at ") and "serve/mcp.py:1" in bad[0]
    assert "declrag.cli._query calls select_program().load().warm_up()" in bad[1]
    assert "declrag.serve.mcp calls program.search() at " in bad[2] and "serve/mcp.py:4" in bad[2]


def test_the_product_never_imports_the_benchmarks():
    found = [f"{p.relative_to(SRC)}:{n.lineno}" for p in sorted((SRC / "declrag").rglob("*.py"))
             for n in _imports(ast.parse(p.read_text(encoding="utf-8")))
             if any(name.split(".")[0] == "declrag_bench" for name in _names(n))]
    assert not found, f"the product imports declrag_bench at {found}"


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    return [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]


def inner_imports_without_a_reason(root: Path = SRC) -> list[str]:
    """Imports of declrag's own modules inside a function with no comment on their line or the line above."""
    out = []
    for p in sorted((root / "declrag").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for n in ast.walk(fn):
                own = isinstance(n, ast.ImportFrom) and (n.level > 0 or (n.module or "").startswith("declrag"))
                own = own or isinstance(n, ast.Import) and any(a.name.startswith("declrag") for a in n.names)
                if own and not _said(lines, n.lineno - 1):
                    out.append(f"{p.relative_to(root)}:{n.lineno}")
    return sorted(set(out))


def _said(lines: list[str], i: int) -> bool:
    """A comment on line ``i`` (0-based), or on the line above the run of imports it belongs to."""
    if "#" in lines[i]:
        return True
    while i > 0 and lines[i - 1].lstrip().startswith(("from ", "import ")):
        i -= 1
        if "#" in lines[i]:
            return True
    return i > 0 and lines[i - 1].lstrip().startswith("#")


def test_imports_inside_functions_say_why():
    bad = inner_imports_without_a_reason()
    assert not bad, ("move these imports to the top of their module, or say why not in a comment (start-up time, "
                     "an optional dependency): " + ", ".join(bad))
