"""The local model runs on any x86-64 machine, or says in one line why not: the llama.cpp that setup.sh builds holds
no AMX tile instruction and was not built for this CPU alone; a library that kills the process that loads it (SIGILL)
kills a child process instead, and the command says so (exit 2) and the server answers 503 with that message while
it stays up; the demo's `ask` answers with citations on the real library; and the CLI answers --help, --version and
usage errors without importing torch, DSPy or LiteLLM."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from declrag.runtime import gguf

from tests.conftest import ROOT, shared

SCRIPT = Path(sys.executable).parent / "declrag"
AMX_OPS = ("tileloadd", "tilestored", "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps", "ldtilecfg",
           "tilezero")
HEAVY = ("torch", "dspy", "litellm", "lancedb", "transformers", "sentence_transformers", "llama_cpp")


def run(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 600):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, stdin=subprocess.DEVNULL)


# -- the build ---------------------------------------------------------------------------------------------------
def test_the_built_library_was_built_for_x86_64_v3_without_amx():
    if not gguf.llama_libs():
        pytest.skip("llama-cpp-python is not installed")
    info = gguf.system_info()["info"]
    assert "AMX" not in gguf._features(info).split(), info  # llama.cpp names AMX_INT8 = 1 in a build with AMX
    if os.uname().machine == "x86_64" and not os.environ.get("DECLRAG_LLAMA_CMAKE_ARGS"):
        on = gguf._features(info).split()
        assert {"AVX2", "FMA", "F16C"} <= set(on), info  # the portable level setup.sh asks for ...
        assert "AVX512" not in on and "AVX512_VNNI" not in on, info  # ... and nothing above it


def test_no_amx_tile_and_no_avx512_instruction_in_the_library():
    """The disassembly itself: no AMX tile instruction anywhere, and (with setup.sh's own flags, on x86-64) no
    AVX-512 register either, so the library runs on an AVX2 CPU (the native build here has 15,648 zmm operands)."""
    libs = [p for p in gguf.llama_libs() if p.suffix == ".so" or ".so." in p.name]
    if not libs:
        pytest.skip("llama-cpp-python's shared libraries are not here")
    if shutil.which("objdump") is None:
        pytest.skip("objdump (binutils) is not installed: the disassembly check needs it")
    portable = os.uname().machine == "x86_64" and not os.environ.get("DECLRAG_LLAMA_CMAKE_ARGS")
    for lib in libs:
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                             check=True).stdout
        amx = [line for line in asm.splitlines() if any(op in line for op in AMX_OPS)]
        assert not amx, f"{lib.name}: {amx[:3]}"
        if portable:
            zmm = [line for line in asm.splitlines() if "%zmm" in line]
            assert not zmm, f"{lib.name}: {len(zmm)} AVX-512 instructions, e.g. {zmm[:2]}"


def test_setup_builds_into_a_folder_keyed_by_its_flags_without_pip_s_cache():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "--no-cache-dir" in text and "--no-binary llama-cpp-python" in text
    # one build per machine and flags, in the cache the servers are built into ($DECLRAG_BUILD_CACHE, else declrag's)
    cache = "${DECLRAG_BUILD_CACHE:-${DECLRAG_CACHE:-$HOME/.cache/declrag}}"
    assert f'llama_dir="{cache}/wheels/llama-cpp-python/$LLAMA_KEY"' in text
    key = subprocess.run(["bash", "-c", ". scripts/llama-flags.sh; echo $LLAMA_KEY; echo $LLAMA_CMAKE_ARGS"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    other = subprocess.run(["bash", "-c", ". scripts/llama-flags.sh; echo $LLAMA_KEY"], cwd=ROOT, capture_output=True,
                           text=True, check=True, env={**os.environ, "DECLRAG_LLAMA_CMAKE_ARGS": "-DGGML_NATIVE=ON"})
    assert key[0] and other.stdout.strip() and key[0] != other.stdout.strip()  # other flags, another wheel folder
    assert "GGML_NATIVE=OFF" in key[1] and "-march=native" not in key[1]
    p = subprocess.run(["bash", "scripts/setup.sh", "--rebuild-local-modle"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and "unknown option '--rebuild-local-modle'" in p.stderr and "Traceback" not in p.stderr


# -- a library that kills the process that loads it ------------------------------------------------------------------
@pytest.fixture(scope="module")
def crashing_llama(tmp_path_factory):
    """A stand-in llama_cpp package, first on PYTHONPATH, whose import raises SIGILL: what a library built for
    instructions this CPU lacks does to the process that runs it."""
    root = tmp_path_factory.mktemp("sigill")
    (root / "llama_cpp").mkdir()
    (root / "llama_cpp" / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    return {"PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
            "DECLRAG_CACHE": str(tmp_path_factory.mktemp("sigill-cache")), "DECLRAG_LOCAL_BACKEND": "llama-cpp"}


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    shared("squad-v2.0")
    store = tmp_path_factory.mktemp("store") / "s"
    p = run("index", str(ROOT / "README.md"), "--store", str(store), "-q")
    assert p.returncode == 0, p.stderr
    return store


def test_a_crash_of_the_local_model_is_one_line_and_exit_2(crashing_llama, small_store):
    p = run("ask", "What does declrag compile search?", "--store", str(small_store), "--model", "local/smollm2",
            env=crashing_llama)
    assert "Traceback" not in p.stdout + p.stderr
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("  fix: "), p.stderr
    assert "SIGILL" in lines[0] and "this CPU has" in lines[0] and "SmolLM2" in lines[0], lines[0]
    assert "scripts/setup.sh --rebuild-local-model" in lines[1]
    record = json.loads((Path(crashing_llama["DECLRAG_CACHE"]) / "local-model.json").read_text())
    assert [v["ok"] for v in record["loads"].values()] == [False]

    # remembered: the next process says the same without trying again (no child: the record answers)
    again = run("ask", "What does declrag serve?", "--store", str(small_store), "--model", "local/smollm2",
                env=crashing_llama)
    assert again.returncode == 2 and "SIGILL" in again.stderr


def test_a_load_that_works_is_remembered_and_not_tried_again(tmp_path, monkeypatch):
    """The real library and model: the child loads it and makes a token; the outcome is kept per (library, model
    file, CPU flags), so the next process (here: the process memory cleared) reads it instead of starting a child."""
    if not gguf.llama_libs():
        pytest.skip("llama-cpp-python is not installed")
    model = gguf.resolve_local("smollm2")
    monkeypatch.setenv("DECLRAG_CACHE", str(tmp_path))
    monkeypatch.setattr(gguf, "_checked", set())
    monkeypatch.setattr(gguf, "_hashes", {})  # a fresh process: nothing hashed yet
    gguf.check_load(model)
    record = json.loads((tmp_path / "local-model.json").read_text())
    (outcome,) = record["loads"].values()
    assert outcome["ok"] is True and outcome["library_info"].startswith("CPU :"), outcome
    assert record["files"][str(model)]["sha256"] == gguf.file_sha256(model)

    def no_child(*args, **kwargs):
        raise AssertionError("a remembered outcome started a child process")

    monkeypatch.setattr(gguf, "_checked", set())
    monkeypatch.setattr(gguf, "_child", no_child)
    gguf.check_load(model)  # answered by the record
    monkeypatch.setattr(gguf, "cpu_flags", lambda: ["another", "cpu"])
    with pytest.raises(AssertionError, match="started a child"):  # another CPU is another key: tried again
        gguf.check_load(model)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_503_with_the_crash_and_stays_up(crashing_llama, small_store):
    port = free_port()
    proc = subprocess.Popen([str(SCRIPT), "serve", "--store", str(small_store), "--port", str(port), "--model",
                             "local/smollm2"],
                            env={**os.environ, **crashing_llama}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=2):
                    break  # ready: the store and the embedder loaded; the local model could not
            except OSError:  # not listening yet, or 503 while loading
                time.sleep(0.5)
        assert proc.poll() is None, "the server died"
        req = urllib.request.Request(base + "/v1/ask", data=json.dumps({"question": "What is declrag?"}).encode(),
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        body = json.loads(e.value.read())
        assert e.value.code == 503, body
        assert "SIGILL" in json.dumps(body) and "rebuild-local-model" in json.dumps(body), body
        search = urllib.request.Request(base + "/v1/search", data=json.dumps({"query": "compile", "k": 2}).encode(),
                                        headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(search, timeout=30) as r:  # still up, and search needs no LM
            assert r.status == 200 and json.loads(r.read())["hits"]
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_version_prints_what_llama_cpp_was_built_for():
    p = run("--version")
    assert p.returncode == 0, p.stderr
    assert "llama.cpp built for: " in p.stdout and "this CPU has: " in p.stdout
    if gguf.llama_libs():
        built = p.stdout.split("llama.cpp built for: ")[1].splitlines()[0]
        assert built.startswith("CPU :"), built  # llama.cpp's own system info, read from the library
        if os.uname().machine == "x86_64" and not os.environ.get("DECLRAG_LLAMA_CMAKE_ARGS"):
            assert "AVX2 = 1" in built and "AVX512 = 1" not in built, built


# -- the demo ----------------------------------------------------------------------------------------------------
def test_the_demo_answers_with_citations_on_the_real_library():
    """`bash scripts/demo.sh` as a newcomer runs it (its own store, the local model in the `declrag` process)."""
    shared("squad-v2.0")
    p = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert "Illegal instruction" not in p.stderr
    cited = [line for line in p.stdout.splitlines() if re.match(r"\s*\[\d+\] ", line)]
    assert cited and "LM calls" in p.stdout, p.stdout[-2000:]
    # its own question ("In what country is Normandy located?") is answered by a cited sentence naming the country
    answer = next(line for line in p.stdout.splitlines() if "Normand" in line and re.search(r"\[\d+\]\s*$", line))
    assert re.search(r"France[^\[]*\[\d+\]", answer), answer


# -- a CLI that answers at once ------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["complie"], ["ask", "--help"], ["index", "--nosuch"],
                                  ["bench", "retrieval", "--help"], ["search"]])
def test_help_version_and_usage_errors_import_nothing_heavy(argv):
    code = (f"import sys\nfrom declrag.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY', [m for m in {HEAVY!r} if m in sys.modules])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    heavy = p.stdout.rsplit("HEAVY", 1)[-1].strip()
    assert heavy == "[]", (argv, heavy, p.stderr[-500:])
