"""Print declrag's public surface as JSON: every command's ``--help`` and the HTTP API's OpenAPI schema.

A reorganisation must leave both unchanged: ``python scripts/surface.py > before.json``, change, run it again and
diff the two (``tests/house/test_surface.py`` compares against the copy kept in ``tests/data/surface.json``)."""

from __future__ import annotations

import json
import os
import sys

import typer


def helps() -> dict[str, str]:
    from typer.testing import CliRunner

    from declrag.cli import app

    root = typer.main.get_command(app)
    runner = CliRunner()
    out: dict[str, str] = {}

    def walk(cmd, path: list[str]) -> None:  # typer carries its own click: no isinstance on click's classes
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"},
                       prog_name="declrag")
        out[" ".join(["declrag", *path])] = r.output
        if getattr(cmd, "commands", None):
            for name in sorted(cmd.commands):
                walk(cmd.commands[name], [*path, name])

    walk(root, [])
    return out


def openapi() -> dict:
    from declrag.serve import ServeSettings, create_app

    return create_app(lambda: None, "demo", "runs/demo/best", ServeSettings()).openapi()


def surface() -> dict:
    os.environ.setdefault("COLUMNS", "120")
    return {"help": helps(), "openapi": openapi()}


if __name__ == "__main__":
    json.dump(surface(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
