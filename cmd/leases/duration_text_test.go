package main

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
)

// The CLI writes durations the way every surface does (the vectors'
// "shown"), and reads back every text it writes of a claim's duration.
func TestTheCLIWritesDurationsAsEverySurfaceDoesAndReadsThemBack(t *testing.T) {
	raw, err := os.ReadFile("../../tests/vectors/durations.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Shown []struct{ Nanoseconds, Shown string }
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Shown) < 20 {
		t.Fatalf("the shared vectors were not read: %d shown", len(v.Shown))
	}
	for _, s := range v.Shown {
		ns, err := strconv.ParseInt(s.Nanoseconds, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Duration(ns)
		f := durationFlag{d: d, set: true}
		if got := f.String(); got != s.Shown {
			t.Errorf("%d ns is shown %q, want %q", ns, got, s.Shown)
		}
		if _, err := core.ValidateDuration(d); err == nil {
			if back, err := parseDuration(s.Shown); err != nil || back != d {
				t.Errorf("parseDuration(%q) = %v, %v; want %v", s.Shown, back, err, d)
			}
		}
	}
	if got := spanText(366 * 24 * time.Hour); got != "8784h" {
		t.Errorf("spanText(366 days) = %q", got)
	}
}
