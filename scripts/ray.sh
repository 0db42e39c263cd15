#!/usr/bin/env bash
# A real Ray cluster on loopback, for tests and benchmarks: a head node and worker nodes on this machine, each a
# raylet of its own, started with `ray start` as on real machines (Ray from `pip install 'declrag[ray]'`).
#
#   bash scripts/ray.sh start [--dir DIR] [--port P] [--workers N] [--cpus C]
#                                     # head + N worker nodes (default 1) of C CPUs each (default 1); prints the address
#   bash scripts/ray.sh kill-worker [--dir DIR] [--index I]
#                                     # SIGKILL worker node I's raylet (default 1): the node is lost, as a machine is
#   bash scripts/ray.sh stop [--dir DIR] [--clean]
#                                     # stop this cluster's processes only (never `ray stop`, which stops every one)
#   bash scripts/ray.sh status [--dir DIR]   # exit status 0 when the head answers, 1 when not
#
# The head is reached at 127.0.0.1:P (default: a free port). Ray itself binds every interface and runs without
# authentication: start it on trusted machines only. DIR (default: a new temporary folder) holds the nodes'
# logs, `address`, one `nodeN` file per worker with its node id, and `tempdir`: the nodes' session files, in a
# short /tmp/ray-XXXXXX of their own (Ray's sockets need a path under 108 bytes). Without --dir,
# kill-worker/stop/status act on the last cluster started. Every node runs this checkout's Python (.venv/bin/ray,
# else `ray` on PATH), so its workers import the same declrag. Exit status 3: Ray is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${DECLRAG_CACHE:-$HOME/.cache/declrag}/ray
LAST=$CACHE/last-dir
TIMEOUT=${RAY_START_TIMEOUT:-120}

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "ray.sh: $*" >&2; }

RAY=.venv/bin/ray
[ -x "$RAY" ] || RAY=$(command -v ray || true)
PY=$(dirname "${RAY:-/x}")/python
[ -x "$PY" ] || PY=python3

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
dir="" port="" workers=1 cpus=1 index=1 clean=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --index) index=$2; shift 2 ;;
    --clean) clean=1; shift ;;
    *) say "unknown argument '$1'"; usage ;;
  esac
done
if [ -z "$dir" ]; then
  if [ "$cmd" = start ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/declrag-ray.XXXXXX")
  elif [ -f "$LAST" ]; then dir=$(cat "$LAST")
  else say "no cluster started yet (give --dir)"; exit 1; fi
fi

# this cluster's processes: every one whose command line names its session folder (gcs, raylets, workers)
tmpd() { cat "$dir/tempdir" 2>/dev/null || echo "$dir/none"; }
pids() { pgrep -f -- "$(tmpd)" || true; }

case "$cmd" in
  start)
    [ -n "$RAY" ] || { say "Ray is not installed: pip install 'declrag[ray]'"; exit 3; }
    mkdir -p "$dir" "$CACHE"
    mktemp -d /tmp/ray-XXXXXX > "$dir/tempdir"
    [ -n "$port" ] || port=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    common=(--node-ip-address=127.0.0.1 --num-cpus="$cpus" --num-gpus=0 --disable-usage-stats)
    export RAY_USAGE_STATS_ENABLED=0
    # a lost node is noticed in about 3 s, not Ray's 15 (its GCS checks every node's health)
    export RAY_health_check_period_ms=1000 RAY_health_check_timeout_ms=1000 RAY_health_check_failure_threshold=3
    "$RAY" start --head --port="$port" --temp-dir="$(tmpd)" --include-dashboard=false "${common[@]}" \
      > "$dir/head.log" 2>&1 || { say "the head did not start:"; tail -20 "$dir/head.log" >&2; exit 1; }
    echo "127.0.0.1:$port" > "$dir/address"
    echo "$dir" > "$LAST"
    for i in $(seq 1 "$workers"); do
      "$RAY" start --address="127.0.0.1:$port" "${common[@]}" > "$dir/worker$i.log" 2>&1 \
        || { say "worker node $i did not start:"; tail -20 "$dir/worker$i.log" >&2; exit 1; }
    done
    # wait until every node is alive; note each worker's node id (the head's is the one with the head's resource)
    "$PY" - "$dir" "$((workers + 1))" "$TIMEOUT" <<'EOF' || { say "the nodes did not all come up"; exit 1; }
import sys, time
import ray
d, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ray.init(address=open(f"{d}/address").read().strip(), logging_level="ERROR", log_to_driver=False)
end = time.time() + timeout
while True:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= want or time.time() > end:
        break
    time.sleep(0.5)
workers = [n["NodeID"] for n in alive if "node:__internal_head__" not in n["Resources"]]
for i, node in enumerate(workers, 1):
    open(f"{d}/node{i}", "w").write(node)
sys.exit(0 if len(alive) >= want else 1)
EOF
    say "$((workers + 1)) nodes up, $dir"
    cat "$dir/address"
    ;;
  kill-worker)
    node=$(cat "$dir/node$index" 2>/dev/null) || { say "no worker node $index in $dir"; exit 1; }
    raylet=$(pgrep -f -- "raylet.*--node_id=$node" || true)
    [ -n "$raylet" ] || { say "worker node $index ($node) has no raylet running"; exit 1; }
    kill -9 $raylet
    say "killed worker node $index's raylet (pid $raylet)"
    ;;
  stop)
    for sig in TERM KILL; do
      p=$(pids); [ -n "$p" ] || break
      kill -s "$sig" $p 2>/dev/null || true
      for _ in $(seq 1 20); do [ -n "$(pids)" ] || break; sleep 0.25; done
    done
    [ "$clean" = 1 ] && rm -rf "$(tmpd)" "$dir"
    say "stopped"
    ;;
  status)
    [ -f "$dir/address" ] || exit 1
    addr=$(cat "$dir/address")
    "$PY" -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); socket.create_connection((h,int(p)),2)" "$addr" \
      2>/dev/null
    ;;
  *) usage ;;
esac
