#!/usr/bin/env bash
# The main job on the embedded default store: index a real corpus (SQuAD v2.0 dev's 1,204 Wikipedia
# paragraphs), then answer a search with hybrid retrieval. Re-running reuses the store and the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_DISABLE_TELEMETRY=1
.venv/bin/declrag index --dataset squad-v2.0 --store .declrag/demo
.venv/bin/declrag search "${1:-What did the Normans fight the Byzantines for?}" --store .declrag/demo --k 5
