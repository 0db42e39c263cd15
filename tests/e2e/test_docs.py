"""The documentation site builds with `mkdocs build --strict` (a broken link, a missing page or an API page whose
module is gone fails it), and every command of the quick start (docs/quickstart.md) runs as written.

The quick start marks each of its `bash` blocks with an HTML comment just above it:
`<!-- test: run | expect: TEXT -->` runs the block (bash -e) and expects exit status 0 and TEXT in its output;
`<!-- test: serve -->` starts the block in the background and waits for the server's /readyz; it is stopped with
SIGTERM at the end and must exit 0. A `bash` block without a mark fails the test, so that none goes unrun. The
blocks run in order, in an empty folder holding a copy of docs/ (the quick start says so), with a
fresh home folder (so fresh caches), no DECLRAG_* variable, the Hugging Face Hub off (the offline embedder
package), and port 8000 replaced by a free one. Then the served program is asked 20 questions about the guides over
HTTP (`benchmarks/data/docs-questions.jsonl`): no answer repeats the prompt, and each is cited or an abstention
that says why."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from declrag.pipeline.stages.generate._echo import caught
from tests.conftest import ROOT, free_port

QUICKSTART = ROOT / "docs" / "quickstart.md"
BIN = Path(sys.executable).parent  # the environment's own `declrag` and `mkdocs`
MARK = re.compile(r"<!-- test: (run|serve)(?: \| expect: (.*?))? -->\n```bash\n(.*?)\n```", re.S)


def blocks() -> list[tuple[str, str, str]]:
    """(kind, expected text, commands) for each bash block of the quick start, in order."""
    text = QUICKSTART.read_text()
    found = [(m.group(1), (m.group(2) or "").strip(), m.group(3)) for m in MARK.finditer(text)]
    assert len(found) == text.count("```bash"), "a ```bash block of docs/quickstart.md has no <!-- test: ... --> mark"
    return found


def test_the_documentation_site_builds_strict(tmp_path):
    mkdocs = BIN / "mkdocs"
    assert mkdocs.exists(), "mkdocs is not installed: bash scripts/setup.sh installs it (the dev extra)"
    r = subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    site = tmp_path / "site"
    assert (site / "quickstart" / "index.html").is_file()
    api = (site / "reference" / "config" / "index.html").read_text()
    assert "ProgramConfig" in api  # the API reference is generated from the docstrings


def test_every_quick_start_block_is_marked():
    found = blocks()
    kinds = [k for k, _, _ in found]
    assert kinds.count("serve") == 1 and all(e for k, e, _ in found if k == "run"), found


def commands(block: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block)
    return [" ".join(line.split("  #")[0].split()) for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_readme_tour_is_the_quick_start():
    """README.md shows the quick start's commands in short; they must stay the ones the test below runs."""
    readme = (ROOT / "README.md").read_text()
    tour = readme[readme.index("## Five minutes"):readme.index("## Where to read next")]
    shown = [c for b in re.findall(r"```bash\n(.*?)\n```", tour, re.S) for c in commands(b)]
    tested = [c for _, _, b in blocks() for c in commands(b)]
    assert len(shown) == 8 and shown == tested, (shown, tested)


def test_the_readme_links_to_pages_that_exist():
    links = re.findall(r"\]\(([^)#]+)\)", (ROOT / "README.md").read_text())
    assert links and not [link for link in links if not (ROOT / link).is_file()], links


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    home.mkdir()
    shutil.copytree(ROOT / "docs", work / "docs")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DECLRAG_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "HF_HOME")}
    env |= {"HOME": str(home), "HF_HUB_OFFLINE": "1", "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "COLUMNS": "120"}
    if os.environ.get("PYTHONPATH"):  # a checkout run with PYTHONPATH=src: the same source under test
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    port = str(free_port())
    server, log = None, None
    took: list[str] = []  # seconds per block, printed (pytest -s) to keep an eye on the test's time
    try:
        for kind, expect, commands in blocks():
            commands = commands.replace("8000", port)
            start = time.monotonic()
            if kind == "serve":
                log = (work / "serve.log").open("w")
                server = subprocess.Popen(["bash", "-c", f"exec {commands}"], cwd=work, env=env, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                deadline = time.monotonic() + 300
                while True:
                    assert server.poll() is None, f"{commands} exited {server.returncode}:\n" \
                                                  f"{(work / 'serve.log').read_text()[-3000:]}"
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
                            if resp.status == 200:
                                break
                    except (urllib.error.URLError, ConnectionError, TimeoutError):
                        pass
                    assert time.monotonic() < deadline, "the server was not ready in 300 s"
                    time.sleep(0.5)
                took.append(f"{time.monotonic() - start:6.1f} s  {commands.splitlines()[0]} (until ready)")
                continue
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=work, env=env, capture_output=True,
                               text=True, timeout=600, stdin=subprocess.DEVNULL)
            out = r.stdout + r.stderr
            assert r.returncode == 0, f"{commands}\nexited {r.returncode}:\n{out[-4000:]}"
            assert expect in out, f"{commands}\ndid not print {expect!r}:\n{out[-4000:]}"
            took.append(f"{time.monotonic() - start:6.1f} s  {commands.splitlines()[0]}")
        start = time.monotonic()
        answers = [(q, _ask(port, q)) for q in GUIDE_QUESTIONS]
        took.append(f"{time.monotonic() - start:6.1f} s  {len(answers)} questions over HTTP")
    finally:
        print("\n".join(took))
        if server is not None:
            server.send_signal(signal.SIGTERM)  # drains requests in flight and exits 0
            try:
                code = server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                code = server.wait()
            log.close()
            assert code == 0, (work / "serve.log").read_text()[-3000:]
    assert (work / "runs" / "first" / "best" / "program.json").is_file()
    assert "answers: extractive" in (work / "serve.log").read_text()  # the start says how it answers
    for q, a in answers:
        assert caught(a["answer"], q, []) is None and a["caught"] is None, (q, a["answer"])
        assert a["citations"] or (a["abstained"] and a["reason"]), (q, a)
    assert sum(not a["abstained"] for _, a in answers) >= len(answers) // 2, [a["answer"] for _, a in answers]


GUIDE_QUESTIONS = [json.loads(line)["question"] for line in
                   (ROOT / "benchmarks" / "data" / "docs-questions.jsonl").read_text().splitlines()[::2][:20]]


def _ask(port: str, question: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/ask", data=json.dumps({"question": question}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())
