#!/usr/bin/env bash
# The linter (ruff) and the type checker (mypy) on src/ and benchmarks/src/, as CI runs them; settings in pyproject.toml.
# Installs nothing: both come with the dev extra (pip install -e '.[dev]'). Runs both, fails if either does.
set -uo pipefail
cd "$(dirname "$0")/.."
for tool in ruff mypy; do
  if [ ! -x ".venv/bin/$tool" ]; then
    echo "lint: .venv/bin/$tool not found; install the dev extra: .venv/bin/pip install -e '.[dev]'" >&2
    exit 2
  fi
done
status=0
echo "== ruff check src/ benchmarks/src/"
.venv/bin/ruff check src/ benchmarks/src/ "$@" || status=1
echo "== mypy src/declrag benchmarks/src/declrag_bench"
.venv/bin/mypy || status=1
exit $status
