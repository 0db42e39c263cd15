#!/usr/bin/env bash
# The main job on the embedded default store: index a real corpus (SQuAD v2.0 dev's 1,204 Wikipedia
# paragraphs), show what hybrid search finds for a question, then answer it with the default program
# (the naive RAG baseline; with no model named it answers in the passages' own sentences, each cited with its
# exact span: docs/guides/answer-modes.md). Re-running reuses the store and the caches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_DISABLE_TELEMETRY=1
question="${1:-In what country is Normandy located?}"
.venv/bin/declrag index --dataset squad-v2.0 --store .declrag/demo
.venv/bin/declrag search "$question" --store .declrag/demo --k 3
.venv/bin/declrag ask "$question" --store .declrag/demo
