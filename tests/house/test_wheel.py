"""declrag as a package: the sdist and the wheel are built from this checkout (no network: no build isolation),
the wheel is installed NOT editable into a fresh virtual environment, and from a folder outside the checkout its
`declrag` command runs what the README shows: index, search, ask (the local model), eval on a tiny golden set,
compile on a retrieval-only space, serve, and init.

The fresh environment sees the already-installed dependencies (torch and all) through one .pth line naming this
interpreter's site-packages; .pth files inside that folder are not processed, so the editable install of
declrag there is not picked up (checked: `declrag.__file__` is in the fresh environment)."""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parents[1] / "data" / "tiny"
KINDS = ("signatures", "optimizers", "datasets")


def shipped(kind: str) -> list[str]:
    """The files of a top-level folder that the build packages."""
    return sorted(f.name for f in (ROOT / kind).iterdir() if f.suffix == ".yaml" or f.name == "README.md")


def sh(*args, cwd: Path | None = None, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, \
        f"{' '.join(map(str, args))} exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist, the wheel built from it, and the wheel built from the checkout directly."""
    out = tmp_path_factory.mktemp("dist")
    sdist = None
    if importlib.util.find_spec("build"):  # the dev extra brings it; without it only the direct wheel is built
        sh(sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", out / "sdist", ROOT, cwd=out)
        sdist = next((out / "sdist").glob("declrag-*.tar.gz"))
        sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out / "from-sdist",
           sdist, cwd=out)
    sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out / "direct", ROOT,
       cwd=ROOT)
    direct = next((out / "direct").glob("declrag-*.whl"))
    from_sdist = next((out / "from-sdist").glob("declrag-*.whl")) if sdist else None
    return {"sdist": sdist, "wheel": from_sdist or direct, "direct": direct}


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory):
    """A fresh virtual environment with the wheel installed (not editable, --no-deps) and the project's
    installed dependencies visible; returns (its bin folder, the environment for its commands)."""
    home = tmp_path_factory.mktemp("wheel-venv")
    env_dir = home / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", env_dir)
    py = env_dir / "bin" / "python"
    # install before the dependencies become visible, so that pip does not see the editable declrag
    sh(sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", built["wheel"])
    purelib = Path(sh(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (purelib / "_declrag_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DECLRAG_MODEL", "DECLRAG_STORE", "DECLRAG_SIGNATURES",
                        "DECLRAG_OPTIMIZERS", "DECLRAG_DATASETS", "DECLRAG_API_KEY")}
    env |= {"DECLRAG_CACHE": str(home / "cache"), "HF_HUB_OFFLINE": "1",  # no hub here: the offline packages
            "PATH": f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    return env_dir / "bin", env, purelib


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A folder outside the checkout, with a few documents and a tiny golden set declared in ./datasets."""
    p = tmp_path_factory.mktemp("wheel-project")
    assert ROOT not in p.parents
    docs = p / "docs"
    docs.mkdir()
    (docs / "solar.md").write_text("# Solar power\n\nPhotovoltaic panels convert sunlight into electricity. "
                                   "Panel efficiency is around twenty percent.\n")
    (docs / "wind.txt").write_text("Wind turbines turn the kinetic energy of moving air into electricity.\n")
    (docs / "tea.txt").write_text("Green tea is steamed, black tea is oxidised.\n")
    data = p / "data" / "tiny"
    data.mkdir(parents=True)
    shutil.copy(TINY / "corpus.jsonl", data / "corpus.jsonl")
    gold = (TINY / "gold.jsonl").read_text().splitlines()
    (data / "train.jsonl").write_text("\n".join(gold[:8]) + "\n")  # a train and a test split, as BEIR sets have
    (data / "test.jsonl").write_text("\n".join(gold[8:]) + "\n")
    (p / "datasets").mkdir()
    (p / "datasets" / "tiny.yaml").write_text("name: tiny\nformat: jsonl\npath: ../data/tiny\n"
                                              "description: six capitals\n")
    return p


def declrag(venv, cwd: Path, *args, timeout: float = 600) -> subprocess.CompletedProcess:
    bin_dir, env, _ = venv
    return sh(bin_dir / "declrag", *args, cwd=cwd, env=env, timeout=timeout)


def test_sdist_and_wheels_carry_the_defaults_and_no_benchmark(built):
    for key in ("wheel", "direct"):
        names = zipfile.ZipFile(built[key]).namelist()
        folders = collections.defaultdict(list)
        for n in names:
            folders[n.rsplit("/", 1)[0]].append(n.rsplit("/", 1)[1])
        for kind in KINDS:
            assert sorted(folders[f"declrag/defaults/{kind}"]) == shipped(kind), (key, kind)
        # the benchmarks (benchmarks/, their own distribution) and the server scripts they run stay out
        assert not [n for n in names if n.startswith(("declrag/scripts/", "declrag/bench/", "declrag_bench/"))]
        assert {"declrag/serve/page.html", "declrag/py.typed", "declrag/runtime/resources.py"} <= set(names)
        meta = zipfile.ZipFile(built[key]).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert "License-Expression: Apache-2.0" in meta and "Requires-Python: >=3.11" in meta
        assert "Provides-Extra: weaviate" in meta and "Requires-Dist: dspy-ai" in meta
    if built["sdist"] is None:
        pytest.skip("`build` is not installed (pip install 'declrag[dev]'): the sdist was not checked")
    with tarfile.open(built["sdist"]) as t:
        files = {n.split("/", 1)[1] for n in t.getnames() if "/" in n and t.getmember(n).isfile()}
    for kind in KINDS:
        assert {f"{kind}/{f}" for f in shipped(kind)} <= files
    assert {"setup.py", "MANIFEST.in", "pyproject.toml", "README.md", "LICENSE"} <= files
    assert not [f for f in files if f.startswith(("scripts/", "benchmarks/"))]


def test_the_installed_package_is_the_wheel_and_its_requirements_hold(venv, project):
    bin_dir, env, purelib = venv
    r = sh(bin_dir / "python", "-c", "import declrag, json; from declrag.runtime import resources; print(json.dumps("
           "[declrag.__file__] + [str(resources.default_dir(k)) for k in resources.KINDS]))", cwd=project, env=env)
    where = [Path(p) for p in json.loads(r.stdout)]
    for p in where:
        assert purelib in p.parents and ROOT not in p.parents, p
    assert where[1:4] == [purelib / "declrag" / "defaults" / k for k in KINDS]
    # what `pip check` does, for the wheel's own requirements (and theirs): every one installed, in range
    check = r'''
import sys
from importlib import metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
dist = metadata.distribution("declrag")
print(dist.locate_file(""))
problems, seen = [], set()
def walk(name, extras, via):
    key = (canonicalize_name(name), frozenset(extras))
    if key in seen:
        return
    seen.add(key)
    d = metadata.distribution(name)
    for line in d.requires or []:
        req = Requirement(line)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{req} (for {via}): not installed")
            continue
        if not req.specifier.contains(have, prereleases=True):
            problems.append(f"{req} (for {via}): {have} installed")
            continue
        walk(req.name, set(req.extras), req.name)
walk("declrag", set(), "declrag")
print(len(seen))
print("\n".join(problems))
'''
    r = sh(bin_dir / "python", "-c", check, cwd=project, env=env)
    location, checked, *problems = r.stdout.splitlines()
    assert Path(location) == purelib
    assert int(checked) > 30 and not [p for p in problems if p.strip()], problems


def test_index_search_ask(venv, project):
    r = declrag(venv, project, "index", "docs/", "--store", ".declrag/store", "-q")
    assert "3 documents indexed" in r.stdout and (project / ".declrag" / "store").is_dir()
    r = declrag(venv, project, "search", "how do solar panels work", "--store", ".declrag/store", "--k", "2",
                "--json")
    hits = json.loads(r.stdout)
    assert len(hits) == 2 and Path(hits[0]["source"]).name == "solar.md"
    # the default program with no model named: the passages' own sentences (extractive), no LM call
    r = declrag(venv, project, "ask", "What do photovoltaic panels convert into electricity?", "--store",
                ".declrag/store", "--json")
    answer = json.loads(r.stdout)
    assert answer["answer"].strip() and not answer["abstained"]
    assert answer["citations"] and {Path(c["source"]).name for c in answer["citations"]} <= {
        "solar.md", "wind.txt", "tea.txt"}
    assert answer["usage"]["total"]["calls"] == 0 and answer["stages"]["generate"] == "extractive"
    # the local model (local/smollm2), in-process, when it is named
    r = declrag(venv, project, "ask", "What do photovoltaic panels convert into electricity?", "--store",
                ".declrag/store", "--json", "--model", "local/smollm2")
    answer = json.loads(r.stdout)
    assert answer["answer"].strip() and answer["citations"]
    assert answer["usage"]["generate"]["calls"] == 1 and answer["stages"]["generate"] == "plain"


def test_eval_on_a_tiny_golden_set(venv, project):
    r = declrag(venv, project, "eval", "--dataset", "tiny", "--limit", "3", "--name", "tiny-eval", "-q", "--model",
                "local/smollm2")
    run = project / "runs" / "tiny-eval"
    assert "report: runs/tiny-eval/report.html" in r.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n"] == 3 and summary["metrics"]["hit@5"]["mean"] == 1.0
    assert summary["usage"]["program"]["calls"] == 3  # three real answers from the local model
    assert len((run / "records.jsonl").read_text().splitlines()) == 3 and (run / "report.html").is_file()


def test_compile_a_retrieval_space_then_serve_it(venv, project):
    # the README's command, run where there is no optimizers/ folder: the packaged space is used
    assert not (project / "optimizers").exists()
    r = declrag(venv, project, "compile", "--space", "optimizers/retrieval.yaml", "--dataset", "tiny", "--name",
                "tiny-ret", "--max-trials", "2", "-q")
    run = project / "runs" / "tiny-ret"
    assert "program: runs/tiny-ret/best" in r.stdout and (run / "best" / "program.json").is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["trials"] == 2 and summary["lm_calls"] == 0
    assert json.loads((run / "compile.json").read_text())["space"]["name"] == "retrieval"

    bin_dir, env, _ = venv
    port = free_port()
    log = (project / "serve.log").open("w")
    proc = subprocess.Popen([str(bin_dir / "declrag"), "serve", "runs/tiny-ret", "--port", str(port)], cwd=project,
                            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            log_text = (project / "serve.log").read_text
            assert proc.poll() is None, f"declrag serve exited {proc.returncode}:\n{log_text()}"
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, f"not ready in 300 s:\n{log_text()}"
            time.sleep(1)
        req = urllib.request.Request(f"{base}/v1/ask", data=json.dumps({"question": "What is the capital of France?"})
                                     .encode(), headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=300) as resp:
            assert resp.status == 200
            body = json.loads(resp.read())
        assert body["answer"].strip() and body["citations"]
        assert all(c["snippet"] for c in body["citations"])
        assert any("Paris" in c["snippet"] for c in body["citations"])
    finally:
        proc.send_signal(signal.SIGTERM)  # drains and exits 0
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        log.close()
    assert code == 0, (project / "serve.log").read_text()


def test_init_copies_the_packaged_defaults(venv, tmp_path):
    _, _, purelib = venv
    folder = tmp_path / "fresh"
    folder.mkdir()
    r = declrag(venv, folder, "init")
    n = sum(len(shipped(k)) for k in KINDS)
    assert f"{n} files written, 0 skipped" in r.stdout and "win over the packaged defaults" in r.stdout
    for kind in KINDS:
        assert sorted(f.name for f in (folder / kind).iterdir()) == shipped(kind)
        for f in (folder / kind).iterdir():
            assert f.read_bytes() == (purelib / "declrag" / "defaults" / kind / f.name).read_bytes()
    r = declrag(venv, folder, "init")
    assert f"0 files written, {n} skipped" in r.stdout
