#!/usr/bin/env bash
# End-to-end smoke test of the release `leases` binary, as a shell worker
# uses it: a whole job round trip, the exit statuses a script branches on,
# the streamed listings, no test hook in a release build, and no token in
# any output.
# Usage: tests/cli/smoke.sh PATH/TO/leases VERSION
set -euo pipefail
leases=$1
want_version=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LEASES_DB=$work/jobs.db
log=$work/output.log
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
# shellcheck source=run.sh
. "$(dirname "${BASH_SOURCE[0]}")/run.sh"
# shellcheck source=listings.sh
. "$(dirname "${BASH_SOURCE[0]}")/listings.sh"
# shellcheck source=retries.sh
. "$(dirname "${BASH_SOURCE[0]}")/retries.sh"

run 0 version
grep -qx "leases $want_version" "$work/out" || fail "version: $(cat "$work/out")"
for flag in --version -V; do
  run 0 "$flag"
  grep -qx "leases $want_version" "$work/out" || fail "$flag: $(cat "$work/out")"
done
# A typo gets a suggestion, and flags are named as --help names them.
run 2 job lst --production nightly
grep -qF 'did you mean "job list"?' "$work/err" || fail "job lst: $(cat "$work/err")"
run 2 claim --production nightly --worker smoke --durration 30s --token-out "$work/t0"
grep -qF 'unknown flag --durration (did you mean --duration?)' "$work/err" || fail "--durration: $(cat "$work/err")"
run 2 claim --production nightly --worker smoke --duration 1m30 --token-out "$work/t0"
grep -qF 'write 1m30s' "$work/err" || fail "1m30: $(cat "$work/err")"
[ ! -e "$work/t0" ] && [ ! -e "$LEASES_DB" ] || fail "a usage error created a file"

run 0 production create nightly
printf 'frame-1' | "$leases" job request --production nightly --key f1 --payload-file - >>"$log"
printf 'frame-2' | "$leases" job request --production nightly --key f2 --payload-file - >>"$log"
run 0 job list --production nightly
grep -q requested "$work/out" || fail "job list: $(cat "$work/out")"

# Claim into a private token file; run the job through exec.
run 0 claim --production nightly --worker smoke --duration 30s --token-out "$work/t1"
[ "$(stat -c %a "$work/t1")" = 600 ] || fail "token file mode $(stat -c %a "$work/t1")"
run 1 claim --production nightly --worker smoke --duration 30s --token-out "$work/t1"
mkdir "$work/out.d"
run 0 exec --token-file "$work/t1" --output-dir "$work/out.d" -- sh -c 'tr a-z A-Z > "$LEASES_OUTPUT"'
outputs=("$work"/out.d/*.out)
[ "${#outputs[@]}" = 1 ] && [ "$(cat "${outputs[0]}")" = FRAME-1 ] || fail "exec output: ${outputs[*]}"
grep -q "sha256 $(sha256sum <"${outputs[0]}" | cut -d' ' -f1)" "$work/err" || fail "exec did not report the output"

# A release build has no test hooks: this variable changes nothing.
LEASES_TEST_TOKEN_WRITE_EFBIG=1 run 0 claim --production nightly --worker smoke --duration 30s --token-out "$work/t2"
[ -s "$work/t2" ] || fail "the release build honoured a test hook"
run 0 fail --token-file - --reason "smoke test" <"$work/t2"
run 3 claim --production nightly --worker smoke --duration 30s --token-out "$work/t3"
[ ! -e "$work/t3" ] || fail "exit 3 left the token file"

# The worker loop (production batch): a waiting claim times out with 3; leases work runs each job
# through the executor, and SIGTERM drains it (the running job completes, exit 0).
run 3 claim --production nightly --worker smoke --duration 30s --token-out "$work/t4" --wait 200ms
[ ! -e "$work/t4" ] || fail "a waiting claim that timed out left the token file"
run 0 production create batch
printf 'frame-3' | "$leases" job request --production batch --key f3 --payload-file - >>"$log"
printf 'frame-4' | "$leases" job request --production batch --key f4 --payload-file - >>"$log"
mkdir "$work/hook"   # a release build ignores the test hook that hands tokens out
LEASES_TEST_WORK_TOKENS=$work/hook "$leases" work --production batch --worker smoke-work --duration 30s --output-dir "$work/out.d" \
  -- sh -c 'touch "$0/started"; while [ ! -e "$0/go" ]; do sleep 0.02; done; tr a-z A-Z > "$LEASES_OUTPUT"' "$work" \
  >>"$log" 2>"$work/work.err" &
pid=$!
# What must happen eventually gets 60 s: a loaded or stalled CI host can take seconds.
until_true() { for _ in $(seq 3000); do eval "$1" && return 0; sleep 0.02; done; fail "timed out: $1: $(cat "$work/work.err")"; }
until_true '[ -e "$work/started" ]'
kill -TERM "$pid"
until_true 'grep -q draining "$work/work.err"'
touch "$work/go"
rc=0; wait "$pid" || rc=$?
cat "$work/work.err" >>"$log"
[ "$rc" = 0 ] || fail "leases work after SIGTERM: exit $rc: $(cat "$work/work.err")"
grep -q "work stopped: 1 completed, 0 failed, 0 given back, 0 lost" "$work/work.err" || fail "work: $(cat "$work/work.err")"
[ -z "$(ls -A "$work/hook")" ] || fail "the release build honoured LEASES_TEST_WORK_TOKENS"
run 0 job list --production batch --state requested --jsonl
[ "$(wc -l <"$work/out")" = 1 ] || fail "the drained worker claimed a second job: $(cat "$work/out")"

# A worker killed outright takes its program and the program's child with it (the release
# binary's reaper is the binary itself, re-executed); a closed log (a reader that exited)
# kills neither the worker nor a program, and the job completes.
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]; }
run 0 production create crash
"$leases" job request --production crash --key c1 >>"$log"
mkdir "$work/crash.d"
"$leases" work --production crash --worker smoke-kill --duration 30s --output-dir "$work/crash.d" \
  -- sh -c 'sleep 60 & echo "$$ $!" > "$0/crash.pids"; wait' "$work" >>"$log" 2>>"$log" &
pid=$!
until_true '[ -n "$(sed -n "/ [0-9]/p" "$work/crash.pids" 2>/dev/null)" ]'
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
read -r p1 p2 <"$work/crash.pids"
gone() { ! running "$p1" && ! running "$p2"; }
for _ in $(seq 500); do gone && break; sleep 0.02; done
gone || { kill -KILL "$p1" "$p2" 2>/dev/null; fail "the program of a killed leases work still runs"; }
run 0 production create piped
printf 'frame-5' | "$leases" job request --production piped --key p1 --payload-file - >>"$log"
( rc=0; "$leases" work --production piped --worker smoke-pipe --duration 30s --output-dir "$work/out.d" --exit-when-empty \
    -- sh -c 'i=0; while [ $i -lt 100 ]; do echo "noise $i" >&2; echo "out $i"; i=$((i+1)); done; tr a-z A-Z > "$LEASES_OUTPUT"' \
    2>&1 || rc=$?; echo "$rc" >"$work/piped.rc" ) | head -c 0
[ "$(cat "$work/piped.rc")" = 0 ] || fail "leases work with its log closed: exit $(cat "$work/piped.rc")"
run 0 job list --production piped --state completed --jsonl
[ "$(wc -l <"$work/out")" = 1 ] || fail "the job of a worker whose log closed did not complete: $(cat "$work/out")"

# Tokens never come from arguments; durations need units.
run 2 release "$(cat "$work/t1")"
run 2 renew --token-file "$work/t1" --duration 30
run 0 events --production nightly --json
grep -q '"completed"' "$work/out" && grep -q '"failed"' "$work/out" || fail "events: $(cat "$work/out")"
smoke_listings nightly 1
smoke_retries

for t in "$work"/t1 "$work"/t2; do
  tok=$(cat "$t")
  ! grep -qF "$tok" "$log" || fail "a token appeared in command output"
  ! grep -qF "${tok#lt1.}" "$log" || fail "a token appeared in command output"
done
echo "smoke: the release leases binary passed"
