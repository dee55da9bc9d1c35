#!/usr/bin/env bash
# The CLI worker of the multi-language race (tests/reliability/race_test.go):
# a shell loop over build/test/leases (the CLI's test build: clock faults
# below), tokens only in --token-out files. Same loop
# and history schema as every other worker (race_worker_test.go); times come
# from $EPOCHREALTIME, taken just before and just after each command. Each
# command is a process of its own (tens of milliseconds), so durations are
# four times the other workers' (claim 120-600 ms, renew 120-800 ms); one
# claim in two waits up to 1200 ms (claim --wait). Half of its failures are
# retryable (fail --retry, half of them with a --delay of 4-200 ms), and one
# time in five before a claim it acts as a coordinator (coordinate: job
# request with a priority and a --delay or --run-at, cancel, job retry,
# production redrive).
#
# Clock faults (unless LEASES_RACE_CLOCK_FAULTS=0), as the Go worker makes
# them: $LEASES_CLI is the test build of the CLI, whose authority reads the
# wall clock plus LEASES_TEST_CLOCK_OFFSET_US, set on every command to the
# skew in force. One iteration in eight the skew changes, between calls: a
# small step back (1-5 ms), a forward jump (5-30 ms) or back to none; its
# first request, and one in four after it, is sampled a day ahead, with
# priority 5. Each call line carries the skew (skew_us), so the model reads
# its samples on that clock.
set -u
leases=$LEASES_CLI
name=$LEASES_RACE_WORKER
log=$LEASES_RACE_LOG
tokdir=$LEASES_RACE_TOKEN_DIR
export LEASES_DB=$LEASES_RACE_DB
RANDOM=$LEASES_RACE_SEED
n=0
skew=0 # the clock fault in force, µs
faults=1
[ "${LEASES_RACE_CLOCK_FAULTS:-1}" = 0 ] && faults=0
ahead_us=86400000000
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

esc() { # JSON string body of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  printf '%s' "$s"
}
call() { # op lease job dur_us
  n=$((n + 1))
  local t=${EPOCHREALTIME/./}
  echo "{\"w\":\"$name\",\"n\":$n,\"ev\":\"call\",\"op\":\"$1\",\"lease\":\"$2\",\"job\":\"$3\",\"dur_us\":$4,\"skew_us\":$skew,\"t\":$t}" >>"$log"
  id=$n
}
# run ARGS...: runs leases, sets st, t (return time), kind, msg; echoes its output.
run() {
  st=0
  LEASES_TEST_CLOCK_OFFSET_US=$skew "$leases" "$@" >"$out/o" 2>"$out/e" || st=$?
  t=${EPOCHREALTIME/./}
  cat "$out/o" "$out/e"
  kind=ok msg=
  if [ "$st" -eq 3 ]; then
    kind=nothing_to_claim
  elif [ "$st" -ne 0 ]; then
    msg=$(head -c 2000 "$out/e")
    kind=unknown_exit_$st
    if [[ $msg =~ ^leases:\ ([a-z_]+): ]]; then kind=${BASH_REMATCH[1]}; fi
  fi
}
ret() { # job expiry
  echo "{\"w\":\"$name\",\"n\":$id,\"ev\":\"ret\",\"kind\":\"$kind\",\"job\":\"$1\",\"expiry_unix_us\":$2,\"msg\":\"$(esc "$msg")\",\"t\":$t}" >>"$log"
}
expiry() { [[ $(cat "$out/o") =~ \"expiry_unix_us\":\ *([0-9]+) ]] && echo "${BASH_REMATCH[1]}" || echo 0; }

mine=() failed=() # the jobs it requested and failed
pick() { # from the array named $1: sets job, or returns 1 when empty
  local -n pool=$1
  [ ${#pool[@]} -gt 0 ] || return 1
  job=${pool[RANDOM % ${#pool[@]}]}
}
coordinate() {
  local r=$((RANDOM % 10)) t0 extra opts
  if [ $r -lt 5 ]; then
    n=$((n + 1)) id=$n
    local key=$name-$n prio=$((RANDOM % 3)) how=$((RANDOM % 12)) delay=0 run_at=0 was=$skew
    if [ $faults = 1 ] && { [ ${#mine[@]} -eq 0 ] || [ $((RANDOM % 4)) -eq 0 ]; }; then
      skew=$ahead_us prio=5 # sampled a day ahead
    fi
    opts=(--priority $prio)
    if [ $how -lt 4 ]; then
      delay=$((4 + RANDOM % 197))
      opts+=(--delay "${delay}ms")
      delay=$((delay * 1000))
    elif [ $how -lt 7 ]; then
      t0=${EPOCHREALTIME/./}
      run_at=$((t0 + 1000 * (RANDOM % 201)))
      opts+=(--run-at "$(date -u -d "@$((run_at / 1000000)).$(printf %06d $((run_at % 1000000)))" +%Y-%m-%dT%H:%M:%S.%6NZ)")
    fi
    echo "{\"w\":\"$name\",\"n\":$n,\"ev\":\"call\",\"op\":\"request\",\"key\":\"$key\",\"prio\":$prio,\"dur_us\":$delay,\"run_at_us\":$run_at,\"skew_us\":$skew,\"t\":${EPOCHREALTIME/./}}" >>"$log"
    run job request --production race --key "$key" "${opts[@]}" --json
    job=
    if [ "$kind" = ok ] && [[ $(cat "$out/o") =~ \"id\":\ *\"([0-9a-f-]+)\" ]]; then
      job=${BASH_REMATCH[1]}
      mine+=("$job")
    fi
    skew=$was
    ret "$job" 0
  elif [ $r -lt 7 ]; then
    pick mine || return 0
    call cancel "" "$job" 0
    run cancel --production race --job "$job"
    ret "$job" 0
  elif [ $r -lt 9 ]; then
    pick failed || pick mine || return 0
    call retry_job "" "$job" 0
    run job retry --production race --job "$job"
    ret "$job" 0
  else
    local states=(failed dead cancelled)
    local state=${states[RANDOM % 3]}
    n=$((n + 1)) id=$n
    echo "{\"w\":\"$name\",\"n\":$n,\"ev\":\"call\",\"op\":\"redrive\",\"state\":\"$state\",\"skew_us\":$skew,\"t\":${EPOCHREALTIME/./}}" >>"$log"
    run production redrive race --state "$state"
    ret "" 0
  fi
}

end=$(( ${EPOCHREALTIME/./} + LEASES_RACE_RUN_MS * 1000 ))
it=0
while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
  it=$((it + 1))
  if [ $((it % 25)) -eq 0 ]; then
    "$leases" job list --production race --json
    "$leases" events --production race --json
  fi
  if [ $faults = 1 ] && [ $((RANDOM % 8)) -eq 0 ]; then
    case $((RANDOM % 3)) in
      0) skew=$((-1000 * (1 + RANDOM % 5))) ;; # a small step back
      1) skew=$((1000 * (5 + RANDOM % 26))) ;; # a forward jump
      *) skew=0 ;;
    esac
  fi
  [ $((RANDOM % 5)) -eq 0 ] && coordinate
  d=$((4 * (30 + RANDOM % 121)))
  # One claim in two waits (claim --wait, up to 4-1200 ms: the CLI's wait is
  # positive): a waiting claim in the history, as the other workers make.
  if [ $((RANDOM % 2)) -eq 0 ]; then
    op=claim_wait wait=(--wait "$((4 * (1 + RANDOM % 300)))ms")
  else
    op=claim wait=()
  fi
  call $op "" "" $((d * 1000))
  label=$name:$id
  tok=$tokdir/$name-$id.token
  run claim --production race --worker "$name" --duration "${d}ms" "${wait[@]}" --token-out "$tok" --json
  if [ "$kind" != ok ]; then
    ret "" 0
    [ "$op" = claim ] && sleep 0.005
    continue
  fi
  [[ $(cat "$out/o") =~ \"job_id\":\ *\"([0-9a-f-]+)\" ]] && job=${BASH_REMATCH[1]}
  ret "$job" "$(expiry)"
  sleep "0.0$((RANDOM % 60 + 10))"
  if [ $((RANDOM % 3)) -eq 0 ]; then
    d=$((4 * (30 + RANDOM % 171)))
    call renew "$label" "$job" $((d * 1000))
    run renew --token-file "$tok" --duration "${d}ms" --json
    if [ "$kind" = ok ]; then ret "$job" "$(expiry)"; else ret "$job" 0; fi
  fi
  r=$((RANDOM % 10))
  if [ $r -lt 2 ]; then
    call release "$label" "$job" 0
    run release --token-file "$tok"
  elif [ $r -lt 3 ] && [ $((RANDOM % 2)) -eq 0 ]; then
    delay=()
    if [ $((RANDOM % 2)) -eq 0 ]; then
      delay=$((4 + RANDOM % 197))
      call fail_retry "$label" "$job" $((delay * 1000))
      delay=(--delay "${delay}ms")
    else
      call fail_retry "$label" "$job" 0
    fi
    run fail --token-file "$tok" --reason "race retry by $name" --retry "${delay[@]}"
  elif [ $r -lt 3 ]; then
    call fail "$label" "$job" 0
    run fail --token-file "$tok" --reason "race failure by $name"
    [ "$kind" = ok ] && failed+=("$job")
  else
    call complete "$label" "$job" 0
    run complete --token-file "$tok" --metadata "by=\"$name\"" --metadata "lease=\"$label\""
  fi
  ret "$job" 0
done
