// The workers rows (section 7): W goroutines of one process share one
// Authority and run claim → complete cycles through the core, on SQLite
// (synchronous=FULL) or on PostgreSQL (fsync on). Jobs are requested before
// the timer starts; each worker runs one untimed warm-up cycle first so the
// timed loop does not pay for opening connections or preparing statements.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

// pgSchemaURL creates a fresh schema on the server at base and returns the URL
// that opens the authority in it, the schema's name, and the application
// name its connections carry (to find their server processes).
func pgSchemaURL(base string, minConns int) (loc, schema, app string) {
	var b [6]byte
	_, err := rand.Read(b[:])
	must(err)
	schema = "bench_" + hex.EncodeToString(b[:])
	app = "leasesbench-" + schema
	conn, err := pgx.Connect(context.Background(), base)
	must(err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), "CREATE SCHEMA "+schema)
	must(err)
	u, err := url.Parse(base)
	must(err)
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", app)
	if minConns > 0 {
		q.Set("pool_min_conns", strconv.Itoa(minConns))
	}
	u.RawQuery = q.Encode()
	return u.String(), schema, app
}

func pgDropSchema(base, schema string) {
	conn, err := pgx.Connect(context.Background(), base)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
}

// pgFsync is the server's fsync setting ("on" for the durable cluster).
func pgFsync(base string) string {
	conn, err := pgx.Connect(context.Background(), base)
	must(err)
	defer conn.Close(context.Background())
	var v string
	must(conn.QueryRow(context.Background(), "SHOW fsync").Scan(&v))
	return v
}

// backendCPU is the CPU (user+sys, ns) of each server process serving a
// connection named app, read from /proc: only meaningful for a server on this
// host. Empty when none could be read.
func backendCPU(base, app string) map[int32]int64 {
	conn, err := pgx.Connect(context.Background(), base)
	must(err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	must(err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(err)
	cpu := map[int32]int64{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name "(…)": state is field 3, utime 14, stime 15.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cpu[pid] = (ut + st) * int64(time.Second) / clockTicks
	}
	return cpu
}

func atoi(s string) int { i, _ := strconv.Atoi(s); return i }

// openRow opens a row's authority at loc: PostgreSQL (pg) with its
// defaults, SQLite at the synchronous level.
func openRow(loc string, pg bool, level string) *core.Authority {
	var a *core.Authority
	var err error
	if pg {
		a, err = leases.Open(loc)
	} else {
		a, err = leases.OpenWith(loc, leases.Options{Synchronous: level})
	}
	must(err)
	return a
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on
// every Linux this runs on).
const clockTicks = 100

func cmdWorkers(args []string) {
	fs := flag.NewFlagSet("workers", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file (created) or a postgres:// URL (a fresh schema is created in it)")
	level := fs.String("sync", "FULL", "synchronous level (SQLite only)")
	n := fs.Int("n", 400, "timed cycles in all; with -dur, the jobs requested before the loop (running out fails the row)")
	dur := fs.Duration("dur", 0, "time the loop for this long instead of for -n cycles")
	w := fs.Int("w", 1, "worker goroutines")
	web := fs.String("web", "", "the leases CLI: serve the status page and refresh it every second during the loop")
	must(fs.Parse(args))
	loc, pg := *db, leases.IsPostgres(*db)
	var schema, app string
	if pg {
		if fsync := pgFsync(*db); fsync != "on" && os.Getenv("LEASESBENCH_ALLOW_NOFSYNC") == "" {
			fail(fmt.Errorf("the PostgreSQL server runs with fsync=%s: not comparable with SQLite FULL "+
				"(start it with LEASES_PG_DURABLE=1, or set LEASESBENCH_ALLOW_NOFSYNC=1 for a smoke run)", fsync))
		}
		loc, schema, app = pgSchemaURL(*db, *w)
		defer pgDropSchema(*db, schema)
	}
	fillCore(loc, *n+*w)
	a := openRow(loc, pg, *level)
	defer a.Close()

	run := workersRun{a: a, w: *w, n: *n, dur: *dur}
	if *web != "" {
		run.page = func() *pageTabs { return pageOpen(*web, loc) }
	}
	var srv0 map[int32]int64
	if pg {
		run.armed = func() { srv0 = backendCPU(*db, app) }
	}
	r, err := run.run()
	must(err)
	if pg {
		// Per process, so a connection opened or closed meanwhile counts only
		// what it spent in the loop (a new one from zero).
		if srv1 := backendCPU(*db, app); len(srv1) > 0 {
			var ns int64
			for pid, c := range srv1 {
				ns += c - srv0[pid]
			}
			if r.Extra == nil {
				r.Extra = map[string]float64{}
			}
			r.Extra["server_cpu_ns"] = float64(ns) / float64(r.Ops)
		}
	}
	emit(r)
}

// workersRun is one repetition of a workers row: w goroutines sharing a run
// claim → complete cycles, n in all or, when dur is set, for dur (the n jobs
// requested beforehand must last it: running out is an error, not a shorter
// loop). Each worker runs one untimed warm-up cycle first; then armed is
// called, the page opened (page, when set), and the timer started.
type workersRun struct {
	a     *core.Authority
	w, n  int
	dur   time.Duration
	page  func() *pageTabs
	armed func()
}

// run times the loop. With the page open, the result counts the page's
// fetches started during the timed loop ("page_fetches"), and a loop that
// saw none is an error: it measured the workers without the page.
func (wr workersRun) run() (result, error) {
	a := wr.a
	var left atomic.Int64
	left.Store(int64(wr.n))
	var end time.Time // set before start is closed: every worker reads it after
	var errOnce sync.Once
	var loopErr error
	var stopped atomic.Bool
	stop := func(err error) {
		errOnce.Do(func() { loopErr = err })
		stopped.Store(true)
	}
	cycle := func() (int64, error) {
		t := time.Now()
		l, err := a.Claim(prod, worker, leaseFor)
		lat := since(t)
		if err != nil {
			return 0, err
		}
		return lat, l.Complete(core.Facts{})
	}
	more := func() bool {
		if stopped.Load() {
			return false
		}
		if wr.dur > 0 {
			return time.Now().Before(end)
		}
		return left.Add(-1) >= 0
	}
	// Warm-up: one cycle per worker, all at once, then everyone starts together.
	var warm, done sync.WaitGroup
	warm.Add(wr.w)
	start := make(chan struct{})
	lats := make([][]int64, wr.w)
	var t0 time.Time
	for i := 0; i < wr.w; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			_, err := cycle()
			warm.Done()
			if err != nil {
				stop(fmt.Errorf("warm-up cycle: %w", err))
			}
			<-start
			for more() {
				lat, err := cycle()
				if err != nil {
					if wr.dur > 0 && core.KindOf(err) == core.KindNothingToClaim {
						err = fmt.Errorf("the %d jobs requested ran out %.2f s into the %s loop: request more (-n)",
							wr.n, time.Since(t0).Seconds(), wr.dur)
					}
					stop(err)
					return
				}
				lats[i] = append(lats[i], lat)
			}
		}()
	}
	warm.Wait()
	if wr.armed != nil {
		wr.armed()
	}
	var tabs *pageTabs
	if wr.page != nil {
		tabs = wr.page()
	}
	cpu0 := cpuNS()
	t0 = time.Now()
	end = t0.Add(wr.dur)
	close(start)
	done.Wait()
	t1 := time.Now()
	secs := t1.Sub(t0).Seconds()
	cpu := cpuNS() - cpu0
	fetches := -1
	if tabs != nil {
		fetches = tabs.fetchesBetween(t0, t1)
		if err := tabs.close(); err != nil {
			stop(fmt.Errorf("the page: %w", err))
		}
	}
	if loopErr != nil {
		return result{}, loopErr
	}
	var lat []int64
	for _, l := range lats {
		lat = append(lat, l...)
	}
	ops := len(lat)
	if ops == 0 {
		return result{}, fmt.Errorf("no cycle ran in the timed loop")
	}
	r := result{Ops: ops, Secs: secs, CPUNS: float64(cpu) / float64(ops),
		P50NS: percentile(lat, 0.5), P99NS: percentile(lat, 0.99)}
	if fetches >= 0 {
		if fetches == 0 {
			return result{}, fmt.Errorf("page open, but no page was fetched during the %.2f s timed loop "+
				"(it refreshes every %s): the repetition measured the workers without the page; time the loop "+
				"for longer (-dur)", secs, webRefresh)
		}
		r.Extra = map[string]float64{"page_fetches": float64(fetches)}
	}
	return r, nil
}

// renderWorkers is section 7 of the table: per worker count, the SQLite row
// and the PostgreSQL row one above the other.
func renderWorkers(o *opts, b *strings.Builder, rows []*row, floorFull *row, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n### 7. Workers: goroutines of one process, claim → complete through the core, SQLite FULL next to PostgreSQL (%s)\n\n", n)
	p("| workers | store | cycles/s | range | × floor FULL | PostgreSQL ÷ SQLite | claim p50 | claim p99 | CPU µs/cycle | server CPU µs/cycle |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		if r.section != "workers" {
			continue
		}
		w, store := workersLabel(r.name)
		if s := status(r); s != "" {
			p("| %s | %s | %s | | | | | | | |\n", w, store, s)
			continue
		}
		rt := rates(r)
		rel, vs := "—", ""
		if floorFull != nil && len(floorFull.res) > 0 {
			rel = fmt.Sprintf("%.2f×", ratio(rt, rates(floorFull)))
		}
		if store == "PostgreSQL" {
			if sq := find(rows, "workers", workersName("SQLite FULL", atoi(w))); sq != nil && len(sq.res) > 0 {
				vs = fmt.Sprintf("%.2f×", ratio(rt, rates(sq)))
			}
		}
		srv := "—"
		if c := median(values(r, func(x result) float64 { return x.Extra["server_cpu_ns"] })); c > 0 {
			srv = num(c / 1000)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w, store, num(median(rt)), spread(rt), rel, vs,
			us(median(values(r, func(x result) float64 { return float64(x.P50NS) }))),
			us(median(values(r, func(x result) float64 { return float64(x.P99NS) }))),
			num(median(values(r, func(x result) float64 { return x.CPUNS }))/1000), srv)
	}
	p("\nEach row: %d timed cycles shared by the workers, one `*core.Authority` for all of them; jobs requested and\n"+
		"one warm-up cycle per worker before the timer. SQLite: one file, synchronous=FULL (each commit waits for the\n"+
		"writer lock and its fsync). PostgreSQL: %s;\n"+
		"a fresh schema per repetition, a pool opened with one connection per worker. CPU µs/cycle is the bench\n"+
		"process's; server CPU µs/cycle is that of the PostgreSQL processes serving its connections (/proc; —\n"+
		"when the server is not on this host). × floor FULL: against section 1's SQLite floor, same repetition.\n",
		o.n(600), pgInfo(o.pg))
}

// workersName names a workers row: "PostgreSQL, 4 workers".
func workersName(store string, w int) string {
	if w == 1 {
		return store + ", 1 worker"
	}
	return fmt.Sprintf("%s, %d workers", store, w)
}

// workersLabel splits "PostgreSQL, 4 workers" into "4" and "PostgreSQL".
func workersLabel(name string) (w, store string) {
	store, rest, _ := strings.Cut(name, ", ")
	if store == "SQLite FULL" {
		store = "SQLite"
	}
	w, _, _ = strings.Cut(rest, " ")
	return w, store
}

// pgInfo describes the server: version and the settings that decide what a
// commit costs.
func pgInfo(base string) string {
	if base == "" {
		return "no server"
	}
	conn, err := pgx.Connect(context.Background(), base)
	if err != nil {
		return "server unreachable"
	}
	defer conn.Close(context.Background())
	var ver, fsync, sc, method string
	err = conn.QueryRow(context.Background(), `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('wal_sync_method')`).Scan(&ver, &fsync, &sc, &method)
	if err != nil {
		return "server settings unreadable"
	}
	host := "?"
	if u, err := url.Parse(base); err == nil {
		host = u.Hostname()
	}
	return fmt.Sprintf("PostgreSQL %s on %s, fsync=%s, synchronous_commit=%s, wal_sync_method=%s", ver, host, fsync, sc, method)
}
