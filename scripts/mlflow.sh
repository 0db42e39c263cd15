#!/usr/bin/env bash
# A real MLflow tracking server on loopback (MLflow from PyPI, in a virtual environment of its own so that the
# server's dependencies never meet declrag's), with a SQLite backend and the artifacts served by the server.
#
#   bash scripts/mlflow.sh build                          # install the server once (cached), print its mlflow path
#   bash scripts/mlflow.sh start [--dir DIR] [--port P]   # start, wait until ready, print the tracking URI last
#   bash scripts/mlflow.sh stop [--dir DIR] [--clean]     # stop (SIGTERM, then SIGKILL after 15 s)
#
# Version: MLFLOW_VERSION (default below), installed with pip into $DECLRAG_BUILD_CACHE (else $DECLRAG_CACHE, else ~/.cache/declrag)/mlflow/VERSION/.
# Exit status 3: the server cannot be installed here (no network to PyPI, no venv module). DIR (default: a new
# temporary folder) holds mlflow.db (runs), artifacts/, mlflow.log and mlflow.pid. Port: P (default 15000).
set -euo pipefail

VERSION=${MLFLOW_VERSION:-3.17.2}
CACHE=${DECLRAG_BUILD_CACHE:-${DECLRAG_CACHE:-$HOME/.cache/declrag}}/mlflow
ENV_DIR=$CACHE/$VERSION
BIN=$ENV_DIR/bin/mlflow
LAST=$CACHE/last-dir
NAME=mlflow LABEL="MLflow server" PORT=15000
# shellcheck source=scripts/one-server.sh
. "$(dirname "$0")/one-server.sh"

usage() { sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

build() {
  if [ -x "$BIN" ]; then echo "$BIN"; return 0; fi
  local py=${PYTHON:-python3} t0=$SECONDS
  say "installing MLflow $VERSION into $ENV_DIR (about a minute the first time)"
  rm -rf "$ENV_DIR.tmp"
  if ! "$py" -m venv "$ENV_DIR.tmp" >&2 || ! "$ENV_DIR.tmp/bin/pip" install -q "mlflow==$VERSION" >&2; then
    rm -rf "$ENV_DIR.tmp"
    say "could not install MLflow $VERSION from PyPI here; run a tracking server yourself and pass its URI"
    exit 3
  fi
  rm -rf "$ENV_DIR" && mv "$ENV_DIR.tmp" "$ENV_DIR"
  # a venv's scripts name their interpreter by absolute path: rewrite them for the folder's final place
  sed -i "1s|$ENV_DIR.tmp|$ENV_DIR|" "$ENV_DIR"/bin/*
  say "installed in $((SECONDS - t0)) s: $BIN"
  echo "$BIN"
}

server_args "$@"

case $cmd in
  build) build ;;
  start)
    build > /dev/null
    dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/declrag-mlflow.XXXXXX")}
    mkdir -p "$dir/artifacts"; dir=$(cd "$dir" && pwd)
    if alive "$dir"; then say "$dir already has a running server (stop it first)"; exit 2; fi
    t0=$SECONDS
    launch "$dir" "$BIN" server --backend-store-uri "sqlite:///$dir/mlflow.db" --artifacts-destination \
      "$dir/artifacts" --host 127.0.0.1 --port "$port" --workers 1
    wait_ready "$dir" 120 curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health"
    say "MLflow $VERSION ready in $((SECONDS - t0)) s; runs and artifacts in $dir"
    echo "http://127.0.0.1:$port"
    ;;
  stop) stop_server "$dir" ;;
  *) usage ;;
esac
