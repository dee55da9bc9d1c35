#!/usr/bin/env bash
# Runs one Go fuzz target of ./core with an execution budget and appends
# the number of inputs it really executed to the soak's figures file as a
# JSON line: the "execs: N" of the last status line go test prints, counted
# by the fuzzing engine, not the budget asked for (the engine stops at a
# batch boundary, so the two differ).
#
# Usage: mk/fuzz_figure.sh FIGURES TARGET BUDGET [GO]
set -u
figures=$1 target=$2 budget=$3 go=${4:-go}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$go" test -count=1 -run='^$' -fuzz="^${target}\$" -fuzztime="$budget" ./core 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || exit "$status"
execs=$(sed -n 's/^fuzz: elapsed: .*, execs: \([0-9][0-9]*\) .*/\1/p' "$out" | tail -n 1)
if [ -z "$execs" ]; then
	echo "fuzz_figure.sh: go test printed no execution count for $target" >&2
	exit 1
fi
printf '{"test":"go_fuzz","target":"%s","figures":{"inputs":%s}}\n' "$target" "$execs" >>"$figures"
