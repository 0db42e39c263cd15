#!/usr/bin/env bash
# The GPU check: SciFact indexed and all-MiniLM-L6-v2 fine-tuned on one device, against the 2-core CPU figures.
#
#   bash scripts/gpu-check.sh [--device cuda|cuda:N|cpu] [--limit N] [--steps N] [--json PATH] [options]
#   bash scripts/gpu-check.sh --json runs/bench/gpu-check.json     # the whole check on the first CUDA GPU
#   bash scripts/gpu-check.sh --device cpu --limit 60 --steps 2    # exercise it on a machine without a GPU
#
# Indexes the SciFact corpus (fixed 256/32 chunks, a fresh temporary embedding cache) and reports chunks/s and
# documents/s; embeds 256 of those chunks on the device and on the CPU (tolerance: min cosine >= 0.999); checks that
# a CPU config finds the index the device built (the device is not in the index address); fine-tunes on the train
# qrels, 40 steps of 32 (lr 5e-5, mini-batch 4, seed 13), and times it. Prints a Markdown table against the CPU
# figures; --json writes every number with the torch and CUDA versions and the GPU's name. Under 8 minutes on one
# GPU. Everything it writes goes to a temporary folder, removed at the end. Needs .venv (bash scripts/setup.sh) and
# ../shared/datasets/scifact; on a machine without network, set HF_HUB_OFFLINE=1.
# The options: .venv/bin/python benchmarks/scripts/gpu_check.py --help
# Exit status: 0 passed; 1 a vector or address check failed; 2 bad arguments; 3 the device is not available here.
set -euo pipefail

cd "$(dirname "$0")/.."

case "${1:-}" in
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

if [ ! -x .venv/bin/python ]; then
  echo "gpu-check.sh: .venv not found in $(pwd); set it up first: bash scripts/setup.sh" >&2
  exit 2
fi

exec .venv/bin/python benchmarks/scripts/gpu_check.py "$@"
