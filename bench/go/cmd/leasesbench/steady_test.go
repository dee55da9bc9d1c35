package main

import (
	"strings"
	"testing"
)

// The steady row is judged flat AFTER the first window: window 1 holds no
// deleted rows yet, so a store that grows from window 1 to window 2 and
// then stays put is flat, and one that keeps growing after window 2 is
// not; the claim p99 likewise, by the pooled later half of windows 2..N
// against the earlier half.
func TestTheSteadyRowIsFlatWhenNothingGrowsAfterTheFirstWindow(t *testing.T) {
	const mib = 1 << 20
	mk := func(name string, first, second, largest, early, late float64) *row {
		return &row{section: "steady", name: name, res: []result{{Ops: 100, Secs: 1, Extra: map[string]float64{
			"size_first": first * mib, "size_second": second * mib, "size_max_after_2": largest * mib,
			"p99_early": early * 1000, "p99_late": late * 1000, "prune_share": 0.01}}}}
	}
	var b strings.Builder
	renderSteady(&b, []*row{
		// Window 1 at 2.3 MiB, then 3.5 MiB from window 2 on (1.52× window 1).
		mk("levels off", 2.3, 3.5, 3.55, 2000, 2400),
		mk("grows", 2.3, 3.5, 4.2, 2000, 3100),
	}, "one run")
	lines := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		for _, n := range []string{"levels off", "grows"} {
			if strings.HasPrefix(l, "| "+n+" |") {
				lines[n] = l
			}
		}
	}
	cells := func(n string) []string { return strings.Split(lines[n], " | ") }
	// Columns: row, jobs/s, size w1, size w2, largest, flat, p99 early / late, flat, ...
	if c := cells("levels off"); len(c) < 8 || c[5] != "met" || c[7] != "met" {
		t.Fatalf("a store flat from window 2 on: %q", lines["levels off"])
	}
	if c := cells("grows"); len(c) < 8 || c[5] != "**missed**" || c[7] != "**missed**" {
		t.Fatalf("a store still growing after window 2: %q", lines["grows"])
	}
	for _, want := range []string{"2.3 MiB | 3.5 MiB | 3.5 MiB", "2000 µs / 2400 µs"} {
		if !strings.Contains(lines["levels off"], want) {
			t.Fatalf("the row prints both figures %q: %q", want, lines["levels off"])
		}
	}
}

// The workers' view of pruning sets each repetition's claim p99 against
// that of the same flow with no prune pass, run beside it: the ratio is
// the median of the per-repetition ratios, not the ratio of the medians.
func TestTheSteadyBaselineSetsEachRepetitionAgainstTheSameFlowWithoutPruning(t *testing.T) {
	mk := func(name string, p99s ...int64) *row {
		r := &row{section: "steady", name: name}
		for _, v := range p99s {
			r.res = append(r.res, result{Ops: 100, Secs: 1, P99NS: v, P50NS: v / 4, Extra: map[string]float64{}})
		}
		return r
	}
	var b strings.Builder
	renderSteady(&b, []*row{
		mk("SQLite FULL", 4000e3, 3000e3, 6000e3),
		mk("SQLite FULL"+baseRow, 2000e3, 3000e3, 4000e3),
		mk("PostgreSQL", 5000e3),
		{section: "steady", name: "PostgreSQL" + baseRow, skip: "no server"},
	}, "one run")
	out := b.String()
	var sq, pg string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "| SQLite FULL"+baseRow):
			t.Fatalf("a baseline row is no row of the steady table: %q", l)
		case strings.HasPrefix(l, "| SQLite FULL | 4000 µs"):
			sq = l
		case strings.HasPrefix(l, "| PostgreSQL | —"):
			pg = l
		}
	}
	// Ratios 2.0, 1.0, 1.5: median 1.5 (the medians' ratio would be 1.33).
	if !strings.Contains(sq, "| 4000 µs | 3000 µs | 1.50× |") {
		t.Fatalf("the SQLite line sets each repetition against its baseline: %q\n%s", sq, out)
	}
	if !strings.Contains(pg, "no server") {
		t.Fatalf("a store whose baseline did not run says why: %q\n%s", pg, out)
	}
}
