# Sourced by the CLI smoke tests after run.sh: retries as a script drives
# them, on a new production "retries": a policy of two attempts without
# backoff, fail --retry up to dead, the dead job listed, counted and shown
# with its history, and a redrive; then no token of its claims in the log.
smoke_retries() {
  local job tok
  run 0 production create retries --max-attempts 2 --backoff 0
  run 0 production policy retries
  grep -qx 'production retries: max attempts 2, no backoff (a retry is claimable at once)' "$work/out" ||
    fail "production policy: $(cat "$work/out")"
  run 2 production policy retries --max-attempts 0
  run 0 job request --production retries --key r1 --priority 7
  job=$(cat "$work/out")
  run 0 job request --production retries --key r2 --delay 1h
  run 0 claim --production retries --worker smoke --duration 30s --token-out "$work/r1.token"
  run 0 fail --token-file "$work/r1.token" --reason "try again" --retry
  grep -q "requested again, claimable at" "$work/out" || fail "fail --retry: $(cat "$work/out")"
  run 0 claim --production retries --worker smoke --duration 30s --token-out "$work/r2.token"
  run 0 fail --token-file "$work/r2.token" --reason "still failing" --retry
  grep -q "dead, all 2 attempts used" "$work/out" || fail "the last fail --retry: $(cat "$work/out")"
  run 3 claim --production retries --worker smoke --duration 30s --token-out "$work/r3.token"
  run 0 job list --production retries --state dead --jsonl
  [ "$(wc -l <"$work/out")" = 1 ] && grep -q "$job" "$work/out" || fail "job list --state dead: $(cat "$work/out")"
  run 0 job counts --production retries --json
  grep -q '"dead": 1,' "$work/out" || fail "job counts: $(cat "$work/out")"
  run 0 job show --production retries --job "$job"
  grep -q '^priority    7$' "$work/out" && grep -q ' retry: still failing$' "$work/out" || fail "job show: $(cat "$work/out")"
  run 0 production redrive retries
  grep -qx 'redrove 1 dead job(s) of production retries' "$work/out" || fail "production redrive: $(cat "$work/out")"
  run 0 job show --production retries --job "$job" --json
  grep -q '"attempts": 0,' "$work/out" && grep -q '"ending": "retry"' "$work/out" || fail "after the redrive: $(cat "$work/out")"
  for tok in "$work/r1.token" "$work/r2.token"; do
    tok=$(cat "$tok")
    ! grep -qF "${tok#lt1.}" "$log" || fail "a token appeared in command output"
  done
}
