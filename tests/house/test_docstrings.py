"""The public API's docstrings say what each argument is, what comes back and what is raised (Google style, as DSPy's),
read by the parser the documentation site renders them with (griffe, `mkdocs.yml`'s ``docstring_style: google``):
every parameter is in ``Args`` and nothing else is, a function that returns something has ``Returns``, one that
raises declrag's error says so in ``Raises``. `CHECKED` lists the API held to it; a function added to it is checked
from then on."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import griffe
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: module -> the public functions and classes (their public methods too) whose docstrings are checked
CHECKED = {
    "declrag.api": ["index", "load_documents", "search"],
    "declrag.pipeline.program": ["RAGProgram", "load", "default_program"],
    "declrag.pipeline.stage_list": ["resolved", "needed_specs", "variant_specs", "lm_stages"],
    "declrag.stores._opening": ["connect", "read_meta", "open_store"],
    "declrag.golden._loading": ["load_golden"],
    "declrag.metrics.retrieval": ["register_at_k", "is_retrieval"],
    "declrag.config._program": ["register_section"],
    "declrag.ingest.loaders": ["iter_files", "load_paths", "load_file", "read_file", "read_data"],
}


def _functions() -> list[tuple[str, griffe.Function]]:
    out = []
    for module, names in CHECKED.items():
        loaded = griffe.load(module, search_paths=[str(SRC)], docstring_parser="google")
        for name in names:
            obj = loaded[name]
            obj = obj.final_target if obj.is_alias else obj
            if obj.is_class:
                out.append((f"{module}.{name}", obj))  # the class's docstring documents its constructor
                out += [(f"{module}.{name}.{m}", f) for m, f in obj.members.items()
                        if f.is_function and not m.startswith("_") and "property" not in f.labels]
            else:
                out.append((f"{module}.{name}", obj))
    return out


def _sections(obj) -> dict[str, list]:
    if obj.docstring is None:
        return {}
    return {s.kind.value: s.value for s in obj.docstring.parse("google", warn_unknown_params=False)}


def _params(obj) -> list[str]:
    fn = obj.members["__init__"] if obj.is_class else obj
    params = list(fn.parameters)[1:] if fn.parent is not None and fn.parent.is_class else list(fn.parameters)
    return [p.name for p in params if p.kind.value not in ("variadic positional", "variadic keyword")]


def _raises_declrag(obj) -> bool:
    tree = ast.parse(textwrap.dedent((obj.members["__init__"] if obj.is_class else obj).source))
    return any(isinstance(n, ast.Raise) and n.exc is not None and "DeclragError" in ast.unparse(n.exc)
               for n in ast.walk(tree))


@pytest.mark.parametrize("name,obj", _functions(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_public_api_documents_its_arguments_what_it_returns_and_raises(name, obj):
    sections = _sections(obj)
    assert sections, f"{name}: no docstring"
    documented = [p.name for p in sections.get("parameters", [])]
    params = _params(obj)
    assert documented == [p for p in params if p in documented], f"{name}: Args out of the signature's order"
    assert set(params) <= set(documented), f"{name}: Args lacks {sorted(set(params) - set(documented))}"
    assert set(documented) <= set(params), f"{name}: Args names what it does not take: " \
                                           f"{sorted(set(documented) - set(params))}"
    returns = (obj.members["__init__"] if obj.is_class else obj).returns
    if not obj.is_class and returns is not None and str(returns) not in ("None",):
        assert "returns" in sections, f"{name}: returns {returns} but has no Returns section"
    if _raises_declrag(obj):
        assert "raises" in sections, f"{name}: raises DeclragError but has no Raises section"


def test_the_check_finds_an_argument_left_out(tmp_path):
    """The check itself: a function whose docstring forgets an argument, or names one it does not take, is caught."""
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('def f(a: int, b: int) -> int:\n    """Sum.\n\n    Args:\n        a: one.\n'
                                     '        c: three.\n\n    Returns:\n        The sum.\n    """\n    return a + b\n')
    obj = griffe.load("toy", search_paths=[str(tmp_path)], docstring_parser="google")["f"]
    documented = [p.name for p in _sections(obj)["parameters"]]
    assert set(_params(obj)) - set(documented) == {"b"} and set(documented) - set(_params(obj)) == {"c"}
