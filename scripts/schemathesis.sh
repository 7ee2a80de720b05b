#!/usr/bin/env bash
# Runs Schemathesis against a running server built from this checkout, on the real Postgres,
# Redis and Temporal started by scripts/test-infra.sh, with the checks the foundation issue
# names: no server errors, responses conform to the documented schemas, auth is not ignored.
# Authenticated as a signed-in user (session cookie + CSRF header) so protected routes are
# exercised beyond their 401s.
#
# Schemathesis's own output goes to a log file (SCHEMATHESIS_LOG): its closing pytest-style
# `=== N warnings in Xs ===` banner would read as another runner's result at the end of
# scripts/test.sh. This prints one line of its own instead, and the failures when there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?run through scripts/test.sh or source scripts/test-infra.sh up}"
log_file="${SCHEMATHESIS_LOG:-${TMPDIR:-/tmp}/flags-test-logs/schemathesis-$(date -u +%Y%m%dT%H%M%SZ)-$$.log}"
mkdir -p "$(dirname "$log_file")"

work="$(mktemp -d)"
db="schemathesis_$$"
port=$((20000 + RANDOM % 20000))
base="http://127.0.0.1:$port"
psql -q "$DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null

DATABASE_URL="${DATABASE_URL%/*}/$db" REDIS_KEY_PREFIX="st$$:" TEMPORAL_TASK_QUEUE="schemathesis-$$" \
  CLICKHOUSE_DATABASE="st_$$" DATA_DIR="$work" PORT="$port" DATA_PORT=0 INGEST_PORT=0 MANAGEMENT_PORT=0 FLAGD_PORT=0 FLAGD_SYNC_PORT=0 NODE_ENV=test \
  RATE_LIMIT_PER_IP=100000000 RATE_LIMIT_PER_TOKEN=100000000 RATE_LIMIT_PER_SERVICE=100000000 \
  AUTH_RATE_LIMIT_PER_IP=100000000 SEND_LIMIT_PER_USER=100000000 SEND_LIMIT_PER_RECIPIENT=100000000 \
  SCRYPT_COST_LOG2=12 LOG_LEVEL=error node dist/api/main.js >"$work/server.log" 2>&1 &
pid=$!
cleanup() {
  kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 120); do curl -sf "$base/api/health" >/dev/null && break; sleep 0.5; done
curl -sf "$base/api/health" >/dev/null || { echo "schemathesis: server did not start" >&2; cat "$work/server.log" >&2; exit 1; }

email="st-$$@example.com"
curl -sf -c "$work/jar" -H 'content-type: application/json' \
  -d '{"email":"'"$email"'","password":"schemathesis pw 1","name":"Schemathesis"}' "$base/api/auth/signup" >/dev/null
export ST_SESSION="$(awk '$6 == "flags_session" {print $7}' "$work/jar")"
export ST_CSRF=$(curl -sf -H "Cookie: flags_session=$ST_SESSION" "$base/api/csrf-token" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).token))')

report_dir="${SCHEMATHESIS_REPORT_DIR:-$work/report}"
status=0
# Logout would end the session every other operation uses; it has its own integration tests.
# One worker: with two, Schemathesis occasionally fails with an internal hypothesis error.
"${SCHEMATHESIS_PATH:-schemathesis}" --config-file test/schemathesis.toml run "$base/api/openapi.json" \
  --checks not_a_server_error,response_schema_conformance,ignored_auth \
  --exclude-path /api/auth/logout --exclude-path-regex "stream|EventStream" \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-30}" --workers 1 --no-color \
  --seed 20261121 --request-timeout 20 \
  --suppress-health-check all --phases "${SCHEMATHESIS_PHASES:-coverage,fuzzing}" --report junit --report-dir "$report_dir" \
  >"$log_file" 2>&1 || status=$?

# Operations from the JUnit report (one test case each); generated cases from the log.
operations=$(cat "$report_dir"/*.xml 2>/dev/null | grep -o '<testcase ' | wc -l || true)
failing=$(cat "$report_dir"/*.xml 2>/dev/null | grep -o '<failure\|<error' | wc -l || true)
cases=$(grep -A1 '^Test cases:' "$log_file" | tail -n 1 | sed 's/^ *//' || true)
if [ "$status" != 0 ]; then
  # The failures and errors (or the end of the log when it stopped before any), without the
  # banner lines that imitate pytest.
  details="$(sed -n '/^=* \(FAILURES\|ERRORS\) =*$/,/^=* SUMMARY =*$/p' "$log_file")"
  [ -n "$details" ] || details="$(tail -n 20 "$log_file")"
  printf '%s\n' "$details" | grep -v '^==*[^=]*==*$' | head -n 200 || true
fi
echo "schemathesis: ${operations:-0} operations (${cases:-no cases}), $failing failing, exit $status (log: $log_file)"
exit "$status"
