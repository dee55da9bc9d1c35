// The PostgreSQL worker-loop rows (section 11): n no-op jobs requested up
// front, W handlers, timed from the loop's start to the last completion, on
// one server with fsync on: libleases' worker.Run, and the hand-written
// floor (a claim, then a completion fenced by claim id, state and expiry:
// two round trips per job). River's rows are peersbench's (river-pg).
//
// With -profile the row also reports what the loop cost the server, counted
// rather than timed: statements per job (pg_stat_statements when the server
// loads it), round trips per job (counted on the wire by a proxy), commits,
// WAL bytes and NOTIFYs per job, and prints the statements to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	workerloop "github.com/libleases/libleases/worker"
)

const floorSchemaSQL = `CREATE TABLE floor_jobs (
	id bigserial PRIMARY KEY,
	state text NOT NULL DEFAULT 'ready',
	payload bytea NOT NULL,
	claim_id bigint,
	expires_at timestamptz
);
CREATE INDEX floor_jobs_ready ON floor_jobs (id) WHERE state = 'ready'`

const floorClaimSQL = `UPDATE floor_jobs SET state = 'claimed', claim_id = $1, expires_at = now() + interval '30 seconds'
	WHERE id = (SELECT id FROM floor_jobs WHERE state = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
	RETURNING id`

const floorCompleteSQL = `UPDATE floor_jobs SET state = 'done', claim_id = NULL
	WHERE id = $1 AND claim_id = $2 AND state = 'claimed' AND expires_at > now()`

func cmdPGLoop(args []string) {
	fs := flag.NewFlagSet("pgloop", flag.ExitOnError)
	db := fs.String("db", "", "postgres:// URL of the server (a fresh schema is made in it)")
	w := fs.Int("w", 16, "handlers")
	n := fs.Int("n", 3000, "jobs")
	mode := fs.String("mode", "loop", "loop (worker.Run) or floor (hand-written SQL)")
	profile := fs.Bool("profile", false, "count statements, round trips, commits, WAL and NOTIFYs per job")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed loop to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the timed loop to this file")
	must(fs.Parse(args))
	if !leases.IsPostgres(*db) {
		fail(fmt.Errorf("pgloop needs a postgres:// URL"))
	}
	if fsync := pgFsync(*db); fsync != "on" && os.Getenv("LEASESBENCH_ALLOW_NOFSYNC") == "" {
		fail(fmt.Errorf("the PostgreSQL server runs with fsync=%s (set LEASESBENCH_ALLOW_NOFSYNC=1 for a smoke run)", fsync))
	}
	loc, schema, app := pgSchemaURL(*db, 0)
	defer pgDropSchema(*db, schema)
	var proxy *tripCounter
	if *profile {
		proxy, loc = newTripCounter(loc)
	}
	var run func()
	var closeAll func() // ends the row's connections: their server processes then report their counts
	switch *mode {
	case "loop":
		fillCore(loc, *n)
		a, err := leases.Open(loc)
		must(err)
		closeAll = func() { a.Close() }
		run = func() {
			must(workerloop.Run(context.Background(), a, workerloop.Config{Production: prod, Worker: worker,
				Duration: 30 * time.Second, Concurrency: *w, MaxJobs: *n},
				func(context.Context, *core.Lease) (core.Facts, error) { return core.Facts{}, nil }))
		}
	case "floor":
		var pool *pgxpool.Pool
		run, pool = floorLoop(loc, *n, *w)
		closeAll = pool.Close
	default:
		fail(fmt.Errorf("unknown mode %q", *mode))
	}
	var before *serverCounts
	if *profile {
		before = readServerCounts(*db)
		proxy.start()
	}
	srv0 := backendCPU(*db, app)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer f.Close()
	}
	cpu0, t0 := cpuNS(), time.Now()
	run()
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		must(err)
		must(pprof.Lookup("allocs").WriteTo(f, 0))
		must(f.Close())
	}
	secs := time.Since(t0).Seconds()
	cpu := cpuNS() - cpu0
	r := result{Ops: *n, Secs: secs, CPUNS: float64(cpu) / float64(*n), Extra: map[string]float64{}}
	if srv1 := backendCPU(*db, app); len(srv1) > 0 {
		var ns int64
		for pid, c := range srv1 {
			ns += c - srv0[pid]
		}
		r.Extra["server_cpu_ns"] = float64(ns) / float64(*n)
	}
	// After the server's CPU is read: its processes end with the connections.
	closeAll()
	if *profile {
		trips := proxy.stop()
		// A server process reports its commits when it ends (or at most
		// every second): wait for the closed connections' to end.
		time.Sleep(1500 * time.Millisecond)
		after := readServerCounts(*db)
		per := func(x float64) float64 { return x / float64(*n) }
		r.Extra["round_trips"] = per(float64(trips))
		r.Extra["commits"] = per(float64(after.commits - before.commits))
		r.Extra["wal_bytes"] = per(float64(after.walLSN - before.walLSN))
		if before.stmts != nil {
			r.Extra["statements"], r.Extra["notifies"] = reportStatements(before, after, *n, schema)
		}
	}
	emit(r)
}

// floorLoop fills the floor's table and returns its loop: w goroutines on a
// pool of w connections, each claim and each completion its own statement
// (autocommit), so two round trips and two commits per job.
func floorLoop(loc string, n, w int) (func(), *pgxpool.Pool) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(loc)
	must(err)
	cfg.MaxConns, cfg.MinConns = int32(w), int32(w)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	must(err)
	_, err = pool.Exec(ctx, floorSchemaSQL)
	must(err)
	_, err = pool.Exec(ctx, `INSERT INTO floor_jobs (payload) SELECT $1::bytea FROM generate_series(1, $2)`, payload, n)
	must(err)
	// Every connection open and both statements prepared before the timer.
	var warm sync.WaitGroup
	for i := 0; i < w; i++ {
		warm.Add(1)
		go func() {
			defer warm.Done()
			c, err := pool.Acquire(ctx)
			must(err)
			defer c.Release()
			_, err = c.Conn().Prepare(ctx, "claim", floorClaimSQL)
			must(err)
			_, err = c.Conn().Prepare(ctx, "complete", floorCompleteSQL)
			must(err)
		}()
	}
	warm.Wait()
	return func() {
		var claimIDs atomic.Int64
		var claimed atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < w; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for claimed.Load() < int64(n) {
					claim := claimIDs.Add(1)
					var id int64
					err := pool.QueryRow(ctx, floorClaimSQL, claim).Scan(&id)
					if err == pgx.ErrNoRows {
						// A row another claimer changed under its lock is
						// not returned: look again while jobs are left.
						continue
					}
					must(err)
					claimed.Add(1)
					tag, err := pool.Exec(ctx, floorCompleteSQL, id, claim)
					must(err)
					if tag.RowsAffected() != 1 {
						fail(fmt.Errorf("floor: the completion of job %d changed %d rows", id, tag.RowsAffected()))
					}
				}
			}()
		}
		wg.Wait()
	}, pool
}

// serverCounts are the server's cumulative counters the profile diffs.
type serverCounts struct {
	commits int64
	walLSN  int64
	stmts   map[string]stmtStat // nil: pg_stat_statements is not loaded
}

type stmtStat struct {
	query  string
	calls  int64
	execMS float64
}

func readServerCounts(base string) *serverCounts {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	must(err)
	defer conn.Close(ctx)
	var c serverCounts
	must(conn.QueryRow(ctx, `SELECT sum(xact_commit)::bigint, pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_database`).
		Scan(&c.commits, &c.walLSN))
	rows, err := conn.Query(ctx, `SELECT queryid::text, query, calls, total_exec_time FROM pg_stat_statements`)
	if err != nil {
		return &c // the extension is not loaded: statements are not reported
	}
	defer rows.Close()
	c.stmts = map[string]stmtStat{}
	for rows.Next() {
		var id string
		var s stmtStat
		must(rows.Scan(&id, &s.query, &s.calls, &s.execMS))
		c.stmts[id] = s
	}
	must(rows.Err())
	return &c
}

// reportStatements prints the statements the loop ran (per job: calls and
// server execution time) to stderr, and returns the statements per job and
// the NOTIFYs per job.
func reportStatements(before, after *serverCounts, n int, schema string) (float64, float64) {
	var ds []stmtStat
	var calls, notifies int64
	for id, s := range after.stmts {
		d := stmtStat{query: s.query, calls: s.calls - before.stmts[id].calls, execMS: s.execMS - before.stmts[id].execMS}
		if d.calls <= 0 || strings.Contains(d.query, "pg_stat_") || strings.Contains(d.query, "pg_current_wal_lsn") {
			continue
		}
		ds = append(ds, d)
		calls += d.calls
		if strings.Contains(d.query, "pg_notify") || strings.HasPrefix(strings.TrimSpace(strings.ToUpper(d.query)), "NOTIFY") {
			notifies += d.calls
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].execMS > ds[j].execMS })
	fmt.Fprintf(os.Stderr, "| calls/job | exec µs/job | statement |\n|---:|---:|---|\n")
	for _, d := range ds {
		q := strings.Join(strings.Fields(strings.ReplaceAll(d.query, schema+".", "")), " ")
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(os.Stderr, "| %.2f | %.1f | `%s` |\n", float64(d.calls)/float64(n), 1000*d.execMS/float64(n), q)
	}
	return float64(calls) / float64(n), float64(notifies) / float64(n)
}

// tripCounter forwards connections to a PostgreSQL server and counts round
// trips while started: a client send that follows an answer of the server
// is one; what the client sends before the answer (a pipeline) is the same.
type tripCounter struct {
	target   string
	counting atomic.Bool
	trips    atomic.Int64
}

func newTripCounter(location string) (*tripCounter, string) {
	u, err := url.Parse(location)
	must(err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	p := &tripCounter{target: u.Host}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *tripCounter) start()      { p.trips.Store(0); p.counting.Store(true) }
func (p *tripCounter) stop() int64 { p.counting.Store(false); return p.trips.Load() }

func (p *tripCounter) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	var answered atomic.Bool
	answered.Store(true)
	go copyConn(s, c, func([]byte) { answered.Store(true) })
	copyConn(c, s, func(b []byte) {
		// A pool's liveness check ("-- ping") is no job's round trip.
		isPing := len(b) > 5 && b[0] == 'Q' && strings.HasPrefix(string(b[5:]), "-- ping")
		if answered.Swap(false) && p.counting.Load() && !isPing {
			p.trips.Add(1)
		}
	})
}

func copyConn(from, to net.Conn, saw func([]byte)) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			saw(buf[:n])
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pgLoopHandlers are section 11's handler counts.
var pgLoopHandlers = []int{1, 4, 16, 64}

// pgLoopRows are section 11's rows: per handler count, the floor, River at
// its benchmark's fetch settings and libleases' worker loop; River at its
// defaults at 16 handlers.
func pgLoopRows(o *opts, lb string, pgEnv []string) []*row {
	var rows []*row
	n := o.n(3000)
	pb := o.exe("peersbench")
	add := func(r *row, peer bool) {
		switch {
		case o.pg == "":
			r.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
		case peer && !exists(pb):
			r.skip = "build/bench/peersbench not built"
		}
		rows = append(rows, r)
	}
	for _, w := range pgLoopHandlers {
		w := w
		add(&row{section: "pgloop", name: fmt.Sprintf("floor|%d", w), run: func(string) (result, error) {
			return child([]string{lb, "pgloop", "-db", o.pg, "-mode", "floor", "-w", itoa(w), "-n", itoa(n)}, pgEnv...)
		}}, false)
		add(&row{section: "pgloop", name: fmt.Sprintf("river|%d", w), run: func(string) (result, error) {
			return child([]string{pb, "river-pg", "-db", o.pg, "-mode", "bench", "-w", itoa(w), "-n", itoa(n)})
		}}, true)
		if w == 16 {
			add(&row{section: "pgloop", name: fmt.Sprintf("river-defaults|%d", w), run: func(string) (result, error) {
				return child([]string{pb, "river-pg", "-db", o.pg, "-mode", "defaults", "-w", itoa(w), "-n", itoa(n)})
			}}, true)
		}
		add(&row{section: "pgloop", name: fmt.Sprintf("loop|%d", w), run: func(string) (result, error) {
			return child([]string{lb, "pgloop", "-db", o.pg, "-mode", "loop", "-w", itoa(w), "-n", itoa(n)}, pgEnv...)
		}}, false)
	}
	return rows
}

// renderPGLoop is section 11 of the table.
func renderPGLoop(o *opts, b *strings.Builder, rows []*row, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	label := map[string]string{
		"floor":          "hand-written floor (claim `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING`, fenced completion)",
		"river":          "River v0.51.2 (riverpgxv5), its benchmark's fetch settings (FetchCooldown 2 ms, FetchPollInterval 20 ms)",
		"river-defaults": "River v0.51.2 (riverpgxv5) at its defaults (FetchCooldown 100 ms, FetchPollInterval 1 s)",
		"loop":           "libleases `worker.Run`",
	}
	p("\n### 11. The worker loop on PostgreSQL next to River and the floor (%s)\n\n", n)
	p("| handlers | loop | jobs/s | range | × floor | × River | server CPU µs/job | CPU µs/job |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range pgLoopHandlers {
		floor := find(rows, "pgloop", fmt.Sprintf("floor|%d", w))
		river := find(rows, "pgloop", fmt.Sprintf("river|%d", w))
		for _, kind := range []string{"floor", "river", "river-defaults", "loop"} {
			r := find(rows, "pgloop", fmt.Sprintf("%s|%d", kind, w))
			if r == nil {
				continue
			}
			if s := status(r); s != "" {
				p("| %d | %s | %s | | | | | |\n", w, label[kind], s)
				continue
			}
			rt := rates(r)
			rel := func(base *row) string {
				if base == nil || base == r || len(base.res) == 0 {
					return "—"
				}
				return fmt.Sprintf("%.2f×", ratio(rt, rates(base)))
			}
			srv := "—"
			if c := median(values(r, func(x result) float64 { return x.Extra["server_cpu_ns"] })); c > 0 {
				srv = num(c / 1000)
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", w, label[kind], num(median(rt)), spread(rt), rel(floor), rel(river),
				srv, num(median(values(r, func(x result) float64 { return x.CPUNS }))/1000))
		}
	}
	p("\nEach row: %d no-op jobs requested up front, W handlers, timed from the loop's start to the last completion\n"+
		"(River's: to its last completion event), a fresh schema per repetition, on %s.\n"+
		"Server CPU µs/job is that of the PostgreSQL processes serving the row's connections (/proc; — when the server is\n"+
		"not on this host). × floor and × River: against the floor's and River's rows with as many handlers, same repetition.\n"+
		"Counts per job (round trips, statements, WAL bytes, commits): `leasesbench pgloop -profile` (docs/PERFORMANCE.md).\n",
		o.n(3000), pgInfo(o.pg))
}

// pgLoopTargets are the section's targets: the loop at 16 handlers against
// River and the floor, and its server CPU per job.
func pgLoopTargets(p func(string, ...any), rows []*row) {
	loop, river, floor := find(rows, "pgloop", "loop|16"), find(rows, "pgloop", "river|16"), find(rows, "pgloop", "floor|16")
	ok := func(r *row) bool { return r != nil && len(r.res) > 0 }
	if !ok(loop) {
		return
	}
	if ok(river) {
		r := ratio(rates(loop), rates(river))
		p("| worker loop ÷ River, PostgreSQL, 16 handlers | %.2f (want ≥ 1.00) | %s |\n", r, met(r >= 1))
	}
	if ok(floor) {
		r := ratio(rates(loop), rates(floor))
		p("| worker loop ÷ floor, PostgreSQL, 16 handlers | %.2f (want ≥ 0.80) | %s |\n", r, met(r >= 0.8))
	}
	if c := median(values(loop, func(x result) float64 { return x.Extra["server_cpu_ns"] })); c > 0 {
		p("| server CPU per job, worker loop, PostgreSQL, 16 handlers | %s µs (want ≤ 400) | %s |\n", num(c/1000), met(c <= 400e3))
	}
}
