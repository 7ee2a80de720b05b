#!/usr/bin/env bash
# Smoke run of the embedded profile exactly as the README starts it: no backend URLs, a fresh
# DATA_DIR; checks /api/health within 90 s, signup -> login -> /api/users/me, the web console
# at /, then SIGTERM and a clean exit within 10 s.
set -euo pipefail
cd "$(dirname "$0")/.."

data_dir="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
log="$data_dir/server.log"
unset DATABASE_URL REDIS_URL CLICKHOUSE_URL TEMPORAL_ADDRESS
export DATA_DIR="$data_dir" PORT="$port" DATA_PORT="$((port + 1))" INGEST_PORT="$((port + 2))" MANAGEMENT_PORT="$((port + 3))" FLAGD_PORT=0 FLAGD_SYNC_PORT=0
base="http://127.0.0.1:$port"

node dist/api/main.js >"$log" 2>&1 &
pid=$!
cleanup() { kill -9 "$pid" 2>/dev/null || true; rm -rf "$data_dir"; }
trap cleanup EXIT

fail() { echo "smoke: FAIL: $*" >&2; tail -n 30 "$log" >&2; exit 1; }

start=$(date +%s)
until curl -sf "$base/api/health" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || fail "server exited during start"
  [ $(( $(date +%s) - start )) -lt 90 ] || fail "no healthy /api/health within 90 s"
  sleep 0.5
done
echo "smoke: healthy after $(( $(date +%s) - start )) s"

for l in "$((port + 1))" "$((port + 2))"; do
  curl -sf "http://127.0.0.1:$l/api/health" >/dev/null || fail "listener $l not healthy"
done

management="http://127.0.0.1:$((port + 3))"
# Ready once the Temporal worker has started too, which may come after the listeners answer.
until curl -sf "$management/readyz" >/dev/null; do
  [ $(( $(date +%s) - start )) -lt 120 ] || fail "management /readyz not ready within 120 s: $(curl -s "$management/readyz")"
  sleep 0.5
done
echo "smoke: ready after $(( $(date +%s) - start )) s"
# Each answer is read whole before it is searched: grep -q leaving early would break curl's pipe.
metrics=$(curl -sf "$management/metrics") || fail "management /metrics failed"
grep -q '^flagship_build_info' <<<"$metrics" || fail "management /metrics without flagship_build_info"

email="smoke-$RANDOM@example.com"
json='{"email":"'"$email"'","password":"smoke password 1","name":"Smoke"}'
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -d "$json" "$base/api/auth/signup")
[ "$code" = 201 ] || fail "signup returned $code"
jar="$data_dir/cookies"
code=$(curl -s -o /dev/null -w '%{http_code}' -c "$jar" -H 'content-type: application/json' \
  -d '{"email":"'"$email"'","password":"smoke password 1"}' "$base/api/auth/login")
[ "$code" = 200 ] || fail "login returned $code"
me=$(curl -sf -b "$jar" "$base/api/users/me") || fail "/api/users/me failed"
grep -q "\"email\":\"$email\"" <<<"$me" || fail "/api/users/me returned $me"
echo "smoke: signup -> login -> /api/users/me ok"

# The web console (npm run build built it into dist/web) is served at / and its client routes.
for path in / /verify-email?token=x; do
  page=$(curl -sf -H 'accept: text/html' "$base$path") || fail "the console is not served at $path"
  grep -q '<div id="root">' <<<"$page" || fail "the console is not served at $path"
done
echo "smoke: the web console is served"

t0=$(date +%s%N)
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
elapsed=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$status" = 0 ] || fail "exit status $status after SIGTERM"
[ "$elapsed" -lt 10000 ] || fail "SIGTERM shutdown took ${elapsed} ms"
pgrep -f "db-filename $data_dir" >/dev/null && fail "Temporal dev server still running"
echo "smoke: SIGTERM -> clean exit in ${elapsed} ms"
