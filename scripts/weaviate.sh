#!/usr/bin/env bash
# A real Weaviate server on loopback, built from its Go module (no Docker): one node or a three-node cluster.
#
#   bash scripts/weaviate.sh build                       # build weaviate-server once (cached), print its path
#   bash scripts/weaviate.sh start [--nodes 1|3] [--dir DIR] [--port P] [--api-key KEY]
#                                                        # start, wait until ready, print the store URI last
#   bash scripts/weaviate.sh stop [--dir DIR] [--clean]  # stop (SIGTERM, then SIGKILL after 30 s); --clean: remove DIR
#   bash scripts/weaviate.sh status [--dir DIR]
#   bash scripts/weaviate.sh kill-node N [--dir DIR]     # SIGKILL node N (fault tests)
#   bash scripts/weaviate.sh start-node N [--dir DIR]    # start node N again, same settings, wait until ready
#                                                        # (it joins the cluster through a node that is running)
#
# Version: WEAVIATE_VERSION (default below), built with CGO_ENABLED=0 -tags netgo as upstream does, into
# $DECLRAG_BUILD_CACHE (else $DECLRAG_CACHE, else ~/.cache/declrag)/weaviate/VERSION/. Exit status 3: the server cannot be had here (no Go).
# DIR (default: a new temporary folder) holds node-N/ (data), node-N.log, node-N.pid, node-N.env and uri.
# Without --dir, stop/status/kill-node/start-node act on the last cluster started.
#
# Ports of node N (0, 1, 2) from the base P (default 18080), all on 127.0.0.1:
#   REST P+N, gRPC P+100+N, gossip P+200+10N, data P+201+10N, RAFT P+300+10N, RAFT RPC P+301+10N,
#   Prometheus metrics P+400+N (/metrics; `declrag bench retrieval` reads the server's own query times there)
# (in localhost mode Weaviate takes a remote node's RAFT RPC port as its RAFT port + 1).
# The URI printed for three nodes names them all (weaviate://127.0.0.1:P,127.0.0.1:P+1,127.0.0.1:P+2/?grpc=P+100):
# a store handle goes on with another node when the one it talks to stops answering.
set -euo pipefail

VERSION=${WEAVIATE_VERSION:-v1.33.18}
CACHE=${DECLRAG_BUILD_CACHE:-${DECLRAG_CACHE:-$HOME/.cache/declrag}}/weaviate
BIN_DIR=$CACHE/$VERSION
BIN=$BIN_DIR/weaviate-server
LAST=$CACHE/last-dir

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "weaviate.sh: $*" >&2; }

build() {
  if [ -x "$BIN" ]; then echo "$BIN"; return 0; fi
  if ! command -v go >/dev/null 2>&1; then
    say "Go is needed to build Weaviate $VERSION (https://go.dev/dl), or run a server yourself and set WEAVIATE_URL"
    exit 3
  fi
  mkdir -p "$BIN_DIR"
  say "building weaviate-server $VERSION from the Go module proxy (several minutes the first time)"
  local t0=$SECONDS
  CGO_ENABLED=0 GOBIN="$BIN_DIR" GOFLAGS=-mod=mod go install -tags netgo \
    "github.com/weaviate/weaviate/cmd/weaviate-server@$VERSION" >&2
  say "built in $((SECONDS - t0)) s: $BIN"
  echo "$BIN"
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ready() { curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$1/v1/.well-known/ready"; }

# the per-node environment, written once at start so that start-node replays it exactly
write_env() {  # node nodes port apikey dir
  local n=$1 nodes=$2 p=$3 key=$4 dir=$5 join="" i
  for ((i = 0; i < nodes; i++)); do join+="${join:+,}wv$i:$((p + 300 + 10 * i))"; done
  {
    echo "export PERSISTENCE_DATA_PATH='$dir/node-$n'"
    echo "export CLUSTER_HOSTNAME=wv$n"
    echo "export GRPC_PORT=$((p + 100 + n))"
    echo "export CLUSTER_IN_LOCALHOST=true"
    echo "export CLUSTER_ADVERTISE_ADDR=127.0.0.1"
    echo "export CLUSTER_GOSSIP_BIND_PORT=$((p + 200 + 10 * n))"
    echo "export CLUSTER_DATA_BIND_PORT=$((p + 201 + 10 * n))"
    echo "export RAFT_PORT=$((p + 300 + 10 * n))"
    echo "export RAFT_INTERNAL_RPC_PORT=$((p + 301 + 10 * n))"
    echo "export RAFT_BOOTSTRAP_EXPECT=$nodes"
    echo "export RAFT_JOIN='$join'"
    [ "$n" -gt 0 ] && echo "export CLUSTER_JOIN=127.0.0.1:$((p + 200))"
    echo "export DEFAULT_VECTORIZER_MODULE=none"
    echo "export ENABLE_MODULES=''"
    echo "export DISABLE_TELEMETRY=true"
    echo "export GO_PROFILING_DISABLE=true"
    echo "export LOG_LEVEL=warning"
    echo "export QUERY_DEFAULTS_LIMIT=25"
    echo "export PROMETHEUS_MONITORING_ENABLED=true"
    echo "export PROMETHEUS_MONITORING_PORT=$((p + 400 + n))"
    if [ -n "$key" ]; then
      echo "export AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=false"
      echo "export AUTHENTICATION_APIKEY_ENABLED=true"
      echo "export AUTHENTICATION_APIKEY_ALLOWED_KEYS='$key'"
      echo "export AUTHENTICATION_APIKEY_USERS=declrag"
    else
      echo "export AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true"
    fi
    echo "REST_PORT=$((p + n))"
  } > "$dir/node-$n.env"
  chmod 600 "$dir/node-$n.env"
}

launch() {  # node dir [join]: join, the gossip address of a running node to join (a restarted node)
  local n=$1 dir=$2 join=${3:-}
  (
    # shellcheck disable=SC1090
    . "$dir/node-$n.env"
    [ -n "$join" ] && export CLUSTER_JOIN=$join
    mkdir -p "$PERSISTENCE_DATA_PATH"
    setsid "$BIN" --scheme http --host 127.0.0.1 --port "$REST_PORT" >> "$dir/node-$n.log" 2>&1 < /dev/null &
    echo $! > "$dir/node-$n.pid"
  )
}

rest_port() { (. "$1/node-$2.env"; echo "$REST_PORT"); }

alive() { [ -f "$1/node-$2.pid" ] && kill -0 "$(cat "$1/node-$2.pid")" 2>/dev/null; }

wait_ready() {  # dir node...
  local dir=$1; shift
  local deadline=$((SECONDS + 180)) n
  for n in "$@"; do
    until ready "$(rest_port "$dir" "$n")"; do
      if ! alive "$dir" "$n" || [ $SECONDS -ge $deadline ]; then
        say "node $n did not become ready; the end of its log:"
        tail -n 15 "$dir/node-$n.log" >&2 || true
        return 1
      fi
      sleep 0.5
    done
  done
}

wait_healthy() {  # dir nodes [node]: asked of node (default 0)
  local dir=$1 nodes=$2 deadline=$((SECONDS + 180)) port
  port=$(rest_port "$dir" "${3:-0}")
  until [ "$(curl -sf --max-time 2 "http://127.0.0.1:$port/v1/nodes" | grep -o '"status":"HEALTHY"' | wc -l)" -ge "$nodes" ]; do
    if [ $SECONDS -ge $deadline ]; then say "the cluster did not report $nodes healthy nodes"; return 1; fi
    sleep 0.5
  done
}

nodes_of() { local f n=0; for f in "$1"/node-*.env; do [ -e "$f" ] && n=$((n + 1)); done; echo $n; }

stop_dir() {  # dir
  local dir=$1 n pid deadline
  for ((n = 0; n < $(nodes_of "$dir"); n++)); do
    alive "$dir" "$n" && kill -TERM "$(cat "$dir/node-$n.pid")" 2>/dev/null || true
  done
  deadline=$((SECONDS + 30))
  for ((n = 0; n < $(nodes_of "$dir"); n++)); do
    [ -f "$dir/node-$n.pid" ] || continue
    pid=$(cat "$dir/node-$n.pid")
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/node-$n.pid"
  done
}

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
nodes=1 dir="" port=18080 key="" clean=0 node=""
case $cmd in kill-node|start-node) [ $# -ge 1 ] || usage; node=$1; shift ;; esac
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --api-key) key=$2; shift 2 ;;
    --clean) clean=1; shift ;;
    *) usage ;;
  esac
done
if [ -z "$dir" ] && [ "$cmd" != build ] && [ "$cmd" != start ]; then
  [ -f "$LAST" ] || { say "no cluster started yet (give --dir)"; exit 2; }
  dir=$(cat "$LAST")
fi

case $cmd in
  build) build ;;
  start)
    [ "$nodes" = 1 ] || [ "$nodes" = 3 ] || { say "--nodes is 1 or 3"; exit 2; }
    build > /dev/null
    dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/declrag-weaviate.XXXXXX")}
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    for ((n = 0; n < 3; n++)); do
      if alive "$dir" "$n"; then say "$dir already has running nodes (stop them first)"; exit 2; fi
    done
    rm -f "$dir"/node-*.env
    for ((n = 0; n < nodes; n++)); do write_env "$n" "$nodes" "$port" "$key" "$dir"; done
    mkdir -p "$CACHE"; echo "$dir" > "$LAST"
    t0=$SECONDS
    launch 0 "$dir"
    if [ "$nodes" -gt 1 ]; then  # the others join through node 0's gossip port: it must listen first
      deadline=$((SECONDS + 60))
      until listening $((port + 200)); do
        if ! alive "$dir" 0 || [ $SECONDS -ge $deadline ]; then wait_ready "$dir" 0 || true; stop_dir "$dir"; exit 1; fi
        sleep 0.2
      done
      for ((n = 1; n < nodes; n++)); do launch "$n" "$dir"; done
    fi
    if ! wait_ready "$dir" $(seq 0 $((nodes - 1))) || { [ "$nodes" -gt 1 ] && ! wait_healthy "$dir" "$nodes"; }; then
      stop_dir "$dir"; exit 1
    fi
    hosts=127.0.0.1:$port  # every node, so that a client fails over when the one it talks to is lost
    for ((n = 1; n < nodes; n++)); do hosts+=,127.0.0.1:$((port + n)); done
    uri="weaviate://$hosts/?grpc=$((port + 100))"
    echo "$uri" > "$dir/uri"
    say "$nodes node(s) of Weaviate ${VERSION#v} ready in $((SECONDS - t0)) s; data and logs in $dir"
    echo "$uri"
    ;;
  stop)
    stop_dir "$dir"
    [ "$clean" = 1 ] && rm -rf "$dir"
    say "stopped $dir"
    ;;
  status)
    for ((n = 0; n < $(nodes_of "$dir"); n++)); do
      if alive "$dir" "$n"; then echo "node $n: running (pid $(cat "$dir/node-$n.pid"), REST port $(rest_port "$dir" "$n"))"
      else echo "node $n: stopped"; fi
    done
    ;;
  kill-node)
    alive "$dir" "$node" || { say "node $node of $dir is not running"; exit 2; }
    kill -KILL "$(cat "$dir/node-$node.pid")"
    while alive "$dir" "$node"; do sleep 0.1; done
    rm -f "$dir/node-$node.pid"
    say "node $node killed (SIGKILL)"
    ;;
  start-node)
    [ -f "$dir/node-$node.env" ] || { say "no node $node in $dir"; exit 2; }
    alive "$dir" "$node" && { say "node $node is running"; exit 2; }
    t0=$SECONDS
    n_all=$(nodes_of "$dir") join=""
    # a restarted node joins through a running one (node 0 started first, with nobody to join, and the
    # others only through node 0: without this, node 0 back after a kill would stay outside the cluster)
    for ((m = 0; m < n_all; m++)); do
      if [ "$m" != "$node" ] && alive "$dir" "$m"; then
        join=127.0.0.1:$(. "$dir/node-$m.env"; echo "$CLUSTER_GOSSIP_BIND_PORT"); break
      fi
    done
    launch "$node" "$dir" "$join"
    wait_ready "$dir" "$node" || exit 1
    [ "$n_all" -gt 1 ] && { wait_healthy "$dir" "$n_all" "$node" || exit 1; }
    say "node $node ready again in $((SECONDS - t0)) s"
    ;;
  *) usage ;;
esac
