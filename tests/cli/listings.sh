# Sourced by the CLI smoke tests after run.sh: the streamed listings, as a
# script reads them, of production $1, which holds exactly two jobs, $2 of
# them completed. Standard output stays one document; how to continue after
# --limit comes on standard error.
smoke_listings() {
  local p=$1 completed=$2 cursor first second job
  run 0 job list --production "$p" --jsonl
  [ "$(wc -l <"$work/out")" = 2 ] || fail "job list --jsonl: $(cat "$work/out")"
  run 0 job list --production "$p" --limit 1 --json
  cursor=$(sed -n 's/^leases: more jobs follow; continue with --after //p' "$work/err")
  [ -n "$cursor" ] || fail "job list --limit 1 printed no continuation: $(cat "$work/err")"
  first=$(grep -o '"id": "[^"]*"' "$work/out")
  run 0 job list --production "$p" --limit 1 --json --after "$cursor"
  [ ! -s "$work/err" ] || fail "the last page printed a continuation: $(cat "$work/err")"
  second=$(grep -o '"id": "[^"]*"' "$work/out")
  [ -n "$first" ] && [ -n "$second" ] && [ "$first" != "$second" ] || fail "--after did not continue: $first / $second"
  run 0 job list --production "$p" --state completed --jsonl
  [ "$(wc -l <"$work/out")" = "$completed" ] || fail "job list --state completed: $(cat "$work/out")"
  job=$(head -n 1 "$work/out" | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
  run 0 job show --production "$p" --job "$job"
  grep -q '^state       completed$' "$work/out" || fail "job show: $(cat "$work/out")"
  run 0 job show --production "$p" --job "$job" --json
  grep -q '"facts": {' "$work/out" || fail "job show --json: $(cat "$work/out")"
  run 0 job counts --production "$p" --json
  grep -q "\"completed\": $completed," "$work/out" || fail "job counts: $(cat "$work/out")"
  run 0 events --production "$p" --limit 2 --jsonl
  [ "$(wc -l <"$work/out")" = 2 ] || fail "events --limit 2: $(cat "$work/out")"
  grep -q '^leases: more events follow; continue with --after [0-9]*$' "$work/err" || fail "events --limit: $(cat "$work/err")"
  run 0 production list --limit 1 --jsonl
  [ "$(wc -l <"$work/out")" = 1 ] || fail "production list --limit 1: $(cat "$work/out")"
}
