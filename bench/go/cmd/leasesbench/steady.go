// The steady-state row (section 12): jobs flow at a steady rate through
// claim → complete while a short retention window prunes them, for several
// windows. It reports the store's size and the claim p99 per window (flat
// after the first, if pruning keeps up), pruning's share of the run's time,
// and the claim p99 of claims that overlapped a prune batch next to the
// others (no spike while a batch runs). The window is real time, short:
// the rules do not depend on its length, only the volume per window does.
// With -prune=false it runs the same flow with no prune pass: the baseline
// for the claims' latency the workers see over the whole run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

func cmdSteady(args []string) {
	fs := flag.NewFlagSet("steady", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file (created) or a postgres:// URL (a fresh schema is created in it)")
	level := fs.String("sync", "FULL", "synchronous level (SQLite only)")
	window := fs.Duration("window", 3*time.Second, "the retention of completed jobs and of events")
	windows := fs.Int("windows", 10, "how many windows the run lasts")
	rate := fs.Int("rate", 200, "jobs requested per second")
	w := fs.Int("w", 2, "worker goroutines")
	prune := fs.Bool("prune", true, "run a prune pass every quarter window (false: the same flow, nothing pruned)")
	must(fs.Parse(args))
	loc, pg := *db, leases.IsPostgres(*db)
	var schema string
	if pg {
		if fsync := pgFsync(*db); fsync != "on" && os.Getenv("LEASESBENCH_ALLOW_NOFSYNC") == "" {
			fail(fmt.Errorf("the PostgreSQL server runs with fsync=%s (set LEASESBENCH_ALLOW_NOFSYNC=1 for a smoke run)", fsync))
		}
		loc, schema, _ = pgSchemaURL(*db, *w+2)
		defer pgDropSchema(*db, schema)
	}
	a := openRow(loc, pg, *level)
	defer a.Close()
	a.SetPruneInterval(0) // this row prunes on its own schedule, and times it
	_, err := a.CreateProductionWithPolicies(prod, leases.DefaultRetryPolicy(), leases.RetentionPolicy{
		Completed: *window, Failed: *window, Dead: *window, Cancelled: *window, Events: *window})
	must(err)

	size := func() float64 {
		if pg {
			conn, err := pgx.Connect(context.Background(), *db)
			must(err)
			defer conn.Close(context.Background())
			var n int64
			must(conn.QueryRow(context.Background(), `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n))
			return float64(n)
		}
		var n int64
		for _, f := range []string{loc, loc + "-wal"} {
			if fi, err := os.Stat(f); err == nil {
				n += fi.Size()
			}
		}
		return float64(n)
	}

	type claim struct {
		at, lat int64 // ns since start
	}
	var (
		mu      sync.Mutex
		claims  []claim
		pruning []([2]int64) // prune calls: start, end (ns since start)
		pruneNS atomic.Int64 // the passes' wall time
		heldNS  atomic.Int64 // the time their transactions held the writer
		batches atomic.Int64 // the passes' transactions that deleted something
		vacuums atomic.Int64 // the tables the passes vacuumed (PostgreSQL)
	)
	start := time.Now()
	end := start.Add(time.Duration(*windows) * *window)
	ctx, stop := context.WithDeadline(context.Background(), end)
	defer stop()
	var wg sync.WaitGroup
	// The requester: rate jobs a second, in ticks of 10 ms.
	wg.Add(1)
	go func() {
		defer wg.Done()
		per := max(*rate/100, 1)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for i := 0; i < per; i++ {
				if _, err := a.RequestJob(prod, "", nil); err != nil && ctx.Err() == nil {
					fail(err)
				}
			}
		}
	}()
	for i := 0; i < *w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t := time.Now()
				l, err := a.Claim(prod, worker, leaseFor)
				lat := since(t)
				if err != nil {
					if leases.KindOf(err) == leases.KindNothingToClaim {
						time.Sleep(2 * time.Millisecond)
						continue
					}
					fail(err)
				}
				must(l.Complete(core.Facts{}))
				mu.Lock()
				claims = append(claims, claim{at: t.Sub(start).Nanoseconds(), lat: lat})
				mu.Unlock()
			}
		}()
	}
	// The pruner: a pass every quarter window.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for *prune && ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(*window / 4):
			}
			t := time.Now()
			// A pass as the background pruner runs it (its batches need not
			// be durable), timed here.
			r, err := a.Prune(ctx, leases.PruneOptions{Background: true})
			if err != nil && ctx.Err() == nil {
				fail(err)
			}
			d := since(t)
			pruneNS.Add(d)
			heldNS.Add(r.Held.Nanoseconds())
			batches.Add(r.Batches)
			vacuums.Add(r.Vacuumed)
			mu.Lock()
			pruning = append(pruning, [2]int64{t.Sub(start).Nanoseconds(), t.Sub(start).Nanoseconds() + d})
			mu.Unlock()
		}
	}()
	// A size sample at the end of each window.
	sizes := make([]float64, 0, *windows)
	for i := 1; i <= *windows; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * *window)))
		sizes = append(sizes, size())
	}
	if os.Getenv("LEASESBENCH_STEADY_SIZES") != "" {
		fmt.Fprintln(os.Stderr, "size after each window (bytes):", sizes)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()

	p99 := func(lat []int64) float64 {
		if len(lat) == 0 {
			return 0
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(percentile(lat, 0.99))
	}
	perWindow := make([][]int64, *windows)
	var during, outside []int64
	for _, c := range claims {
		wi := min(int(c.at/window.Nanoseconds()), *windows-1)
		perWindow[wi] = append(perWindow[wi], c.lat)
		overlaps := false
		for _, p := range pruning {
			if c.at < p[1] && c.at+c.lat > p[0] {
				overlaps = true
				break
			}
		}
		if overlaps {
			during = append(during, c.lat)
		} else {
			outside = append(outside, c.lat)
		}
	}
	ex := map[string]float64{
		"windows":          float64(*windows),
		"size_first":       sizes[0],
		"size_last":        sizes[len(sizes)-1],
		"size_max_after_1": 0,
		"prune_share":      float64(heldNS.Load()) / (secs * 1e9),
		"prune_wall_share": float64(pruneNS.Load()) / (secs * 1e9),
		"p99_during_prune": p99(during),
		"p99_outside":      p99(outside),
		"p99_first":        p99(perWindow[0]),
		"p99_last":         p99(perWindow[*windows-1]),
		"p99_max_after_1":  0,
		"prune_batches":    float64(batches.Load()),
		"vacuumed_tables":  float64(vacuums.Load()),
	}
	for i := 1; i < *windows; i++ {
		ex["size_max_after_1"] = max(ex["size_max_after_1"], sizes[i])
		ex["p99_max_after_1"] = max(ex["p99_max_after_1"], p99(perWindow[i]))
	}
	// Flat AFTER the first window (the words): window 1 holds no
	// deleted rows yet, so its size is no steady state to compare with; the
	// first pass frees space that window 2 refills, and from then on the
	// store must not grow. Size: the largest of windows 2..N within 1.1× of
	// window 2's (a few pages of slack; a store that keeps growing goes past
	// it within a few windows). Claim p99: one window's p99 rests on its 6 slowest
	// claims of ~600 and moves by 2× from window to window on a shared
	// machine, so the p99 of the later half of windows 2..N (pooled) is
	// compared with that of the earlier half, within 1.5×: a trend shows,
	// one slow window does not. Six runs whose size was flat, at load
	// average 3–5 on the shared 2-core machine, gave later ÷ earlier
	// 0.81–1.53: 1.25× would have failed half of them on noise alone, 1.5×
	// the noisiest one; make bench judges the median of its repetitions.
	ex["size_second"] = sizes[min(1, len(sizes)-1)]
	ex["size_max_after_2"] = 0
	for i := 1; i < len(sizes); i++ {
		ex["size_max_after_2"] = max(ex["size_max_after_2"], sizes[i])
	}
	var early, late []int64
	half := 1 + (*windows-1)/2
	for i := 1; i < *windows; i++ {
		if i < half {
			early = append(early, perWindow[i]...)
		} else {
			late = append(late, perWindow[i]...)
		}
	}
	ex["p99_early"], ex["p99_late"] = p99(early), p99(late)
	if os.Getenv("LEASESBENCH_STEADY_SIZES") != "" {
		ps := make([]string, *windows)
		for i := range perWindow {
			ps[i] = fmt.Sprintf("%.0f", p99(perWindow[i])/1e3)
		}
		fmt.Fprintln(os.Stderr, "claim p99 of each window (µs):", strings.Join(ps, " "))
	}
	all := make([]int64, 0, len(claims))
	for _, c := range claims {
		all = append(all, c.lat)
	}
	r := result{Ops: len(claims), Secs: secs, P99NS: int64(p99(all)), Extra: ex}
	r.P50NS = percentile(all, 0.50)
	emit(r)
}

// steadyRows are section 12's rows: SQLite FULL and PostgreSQL, ten windows
// each (2 s windows at 300 jobs/s; the smoke run 200 ms at 50 jobs/s), and
// each store's baseline: the same flow with no prune pass (baseRow).
func steadyRows(o *opts, lb string, pgEnv []string) []*row {
	window, rate := "2s", max(int(300*o.scale), 50)
	if o.smoke {
		window, rate = "200ms", 50
	}
	args := []string{"-window", window, "-windows", "10", "-rate", itoa(rate), "-w", "2"}
	sq := &row{section: "steady", name: "SQLite FULL", run: func(dir string) (result, error) {
		return child(append([]string{lb, "steady", "-db", filepath.Join(dir, "s.db"), "-sync", "FULL"}, args...))
	}}
	pr := &row{section: "steady", name: "PostgreSQL", run: func(string) (result, error) {
		return child(append([]string{lb, "steady", "-db", o.pg}, args...), pgEnv...)
	}}
	sqBase := &row{section: "steady", name: "SQLite FULL" + baseRow, run: func(dir string) (result, error) {
		return child(append([]string{lb, "steady", "-prune=false", "-db", filepath.Join(dir, "s.db"), "-sync", "FULL"}, args...))
	}}
	prBase := &row{section: "steady", name: "PostgreSQL" + baseRow, run: func(string) (result, error) {
		return child(append([]string{lb, "steady", "-prune=false", "-db", o.pg}, args...), pgEnv...)
	}}
	if o.pg == "" {
		pr.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
		prBase.skip = pr.skip
	}
	return []*row{sq, sqBase, pr, prBase}
}

// baseRow ends the name of a store's baseline row: the same flow, no
// prune pass. The workers see a pass's batches as their claims' latency
// over the whole run; this row's is the same run's figure without them.
const baseRow = ", no pruning"

func renderSteady(b *strings.Builder, rows []*row, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n### 12. Steady state: ten retention windows of jobs flowing (%s)\n\n", n)
	p("Jobs are requested at a steady rate and claimed and completed by 2 workers; completed jobs and events are\n" +
		"kept one window (2 s of real time; 200 ms in the smoke run), and a prune pass (as the background pruner runs it) every quarter window. Size: the store after each\n" +
		"window (SQLite: file and WAL; PostgreSQL: the schema's tables and indexes). Flat after the first window: window 1 holds\n" +
		"no deleted rows yet, so the steady state starts at window 2; the size is flat when the largest of windows 2..N is\n" +
		"within 1.1× of window 2's, and the claim p99 when that of the later half of windows 2..N is within 1.5× of the\n" +
		"earlier half's (pooled: one window's p99 alone moves 2× with the machine's load). Prune share: the time the prune passes' transactions held the writer\n" +
		"over the run's (PruneResult.Held; their wall time, waits for the writer included, in brackets). Spike: claim p99 of claims that overlapped a prune pass, next to the others'.\n\n")
	p("| row | jobs/s | size window 1 | size window 2 | largest after | flat | claim p99 windows 2..N early / late | flat | prune share | p99 during prune | p99 outside |\n")
	p("|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|\n")
	var pruned []*row
	for _, r := range rows {
		if r.section == "steady" && !strings.HasSuffix(r.name, baseRow) {
			pruned = append(pruned, r)
		}
	}
	for _, r := range measuredIn(pruned, "steady", 10, p) {
		med := func(k string) float64 { return median(values(r, func(x result) float64 { return x.Extra[k] })) }
		second, after := med("size_second"), med("size_max_after_2")
		early, late := med("p99_early"), med("p99_late")
		p("| %s | %s | %.1f MiB | %.1f MiB | %.1f MiB | %s | %s / %s | %s | %.1f %% (%.1f %%) %s | %s | %s |\n", r.name,
			num(median(rates(r))), med("size_first")/(1<<20), second/(1<<20), after/(1<<20), met(after <= 1.1*second),
			us(early), us(late), met(late <= 1.5*early),
			100*med("prune_share"), 100*med("prune_wall_share"), met(med("prune_share") <= 0.05),
			us(med("p99_during_prune")), us(med("p99_outside")))
	}
	p("\nThe workers' view: the claim p99 of the whole run, next to the same flow with no prune pass (the row's baseline,\n" +
		"interleaved with it in every repetition; it keeps every row, so its store grows through the run). Ratio: the\n" +
		"median of the per-repetition ratios. Reported, not judged: the target is the spike above.\n\n")
	p("| store | claim p99, pruning | claim p99, no pruning | ratio | claim p50, pruning / no pruning |\n|---|---:|---:|---:|---:|\n")
	for _, r := range pruned {
		base := find(rows, "steady", r.name+baseRow)
		if base == nil {
			continue
		}
		s := status(r)
		if s == "" {
			s = status(base)
		}
		if s != "" {
			p("| %s | %s | | | |\n", r.name, s)
			continue
		}
		p99s := func(x *row) []float64 { return values(x, func(v result) float64 { return float64(v.P99NS) }) }
		p50s := func(x *row) []float64 { return values(x, func(v result) float64 { return float64(v.P50NS) }) }
		p("| %s | %s | %s | %.2f× | %s / %s |\n", r.name, us(median(p99s(r))), us(median(p99s(base))),
			ratio(p99s(r), p99s(base)), us(median(p50s(r))), us(median(p50s(base))))
	}
	p("\n")
}
