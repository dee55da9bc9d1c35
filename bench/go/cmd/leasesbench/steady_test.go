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
