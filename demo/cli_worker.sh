#!/usr/bin/env bash
# Demo worker in shell over the CLI: claim a job with the token written into a
# private file (leases claim --token-out creates it O_EXCL, mode 0600, inside a
# 0700 directory), then run a program on it with `leases exec`, which hands it
# the payload on stdin and LEASES_OUTPUT, renews while it runs and completes
# on exit 0. The token only ever lives in that file; nothing prints it.
#
#   cli_worker.sh LEASES_BIN DB PRODUCTION WORKER WORK_MS STOP_FILE OUTPUT_DIR
set -euo pipefail
leases=$1 db=$2 production=$3 worker=$4 work_ms=$5 stop=$6 out=$7
export LEASES_DB=$db
tokens=$(mktemp -d "${TMPDIR:-/tmp}/leases-demo-cli-XXXXXX")   # mode 0700
trap 'rm -rf "$tokens"' EXIT
work_s=$(printf '%d.%03d' $((work_ms / 1000)) $((work_ms % 1000)))
done=0 n=0
while :; do
  n=$((n + 1))
  token=$tokens/claim-$n.token
  rc=0
  "$leases" claim --production "$production" --worker "$worker" --duration 10s \
    --token-out "$token" >/dev/null 2>"$tokens/claim.err" || rc=$?
  if [ "$rc" -eq 3 ]; then          # nothing to claim
    [ -e "$stop" ] && break
    sleep 0.05; continue
  elif [ "$rc" -ne 0 ]; then
    cat "$tokens/claim.err" >&2; sleep 0.1; continue
  fi
  # The program: upper-cases the payload into the output, after a pause of "work".
  if "$leases" exec --token-file "$token" --output-dir "$out" \
      --metadata 'language="shell"' --provenance "worker=\"$worker\"" \
      -- sh -c "sleep $work_s; tr a-z A-Z > \"\$LEASES_OUTPUT\""; then
    done=$((done + 1))
  fi
  rm -f "$token"
done
echo "$worker: $done job(s) completed" >&2
