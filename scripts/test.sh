#!/usr/bin/env bash
# The whole test suite, as CI runs it: provisions and starts Postgres, Redis and Temporal if
# absent (and chromium for the browser tests), then the build (API and web console), unit +
# integration + browser tests (jest) against the real servers, and beside them typecheck, lint,
# a smoke run of the embedded profile and Schemathesis against a running API. Arguments go to
# jest and skip the smoke run and Schemathesis (`npm test -- test/accounts`).
#
# The last line of output is always `N passed, M failed`, with nothing after it: jest's tests
# plus one for each other step (typecheck, lint, build, smoke, Schemathesis). A step that fails
# counts as failed, and so does a prerequisite that fails (npm install, the servers); what needs
# it is then skipped. The exit status is non-zero when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
summarized=0
logs="${TEST_LOG_DIR:-${TMPDIR:-/tmp}/flags-test-logs/$(date -u +%Y%m%dT%H%M%SZ)-$$}"
mkdir -p "$logs"
export SCHEMATHESIS_LOG="$logs/schemathesis.log"
# Artifacts of the run (the browser tests' screenshots go to $TEST_LOG_DIR/screenshots).
export TEST_LOG_DIR="$logs"

mark_ok() { passed=$((passed + 1)); echo "-- $1: ok"; }
mark_failed() { failed=$((failed + 1)); echo "-- $1: FAILED${2:+ ($2)}"; }
mark_skipped() { echo "-- $1: skipped ($2)"; }

# <name> <command...>: runs a step and counts it.
step() {
  local name="$1" status=0
  shift
  echo "== $name"
  "$@" || status=$?
  if [ "$status" = 0 ]; then mark_ok "$name"; else mark_failed "$name" "exit $status"; fi
  return "$status"
}

# Prints the line and exits; nothing runs after it (the servers are daemons writing to their
# own logs, and every step has been waited for).
finish() {
  summarized=1
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ] && exit 0
  exit 1
}
# An unexpected stop (a bug here, Ctrl-C, CI's timeout) still ends with the line.
trap '[ "$summarized" = 1 ] || { mark_failed "test.sh" "stopped early"; finish; }' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# npm ci would refuse this npm version's lockfiles (other platforms' optional packages are not recorded).
if [ ! -d node_modules ]; then
  step "npm install" npm install --no-audit --no-fund || finish
fi

# In a child process, so a failure there is counted here instead of ending this shell.
echo "== servers"
servers=ok
if infra_env="$(bash scripts/test-infra.sh env)"; then
  eval "$infra_env"
else
  mark_failed "servers" "scripts/test-infra.sh up"
  servers=failed
fi

# The browser tests (test/browser) drive Debian's chromium through playwright-core.
if ! command -v chromium >/dev/null; then
  step chromium bash -c 'source scripts/provision.sh && need_command chromium chromium'
fi

quiet_build() { npm run --silent build >/dev/null; }
built=ok
step build quiet_build || built=failed

# Typecheck and lint need nothing jest needs, and jest's first minute and a half is mostly
# waiting (its largest files watch a guardrail's real-time window): they run meanwhile, each
# into its own $logs/<step>.out, and are reported in order once jest has finished.
background_step() {
  local name="$1"
  shift
  ( "$@" >"$logs/$name.out" 2>&1; echo $? >"$logs/$name.status" ) &
}
report_background_step() {
  local name="$1" status
  wait
  status="$(cat "$logs/$name.status" 2>/dev/null || echo '?')"
  echo "== $name"
  cat "$logs/$name.out"
  if [ "$status" = 0 ]; then mark_ok "$name"; else mark_failed "$name" "exit $status"; fi
}
background_step typecheck npm run --silent typecheck
background_step lint npm run --silent lint
# The smoke run and Schemathesis start servers of their own (their own ports, database, Redis
# prefix and task queue), so they run beside jest too when the whole suite runs.
whole_suite=no
[ "$#" -eq 0 ] && whole_suite=yes
if [ "$whole_suite" = yes ] && [ "$built" = ok ]; then
  background_step smoke bash scripts/smoke-embedded.sh
  [ "$servers" = ok ] && background_step schemathesis bash scripts/schemathesis.sh
fi

if [ "$servers" = ok ]; then
  echo "== jest"
  results="$logs/jest-results.json"
  jest_status=0
  npx jest --ci --json --outputFile="$results" "$@" || jest_status=$?
  count() { node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log('"$1"')' "$results" 2>/dev/null || echo "$2"; }
  jest_passed=$(count 'r.numPassedTests' 0)
  jest_failed=$(count 'r.numFailedTests + r.numRuntimeErrorTestSuites' 0)
  # A crash, an unreadable report or a failed global setup has no failed test to count.
  [ "$jest_status" != 0 ] && [ "$jest_failed" = 0 ] && jest_failed=1
  passed=$((passed + jest_passed))
  failed=$((failed + jest_failed))
  echo "-- jest: $jest_passed passed, $jest_failed failed (exit $jest_status)"
else
  mark_skipped jest "the servers did not start"
fi

report_background_step typecheck
report_background_step lint

if [ "$whole_suite" = yes ]; then
  if [ "$built" = ok ]; then
    report_background_step smoke
  else
    mark_skipped smoke "the build failed"
  fi
  if [ "$built" = ok ] && [ "$servers" = ok ]; then
    report_background_step schemathesis
  else
    mark_skipped schemathesis "the build or the servers failed"
  fi
fi

finish
