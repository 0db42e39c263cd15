"""The `declrag` command tree's root: the Typer app, ``--version`` and ``declrag version``."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from typing import Annotated

import typer

from ._common import out

COMMAND_GROUP = "declrag.commands"  # entry points: NAME = "module:typer_app", added as `declrag NAME ...`

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="declrag: declarative, self-optimizing RAG.")


def _add_installed_groups() -> None:
    """Command groups other distributions register (``declrag bench`` comes from ``declrag-bench``, in
    ``benchmarks/``, which the dev set-up installs). One that cannot be loaded is named, and the rest still run."""
    for ep in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        try:
            group = ep.load()
        except Exception as e:  # a broken plug-in must not take the product's own commands down
            print(f"declrag: the '{ep.name}' commands ({ep.value}) could not be loaded: {type(e).__name__}: {e}; "
                  f"reinstall the package that provides them", file=sys.stderr)
            continue
        app.add_typer(group, name=ep.name)


_add_installed_groups()


def _version_option(value: bool) -> None:
    if value:
        _print_about(json_out=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version_option,
        help="print declrag's version and the versions a bug report needs, then exit")] = False,
) -> None:
    pass


@app.command()
def version(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False):
    """Print declrag's version and what a bug report needs: Python, the libraries, the local model's hash."""
    _print_about(json_out=as_json)


def _print_about(json_out: bool) -> None:
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..config import DEFAULT_ROUTE
    from ..runtime.about import report
    from ..runtime.gguf import instruction_sets, local_model, system_info

    r = {**report(), "local_model": local_model(DEFAULT_ROUTE),
         "llama_cpp": {**system_info(), "cpu": instruction_sets()}}
    if json_out:
        out.print_json(data=r)
        return
    v, py, pf, lm = r["versions"], r["python"], r["platform"], r["local_model"]
    lines = [f"declrag {v['declrag']} (Python {py['version']} {py['implementation']}, {pf['system']} {pf['machine']})"]
    lines += [f"  {name} {ver}" for name, ver in v.items() if name not in ("python", "declrag")]
    lines.append(f"  CLI parser: {r['typer_click']}")
    if lm["file"]:
        lines.append(f"  local model {lm['route']}: {lm['file']} ({lm['bytes'] / 1e6:.1f} MB, sha256 {lm['sha256']})")
    else:
        lines.append(f"  local model {lm['route']}: {lm['problem']} (fix: {lm['fix']})")
    lines.append(f"  llama.cpp built for: {r['llama_cpp']['info']}")
    lines.append(f"  this CPU has: {r['llama_cpp']['cpu']}")
    out.print("\n".join(lines), markup=False, highlight=False)
    for name, u in r["untested"].items():  # on stderr: what was printed above stays what scripts read
        print(f"warning: {name} {u['installed']} is outside the range declrag was tested with ({u['tested']}); "
              f"if something breaks, pip install '{name}{u['tested']}'", file=sys.stderr)
