#!/usr/bin/env bash
# Demo worker in shell over the CLI: `leases work` waits for jobs (no polling),
# runs the program below for each one through the reference executor (payload
# on stdin, a private LEASES_OUTPUT file registered on exit 0, the claim kept
# alive while it runs), and drains on SIGTERM: it claims nothing more, lets the
# running program finish, and exits 0. No token ever leaves the process.
#
#   cli_worker.sh LEASES_BIN DB PRODUCTION WORKER WORK_MS OUTPUT_DIR
set -euo pipefail
leases=$1 db=$2 production=$3 worker=$4 work_ms=$5 out=$6
export LEASES_DB=$db
work_s=$(printf '%d.%03d' $((work_ms / 1000)) $((work_ms % 1000)))
# exec: the signals the demo sends reach `leases work` itself.
# The program: upper-cases the payload into the output, after a pause of "work".
exec "$leases" work --production "$production" --worker "$worker" --duration 10s --output-dir "$out" \
  --metadata 'language="shell"' --provenance "worker=\"$worker\"" \
  -- sh -c "sleep $work_s; tr a-z A-Z > \"\$LEASES_OUTPUT\""
