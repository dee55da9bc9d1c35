package main

import (
	"path/filepath"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

// The idle rows' WAL-frames column counts what the waiters wrote: not the
// bench process's own busy commits, and not a difference that goes back
// when the WAL starts over after a checkpoint.
func TestTheIdleRowsFramesAreTheWaitersOwnThoughTheWALStartsOver(t *testing.T) {
	loc := filepath.Join(t.TempDir(), "idle.db")
	a := openBench(loc)
	defer a.Close()
	other, err := leases.Open(loc) // a waiter's process would write through its own handle
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const busyProd = "busy"
	if _, err := a.CreateProduction(busyProd); err != nil {
		t.Fatal(err)
	}
	const cycles = 200 // well past SQLite's 1,000-frame checkpoint
	for i := 0; i < cycles; i++ {
		if _, err := a.RequestJob(busyProd, "", payload); err != nil {
			t.Fatal(err)
		}
	}
	frames := countFrames(loc)
	start := readWALHeader(loc)
	busy := func(n int) {
		for i := 0; i < n; i++ {
			frames.commit(func() {
				l, err := a.Claim(busyProd, worker, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Complete(core.Facts{}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	f0 := frames.sample()
	busy(cycles / 2)
	before := readWALHeader(loc)
	if _, err := other.RequestJob(prod, "", payload); err != nil { // the "waiters'" write
		t.Fatal(err)
	}
	after := readWALHeader(loc)
	theirs := after.frames - before.frames
	if after.salt != before.salt {
		theirs = after.frames // their commit restarted the WAL
	}
	busy(cycles / 2)
	f1 := frames.sample()
	if readWALHeader(loc).salt == start.salt {
		t.Fatal("the WAL did not start over during the window: the test proves nothing")
	}
	if theirs <= 0 {
		t.Fatalf("the other handle's request wrote %d frames", theirs)
	}
	if got := frames.waiters(f0, f1); got != theirs {
		t.Fatalf("the waiters wrote %d frames; the row counts %d", theirs, got)
	}
}
