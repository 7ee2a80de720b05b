#!/usr/bin/env bash
# The whole test suite, as CI runs it: provisions and starts Postgres, Redis and Temporal if
# absent, then typecheck, lint, unit + integration tests (jest) against the real servers,
# a smoke run of the embedded profile, and Schemathesis against the running API.
set -euo pipefail
cd "$(dirname "$0")/.."

# npm ci would refuse this npm version's lockfiles (other platforms' optional packages are not recorded).
[ -d node_modules ] || npm install --no-audit --no-fund
# shellcheck source=scripts/test-infra.sh
source scripts/test-infra.sh up
set -euo pipefail  # sourcing restores the caller's options; this script wants them strict

echo "== typecheck"; npm run --silent typecheck
echo "== lint"; npm run --silent lint
echo "== build"; npm run --silent build >/dev/null

echo "== jest"
results="$(mktemp)"
jest_status=0
npx jest --ci --json --outputFile="$results" "$@" || jest_status=$?
# The results file has no .json extension, so read it as JSON rather than require() it.
count() { node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log('"$1"')' "$results" 2>/dev/null || echo "$2"; }
passed=$(count 'r.numPassedTests' 0)
failed=$(count 'r.numFailedTests + r.numRuntimeErrorTestSuites' 1)

smoke_status=0; schema_status=0
if [ "$#" -eq 0 ]; then
  echo "== smoke (embedded profile)"; bash scripts/smoke-embedded.sh || smoke_status=$?
  echo "== schemathesis"; bash scripts/schemathesis.sh || schema_status=$?
  for status in "$smoke_status" "$schema_status"; do
    if [ "$status" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done

fi

echo "tests: $passed passed, $failed failed"
[ "$jest_status" = 0 ] && [ "$smoke_status" = 0 ] && [ "$schema_status" = 0 ]
