#!/bin/sh
# Runs the built API (dist/api/main.js) with the node flags its roles need: the one place that
# decides them, for scripts/start.sh and the Docker image (POSIX sh: the image has no bash).
# A process that ingests (every process of the embedded profile, whose ROLES default to all)
# gets a larger young generation: OTLP and event ingestion allocate short-lived objects fast
# (docs/opentelemetry.md#throughput).
roles="${ROLES:-control,data,ingest,worker}"
for arg in "$@"; do
  case "$arg" in --roles=*) roles="${arg#--roles=}" ;; esac
done
case ",$roles," in
  *,ingest,*) exec node --max-semi-space-size=64 dist/api/main.js "$@" ;;
  *) exec node dist/api/main.js "$@" ;;
esac
