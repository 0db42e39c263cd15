"""requirements.lock is what gets installed and tested: it satisfies pyproject.toml, this environment holds exactly
its versions (scripts/setup.sh installs from it), and regenerating it changes nothing (scripts/lock.sh --check)."""

from __future__ import annotations

import socket
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, version

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

LOCK = ROOT / "requirements.lock"
EXTRAS = ("dev", "offline", "postgres", "otel", "mlflow")  # what scripts/setup.sh installs (and scripts/lock.sh resolves)


def locked() -> dict[str, list[Requirement]]:
    """The lock's pins by package name (a package may have one pin per platform or Python version)."""
    pins: dict[str, list[Requirement]] = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            r = Requirement(line)
            assert len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==", f"not an exact pin: {line}"
            pins.setdefault(canonicalize_name(r.name), []).append(r)
    return pins


def applies(r: Requirement, extra: str = "") -> bool:
    return r.marker is None or r.marker.evaluate({"extra": extra})


def test_the_lock_pins_a_version_pyproject_allows_for_every_requirement():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [(Requirement(d), "") for d in project["dependencies"]]
    wanted += [(Requirement(d), e) for e in EXTRAS for d in project["optional-dependencies"][e]]
    pins = locked()
    problems = []
    for req, extra in wanted:
        if not applies(req, extra):
            continue
        here = [p for p in pins.get(canonicalize_name(req.name), []) if applies(p)]
        if not here:
            problems.append(f"{req} ({extra or 'dependencies'}) is not in the lock")
        elif not all(req.specifier.contains(str(next(iter(p.specifier)).version), prereleases=True) for p in here):
            problems.append(f"{req} ({extra or 'dependencies'}): the lock has {', '.join(map(str, here))}")
    assert not problems, ("pyproject.toml and requirements.lock disagree; run bash scripts/lock.sh:\n"
                          + "\n".join(problems))


def test_this_environment_holds_the_locked_versions():
    """What CI tests is what the lock says (scripts/setup.sh installs it with -c requirements.lock)."""
    wrong = []
    for name, reqs in locked().items():
        for r in reqs:
            if not applies(r):
                continue
            want = str(next(iter(r.specifier)).version)
            try:
                have = version(name)
            except PackageNotFoundError:
                have = "not installed"
            if have != want:
                wrong.append(f"{name}: {have} installed, {want} locked")
    assert not wrong, ("this environment is not the locked one (rm .venv/.declrag-setup-* && bash scripts/setup.sh "
                       "reinstalls it):\n" + "\n".join(wrong))


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def test_regenerating_the_lock_changes_nothing():
    if not _pypi_reachable():
        pytest.skip("PyPI is not reachable from here: scripts/lock.sh --check resolves against it")
    p = subprocess.run(["bash", str(ROOT / "scripts" / "lock.sh"), "--check"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
