"""Private by name, as Optuna's modules are: a module whose name starts with ``_`` is its package's own business, and
every other module is surface, so that the name alone says what another package, or a user, may import.

- A private module is imported only from inside the package that holds it (its ``__init__`` hands on what others
  need).
- A public module inside a package is there for others: another top-level package imports it, or the docs name it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.house.test_house import SRC, Edges, import_graph, modules

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _owner(module: str) -> str | None:
    """The package a private module belongs to (the one holding its first ``_`` part), or None for a public one."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def private_imported_from_outside(edges: Edges) -> list[str]:
    bad = []
    for importer, imported in edges.items():
        for dst, where in imported.items():
            owner = _owner(dst)
            if owner and importer != owner and not importer.startswith(owner + "."):
                bad.append(f"{where[0]}: {importer} imports {dst}, private to {owner}")
    return bad


def public_but_unused(edges: Edges, root: Path = SRC, docs: Path = DOCS) -> list[str]:
    named = set()
    for page in docs.rglob("*.md"):
        named |= set(re.findall(r"declrag(?:\.\w+)+", page.read_text(encoding="utf-8")))
    used_outside = set()
    for importer, imported in edges.items():
        for dst in imported:
            if importer.split(".")[:2] != dst.split(".")[:2]:
                used_outside.add(dst)
    bad = []
    for mod, (path, is_pkg) in modules(root).items():
        if is_pkg or mod.count(".") < 2 or _owner(mod) or mod.endswith(".__main__"):
            continue
        if mod not in used_outside and not any(n == mod or n.startswith(mod + ".") for n in named):
            leaf = mod.rsplit(".", 1)[1]
            bad.append(f"{path.relative_to(root.parent)}: {mod} is used only inside its package; name it _{leaf}")
    return bad


def test_private_modules_are_imported_only_by_their_own_package():
    bad = private_imported_from_outside(import_graph())
    assert not bad, "import these through their package's __init__: " + "; ".join(bad)


def test_every_public_module_is_used_outside_its_package_or_documented():
    bad = public_but_unused(import_graph())
    assert not bad, "; ".join(bad)


def test_the_checks_see_a_private_import_and_an_unused_public_module(tmp_path):
    pkg = tmp_path / "declrag"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "_inner.py").write_text("X = 1\n")
    (pkg / "a" / "helper.py").write_text("from ._inner import X\n")
    (pkg / "b" / "user.py").write_text("from declrag.a._inner import X\n")
    edges = import_graph(tmp_path)
    assert private_imported_from_outside(edges) == [
        f"{tmp_path.name}/declrag/b/user.py:1: declrag.b.user imports declrag.a._inner, private to declrag.a"]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("`declrag.b.user` is documented\n")
    assert public_but_unused(edges, tmp_path, docs) == [
        f"{tmp_path.name}/declrag/a/helper.py: declrag.a.helper is used only inside its package; name it _helper"]
