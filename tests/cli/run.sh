# Sourced by the CLI smoke tests; they set $leases, $work, $log and fail().
# run EXPECTED-STATUS ARGS...: runs leases, logs both streams, checks status.
run() {
  local want=$1; shift
  local st=0
  "$leases" "$@" >"$work/out" 2>"$work/err" || st=$?
  cat "$work/out" "$work/err" >>"$log"
  [ "$st" -eq "$want" ] || fail "leases $1 ...: exit $st, want $want: $(cat "$work/err")"
}
