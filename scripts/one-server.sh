# shellcheck shell=bash
# What scripts/jaeger.sh and scripts/mlflow.sh share: one server process in a folder of its own, started in a session
# of its own (its workers with it), its pid in DIR/NAME.pid and its log in DIR/NAME.log, stopped as a process group.
# Sourced after the script sets NAME (the file names), LABEL (the messages), PORT (the default base port) and LAST.
#   server_args "$@"           sets cmd, dir, port and clean from: CMD [--dir DIR] [--port P] [--clean]
#   launch DIR PROGRAM ARGS... start it; wait_ready DIR SECONDS CHECK...: until CHECK succeeds, or fail with the log
#   stop_server DIR            SIGTERM to its group, then SIGKILL after 15 s

say() { echo "$NAME.sh: $*" >&2; }

alive() { [ -f "$1/$NAME.pid" ] && kill -0 "$(cat "$1/$NAME.pid")" 2>/dev/null; }

server_args() {
  cmd=${1:-}; [ -n "$cmd" ] || usage; shift
  dir="" port=$PORT clean=0
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) dir=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --clean) clean=1; shift ;;
      *) usage ;;
    esac
  done
  if [ -z "$dir" ] && [ "$cmd" = stop ]; then
    [ -f "$LAST" ] || { say "no $LABEL started yet (give --dir)"; exit 2; }
    dir=$(cat "$LAST")
  fi
}

launch() {  # dir program args...
  local d=$1; shift
  mkdir -p "$(dirname "$LAST")"; echo "$d" > "$LAST"
  setsid "$@" >> "$d/$NAME.log" 2>&1 < /dev/null &
  echo $! > "$d/$NAME.pid"
}

wait_ready() {  # dir seconds check...
  local d=$1 deadline=$((SECONDS + $2)); shift 2
  until "$@"; do
    if ! alive "$d" || [ $SECONDS -ge $deadline ]; then
      say "$LABEL did not become ready; the end of its log:"; tail -n 15 "$d/$NAME.log" >&2 || true
      alive "$d" && kill -KILL -- "-$(cat "$d/$NAME.pid")" 2>/dev/null
      exit 1
    fi
    sleep 0.3
  done
}

stop_server() {  # dir
  local d=$1 pid deadline
  if alive "$d"; then
    pid=$(cat "$d/$NAME.pid")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 15))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$d/$NAME.pid"
  [ "$clean" = 1 ] && rm -rf "$d"
  say "stopped $d"
}
