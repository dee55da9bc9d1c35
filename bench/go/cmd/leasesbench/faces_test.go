package main

import (
	"os"
	"strings"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

// benchStores are the stores a test of the section runs on: SQLite, and
// PostgreSQL when LEASES_TEST_PG_URL names a server (LEASES_REQUIRE_PG=1
// makes its absence a failure).
func benchStores(t *testing.T) []string {
	stores := []string{"SQLite"}
	if os.Getenv("LEASES_TEST_PG_URL") != "" {
		stores = append(stores, "PostgreSQL")
	} else if os.Getenv("LEASES_REQUIRE_PG") == "1" {
		t.Fatal("LEASES_REQUIRE_PG=1 but LEASES_TEST_PG_URL is unset")
	}
	return stores
}

func TestAFaceRowCountsOnlyALoopThatCompletedEveryJob(t *testing.T) {
	for _, store := range benchStores(t) {
		t.Run(store, func(t *testing.T) {
			loc, drop, err := faceScratch(store, os.Getenv("LEASES_TEST_PG_URL"), t.TempDir(), true)
			if err != nil {
				t.Fatal(err)
			}
			defer drop()
			const n = 6
			fillCore(loc, n)
			a, err := leases.Open(loc)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			complete := func(k int) {
				t.Helper()
				for i := 0; i < k; i++ {
					l, err := a.Claim(prod, worker, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Complete(core.Facts{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := checkDrained(loc, n); err == nil {
				t.Fatal("a store whose jobs are all waiting passed as drained")
			}
			complete(n - 1)
			if err := checkDrained(loc, n); err == nil {
				t.Fatal("a store with a job left passed as drained")
			}
			l, err := a.Claim(prod, worker, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkDrained(loc, n); err == nil {
				t.Fatal("a store with a job still claimed passed as drained")
			}
			if err := l.Complete(core.Facts{}); err != nil {
				t.Fatal(err)
			}
			if err := checkDrained(loc, n); err != nil {
				t.Fatalf("a store whose %d jobs are all completed: %v", n, err)
			}
			// A job more than the row requested: the loop drained a store it
			// did not measure.
			if _, err := a.RequestJob(prod, "", payload); err != nil {
				t.Fatal(err)
			}
			complete(1)
			if err := checkDrained(loc, n); err == nil {
				t.Fatalf("a store of %d completed jobs passed as the %d the row requested", n+1, n)
			}
		})
	}
}

func TestEachFaceIsComparedWithTheGoLoopOfTheSameStoreAndConcurrency(t *testing.T) {
	o := &opts{reps: 2, scale: 1}
	// Two repetitions each, as jobs per second (ops 100 over secs).
	// CPU per job: 500 µs a job more in each repetition for every face
	// but Go, whose CPU per job is 1000 µs and 2000 µs.
	mk := func(store string, c int, face string, secs ...float64) *row {
		r := &row{section: "faces", name: faceName(store, c, face)}
		for i, s := range secs {
			cpu, cs := float64(1000*(i+1)), 1.0
			if face != "Go" {
				cpu, cs = cpu+500, 3
			}
			r.res = append(r.res, result{Ops: 100, Secs: s, CPUNS: cpu * 1000, Extra: map[string]float64{"vcsw": cs}})
		}
		return r
	}
	rows := []*row{
		mk("SQLite", 1, "Go", 1, 0.5),         // 100, 200 jobs/s
		mk("SQLite", 1, "C", 2, 1.0/3),        // 50, 300: per repetition 0.5× and 1.5×, median 1.00×
		mk("SQLite", 4, "Go", 0.1, 0.1),       // 1000, 1000
		mk("SQLite", 4, "C", 0.2, 0.2),        // 500, 500: 0.50×
		mk("PostgreSQL", 1, "Go", 0.25, 0.25), // 400, 400
		mk("PostgreSQL", 1, "C", 1, 1),        // 100, 100: 0.25×
		mk("PostgreSQL", 1, "CLI", 2, 2),      // 50, 50: 0.12×
	}
	var b strings.Builder
	renderFaces(o, &b, rows, "median of 2 interleaved repetitions")
	out := b.String()
	want := []string{
		"| SQLite | 1 | " + faceLabel["Go"] + " | 150 | 100–200 | — | 1500 | — | 1.00 |",
		"| SQLite | 1 | " + faceLabel["C"] + " | 175 | 50.0–300 | 1.00× | 2000 | +500 | 3.00 |",
		"| SQLite | 4 | " + faceLabel["C"] + " | 500 | 500–500 | 0.50× | 2000 | +500 | 3.00 |",
		"| PostgreSQL | 1 | " + faceLabel["C"] + " | 100 | 100–100 | 0.25× | 2000 | +500 | 3.00 |",
		"| PostgreSQL | 1 | " + faceLabel["CLI"] + " | 50.0 | 50.0–50.0 | 0.12× | 2000 | +500 | 3.00 |",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the table lacks %q:\n%s", w, out)
		}
	}
	// The CLI's row is in its own table, after the other faces'.
	if i, j := strings.Index(out, faceLabel["CLI"]), strings.Index(out, "`leases work` forks"); i < j {
		t.Errorf("the CLI's row comes before its own table:\n%s", out)
	}
}
