// The Go rows: the hand-written SQLite floor, the core cycle, the one-commit
// paths, scaling, contention workers and memory. Every row fills its own jobs
// before the timer starts.
package main

import (
	"bufio"
	"crypto/rand"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	_ "modernc.org/sqlite"
)

const (
	prod     = "bench"
	worker   = "w"
	leaseFor = time.Hour
)

var payload = []byte("payload-0123456789")

// dsn opens path the way the core does: WAL, the given synchronous level, a
// busy timeout, foreign keys, BEGIN IMMEDIATE for every transaction.
func dsn(path, sync string) string {
	abs, err := filepath.Abs(path)
	must(err)
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
}

// ---- the floor -------------------------------------------------------------

// The floor is the same work as a two-commit cycle with no lease logic: no
// clock guard, no events, no hashing, no production lookup by name.
const floorSchema = `CREATE TABLE IF NOT EXISTS jobs (
	id TEXT PRIMARY KEY,
	production_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	state TEXT NOT NULL,
	claim BLOB,
	expiry_unix_us INTEGER NOT NULL DEFAULT 0,
	payload BLOB NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS jobs_claimable ON jobs (production_id, state, seq);`

func cmdFloor(args []string) {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	db := fs.String("db", "", "database file (created)")
	sync := fs.String("sync", "FULL", "synchronous level")
	n := fs.Int("n", 200, "cycles")
	must(fs.Parse(args))
	d := openFloor(*db, *sync, *n)
	defer d.Close()

	cpu0, start := cpuNS(), time.Now()
	for i := 0; i < *n; i++ {
		id, claim := floorClaim(d)
		floorComplete(d, id, claim)
	}
	emit(result{Ops: *n, Secs: time.Since(start).Seconds(), CPUNS: float64(cpuNS()-cpu0) / float64(*n)})
}

// openFloor creates the floor's table and requests n jobs (setup only).
func openFloor(path, sync string, n int) *sql.DB {
	d, err := sql.Open("sqlite", dsn(path, sync))
	must(err)
	d.SetMaxOpenConns(1)
	_, err = d.Exec(floorSchema)
	must(err)
	tx, err := d.Begin()
	must(err)
	for i := 0; i < n; i++ {
		_, err := tx.Exec(`INSERT INTO jobs (id, production_id, seq, state, payload) VALUES (?, 'p', ?, 'requested', ?)`,
			fmt.Sprintf("job-%08d", i), i, payload)
		must(err)
	}
	must(tx.Commit())
	return d
}

// floorClaim is the floor's claim commit: BEGIN IMMEDIATE, the first
// requested row by the index, its update.
func floorClaim(d *sql.DB) (string, []byte) {
	claim := make([]byte, 16)
	_, err := rand.Read(claim)
	must(err)
	tx, err := d.Begin()
	must(err)
	var id string
	must(tx.QueryRow(`SELECT id FROM jobs WHERE production_id = 'p' AND state = 'requested' ORDER BY seq LIMIT 1`).Scan(&id))
	expiry := time.Now().Add(leaseFor).UnixMicro()
	_, err = tx.Exec(`UPDATE jobs SET state = 'claimed', claim = ?, expiry_unix_us = ? WHERE id = ?`, claim, expiry, id)
	must(err)
	must(tx.Commit())
	return id, claim
}

// floorComplete is the floor's completion commit: check the claim and the
// expiry, then complete.
func floorComplete(d *sql.DB, id string, claim []byte) {
	tx, err := d.Begin()
	must(err)
	var got []byte
	var exp int64
	must(tx.QueryRow(`SELECT claim, expiry_unix_us FROM jobs WHERE id = ?`, id).Scan(&got, &exp))
	if string(got) != string(claim) || exp <= time.Now().UnixMicro() {
		fail(errors.New("floor: claim lost"))
	}
	_, err = tx.Exec(`UPDATE jobs SET state = 'completed' WHERE id = ?`, id)
	must(err)
	must(tx.Commit())
}

// ---- the core --------------------------------------------------------------

func openCore(path, sync string) *core.Authority {
	if leases.IsPostgres(path) {
		sync = "" // PostgreSQL commits durably; synchronous is SQLite's
	}
	a, err := leases.OpenWith(path, leases.Options{Synchronous: sync})
	must(err)
	return a
}

// fillCore requests n jobs in edits of up to 5000 at NORMAL (setup only).
func fillCore(path string, n int) {
	a := openCore(path, "NORMAL")
	defer a.Close()
	ps, err := a.Productions()
	must(err)
	if len(ps) == 0 {
		_, err := a.CreateProduction(prod)
		must(err)
	}
	for done := 0; done < n; {
		e, err := a.Begin()
		must(err)
		k := min(5000, n-done)
		for i := 0; i < k; i++ {
			_, err := e.RequestJob(prod, "", payload)
			must(err)
		}
		must(e.Commit())
		done += k
	}
}

func cmdFill(args []string) {
	fs := flag.NewFlagSet("fill", flag.ExitOnError)
	db := fs.String("db", "", "database file or postgres:// URL")
	n := fs.Int("n", 1000, "jobs")
	busy := fs.Bool("busy", false, "as a busy production: most jobs completed within the hour (webFill)")
	must(fs.Parse(args))
	if *busy {
		webFill(*db, *n)
	} else {
		fillCore(*db, *n)
	}
	emit(result{Ops: *n})
}

func cmdCore(args []string) {
	coreCycles("core", args, func(a *core.Authority) {
		l, err := a.Claim(prod, worker, leaseFor)
		must(err)
		must(l.Complete(core.Facts{}))
	})
}

// cmdInline claims and completes one job in one edit: one commit per cycle.
func cmdInline(args []string) {
	coreCycles("inline", args, func(a *core.Authority) {
		e, err := a.Begin()
		must(err)
		l, err := e.Claim(prod, worker, leaseFor)
		must(err)
		must(e.Complete(l, core.Facts{}))
		must(e.Commit())
	})
}

// cmdNext is a worker's loop in one commit per job: after one claim, each
// cycle completes its lease and claims the next job together
// (Lease.CompleteAndClaimNext). The last cycle finds nothing to claim.
func cmdNext(args []string) {
	var l *core.Lease
	coreCycles("next", args, func(a *core.Authority) {
		var err error
		if l == nil {
			l, err = a.Claim(prod, worker, leaseFor)
			must(err)
		}
		l, err = l.CompleteAndClaimNext(core.Facts{}, leaseFor)
		must(err)
	})
}

// coreCycles is the body of the Go-core cycle rows: fill n jobs, then time n
// cycles and report their rate and CPU per cycle.
func coreCycles(name string, args []string, cycle func(a *core.Authority)) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	db := fs.String("db", "", "database file (created)")
	sync := fs.String("sync", "FULL", "synchronous level")
	n := fs.Int("n", 200, "cycles")
	must(fs.Parse(args))
	fillCore(*db, *n)
	a := openCore(*db, *sync)
	defer a.Close()
	cpu0, start := cpuNS(), time.Now()
	for i := 0; i < *n; i++ {
		cycle(a)
	}
	emit(result{Ops: *n, Secs: time.Since(start).Seconds(), CPUNS: float64(cpuNS()-cpu0) / float64(*n)})
}

// cmdEdit claims k jobs per edit (no completion); -k 0 uses a.Claim, one
// edit per claim outside an explicit edit. The rate is claims per second.
func cmdEdit(args []string) {
	fs := flag.NewFlagSet("edit", flag.ExitOnError)
	db := fs.String("db", "", "database file (created)")
	sync := fs.String("sync", "FULL", "synchronous level")
	n := fs.Int("n", 200, "claims (rounded up to a multiple of k)")
	k := fs.Int("k", 1, "claims per edit; 0 = single claims without an edit")
	must(fs.Parse(args))
	per := max(*k, 1)
	total := (*n + per - 1) / per * per
	fillCore(*db, total)
	a := openCore(*db, *sync)
	defer a.Close()
	cpu0, start := cpuNS(), time.Now()
	if *k == 0 {
		for i := 0; i < total; i++ {
			_, err := a.Claim(prod, worker, leaseFor)
			must(err)
		}
	} else {
		for i := 0; i < total; i += per {
			e, err := a.Begin()
			must(err)
			for j := 0; j < per; j++ {
				_, err := e.Claim(prod, worker, leaseFor)
				must(err)
			}
			must(e.Commit())
		}
	}
	emit(result{Ops: total, Secs: time.Since(start).Seconds(), CPUNS: float64(cpuNS()-cpu0) / float64(total)})
}

// ---- scaling ---------------------------------------------------------------

// cmdScaleFill requests n jobs, optionally marks the first `outstanding` of
// them claimed with an unexpired claim (raw SQL: a fixture, not a claim),
// checkpoints and reports database bytes per job in extra["bytes_per_job"].
func cmdScaleFill(args []string) {
	fs := flag.NewFlagSet("scale-fill", flag.ExitOnError)
	db := fs.String("db", "", "database file (created)")
	n := fs.Int("n", 1000, "jobs")
	outstanding := fs.Int("outstanding", 0, "jobs to mark claimed and unexpired")
	delayed := fs.Int("delayed", 0, "jobs (after the outstanding ones) to delay by a day at the highest priority")
	must(fs.Parse(args))
	fillCore(*db, *n)
	d, err := sql.Open("sqlite", dsn(*db, "NORMAL"))
	must(err)
	defer d.Close()
	if *outstanding > 0 {
		_, err = d.Exec(`UPDATE jobs SET state = 'claimed', claim_hash = randomblob(32), worker = 'fixture',
			claimed_unix_us = ?1, expiry_unix_us = ?1 + 86400000000, ready_unix_us = ?1 + 86400000000, due = 0,
			attempts = 1 WHERE seq <= ?2`,
			time.Now().UnixMicro(), *outstanding)
		must(err)
	}
	if *delayed > 0 {
		// Delayed (or backed-off) jobs of the highest priority: a claim must
		// pass over them by index, never scan them.
		_, err = d.Exec(`UPDATE jobs SET priority = 1000, ready_unix_us = ?1 + 86400000000,
			claimable_unix_us = ?1 + 86400000000, due = 0 WHERE seq > ?2 AND seq <= ?2 + ?3`,
			time.Now().UnixMicro(), *outstanding, *delayed)
		must(err)
	}
	_, err = d.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	must(err)
	var size int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(*db + suffix); err == nil {
			size += fi.Size()
		}
	}
	emit(result{Ops: *n, Extra: map[string]float64{"bytes_per_job": float64(size) / float64(*n)}})
}

// cmdScaleClaim times m claims (each completed outside the timer, so the
// number of outstanding claims does not grow).
func cmdScaleClaim(args []string) {
	fs := flag.NewFlagSet("scale-claim", flag.ExitOnError)
	db := fs.String("db", "", "filled database file")
	sync := fs.String("sync", "NORMAL", "synchronous level")
	m := fs.Int("m", 200, "claims")
	must(fs.Parse(args))
	a := openCore(*db, *sync)
	defer a.Close()
	lat := make([]int64, 0, *m)
	start := time.Now()
	for i := 0; i < *m; i++ {
		t := time.Now()
		l, err := a.Claim(prod, worker, leaseFor)
		lat = append(lat, since(t))
		must(err)
		must(l.Complete(core.Facts{}))
	}
	secs := time.Since(start).Seconds()
	emit(result{Ops: *m, Secs: secs, P50NS: percentile(lat, 0.50), P99NS: percentile(lat, 0.99)})
}

// ---- contention ------------------------------------------------------------

// cmdContendWorker waits for the common start time, then runs claim+complete
// cycles until the common end time, counting writer-lock timeouts (BUSY).
func cmdContendWorker(args []string) {
	fs := flag.NewFlagSet("contend-worker", flag.ExitOnError)
	db := fs.String("db", "", "filled database file")
	sync := fs.String("sync", "FULL", "synchronous level")
	startAt := fs.Int64("start", 0, "start time, unix ns")
	endAt := fs.Int64("end", 0, "end time, unix ns")
	busyTimeout := fs.Duration("busy-timeout", 0, "writer-lock wait (0 = the core default)")
	must(fs.Parse(args))
	a, err := leases.OpenWith(*db, leases.Options{Synchronous: *sync, BusyTimeout: *busyTimeout})
	must(err)
	defer a.Close()
	time.Sleep(time.Until(time.Unix(0, *startAt)))
	end := time.Unix(0, *endAt)
	var lat []int64
	busy, cycles := 0, 0
	start := time.Now()
	for time.Now().Before(end) {
		t := time.Now()
		l, err := a.Claim(prod, worker, leaseFor)
		if err != nil {
			if core.KindOf(err) == core.KindBusy {
				busy++
				continue
			}
			fail(err)
		}
		lat = append(lat, since(t))
		for {
			err := l.Complete(core.Facts{})
			if core.KindOf(err) == core.KindBusy {
				busy++
				continue
			}
			must(err)
			break
		}
		cycles++
	}
	emit(result{Ops: cycles, Secs: time.Since(start).Seconds(), Busy: busy, Lat: lat})
}

// ---- memory ----------------------------------------------------------------

// vm reads VmHWM and VmRSS (kB) from /proc/self/status.
func vm() (hwm, rss int64) {
	f, err := os.Open("/proc/self/status")
	must(err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmHWM:":
			hwm = v
		case "VmRSS:":
			rss = v
		}
	}
	return hwm, rss
}

// cmdRSS is a worker process over a filled file: peak RSS after opening
// (idle), after a warm-up, and after all cycles.
func cmdRSS(args []string) {
	fs := flag.NewFlagSet("rss", flag.ExitOnError)
	db := fs.String("db", "", "filled database file")
	sync := fs.String("sync", "NORMAL", "synchronous level")
	n := fs.Int("n", 100000, "cycles")
	warm := fs.Int("warm", 10000, "warm-up cycles (counted in n)")
	must(fs.Parse(args))
	a := openCore(*db, *sync)
	defer a.Close()
	idle, _ := vm()
	start := time.Now()
	var warmHWM int64
	for i := 0; i < *n; i++ {
		if i == *warm {
			warmHWM, _ = vm()
		}
		l, err := a.Claim(prod, worker, leaseFor)
		must(err)
		must(l.Complete(core.Facts{}))
	}
	secs := time.Since(start).Seconds()
	if warmHWM == 0 {
		warmHWM, _ = vm()
	}
	after, rss := vm()
	emit(result{Ops: *n, Secs: secs, Extra: map[string]float64{
		"idle_hwm_kb": float64(idle), "warm_hwm_kb": float64(warmHWM), "after_hwm_kb": float64(after), "after_rss_kb": float64(rss)}})
}
