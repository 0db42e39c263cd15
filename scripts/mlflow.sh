#!/usr/bin/env bash
# A real MLflow tracking server on loopback (MLflow from PyPI, in a virtual environment of its own so that the
# server's dependencies never meet declrag's), with a SQLite backend and the artifacts served by the server.
#
#   bash scripts/mlflow.sh build                          # install the server once (cached), print its mlflow path
#   bash scripts/mlflow.sh start [--dir DIR] [--port P]   # start, wait until ready, print the tracking URI last
#   bash scripts/mlflow.sh stop [--dir DIR] [--clean]     # stop (SIGTERM, then SIGKILL after 15 s)
#
# Version: MLFLOW_VERSION (default below), installed with pip into ${DECLRAG_CACHE:-~/.cache/declrag}/mlflow/VERSION/.
# Exit status 3: the server cannot be installed here (no network to PyPI, no venv module). DIR (default: a new
# temporary folder) holds mlflow.db (runs), artifacts/, mlflow.log and mlflow.pid. Port: P (default 15000).
set -euo pipefail

VERSION=${MLFLOW_VERSION:-3.17.2}
CACHE=${DECLRAG_CACHE:-$HOME/.cache/declrag}/mlflow
ENV_DIR=$CACHE/$VERSION
BIN=$ENV_DIR/bin/mlflow
LAST=$CACHE/last-dir

usage() { sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "mlflow.sh: $*" >&2; }

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

alive() { [ -f "$1/mlflow.pid" ] && kill -0 "$(cat "$1/mlflow.pid")" 2>/dev/null; }

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
dir="" port=15000 clean=0
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --clean) clean=1; shift ;;
    *) usage ;;
  esac
done
if [ -z "$dir" ] && [ "$cmd" = stop ]; then
  [ -f "$LAST" ] || { say "no MLflow server started yet (give --dir)"; exit 2; }
  dir=$(cat "$LAST")
fi

case $cmd in
  build) build ;;
  start)
    build > /dev/null
    dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/declrag-mlflow.XXXXXX")}
    mkdir -p "$dir/artifacts"; dir=$(cd "$dir" && pwd)
    if alive "$dir"; then say "$dir already has a running server (stop it first)"; exit 2; fi
    mkdir -p "$CACHE"; echo "$dir" > "$LAST"
    t0=$SECONDS
    setsid "$BIN" server --backend-store-uri "sqlite:///$dir/mlflow.db" --artifacts-destination "$dir/artifacts" \
      --host 127.0.0.1 --port "$port" --workers 1 >> "$dir/mlflow.log" 2>&1 < /dev/null &
    echo $! > "$dir/mlflow.pid"
    deadline=$((SECONDS + 120))
    until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health"; do
      if ! alive "$dir" || [ $SECONDS -ge $deadline ]; then
        say "MLflow did not become ready; the end of its log:"; tail -n 15 "$dir/mlflow.log" >&2 || true
        alive "$dir" && kill -KILL -- "-$(cat "$dir/mlflow.pid")" 2>/dev/null
        exit 1
      fi
      sleep 0.5
    done
    say "MLflow $VERSION ready in $((SECONDS - t0)) s; runs and artifacts in $dir"
    echo "http://127.0.0.1:$port"
    ;;
  stop)
    if alive "$dir"; then
      pid=$(cat "$dir/mlflow.pid")
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true  # the server and its workers
      deadline=$((SECONDS + 15))
      while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$dir/mlflow.pid"
    [ "$clean" = 1 ] && rm -rf "$dir"
    say "stopped $dir"
    ;;
  *) usage ;;
esac
