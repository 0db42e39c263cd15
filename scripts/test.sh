#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite, as CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the web page test drives a real headless Chromium (Debian's package); without it that one test is skipped
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } \
    || echo "chromium could not be installed: the browser test will be skipped"
fi
.venv/bin/python -m pytest -q "$@"
