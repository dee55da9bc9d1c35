#!/usr/bin/env bash
# The CLI worker of the multi-language race (tests/reliability/race_test.go):
# a shell loop over build/leases, tokens only in --token-out files. Same loop
# and history schema as every other worker (race_worker_test.go); times come
# from $EPOCHREALTIME, taken just before and just after each command. Each
# command is a process of its own (tens of milliseconds), so durations are
# four times the other workers' (claim 120-600 ms, renew 120-800 ms); one
# claim in two waits up to 1200 ms (claim --wait).
set -u
leases=$LEASES_CLI
name=$LEASES_RACE_WORKER
log=$LEASES_RACE_LOG
tokdir=$LEASES_RACE_TOKEN_DIR
export LEASES_DB=$LEASES_RACE_DB
RANDOM=$LEASES_RACE_SEED
n=0
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
  echo "{\"w\":\"$name\",\"n\":$n,\"ev\":\"call\",\"op\":\"$1\",\"lease\":\"$2\",\"job\":\"$3\",\"dur_us\":$4,\"t\":$t}" >>"$log"
  id=$n
}
# run ARGS...: runs leases, sets st, t (return time), kind, msg; echoes its output.
run() {
  st=0
  "$leases" "$@" >"$out/o" 2>"$out/e" || st=$?
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

end=$(( ${EPOCHREALTIME/./} + LEASES_RACE_RUN_MS * 1000 ))
it=0
while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
  it=$((it + 1))
  if [ $((it % 25)) -eq 0 ]; then
    "$leases" job list --production race --json
    "$leases" events --production race --json
  fi
  d=$((4 * (30 + RANDOM % 121)))
  # One claim in two waits (claim --wait, up to 0-1200 ms): a waiting claim
  # in the history, as the other workers make.
  if [ $((RANDOM % 2)) -eq 0 ]; then
    op=claim_wait wait=(--wait "$((4 * (RANDOM % 301)))ms")
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
  elif [ $r -lt 3 ]; then
    call fail "$label" "$job" 0
    run fail --token-file "$tok" --reason "race failure by $name"
  else
    call complete "$label" "$job" 0
    run complete --token-file "$tok" --metadata "by=\"$name\"" --metadata "lease=\"$label\""
  fi
  ret "$job" 0
done
