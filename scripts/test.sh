#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite, as CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -q "$@"
