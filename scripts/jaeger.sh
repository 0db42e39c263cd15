#!/usr/bin/env bash
# A real Jaeger (v2, the OpenTelemetry Collector based all-in-one) on loopback, built from its Go module, no Docker:
# it receives OTLP traces and answers its query API, so that a test reads back the trace declrag sent.
#
#   bash scripts/jaeger.sh build                             # build the jaeger binary once (cached), print its path
#   bash scripts/jaeger.sh start [--dir DIR] [--port P]      # start, wait until ready; prints the OTLP endpoint
#                                                            # (http://127.0.0.1:P+1) and the query URL, one per line
#   bash scripts/jaeger.sh stop [--dir DIR] [--clean]        # stop (SIGTERM, then SIGKILL after 15 s)
#
# Version: JAEGER_VERSION (default below), built with CGO_ENABLED=0 as a tool of a throwaway module (`go get -tool`:
# Jaeger's go.mod has a replace directive, so `go install pkg@version` refuses it), into
# $DECLRAG_BUILD_CACHE (else $DECLRAG_CACHE, else ~/.cache/declrag)/jaeger/VERSION/ (about 7 min of CPU the first time; then Go's build cache makes
# it a link step). Exit status 3: no Go here to build it.
# Ports from the base P (default 24317), all on 127.0.0.1: OTLP gRPC P, OTLP HTTP P+1, query HTTP P+2 (the UI and
# /api/traces), query gRPC P+3, health P+4. Traces are kept in memory (at most 10,000) and lost at stop.
set -euo pipefail

VERSION=${JAEGER_VERSION:-v1.76.0}
CACHE=${DECLRAG_BUILD_CACHE:-${DECLRAG_CACHE:-$HOME/.cache/declrag}}/jaeger
BIN_DIR=$CACHE/$VERSION
BIN=$BIN_DIR/jaeger
LAST=$CACHE/last-dir
NAME=jaeger LABEL=Jaeger PORT=24317
# shellcheck source=scripts/one-server.sh
. "$(dirname "$0")/one-server.sh"

usage() { sed -n '5,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

build() {
  if [ -x "$BIN" ]; then echo "$BIN"; return 0; fi
  if ! command -v go >/dev/null 2>&1; then
    say "Go is needed to build Jaeger $VERSION (https://go.dev/dl), or run a Jaeger yourself and point OTLP at it"
    exit 3
  fi
  local mod=$BIN_DIR/module t0=$SECONDS
  rm -rf "$mod" && mkdir -p "$mod"
  say "building jaeger $VERSION from the Go module proxy (several minutes the first time)"
  (
    cd "$mod"
    go mod init declrag-jaeger-build >/dev/null 2>&1
    GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$VERSION" >&2
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger >&2
  )
  mv "$BIN.tmp" "$BIN" && rm -rf "$mod"
  say "built in $((SECONDS - t0)) s: $BIN"
  echo "$BIN"
}

write_config() {  # dir port
  local p=$2
  cat > "$1/config.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$((p + 4))
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$((p + 2))
    grpc:
      endpoint: 127.0.0.1:$((p + 3))
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$p
      http:
        endpoint: 127.0.0.1:$((p + 1))
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
}

server_args "$@"

case $cmd in
  build) build ;;
  start)
    build > /dev/null
    dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/declrag-jaeger.XXXXXX")}
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    if alive "$dir"; then say "$dir already has a running Jaeger (stop it first)"; exit 2; fi
    write_config "$dir" "$port"
    t0=$SECONDS
    launch "$dir" "$BIN" --config "$dir/config.yaml"
    ready() {
      curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$((port + 2))/api/services" \
        && curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$((port + 1))/v1/traces"
    }
    wait_ready "$dir" 60 ready
    say "Jaeger ${VERSION#v} ready in $((SECONDS - t0)) s; log in $dir/jaeger.log"
    echo "http://127.0.0.1:$((port + 1))"
    echo "http://127.0.0.1:$((port + 2))"
    ;;
  stop) stop_server "$dir" ;;
  *) usage ;;
esac
