"""What `declrag --version` says about the installed libraries' versions against the ranges declrag was tested with."""

from __future__ import annotations

import importlib.metadata as md

from typer.testing import CliRunner

from declrag.runtime import about
from declrag.cli._app import app

REQUIRES = ["dspy-ai>=3.0,<3.5", "litellm>=1.50,<1.111", 'uvicorn>=0.30; extra == "serve"', "numpy>=1.26",
            "pyyaml", 'uvloop>=0.19; sys_platform == "nosuchplatform"']


def test_a_library_outside_its_tested_range_is_named_and_the_others_are_not(monkeypatch):
    monkeypatch.setattr(md, "requires", lambda name: REQUIRES)
    installed = {"dspy-ai": "3.5.0", "litellm": "1.110.2", "uvicorn": "0.1", "numpy": "1.20", "pyyaml": "6.0",
                 "uvloop": "0.1"}
    monkeypatch.setattr(about, "package_version", lambda name: installed.get(name, "not installed"))
    got = about.untested()
    assert set(got) == {"dspy-ai", "numpy"}  # an extra's requirement, another platform's, no range: not checked
    assert got["dspy-ai"]["installed"] == "3.5.0" and set(got["dspy-ai"]["tested"].split(",")) == {">=3.0", "<3.5"}


def test_this_install_is_inside_every_tested_range():
    assert about.untested() == {}  # the lock CI installs satisfies pyproject.toml's ranges


def test_version_warns_on_stderr_and_keeps_stdout_as_it_was(monkeypatch):
    monkeypatch.setattr(about, "untested", lambda: {"dspy-ai": {"installed": "3.5.0", "tested": "<3.5,>=3.0"}})
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.startswith("declrag ")
    warn = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert warn == ["warning: dspy-ai 3.5.0 is outside the range declrag was tested with (<3.5,>=3.0); if something "
                    "breaks, pip install 'dspy-ai<3.5,>=3.0'"]
    assert "warning" not in r.stdout
