#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite, as CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
# --ocr: Tesseract too, so that the OCR tests read real scanned pages (they skip, saying why, where it cannot be had)
bash scripts/setup.sh --ocr
# the web page test drives a real headless Chromium (Debian's package); without it that one test is skipped
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } \
    || echo "chromium could not be installed: the browser test will be skipped"
fi
# `declrag bench pdf` typesets its corpus with pdfLaTeX (Debian's texlive); its test skips, saying so, without it
if ! command -v pdflatex >/dev/null && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      texlive-latex-base texlive-latex-recommended texlive-fonts-recommended lmodern; } \
    || echo "texlive could not be installed: the typeset-PDF benchmark test will be skipped"
fi
# the Weaviate tests start real servers (one node, a keyed node, a 3-node cluster) from a weaviate-server built
# from its Go module; build it here, once (cached), so that its cost shows up front. Without Go they are skipped.
if command -v go >/dev/null; then
  bash scripts/weaviate.sh build >/dev/null || echo "weaviate-server could not be built: the Weaviate tests will fail"
else
  echo "Go not found: the Weaviate tests will be skipped (install Go from https://go.dev/dl to run them)"
fi
# the tracing test sends its spans to a real Jaeger, also built from its Go module (scripts/jaeger.sh), and the MLflow
# test logs a compile to a real tracking server (scripts/mlflow.sh: MLflow from PyPI in a venv of its own): both
# prepared here, once, so that their cost shows up front
if command -v go >/dev/null; then
  bash scripts/jaeger.sh build >/dev/null || echo "jaeger could not be built: the tracing test will fail"
fi
bash scripts/mlflow.sh build >/dev/null || echo "MLflow could not be installed: the MLflow test will be skipped"
# the PostgreSQL tests (marker `postgres`) start their own servers from Debian's postgresql package; install it
# here, once, so that its cost shows up front. Where it cannot be installed they are skipped and say why.
bash scripts/postgres.sh install >/dev/null || echo "PostgreSQL could not be installed: the postgres tests will be skipped"
# ruff and mypy on src/ (settings in pyproject.toml); set -e stops here when either fails
bash scripts/lint.sh
# the documentation site (docs/, mkdocs.yml), built strict: a broken link, a missing page or an API reference page
# whose module is gone stops here (tests/e2e/test_docs.py builds it too, and runs the quick start's commands)
site=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet -d "$site" || { rm -rf "$site"; exit 1; }
rm -rf "$site"
# the 30 slowest tests are listed at the end, so that what makes CI long is seen
.venv/bin/python -m pytest -q --durations=30 "$@"
