#!/bin/sh
# Runs the built API (dist/api/main.js) with the node flags its roles and its CPUs need: the one
# place that decides them, for scripts/start.sh, the Docker image (POSIX sh: the image has no
# bash) and the benches (`--print-node-flags` prints them instead of running, for a process
# started the same way, under the same CPU affinity).
#
# - A process that ingests (every process of the embedded profile, whose ROLES default to all)
#   gets a larger young generation: OTLP and event ingestion allocate short-lived objects fast
#   (docs/opentelemetry.md#throughput).
# - A process given one CPU (its affinity, or a cgroup quota of one CPU or less) runs V8's
#   collector on the JavaScript thread on Node 20: its helper threads could only take turns with
#   it on that CPU. Node 22 and later are cheaper without it (docs/operations.md#one-cpu).
roles="${ROLES:-control,data,ingest,worker}"
print_flags=
for arg in "$@"; do
  case "$arg" in
    --roles=*) roles="${arg#--roles=}" ;;
    --print-node-flags) print_flags=1 ;;
  esac
done

# CPUs this process may run on: its affinity, lowered by a cgroup v2 quota ("max" or "<quota> <period>").
cpus="$(nproc 2>/dev/null || echo 2)"
if [ -r /sys/fs/cgroup/cpu.max ]; then
  read -r quota period < /sys/fs/cgroup/cpu.max || true
  if [ "${quota:-max}" != max ] && [ "${period:-0}" -gt 0 ]; then
    quota_cpus=$(( (quota + period - 1) / period ))
    [ "$quota_cpus" -lt "$cpus" ] && cpus="$quota_cpus"
  fi
fi

flags=
case ",$roles," in
  *,ingest,*) flags="--max-semi-space-size=64" ;;
esac
if [ "$cpus" -le 1 ]; then
  # Asked only here: starting node costs tens of milliseconds, and most processes have more CPUs.
  node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  [ "$node_major" -lt 22 ] && flags="$flags --single-threaded-gc"
fi

if [ -n "$print_flags" ]; then
  echo $flags
  exit 0
fi
# $flags unquoted: each flag a word of its own.
exec node $flags dist/api/main.js "$@"
