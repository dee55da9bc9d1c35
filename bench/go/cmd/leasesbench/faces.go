// The worker loop per language (section 13): the same N no-op jobs,
// requested up front, drained by each face's worker loop with exit-when-empty
// — Go's worker.Run, C's leases_worker_* (bench/c), C++'s leases::Worker
// (bench/cpp), Rust's Worker (bench/rust), Python's Worker.run
// (bench/python) and `leases work -- true` — at concurrency 1 and 4, on
// SQLite (synchronous=FULL, the ABI's default) and on PostgreSQL. Each face's
// program times its loop from the worker's creation to its return and counts
// its handler's calls; the driver then checks that the store holds N
// completed jobs and nothing else. `leases work` forks a process per job, so
// it has jobs of its own (fewer) and a table of its own.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	workerloop "github.com/libleases/libleases/worker"
	"github.com/libleases/libleases/worker/loop"
)

// faceLease is each claim's duration in every face: far longer than a no-op
// job, so no keep-alive renewal falls in the timed loop.
const faceLease = time.Minute

// faceConcurrency are the section's handler counts.
var faceConcurrency = []int{1, 4}

// faceNames are the faces in the table's order; the CLI's rows come last,
// in a table of their own.
var faceNames = []string{"Go", "C", "C++", "Rust", "Python", "CLI"}

// faceLabel says which loop each face runs.
var faceLabel = map[string]string{
	"Go":     "Go `worker.Run`",
	"C":      "C `leases_worker_*` (threads of its own)",
	"C++":    "C++ `leases::Worker`",
	"Rust":   "Rust `Worker::run`",
	"Python": "Python `Worker.run`",
	"CLI":    "`leases work -- true`",
}

// cmdFaceLoop is the Go face: worker.Run with exit-when-empty and a no-op
// handler over the jobs already requested at -db.
func cmdFaceLoop(args []string) {
	fs := flag.NewFlagSet("faceloop", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file or postgres:// URL, filled with -n jobs")
	n := fs.Int("n", 500, "jobs requested")
	c := fs.Int("c", 1, "concurrency")
	must(fs.Parse(args))
	a, err := leases.Open(*db) // the defaults: synchronous=FULL on SQLite
	must(err)
	defer a.Close()
	var handled atomic.Int64
	cpu0, cs0, t0 := cpuNS(), vcsw(), time.Now()
	must(workerloop.Run(context.Background(), a, workerloop.Config{Production: prod, Worker: worker, Duration: faceLease,
		Concurrency: *c, ExitWhenEmpty: true}, func(context.Context, *core.Lease) (core.Facts, error) {
		handled.Add(1)
		return core.Facts{}, nil
	}))
	secs := time.Since(t0).Seconds()
	cpu, cs := cpuNS()-cpu0, vcsw()-cs0
	if got := handled.Load(); got != int64(*n) {
		fail(fmt.Errorf("faceloop: the handler ran %d times for %d jobs", got, *n))
	}
	emit(result{Ops: *n, Secs: secs, CPUNS: float64(cpu) / float64(*n),
		Extra: map[string]float64{"vcsw": float64(cs) / float64(*n)}})
}

// vcsw is this process's voluntary context switches so far (all threads).
func vcsw() int64 {
	var ru syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return ru.Nvcsw
}

// cmdFaceCheck fails unless the production at -db holds exactly -n jobs,
// every one completed (checkDrained).
func cmdFaceCheck(args []string) {
	fs := flag.NewFlagSet("facecheck", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file or postgres:// URL")
	n := fs.Int("n", 500, "jobs requested")
	must(fs.Parse(args))
	must(checkDrained(*db, *n))
	emit(result{Ops: *n})
}

// checkDrained is what a face's loop must leave behind for its row to count:
// the production holds exactly n jobs, every one completed.
func checkDrained(loc string, n int) error {
	a, err := leases.Open(loc)
	if err != nil {
		return err
	}
	defer a.Close()
	c, err := a.Counts(context.Background(), prod)
	if err != nil {
		return err
	}
	if c.Completed != int64(n) || c.Total() != int64(n) {
		return fmt.Errorf("%d jobs, %d completed (requested %d, claimed %d, failed %d, dead %d, cancelled %d); want %d completed",
			c.Total(), c.Completed, c.Requested, c.Claimed, c.Failed, c.Dead, c.Cancelled, n)
	}
	return nil
}

// faceScratch is a row's store: a file in dir, or a fresh schema on the
// server at base (a server with fsync off is refused, as the other
// PostgreSQL rows refuse it, unless allowNoFsync); drop removes the schema.
func faceScratch(store, base, dir string, allowNoFsync bool) (loc string, drop func(), err error) {
	if store == "SQLite" {
		return filepath.Join(dir, "faces.db"), func() {}, nil
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		return "", nil, err
	}
	if fsync != "on" && !allowNoFsync {
		return "", nil, fmt.Errorf("the PostgreSQL server runs with fsync=%s (set LEASESBENCH_ALLOW_NOFSYNC=1 for a smoke run)", fsync)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	schema := "bench_faces_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop = func() { pgDropSchema(base, schema) }
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// faceRun fills the row's store with n jobs (untimed), runs the face's
// loop over them, and checks that every job was completed once.
func faceRun(o *opts, store, face, dir string, n, c int) (result, error) {
	lb := o.exe("leasesbench")
	loc, drop, err := faceScratch(store, o.pg, dir, o.smoke)
	if err != nil {
		return result{}, err
	}
	defer drop()
	if _, err := child([]string{lb, "fill", "-db", loc, "-n", itoa(n)}); err != nil {
		return result{}, err
	}
	var r result
	switch face {
	case "Go":
		r, err = child([]string{lb, "faceloop", "-db", loc, "-n", itoa(n), "-c", itoa(c)})
	case "C":
		r, err = child([]string{o.exe("cbench"), "worker", loc, itoa(n), itoa(c)})
	case "CLI":
		r, err = cliWork(o, loc, n, c)
	default:
		b := bindingOf(face)
		r, err = child(append(b.argv(o), "worker", loc, itoa(n), itoa(c)), b.env(o)...)
	}
	if err != nil {
		return result{}, err
	}
	if _, err := child([]string{lb, "facecheck", "-db", loc, "-n", itoa(n)}); err != nil {
		return result{}, fmt.Errorf("%s's loop left the store unfinished: %v", face, err)
	}
	return r, nil
}

// cliWork times `leases work --exit-when-empty -- true` from its start to its
// exit (the process's start and open included: they are the CLI's); its CPU
// is the process's and its programs'.
func cliWork(o *opts, loc string, n, c int) (result, error) {
	cmd := exec.Command(o.cli, "--db", loc, "work", "--production", prod, "--worker", worker,
		"--duration", faceLease.String(), "--concurrency", itoa(c), "--exit-when-empty", "--", "true")
	var errb strings.Builder
	cmd.Stderr = &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("leases work: %v: %s", err, lastLine(errb.String()))
	}
	secs := time.Since(t0).Seconds()
	var cpu, cs float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / float64(n)
		cs = float64(ru.Nvcsw) / float64(n)
	}
	return result{Ops: n, Secs: secs, CPUNS: cpu, Extra: map[string]float64{"vcsw": cs}}, nil
}

func bindingOf(name string) binding {
	for _, b := range bindingList() {
		if b.name == name {
			return b
		}
	}
	panic("no binding " + name)
}

// faceName names a row: "faces|SQLite|4|C++".
func faceName(store string, c int, face string) string {
	return fmt.Sprintf("faces|%s|%d|%s", store, c, face)
}

// facesRows are section 13's rows.
func facesRows(o *opts) []*row {
	var rows []*row
	n, cliN := o.n(300), o.n(60)
	for _, store := range []string{"SQLite", "PostgreSQL"} {
		for _, c := range faceConcurrency {
			for _, face := range faceNames {
				store, c, face := store, c, face
				jobs := n
				if face == "CLI" {
					jobs = cliN
				}
				r := &row{section: "faces", name: faceName(store, c, face), run: func(dir string) (result, error) {
					return faceRun(o, store, face, dir, jobs, c)
				}}
				switch {
				case store == "PostgreSQL" && o.pg == "":
					r.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
				case face == "C" && !exists(o.exe("cbench")):
					r.skip = "build/bench/cbench not built"
				case face == "CLI" && !exists(o.cli):
					r.skip = o.cli + " not built"
				case face == "C++" || face == "Rust" || face == "Python":
					r.skip = probeOnce(o, bindingOf(face))
					if r.skip == "" && face == "Python" && c > 1 {
						r.skip = pythonConcurrency(o)
					}
				}
				rows = append(rows, r)
			}
		}
	}
	return rows
}

var pyConcurrency *string

// pythonConcurrency is "" when the Python binding's work() runs handlers
// concurrently (it takes concurrency=N), else why the row has no figure.
func pythonConcurrency(o *opts) string {
	if pyConcurrency == nil {
		b := bindingOf("Python")
		cmd := exec.Command(b.argv(o)[0], append(b.argv(o)[1:], "probe-concurrency")...)
		cmd.Env = append(os.Environ(), b.env(o)...)
		why := ""
		if out, err := cmd.CombinedOutput(); err != nil {
			why = lastLine(string(out))
		}
		pyConcurrency = &why
	}
	return *pyConcurrency
}

// renderFaces is section 13 of the table.
func renderFaces(o *opts, b *strings.Builder, rows []*row, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n### 13. The worker loop per language (%s)\n\n", n)
	line := func(store string, c int, face string) {
		r := find(rows, "faces", faceName(store, c, face))
		if r == nil {
			return
		}
		if s := status(r); s != "" {
			p("| %s | %d | %s | %s | | | | | |\n", store, c, faceLabel[face], s)
			return
		}
		rt, cpu := rates(r), values(r, func(x result) float64 { return x.CPUNS })
		rel, more := "—", "—"
		if g := find(rows, "faces", faceName(store, c, "Go")); g != nil && g != r && len(g.res) > 0 {
			rel = fmt.Sprintf("%.2f×", ratio(rt, rates(g)))
			more = fmt.Sprintf("%+.0f", difference(cpu, values(g, func(x result) float64 { return x.CPUNS }))/1000)
		}
		p("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", store, c, faceLabel[face], num(median(rt)), spread(rt), rel,
			num(median(cpu)/1000), more, num(median(values(r, func(x result) float64 { return x.Extra["vcsw"] }))))
	}
	head := "| store | concurrency | loop | jobs/s | range | × Go (same store and concurrency) | CPU µs/job | CPU µs/job − Go's | context switches/job |\n" +
		"|---|---:|---|---:|---:|---:|---:|---:|---:|\n"
	p("%s", head)
	for _, store := range []string{"SQLite", "PostgreSQL"} {
		for _, c := range faceConcurrency {
			for _, face := range faceNames[:len(faceNames)-1] {
				line(store, c, face)
			}
		}
	}
	p("\nEach row: %d no-op jobs requested up front (untimed), drained by the face's loop with exit-when-empty and\n"+
		"concurrency C (threads in C, C++, Rust and Python, goroutines in Go), each claim for %s; timed from the\n"+
		"worker's creation to the loop's return, which includes exit-when-empty's last claim: it waits %s for a job\n"+
		"before the loop calls the production empty. Afterwards the store must hold %d completed jobs and nothing else.\n"+
		"SQLite: a fresh file, synchronous=FULL (every face opens with the defaults). PostgreSQL: a fresh schema per\n"+
		"repetition on %s.\n"+
		"CPU µs/job and context switches/job (voluntary: a thread blocked and was woken): the face's process (all\n"+
		"threads) during the timed loop. × Go and − Go's: the medians of the per-repetition ratios and\n"+
		"differences to the Go row of the same store and concurrency.\n\n",
		o.n(300), faceLease, loop.EmptyGrace, o.n(300), pgInfo(o.pg))
	p("`leases work` forks one program per job (here `true`), %d jobs:\n\n", o.n(60))
	p("%s", head)
	for _, store := range []string{"SQLite", "PostgreSQL"} {
		for _, c := range faceConcurrency {
			line(store, c, "CLI")
		}
	}
	p("\nTimed from the `leases work` process's start to its exit (the Go runtime's start and the open included);\n" +
		"its CPU and context switches are the process's and its programs'. × Go and − Go's: against the Go row of\n" +
		"the same store and concurrency, which drains more jobs, so compare rates.\n")
}

// difference is the median of per-repetition differences a[i] - b[i].
func difference(a, b []float64) float64 {
	var v []float64
	for i := 0; i < len(a) && i < len(b); i++ {
		v = append(v, a[i]-b[i])
	}
	return median(v)
}
