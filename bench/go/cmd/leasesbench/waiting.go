// The waiting rows (section 8): how fast a waiting claim wakes, what idle
// waiters cost, and the worker loop's throughput next to a claim-and-sleep
// loop.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/libleases/libleases/core/store/stores"
	workerloop "github.com/libleases/libleases/worker"
)

// pollSleep is the pause of today's claim-and-sleep loop (the demo's Python
// worker slept 50 ms when there was nothing to claim).
const pollSleep = 50 * time.Millisecond

// openBench opens loc (a file or a postgres:// URL) with production prod.
func openBench(loc string) *core.Authority {
	a, err := leases.Open(loc)
	must(err)
	_, err = a.CreateProduction(prod)
	must(err)
	return a
}

// benchLocation is dir's file, or a fresh schema on the server at pg; drop
// removes the schema.
func benchLocation(db string) (loc string, drop func()) {
	if !leases.IsPostgres(db) {
		return db, func() {}
	}
	loc, schema, _ := pgSchemaURL(db, 0)
	return loc, func() { pgDropSchema(db, schema) }
}

// waitLoop claims n jobs with waiting claims, completing each, and returns
// when each was held (unix ns), by job id.
func waitLoop(a *core.Authority, n int) map[string]int64 {
	held := make(map[string]int64, n)
	for len(held) < n {
		l, err := a.ClaimWait(context.Background(), prod, worker, leaseFor, time.Minute)
		if core.KindOf(err) == core.KindNothingToClaim {
			continue
		}
		must(err)
		held[l.JobID()] = time.Now().UnixNano()
		must(l.Complete(core.Facts{}))
	}
	return held
}

// cmdWake measures request commit → a waiting worker holds the lease: the
// waiter in this process (-mode same) or in a child process (-mode process),
// on a SQLite file or a PostgreSQL schema. Requests come 20-60 ms apart, so
// the waiter is idle when each arrives.
func cmdWake(args []string) {
	fs := flag.NewFlagSet("wake", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file (created) or a postgres:// URL")
	mode := fs.String("mode", "same", "same (a goroutine of this process waits) or process (a child process waits)")
	n := fs.Int("n", 100, "requests")
	must(fs.Parse(args))
	loc, drop := benchLocation(*db)
	defer drop()
	a := openBench(loc)
	defer a.Close()
	var held map[string]int64
	var done chan struct{}
	var child *exec.Cmd
	var childOut *bufio.Reader
	switch *mode {
	case "same":
		done = make(chan struct{})
		go func() {
			held = waitLoop(a, *n)
			close(done)
		}()
	case "process":
		child = exec.Command(os.Args[0], "wake-waiter", "-db", loc, "-n", itoa(*n))
		out, err := child.StdoutPipe()
		must(err)
		child.Stderr = os.Stderr
		must(child.Start())
		childOut = bufio.NewReader(out)
		line, err := childOut.ReadString('\n')
		must(err)
		if line != "ready\n" {
			fail(fmt.Errorf("wake-waiter: %q", line))
		}
	default:
		fail(fmt.Errorf("unknown mode %q", *mode))
	}
	time.Sleep(200 * time.Millisecond) // the waiter is waiting
	committed := make(map[string]int64, *n)
	for i := 0; i < *n; i++ {
		time.Sleep(time.Duration(20+rand.IntN(41)) * time.Millisecond)
		id, err := a.RequestJob(prod, "", payload)
		must(err)
		committed[id] = time.Now().UnixNano()
	}
	if child != nil {
		must(json.NewDecoder(childOut).Decode(&held))
		must(child.Wait())
	} else {
		<-done
	}
	lat := make([]int64, 0, *n)
	for id, t0 := range committed {
		t1, ok := held[id]
		if !ok {
			fail(fmt.Errorf("job %s was never held", id))
		}
		// The same process wakes its waiter inside RequestJob, which may
		// claim before the requester runs again: that is no delay at all.
		lat = append(lat, max(t1-t0, 0))
	}
	emit(result{Ops: *n, P50NS: percentile(lat, 0.5), P99NS: percentile(lat, 0.99)})
}

// cmdWakeWaiter is the waiting process of cmdWake: it prints "ready", then
// the times it held each job as one JSON object.
func cmdWakeWaiter(args []string) {
	fs := flag.NewFlagSet("wake-waiter", flag.ExitOnError)
	db := fs.String("db", "", "location")
	n := fs.Int("n", 100, "jobs to wait for")
	must(fs.Parse(args))
	a, err := leases.Open(*db)
	must(err)
	defer a.Close()
	fmt.Println("ready")
	must(json.NewEncoder(os.Stdout).Encode(waitLoop(a, *n)))
}

// walFrames is the frame count of the WAL-index header in db's -shm file
// (mxFrame at offset 16, host byte order): every commit adds frames. 0 for
// a PostgreSQL location.
func walFrames(db string) int64 {
	if leases.IsPostgres(db) {
		return 0
	}
	f, err := os.Open(db + "-shm")
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], 16); err != nil {
		return 0
	}
	return int64(binary.NativeEndian.Uint32(b[:]))
}

// cmdIdle measures idle waiters: -w goroutines in this process wait for a
// job that never comes (-procs 0), or -procs child processes of one waiter
// each do. It reports the CPU they used together, in % of one core, and the
// SQLite WAL frames the waiters wrote meanwhile: the frames written in the
// window less those of this process's own busy commits (-busy), counted
// across the WAL's restarts (windowFrames).
func cmdIdle(args []string) {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file (created) or a postgres:// URL")
	w := fs.Int("w", 16, "waiting goroutines (when procs is 0)")
	procs := fs.Int("procs", 0, "waiting processes of one goroutine each")
	secs := fs.Float64("secs", 3, "measured idle time")
	startAt := fs.Int64("start", 0, "(child) start of the measured time, unix ns")
	busy := fs.Float64("busy", 0, "jobs/s this process claims and completes of another production meanwhile (0: none)")
	must(fs.Parse(args))
	window := time.Duration(*secs * float64(time.Second))
	if *startAt != 0 { // a child: wait, measure, report
		a, err := leases.Open(*db)
		must(err)
		defer a.Close()
		cpu := idleWaiters(a, 1, time.Unix(0, *startAt), window)
		emit(result{Ops: 1, Secs: *secs, Extra: map[string]float64{"cpu_ns": float64(cpu)}})
		return
	}
	loc, drop := benchLocation(*db)
	defer drop()
	// With a busy production on SQLite, this process's own projection of
	// its events runs inside its counted commits (busyProduction), not in
	// the background, where its frames would count as the waiters'.
	var a *core.Authority
	var s *sqlitestore.DB
	if *busy > 0 && !leases.IsPostgres(loc) {
		a, s = openBenchHeld(loc)
	} else {
		a = openBench(loc)
	}
	defer a.Close()
	frames := countFrames(loc)
	if *busy > 0 {
		stopBusy := busyProduction(a, s, frames, *busy, *secs+float64(*procs)+4)
		defer stopBusy()
	}
	start := time.Now().Add(time.Second) // the waiters are settled by then
	if *procs == 0 {
		var f0 frameSample
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			time.Sleep(time.Until(start))
			f0 = frames.sample()
		}()
		cpu := idleWaiters(a, *w, start, window)
		<-sampled
		emit(idleResult(*w, *secs, cpu, frames.waiters(f0, frames.sample())))
		return
	}
	type out struct {
		r   result
		err error
	}
	ch := make(chan out, *procs)
	childStart := start.Add(2 * time.Second) // children start their runtime first
	for i := 0; i < *procs; i++ {
		go func() {
			r, err := child([]string{os.Args[0], "idle", "-db", loc, "-secs", fmt.Sprint(*secs),
				"-start", strconv.FormatInt(childStart.UnixNano(), 10)})
			ch <- out{r, err}
		}()
	}
	time.Sleep(time.Until(childStart))
	f0 := frames.sample()
	time.Sleep(window)
	f1 := frames.sample()
	var cpu int64
	var errs []error
	for i := 0; i < *procs; i++ {
		o := <-ch
		if o.err != nil {
			errs = append(errs, o.err)
			continue
		}
		cpu += int64(o.r.Extra["cpu_ns"])
	}
	must(errors.Join(errs...))
	emit(idleResult(*procs, *secs, cpu, frames.waiters(f0, f1)))
}

// windowFrames counts the WAL frames written while it runs: those of the
// bench process's own busy commits, and everyone else's (the waiters'). The
// WAL-index header's frame count starts again from 0 when a checkpoint lets
// a writer restart the WAL (its salts then change), so a difference of two
// readings is no count. Instead the count advances at every reading: by the
// growth since the last one, or, when the WAL restarted in between, by the
// frames of the new WAL. The own commits are read just before and just
// after each; what grows between them is the others'. (Frames another
// writer appended to a WAL that restarted before the next reading are not
// seen: the count of the others' frames is exact when they wrote nothing,
// and at least 1 when they wrote anything else.)
type windowFrames struct {
	db     string
	mu     sync.Mutex
	last   walHeader
	own    int64
	others int64
}

// countFrames starts counting the frames of db (a SQLite file; on
// PostgreSQL every count is 0).
func countFrames(db string) *windowFrames {
	return &windowFrames{db: db, last: readWALHeader(db)}
}

type frameSample struct{ own, others int64 }

// advance reads the header and adds what was written since the last
// reading to into.
func (f *windowFrames) advance(into *int64) {
	cur := readWALHeader(f.db)
	if cur.salt != f.last.salt {
		*into += cur.frames // the WAL restarted: its frames are all new
	} else if cur.frames > f.last.frames {
		*into += cur.frames - f.last.frames
	}
	f.last = cur
}

func (f *windowFrames) sample() frameSample {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance(&f.others)
	return frameSample{f.own, f.others}
}

// commit runs one busy commit (or several) and counts its frames as the
// bench process's own.
func (f *windowFrames) commit(run func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance(&f.others)
	run()
	f.advance(&f.own)
}

// waiters is how many frames others than the busy commits wrote between
// two samples.
func (f *windowFrames) waiters(a, b frameSample) int64 { return b.others - a.others }

// walHeader is what the WAL-index header in a database's -shm file says of
// the WAL: its frame count (mxFrame, offset 16) and its salts (offset 32,
// changed whenever the WAL restarts). Zero for a PostgreSQL location.
type walHeader struct {
	frames int64
	salt   [8]byte
}

func readWALHeader(db string) walHeader {
	if leases.IsPostgres(db) {
		return walHeader{}
	}
	f, err := os.Open(db + "-shm")
	if err != nil {
		return walHeader{}
	}
	defer f.Close()
	var b [walIndexHeaderLen]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return walHeader{}
	}
	h := walHeader{frames: int64(binary.NativeEndian.Uint32(b[16:]))}
	copy(h.salt[:], b[32:40])
	return h
}

// walIndexHeaderLen is the length of the WAL-index header's first copy.
const walIndexHeaderLen = 48

// busyProduction requests enough jobs of another production for secs at
// rate, then claims and completes them at rate (one job every 1/rate s)
// until stopped: the commits an idle waiter of prod must not pay for.
// openBenchHeld is openBench on a SQLite file at the default durability,
// with the handle's background projection of its event log held.
func openBenchHeld(path string) (*core.Authority, *sqlitestore.DB) {
	a, s := openCoreHeld(path, stores.Options{})
	_, err := a.CreateProduction(prod)
	must(err)
	return a, s
}

// busyProduction claims and completes rate jobs/s of a production of its
// own, each cycle a commit of this process counted as its own frames. With
// s (SQLite, its background projection held), a cycle that brings the
// events this process recorded since its last projection to the
// projector's threshold also projects them, as the background projector
// would, inside the counted commit.
func busyProduction(a *core.Authority, s *sqlitestore.DB, frames *windowFrames, rate, secs float64) (stop func()) {
	const busyProd = "busy"
	_, err := a.CreateProduction(busyProd)
	must(err)
	n := int(rate*secs) + 1
	e, err := a.Begin()
	must(err)
	for i := 0; i < n; i++ {
		_, err := e.RequestJob(busyProd, "", payload)
		must(err)
	}
	must(e.Commit())
	done := make(chan struct{})
	finished := make(chan struct{})
	recorded := 0 // events since the last projection: a claim's and a completion's
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			frames.commit(func() {
				l, err := a.Claim(busyProd, worker, leaseFor)
				if core.KindOf(err) == core.KindNothingToClaim {
					return
				}
				must(err)
				must(l.Complete(core.Facts{}))
				if recorded += 2; s != nil && recorded >= sqlitestore.ProjectAfter {
					must1(s.Project(context.Background()))
					recorded = 0
				}
			})
		}
	}()
	return func() { close(done); <-finished }
}

func idleResult(waiters int, secs float64, cpuNS, frames int64) result {
	return result{Ops: waiters, Secs: secs, Extra: map[string]float64{
		"cpu_pct": 100 * float64(cpuNS) / (secs * 1e9), "wal_frames": float64(frames)}}
}

// idleWaiters starts w waiting claims, and returns this process's CPU time
// over [start, start+window] while they wait; then it ends the waits.
func idleWaiters(a *core.Authority, w int, start time.Time, window time.Duration) int64 {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.ClaimWait(ctx, prod, worker, leaseFor, core.MaxWait)
			if core.KindOf(err) != core.KindInterrupted {
				fail(fmt.Errorf("an idle waiter returned: %v", err))
			}
		}()
	}
	time.Sleep(time.Until(start))
	c0 := cpuNS()
	time.Sleep(window)
	cpu := cpuNS() - c0
	cancel()
	wg.Wait()
	return cpu
}

// cmdWorkloop runs n pre-requested jobs through -w workers: the worker loop
// (workerloop.Run, a no-op handler) or today's claim-and-sleep loop (Claim;
// complete; on nothing to claim, sleep 50 ms).
func cmdWorkloop(args []string) {
	fs := flag.NewFlagSet("workloop", flag.ExitOnError)
	db := fs.String("db", "", "SQLite file (created) or a postgres:// URL")
	w := fs.Int("w", 1, "workers")
	n := fs.Int("n", 300, "jobs")
	mode := fs.String("mode", "loop", "loop (worker.Run) or poll (claim and sleep)")
	must(fs.Parse(args))
	loc, drop := benchLocation(*db)
	defer drop()
	fillCore(loc, *n)
	a, err := leases.Open(loc)
	must(err)
	defer a.Close()
	cpu0, t0 := cpuNS(), time.Now()
	switch *mode {
	case "loop":
		must(workerloop.Run(context.Background(), a, workerloop.Config{Production: prod, Worker: worker, Duration: 30 * time.Second,
			Concurrency: *w, MaxJobs: *n}, func(context.Context, *core.Lease) (core.Facts, error) { return core.Facts{}, nil }))
	case "poll":
		var left atomic.Int64
		left.Store(int64(*n))
		var wg sync.WaitGroup
		for i := 0; i < *w; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					for {
						l, err := a.Claim(prod, worker, 30*time.Second)
						if core.KindOf(err) == core.KindNothingToClaim {
							time.Sleep(pollSleep)
							continue
						}
						must(err)
						must(l.Complete(core.Facts{}))
						break
					}
				}
			}()
		}
		wg.Wait()
	default:
		fail(fmt.Errorf("unknown mode %q", *mode))
	}
	secs := time.Since(t0).Seconds()
	emit(result{Ops: *n, Secs: secs, CPUNS: float64(cpuNS()-cpu0) / float64(*n)})
}

// waitingRows are section 8's rows.
func waitingRows(o *opts, lb string, pgEnv []string) []*row {
	var rows []*row
	stores := []struct{ name, db string }{{"SQLite", ""}, {"PostgreSQL", o.pg}}
	loc := func(store, db, dir, file string) string {
		if store == "SQLite" {
			return dir + "/" + file
		}
		return db
	}
	add := func(store string, r *row) {
		if store == "PostgreSQL" && o.pg == "" {
			r.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
		}
		rows = append(rows, r)
	}
	wn := o.n(100)
	for _, st := range stores {
		for _, mode := range []string{"same", "process"} {
			st, mode := st, mode
			where := map[string]string{"same": "same process", "process": "another process"}[mode]
			add(st.name, &row{section: "waiting", name: "wake|" + st.name + "|" + where, run: func(dir string) (result, error) {
				return child([]string{lb, "wake", "-db", loc(st.name, st.db, dir, "wake.db"), "-mode", mode, "-n", itoa(wn)}, pgEnv...)
			}})
		}
	}
	secs := fmt.Sprint(max(3*o.scale, 0.3))
	for _, st := range stores {
		for _, procs := range []int{0, 16} {
			st, procs := st, procs
			what := "16 goroutines of one process"
			if procs > 0 {
				what = "16 processes"
			}
			add(st.name, &row{section: "waiting", name: "idle|" + st.name + "|" + what, run: func(dir string) (result, error) {
				return child([]string{lb, "idle", "-db", loc(st.name, st.db, dir, "idle.db"), "-w", "16",
					"-procs", itoa(procs), "-secs", secs}, pgEnv...)
			}})
		}
	}
	// The waiters' processes while another production of the same file is
	// busy: 18 idle processes, the bench process completing 22 jobs/s.
	add("SQLite", &row{section: "waiting", name: "idle|SQLite|" + idleBusyName, run: func(dir string) (result, error) {
		return child([]string{lb, "idle", "-db", dir + "/idle.db", "-procs", "18", "-busy", "22", "-secs", secs})
	}})
	jn := o.n(300)
	for _, st := range stores {
		for _, w := range []int{1, 4, 16} {
			for _, mode := range []string{"loop", "poll"} {
				st, w, mode := st, w, mode
				add(st.name, &row{section: "waiting", name: fmt.Sprintf("loop|%s|%d|%s", st.name, w, mode), run: func(dir string) (result, error) {
					return child([]string{lb, "workloop", "-db", loc(st.name, st.db, dir, "loop.db"), "-w", itoa(w),
						"-n", itoa(jn), "-mode", mode}, pgEnv...)
				}})
			}
		}
	}
	return rows
}

// idleBusyName names the idle row with another production busy.
const idleBusyName = "18 processes, another production completing 22 jobs/s"

// waitingOf lists section 8's rows of one kind: wake, idle or loop.
func waitingOf(rows []*row, kind string) []*row {
	var out []*row
	for _, r := range rows {
		if r.section == "waiting" && strings.HasPrefix(r.name, kind+"|") {
			out = append(out, r)
		}
	}
	return out
}

// renderWaiting is section 8 of the table.
func renderWaiting(o *opts, b *strings.Builder, rows []*row, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	field := func(r *row, i int) string { return strings.Split(r.name, "|")[i] }
	med := func(r *row, f func(result) float64) float64 { return median(values(r, f)) }
	p("\n### 8. Waiting workers (%s)\n\n", n)
	p("Wake latency: a request commits (the requester's `RequestJob` returned) → a worker blocked in a waiting claim\n" +
		"holds the lease (its `ClaimWait` returned); the worker is idle when each request comes (20–60 ms apart).\n\n")
	p("| store | waiter in | p50 | p99 |\n|---|---|---:|---:|\n")
	for _, r := range waitingOf(rows, "wake") {
		if s := status(r); s != "" {
			p("| %s | %s | %s | |\n", field(r, 1), field(r, 2), s)
			continue
		}
		p("| %s | %s | %s | %s |\n", field(r, 1), field(r, 2),
			us(med(r, func(x result) float64 { return float64(x.P50NS) })),
			us(med(r, func(x result) float64 { return float64(x.P99NS) })))
	}
	p("\nIdle cost: 16 waiting claims on a production with nothing to claim, measured over %s s after they settled\n"+
		"(the last row: 18 waiting processes while the bench process claims and completes 22 jobs/s of another\n"+
		"production in the same file; its own CPU is not counted, nor its commits' WAL frames: the frames column counts\n"+
		"what the waiters wrote, the frames written in the window less the bench process's own, across the WAL's restarts).\n\n",
		fmt.Sprint(max(3*o.scale, 0.3)))
	p("| store | waiters | CPU, %% of one core (all of them) | SQLite WAL frames written |\n|---|---|---:|---:|\n")
	for _, r := range waitingOf(rows, "idle") {
		if s := status(r); s != "" {
			p("| %s | %s | %s | |\n", field(r, 1), field(r, 2), s)
			continue
		}
		frames := "—"
		if field(r, 1) == "SQLite" {
			frames = num(med(r, func(x result) float64 { return x.Extra["wal_frames"] }))
		}
		p("| %s | %s | %.3f | %s |\n", field(r, 1), field(r, 2), med(r, func(x result) float64 { return x.Extra["cpu_pct"] }), frames)
	}
	p("\nWorker loop: %d requested jobs through `worker.Run` (no-op handler, each lease kept alive) next to today's\n"+
		"claim-and-sleep loop (`Claim`; `Complete`; on nothing to claim, sleep 50 ms), W workers in one process.\n\n", o.n(300))
	p("| store | workers | worker loop jobs/s | claim-and-sleep jobs/s | loop ÷ claim-and-sleep | loop CPU µs/job |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range waitingOf(rows, "loop") {
		if field(r, 3) != "loop" {
			continue
		}
		poll := find(rows, "waiting", strings.TrimSuffix(r.name, "loop")+"poll")
		if s := status(r); s != "" {
			p("| %s | %s | %s | | | |\n", field(r, 1), field(r, 2), s)
			continue
		}
		pollRate, rel := "—", "—"
		if poll != nil && len(poll.res) > 0 {
			pollRate = num(median(rates(poll)))
			rel = fmt.Sprintf("%.2f×", ratio(rates(r), rates(poll)))
		}
		p("| %s | %s | %s | %s | %s | %s |\n", field(r, 1), field(r, 2), num(median(rates(r))), pollRate, rel,
			num(med(r, func(x result) float64 { return x.CPUNS })/1000))
	}
}
