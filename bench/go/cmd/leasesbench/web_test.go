package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
)

// workersStore opens a fresh store for a workers loop (a schema of its own
// on PostgreSQL) holding jobs requested jobs, and a second handle on it, the
// status page's.
func workersStore(t *testing.T, store string, jobs int) (a, page *core.Authority) {
	t.Helper()
	loc, drop, err := faceScratch(store, os.Getenv("LEASES_TEST_PG_URL"), t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	fillCore(loc, jobs)
	a = openRow(loc, store == "PostgreSQL", "FULL")
	page = openRow(loc, store == "PostgreSQL", "FULL")
	t.Cleanup(func() { page.Close(); a.Close() })
	return a, page
}

// pageServer stands for `leases serve`: every page it answers reads a page
// of the production's jobs from the store; hits counts the answers.
func pageServer(t *testing.T, a *core.Authority, hits *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.ListJobs(r.Context(), prod, core.JobQuery{Limit: 50}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		hits.Add(1)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The "page open" rows measure the workers while the page reads the store:
// the loop the section runs (webLoop, here at the smoke run's scale, the
// shortest) outlasts the page's refresh, so every repetition fetches the
// page during its timed loop, and the row counts those fetches.
func TestEveryPageOpenRepetitionFetchesThePageDuringItsTimedLoop(t *testing.T) {
	o := &opts{smoke: true, scale: 0.05}
	for _, store := range benchStores(t) {
		t.Run(store, func(t *testing.T) {
			name := map[string]string{"SQLite": "SQLite FULL", "PostgreSQL": "PostgreSQL"}[store]
			jobs, dur := webLoop(o, name)
			a, page := workersStore(t, store, jobs+4)
			var hits atomic.Int64
			srv := pageServer(t, page, &hits)
			r, err := workersRun{a: a, w: 4, n: jobs, dur: dur,
				page: func() *pageTabs { return openTabs(srv.URL, webRefresh) }}.run()
			if err != nil {
				t.Fatalf("the %s page-open loop of %d jobs, %s: %v", store, jobs, dur, err)
			}
			fetches := r.Extra["page_fetches"]
			if fetches < float64(len(webTabPaths)) {
				t.Fatalf("the %s page-open loop ran %d cycles in %.2f s and fetched the page %v times: "+
					"not one refresh of its tabs (every %s)", store, r.Ops, r.Secs, fetches, webRefresh)
			}
			if got := hits.Load(); float64(got) < fetches {
				t.Fatalf("the row counts %v fetches; the page answered %d", fetches, got)
			}
		})
	}
}

// A "page open" repetition whose timed loop saw no fetch of the page
// measured the workers without it: it fails, naming why, instead of
// reporting a figure.
func TestAPageOpenRepetitionThatFetchedNoPageFails(t *testing.T) {
	const cycles = 20 // far less than a second of cycles: over before the first refresh
	a, page := workersStore(t, "SQLite", cycles+4)
	var hits atomic.Int64
	srv := pageServer(t, page, &hits)
	r, err := workersRun{a: a, w: 4, n: cycles,
		page: func() *pageTabs { return openTabs(srv.URL, webRefresh) }}.run()
	if err == nil {
		t.Fatalf("a page-open loop of %d cycles in %.3f s with %v page fetches passed: %+v",
			r.Ops, r.Secs, r.Extra["page_fetches"], r)
	}
	if !strings.Contains(err.Error(), "no page was fetched") {
		t.Fatalf("the error does not say the page was not fetched: %v", err)
	}
}

// A timed loop is timed: one whose jobs run out before its time is up
// fails rather than reporting a shorter loop.
func TestATimedWorkersLoopThatRunsOutOfJobsFails(t *testing.T) {
	const jobs = 50
	a, _ := workersStore(t, "SQLite", jobs+4)
	r, err := workersRun{a: a, w: 4, n: jobs, dur: 2 * time.Second}.run()
	if err == nil {
		t.Fatalf("a 2 s loop over %d jobs passed: %d cycles in %.2f s", jobs, r.Ops, r.Secs)
	}
	if !strings.Contains(err.Error(), "ran out") {
		t.Fatalf("the error does not say the jobs ran out: %v", err)
	}
}

// A "page open" row with a repetition that fetched no page (or failed) is
// marked invalid in the table, and its ratio to the row without the page
// is neither shown nor judged against the target.
func TestAPageOpenRowWithARepetitionThatFetchedNoPageIsInvalid(t *testing.T) {
	o := &opts{reps: 2, scale: 1}
	mk := func(store string, open bool, fetches ...float64) *row {
		r := &row{section: "web", name: webWorkersName(store, open)}
		for _, f := range fetches {
			x := result{Ops: 12000, Secs: 4, P99NS: 2e6}
			if open {
				x.Extra = map[string]float64{"page_fetches": f}
			}
			r.res = append(r.res, x)
		}
		return r
	}
	failed := mk("PostgreSQL", true, 8)
	failed.errs = []string{"leasesbench: exit status 1: page open, but no page was fetched"}
	rows := []*row{
		mk("SQLite FULL", false, 0, 0), mk("SQLite FULL", true, 8, 0),
		mk("PostgreSQL", false, 0, 0), failed,
	}
	var b strings.Builder
	renderWeb(o, &b, rows, 100000, "median of 2 interleaved repetitions")
	table := b.String()
	for _, store := range []string{"SQLite FULL", "PostgreSQL"} {
		line := ""
		for _, l := range strings.Split(table, "\n") {
			if strings.HasPrefix(l, "| "+webWorkersName(store, true)+" |") {
				line = l
			}
		}
		if !strings.Contains(line, "**invalid**") || strings.Contains(line, "×") {
			t.Errorf("the %s page-open row is not marked invalid, or shows a ratio: %q", store, line)
		}
	}
	if !strings.Contains(table, "8, 0") {
		t.Errorf("the table does not list each repetition's page fetches:\n%s", table)
	}
	var tb strings.Builder
	webTargets(func(format string, a ...any) { fmt.Fprintf(&tb, format, a...) }, rows, 100000)
	if strings.Contains(tb.String(), "met") {
		t.Errorf("an invalid page-open row is judged against the target:\n%s", tb.String())
	}

	// The same rows with a page fetched in every repetition: figures, ratio and target.
	rows[1], rows[3] = mk("SQLite FULL", true, 8, 6), mk("PostgreSQL", true, 8, 8)
	b.Reset()
	renderWeb(o, &b, rows, 100000, "median of 2 interleaved repetitions")
	if strings.Contains(b.String(), "**invalid**") || !strings.Contains(b.String(), "| 8, 6 | 1.00× |") {
		t.Errorf("a valid page-open row lacks its fetches or ratio:\n%s", b.String())
	}
}

// `run -rows` may leave out either workers row of a store: the section's
// table shows the row that ran (without a ratio) instead of failing.
func TestTheStatusPageTableShowsAWorkersRowRunWithoutItsTwin(t *testing.T) {
	o := &opts{reps: 1, scale: 1}
	open := &row{section: "web", name: webWorkersName("SQLite FULL", true),
		res: []result{{Ops: 12000, Secs: 4, P99NS: 2e6, Extra: map[string]float64{"page_fetches": 6}}}}
	none := &row{section: "web", name: webWorkersName("PostgreSQL", false), res: []result{{Ops: 4000, Secs: 4, P99NS: 3e6}}}
	var b strings.Builder
	renderWeb(o, &b, []*row{open, none}, 100000, "median of 1 interleaved repetitions")
	webTargets(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, []*row{open, none}, 100000)
	for _, want := range []string{"| " + open.name + " | 3000 | 3000–3000 | 2000 µs | 6 |  |",
		"| " + none.name + " | 1000 | 1000–1000 | 3000 µs |  |  |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}
