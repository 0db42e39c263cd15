#!/usr/bin/env bash
# A real PostgreSQL server on loopback from Debian's packages (no Docker), for tests and benchmarks.
#
#   bash scripts/postgres.sh install                     # install Debian's postgresql if missing, print its bin dir
#   bash scripts/postgres.sh start [--dir DIR] [--port P] [--password-env VAR]
#                                                        # start, wait until ready, print the SQLAlchemy URL last
#   bash scripts/postgres.sh stop [--dir DIR] [--clean]  # stop (pg_ctl stop -m fast); --clean: remove DIR
#   bash scripts/postgres.sh status [--dir DIR]          # exit status 0 when running, 1 when not
#
# The server listens on 127.0.0.1:P only (default 15432; a DIR started before keeps its port unless --port is
# given), its unix socket is in DIR. Database `declrag` is owned by role `declrag` (LOGIN CREATEDB); the URL is
# postgresql+psycopg://declrag@127.0.0.1:P/declrag. Loopback connections are trusted, unless --password-env VAR:
# then the role's password is $VAR and scram-sha-256 is required (give it as PGPASSWORD or in the URL).
# DIR (default: a new temporary folder) holds data/ (the cluster), postgres.log, port, auth and uri.
# Without --dir, stop/status act on the last server started. The superuser `postgres` connects only through
# the socket in DIR. initdb and postgres refuse to run as root: as root, they run as the system user
# ${DECLRAG_PG_USER:-declrag-pg} (created if missing), which gets DIR. Binaries: the newest
# /usr/lib/postgresql/*/bin (or PG_BINDIR). Exit status 3: PostgreSQL cannot be installed here.
set -euo pipefail

CACHE=${DECLRAG_CACHE:-$HOME/.cache/declrag}/postgres
LAST=$CACHE/last-dir
PG_USER=${DECLRAG_PG_USER:-declrag-pg}
TIMEOUT=${PG_START_TIMEOUT:-60}

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "postgres.sh: $*" >&2; }

bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then [ -x "$PG_BINDIR/initdb" ] && echo "$PG_BINDIR"; return; fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1) || true
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

# root runs apt-get itself; others need sudo without a password prompt
priv() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
  else return 1
  fi
}

pg_install() {
  local b
  if b=$(bindir); then echo "$b"; return 0; fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get here: install PostgreSQL yourself (its initdb in /usr/lib/postgresql/*/bin, or set PG_BINDIR)"
    exit 3
  fi
  if ! priv true; then
    say "installing PostgreSQL needs root or password-less sudo: run 'sudo apt-get install postgresql' yourself"
    exit 3
  fi
  say "installing Debian's postgresql package (a minute or more the first time)"
  local t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  if ! priv env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2; then
    say "apt-get install failed; updating the package lists and trying again"
    if ! priv apt-get update -qq >&2 ||
       ! priv env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2; then
      say "could not install postgresql with apt-get (no network or no package source?)"
      exit 3
    fi
  fi
  # the package creates a system cluster (main, port 5432) and may start it: stop it and keep it from starting
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    priv systemctl disable --now postgresql >/dev/null 2>&1 || true
  fi
  if command -v pg_lsclusters >/dev/null 2>&1; then
    local ver name
    while read -r ver name _; do
      [ -n "$name" ] || continue
      priv pg_ctlcluster "$ver" "$name" stop >/dev/null 2>&1 || true
      [ -f "/etc/postgresql/$ver/$name/start.conf" ] &&
        priv sh -c "echo manual > '/etc/postgresql/$ver/$name/start.conf'" || true
      say "the package's cluster $ver/$name is stopped and set to start manually"
    done < <(pg_lsclusters -h 2>/dev/null)
  fi
  b=$(bindir) || { say "postgresql is installed but no initdb was found in /usr/lib/postgresql/*/bin"; exit 3; }
  say "installed in $((SECONDS - t0)) s: $b"
  echo "$b"
}

# run a server program as the owner of the cluster (initdb, pg_ctl and postgres refuse root)
as_pg() {
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u "$PG_USER" -- "$@")
  else "$@"
  fi
}

# as root, act as the user who owns an existing cluster
owner_of() { [ "$(id -u)" = 0 ] && [ -d "$1/data" ] && PG_USER=$(stat -c %U "$1/data"); true; }

ensure_user() {
  [ "$(id -u)" = 0 ] || return 0
  command -v runuser >/dev/null 2>&1 || { say "runuser (util-linux) is needed to run PostgreSQL as root"; exit 3; }
  id -u "$PG_USER" >/dev/null 2>&1 && return 0
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER" ||
    { say "could not create the system user $PG_USER"; exit 3; }
  say "created the system user $PG_USER to run PostgreSQL (it refuses to run as root)"
}

running() { [ -f "$1/data/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$1/data" status >/dev/null 2>&1; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

sq() { printf "%s" "${1//\'/\'\'}"; }  # for a single-quoted SQL / config string

superuser_sql() {  # dir port   (SQL on stdin, through the socket in DIR)
  as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$1" -p "$2" -U postgres -d postgres >/dev/null
}

url_of() { echo "postgresql+psycopg://declrag@127.0.0.1:$1/declrag"; }

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
dir="" port="" pwvar="" clean=0
while [ $# -gt 0 ]; do
  case $1 in
    --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
    --port) [ $# -ge 2 ] || usage; port=$2; shift 2 ;;
    --password-env) [ $# -ge 2 ] || usage; pwvar=$2; shift 2 ;;
    --clean) clean=1; shift ;;
    *) usage ;;
  esac
done
if [ -z "$dir" ] && [ "$cmd" != install ] && [ "$cmd" != start ]; then
  [ -f "$LAST" ] || { say "no server started yet (give --dir)"; exit 2; }
  dir=$(cat "$LAST")
fi

case $cmd in
  install) pg_install ;;
  start)
    if [ -n "$port" ]; then
      [[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || { say "--port is a TCP port number"; exit 2; }
    fi
    password=""
    if [ -n "$pwvar" ]; then
      [[ $pwvar =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { say "--password-env takes the name of a variable"; exit 2; }
      password=${!pwvar:-}
      [ -n "$password" ] || { say "\$$pwvar is empty or unset (--password-env takes the name of a variable)"; exit 2; }
    fi
    BIN=$(pg_install)
    ensure_user
    if [ -z "$dir" ]; then
      dir=$(mktemp -d "${TMPDIR:-/tmp}/declrag-postgres.XXXXXX")
      say "data and logs in $dir (stop with: bash $0 stop --dir $dir --clean)"
    fi
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    owner_of "$dir"
    if [ -z "$port" ]; then port=$(cat "$dir/port" 2>/dev/null || echo 15432); fi
    mkdir -p "$CACHE"; echo "$dir" > "$LAST"
    if running "$dir"; then
      port=$(cat "$dir/port")
      say "a server of $dir is already running on 127.0.0.1:$port ($(cat "$dir/auth" 2>/dev/null || echo trust) auth; stop it to change settings)"
      url_of "$port"
      exit 0
    fi
    # the unix socket path (DIR/.s.PGSQL.P) must fit in sun_path
    [ ${#dir} -le 90 ] || { say "DIR is too long for PostgreSQL's unix socket (keep it under 90 characters): $dir"; exit 2; }
    if listening "$port"; then say "port $port on 127.0.0.1 is already in use (give another --port)"; exit 1; fi
    if [ "$(id -u)" = 0 ]; then
      chown "$PG_USER" "$dir"
      [ ! -d "$dir/data" ] || chown -R "$PG_USER" "$dir/data"
      [ ! -e "$dir/postgres.log" ] || chown "$PG_USER" "$dir/postgres.log"
      as_pg test -w "$dir" -a -x "$dir" ||
        { say "$PG_USER cannot write to $dir (a parent folder is closed to it?): choose another --dir"; exit 1; }
    fi
    t0=$SECONDS
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      rm -rf "$dir/data"
      as_pg "$BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null 2> "$dir/initdb.log" ||
        { say "initdb failed:"; cat "$dir/initdb.log" >&2; exit 1; }
      rm -f "$dir/initdb.log"
      echo "include_if_exists = 'declrag.conf'" | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
    fi
    auth=trust; [ -z "$password" ] || auth=scram-sha-256
    # settings and access rules are written anew at every start
    as_pg tee "$dir/data/declrag.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$(sq "$dir")'
unix_socket_permissions = 0700
password_encryption = 'scram-sha-256'
logging_collector = off
log_min_messages = warning
EOF
    as_pg tee "$dir/data/pg_hba.conf" >/dev/null <<EOF
# TYPE  DATABASE  USER  ADDRESS       METHOD   (written by scripts/postgres.sh)
local   all       all                 trust
host    all       all   127.0.0.1/32  $auth
EOF
    echo "$port" > "$dir/port"
    echo "$auth" > "$dir/auth"
    if ! as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$TIMEOUT" start >/dev/null; then
      say "PostgreSQL did not start; the end of $dir/postgres.log:"
      tail -n 15 "$dir/postgres.log" >&2 || true
      as_pg "$BIN/pg_ctl" -D "$dir/data" stop -m immediate >/dev/null 2>&1 || true
      exit 1
    fi
    deadline=$((SECONDS + TIMEOUT))
    until "$BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2; do
      if [ $SECONDS -ge $deadline ]; then
        say "PostgreSQL is not ready on 127.0.0.1:$port; the end of $dir/postgres.log:"
        tail -n 15 "$dir/postgres.log" >&2 || true
        as_pg "$BIN/pg_ctl" -D "$dir/data" stop -m fast >/dev/null 2>&1 || true
        exit 1
      fi
      sleep 0.2
    done
    if [ -n "$password" ]; then pw_sql="PASSWORD '$(sq "$password")'"; else pw_sql="PASSWORD NULL"; fi
    if ! superuser_sql "$dir" "$port" <<EOF
SELECT 'CREATE ROLE declrag LOGIN CREATEDB' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'declrag') \gexec
ALTER ROLE declrag $pw_sql;
SELECT 'CREATE DATABASE declrag OWNER declrag' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'declrag') \gexec
EOF
    then
      say "could not create the role and database declrag"
      as_pg "$BIN/pg_ctl" -D "$dir/data" stop -m fast >/dev/null 2>&1 || true
      exit 1
    fi
    url=$(url_of "$port")
    echo "$url" > "$dir/uri"
    version=$("$BIN/postgres" --version | awk '{print $3}')
    extra=""; [ -z "$password" ] || extra=", password from \$$pwvar (scram-sha-256)"
    say "PostgreSQL $version ready in $((SECONDS - t0)) s on 127.0.0.1:$port$extra; data and log in $dir"
    echo "$url"
    ;;
  stop)
    if [ -f "$dir/data/PG_VERSION" ]; then
      BIN=$(bindir) || { say "no PostgreSQL binaries found"; exit 3; }
      owner_of "$dir"
      if running "$dir"; then
        as_pg "$BIN/pg_ctl" -D "$dir/data" stop -m fast -w -t "$TIMEOUT" >/dev/null
        say "stopped the server of $dir"
      else
        say "no server of $dir is running"
      fi
    elif [ -d "$dir" ]; then
      say "no cluster in $dir"
    fi
    if [ "$clean" = 1 ]; then
      rm -rf "$dir"
      [ "$(cat "$LAST" 2>/dev/null)" != "$dir" ] || rm -f "$LAST"
      say "removed $dir"
    fi
    ;;
  status)
    [ -f "$dir/data/PG_VERSION" ] || { echo "no cluster in $dir"; exit 1; }
    BIN=$(bindir) || { say "no PostgreSQL binaries found"; exit 3; }
    owner_of "$dir"
    if running "$dir"; then
      echo "running (pid $(head -n 1 "$dir/data/postmaster.pid"), 127.0.0.1:$(cat "$dir/port"), $(cat "$dir/auth") auth): $(cat "$dir/uri" 2>/dev/null || url_of "$(cat "$dir/port")")"
    else
      echo "stopped ($dir)"
      exit 1
    fi
    ;;
  *) usage ;;
esac
