// The driver: every row is a child process, repetitions are interleaved
// (row A rep 1, row B rep 1, …, row A rep 2, …) and each figure is the median
// over the repetitions. Ratios are medians of per-repetition ratios: the two
// figures of one ratio are measured seconds apart, so machine noise that
// drifts over the run cancels.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type opts struct {
	bin, cli, tmp, out, repo string
	reps                     int
	scale                    float64
	full, smoke              bool
	sections                 string
	rows                     *regexp.Regexp // run only the rows whose name matches (nil: all)
	python                   string
	pg                       string   // PostgreSQL server URL for the workers rows
	observeJobs              int      // jobs in the file of the observation rows
	webJobs                  int      // jobs in the status page rows' production
	cleanups                 []func() // run once every repetition is done (e.g. drop a schema rows share)
}

// row is one line of the table: run measures one repetition in dir.
type row struct {
	section, name, note string
	run                 func(dir string) (result, error)
	res                 []result
	errs                []string
	skip                string // why the row has no figure
}

func (r *row) okResults() []result { return r.res }

func cmdRun(args []string) {
	var o opts
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&o.bin, "bin", "build/bench", "directory of leasesbench, peersbench and cbench")
	fs.StringVar(&o.cli, "cli", "build/leases", "the leases CLI")
	fs.StringVar(&o.tmp, "tmp", "build/bench/tmp", "scratch directory for database files (on the disk measured)")
	fs.StringVar(&o.out, "out", "bench/results/latest.md", "results file (empty: none)")
	fs.StringVar(&o.repo, "repo", ".", "repository root")
	fs.StringVar(&o.python, "python", "python3", "Python interpreter for the Python rows")
	fs.IntVar(&o.reps, "reps", 5, "interleaved repetitions per row")
	fs.Float64Var(&o.scale, "scale", 1, "multiplies every N (BENCH_SCALE)")
	fs.BoolVar(&o.full, "full", false, "add the 1M-job scaling row")
	fs.BoolVar(&o.smoke, "smoke", false, "tiny sizes: proves the harness runs, measures nothing")
	fs.StringVar(&o.sections, "sections", "", "comma-separated sections to run (cycle,edit,scale,contention,boundary,memory,workers,waiting,observe,web,pgloop,steady,faces); empty: all")
	rowsRE := fs.String("rows", "", "regexp: run only the rows whose name matches it, e.g. -sections web -rows '4 workers' (empty: all)")
	fs.StringVar(&o.pg, "pg", os.Getenv("LEASES_TEST_PG_URL"), "PostgreSQL server for the workers rows (default $LEASES_TEST_PG_URL; make bench starts a durable one)")
	must(fs.Parse(args))
	if *rowsRE != "" {
		re, err := regexp.Compile(*rowsRE)
		must(err)
		o.rows = re
	}
	if o.smoke {
		o.scale = 0.05
	}
	must(os.RemoveAll(o.tmp))
	must(os.MkdirAll(o.tmp, 0o755))
	began := time.Now()
	load0 := loadavg()

	rows, scaleRows, rss := buildRows(&o)
	fmt.Fprintf(os.Stderr, "bench: %d rows × %d repetitions, scale %.2f\n", len(rows), o.reps, o.scale)
	for rep := 0; rep < o.reps; rep++ {
		for i, r := range rows {
			if r.skip != "" {
				continue
			}
			settle()
			dir := filepath.Join(o.tmp, fmt.Sprintf("r%02d-%d", i, rep))
			must(os.MkdirAll(dir, 0o755))
			res, err := r.run(dir)
			if err != nil {
				r.errs = append(r.errs, err.Error())
				fmt.Fprintf(os.Stderr, "bench: %s / %s: %v\n", r.section, r.name, err)
			} else {
				r.res = append(r.res, res)
			}
			os.RemoveAll(dir)
		}
		fmt.Fprintf(os.Stderr, "bench: repetition %d/%d done (%s)\n", rep+1, o.reps, time.Since(began).Round(time.Second))
	}
	for _, c := range o.cleanups {
		c()
	}
	var rssRes *result
	var rssErr error
	if rss != nil {
		r, err := rss()
		rssRes, rssErr = &r, err
	}
	table := render(&o, rows, scaleRows, rssRes, rssErr)
	fmt.Print(table)
	if o.out != "" {
		head := machine(&o, began, load0)
		must(os.MkdirAll(filepath.Dir(o.out), 0o755))
		must(os.WriteFile(o.out, []byte(head+table), 0o644))
		fmt.Fprintf(os.Stderr, "bench: wrote %s (%s)\n", o.out, time.Since(began).Round(time.Second))
	}
	os.RemoveAll(o.tmp)
	if o.smoke {
		bad := rssErr != nil
		for _, r := range rows {
			if (r.section == "workers" || r.section == "waiting" || r.section == "pgloop") && r.skip != "" {
				fmt.Fprintf(os.Stderr, "bench smoke: %s / %s did not run: %s\n", r.section, r.name, r.skip)
				bad = true
			}
			if len(r.errs) > 0 {
				fmt.Fprintf(os.Stderr, "bench smoke: %s / %s failed: %s\n", r.section, r.name, strings.Join(uniq(r.errs), "; "))
				bad = true
			}
		}
		if bad {
			os.Exit(1)
		}
	}
}

func (o *opts) want(section string) bool {
	if section == "frames" {
		section = "cycle" // the pages-per-commit rows are section 1's
	}
	if o.sections == "" {
		return true
	}
	for _, s := range strings.Split(o.sections, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

// settle flushes the page cache's dirty data (sync(2)) and pauses briefly, so
// that the writeback of one row (the contention rows write a lot) is not billed
// to the fsyncs of the next one.
func settle() {
	syscall.Sync()
	time.Sleep(150 * time.Millisecond)
}

func (o *opts) n(base int) int { return max(int(float64(base)*o.scale), 5) }

func (o *opts) exe(name string) string { return filepath.Join(o.bin, name) }

// child runs a row process and parses the last JSON line it prints.
func child(argv []string, env ...string) (result, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %v: %s", filepath.Base(argv[0]), err, lastLine(errb.String()))
	}
	var r result
	if err := json.Unmarshal([]byte(lastLine(out.String())), &r); err != nil {
		return result{}, fmt.Errorf("%s: bad output %q", filepath.Base(argv[0]), lastLine(out.String()))
	}
	return r, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

type scaleRow struct {
	jobs, outstanding int
	delayed           int
	db                string
	bytesPerJob       float64
	row               *row
}

func buildRows(o *opts) ([]*row, []*scaleRow, func() (result, error)) {
	lb := o.exe("leasesbench")
	var rows []*row
	add := func(r *row) *row { rows = append(rows, r); return r }
	nFull, nNormal := o.n(150), o.n(1000)
	nFor := func(sync string) int {
		if sync == "NORMAL" {
			return nNormal
		}
		return nFull
	}

	// 1. The two-commit cycle.
	for _, sync := range []string{"FULL", "NORMAL"} {
		sync := sync
		n := nFor(sync)
		add(&row{section: "cycle", name: "floor (hand-written SQL) " + sync, run: func(dir string) (result, error) {
			return child([]string{lb, "floor", "-db", filepath.Join(dir, "f.db"), "-sync", sync, "-n", itoa(n)})
		}})
		add(&row{section: "cycle", name: "Go core " + sync, run: func(dir string) (result, error) {
			return child([]string{lb, "core", "-db", filepath.Join(dir, "c.db"), "-sync", sync, "-n", itoa(n)})
		}})
	}
	cb := o.exe("cbench")
	cRow := add(&row{section: "cycle", name: "C ABI FULL", run: func(dir string) (result, error) {
		return child([]string{cb, "cycle", filepath.Join(dir, "c.db"), itoa(nFull)})
	}})
	if !exists(cb) {
		cRow.skip = "build/bench/cbench not built"
	}
	cNormal := add(&row{section: "cycle", name: "C ABI NORMAL", run: func(dir string) (result, error) {
		return child([]string{cb, "cycle", filepath.Join(dir, "c.db"), itoa(nNormal), "NORMAL"})
	}})
	if !exists(cb) {
		cNormal.skip = "build/bench/cbench not built"
	}
	for _, b := range bindingRows(o, nFull) {
		add(b)
	}
	cliN := max(o.n(10), 2)
	cli := add(&row{section: "cycle", name: "CLI FULL (claim + complete processes)", run: func(dir string) (result, error) {
		return cliCycle(o, lb, dir, cliN)
	}})
	if !exists(o.cli) {
		cli.skip = o.cli + " not built"
	}
	pb := o.exe("peersbench")
	for _, peer := range []string{"goqite", "river"} {
		peer := peer
		for _, mode := range []string{"FULL", "NORMAL", "defaults"} {
			mode := mode
			n := nFor(mode)
			label := peer + " " + mode + " (our pragmas)"
			if mode == "defaults" {
				label = peer + " at its defaults"
				n = o.n(100)
			}
			r := add(&row{section: "cycle", name: label, run: func(dir string) (result, error) {
				return child([]string{pb, peer, "-db", filepath.Join(dir, "p.db"), "-mode", mode, "-n", itoa(n)})
			}})
			if !exists(pb) {
				r.skip = "build/bench/peersbench not built"
			}
		}
	}

	// 1b. Pages per commit (not timed: what each commit writes, section 1).
	for _, which := range []string{"floor", "core"} {
		args := []string{lb, "frames", "-n", itoa(max(o.n(100), 5))}
		if which == "floor" {
			args = append(args, "-floor")
		}
		add(&row{section: "frames", name: which, run: func(dir string) (result, error) {
			return child(append(args, "-db", filepath.Join(dir, "w.db")))
		}})
	}

	// 2. One commit.
	add(&row{section: "edit", name: "claim+complete in one edit FULL", run: func(dir string) (result, error) {
		return child([]string{lb, "inline", "-db", filepath.Join(dir, "i.db"), "-n", itoa(nFull)})
	}})
	add(&row{section: "edit", name: "complete-and-claim-next loop FULL", run: func(dir string) (result, error) {
		return child([]string{lb, "next", "-db", filepath.Join(dir, "x.db"), "-n", itoa(nFull)})
	}})
	for _, k := range []int{0, 1, 10, 100} {
		k := k
		name := fmt.Sprintf("%d claims per edit FULL", k)
		n := nFull
		if k == 0 {
			name = "single claims (no edit) FULL"
		}
		if k >= 10 {
			n = o.n(15 * k)
		}
		add(&row{section: "edit", name: name, run: func(dir string) (result, error) {
			return child([]string{lb, "edit", "-db", filepath.Join(dir, "e.db"), "-k", itoa(k), "-n", itoa(n)})
		}})
	}

	// 3. Scaling: files filled once, before the repetitions.
	var scales []*scaleRow
	if o.want("scale") {
		sizes := []int{o.n(1000), o.n(100000)}
		if o.full {
			sizes = append(sizes, o.n(1000000))
		}
		for _, jobs := range sizes {
			scales = append(scales, &scaleRow{jobs: jobs})
		}
		scales = append(scales, &scaleRow{jobs: o.n(11000), outstanding: o.n(10000)})
		scales = append(scales, &scaleRow{jobs: o.n(11000), delayed: o.n(10000)})
		m := o.n(200)
		for i, s := range scales {
			s := s
			s.db = filepath.Join(o.tmp, fmt.Sprintf("scale-%d.db", i))
			t := time.Now()
			res, err := child([]string{lb, "scale-fill", "-db", s.db, "-n", itoa(s.jobs), "-outstanding", itoa(s.outstanding),
				"-delayed", itoa(s.delayed)})
			must(err)
			s.bytesPerJob = res.Extra["bytes_per_job"]
			fmt.Fprintf(os.Stderr, "bench: filled %d jobs (%d claimed) in %s\n", s.jobs, s.outstanding, time.Since(t).Round(time.Millisecond))
			s.row = add(&row{section: "scale", name: fmt.Sprintf("%d jobs", s.jobs), run: func(string) (result, error) {
				return child([]string{lb, "scale-claim", "-db", s.db, "-m", itoa(m)})
			}})
		}

	}
	// 9. Observations, on the largest scaling file (or one of their own).
	if o.want("observe") {
		var db string
		db, o.observeJobs = observeFile(o, scales)
		for _, r := range observeRows(o, db, o.observeJobs) {
			add(r)
		}
	}
	// 10. The status page, on a busy production of its own on each store.
	if o.want("web") {
		o.webJobs = o.n(100000)
		for _, r := range webRows(o, o.webJobs) {
			add(r)
		}
	}
	// 4. Contention: P worker processes on one file for a fixed time.
	secs := max(2*o.scale, 0.3)
	for _, p := range []int{1, 2, 4, 8} {
		p := p
		add(&row{section: "contention", name: fmt.Sprintf("%d processes", p), run: func(dir string) (result, error) {
			return contend(lb, dir, p, secs)
		}})
	}

	// 7. Workers: W goroutines of one process through the core, SQLite FULL
	// next to PostgreSQL (fsync on), claim → complete. Numbered 7 in the
	// table, run here so its rows interleave with the others.
	wn := o.n(600)
	var pgEnv []string
	if o.smoke {
		pgEnv = append(pgEnv, "LEASESBENCH_ALLOW_NOFSYNC=1") // smoke may reuse make test's fsync=off cluster
	}
	for _, w := range []int{1, 4, 16} {
		w := w
		add(&row{section: "workers", name: workersName("SQLite FULL", w), run: func(dir string) (result, error) {
			return child([]string{lb, "workers", "-db", filepath.Join(dir, "w.db"), "-sync", "FULL", "-w", itoa(w), "-n", itoa(wn)})
		}})
		r := add(&row{section: "workers", name: workersName("PostgreSQL", w), run: func(string) (result, error) {
			return child([]string{lb, "workers", "-db", o.pg, "-w", itoa(w), "-n", itoa(wn)}, pgEnv...)
		}})
		if o.pg == "" {
			r.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
		}
	}

	// 8. Waiting: wake latency, idle waiters, the worker loop. Numbered 8
	// in the table, run here so its rows interleave with the others.
	for _, r := range waitingRows(o, lb, pgEnv) {
		add(r)
	}

	// 11. The worker loop on PostgreSQL next to River and the floor.
	for _, r := range pgLoopRows(o, lb, pgEnv) {
		add(r)
	}

	// 12. Steady state: jobs flowing with a short retention window, on each
	// store (steady.go).
	for _, r := range steadyRows(o, lb, pgEnv) {
		add(r)
	}

	// 13. The worker loop per language (faces.go).
	if o.want("faces") {
		for _, r := range facesRows(o) {
			add(r)
		}
	}

	// 5. Boundary cost.
	calls := o.n(2000000)
	bc := add(&row{section: "boundary", name: "C", run: func(dir string) (result, error) {
		return child([]string{cb, "boundary", filepath.Join(dir, "b.db"), itoa(calls)})
	}})
	if !exists(cb) {
		bc.skip = "build/bench/cbench not built"
	}
	for _, b := range bindingBoundaryRows(o, calls) {
		add(b)
	}

	// 6. Memory: one worker process, once, after the repetitions.
	rss := func() (result, error) {
		n := o.n(100000)
		db := filepath.Join(o.tmp, "rss.db")
		if _, err := child([]string{lb, "fill", "-db", db, "-n", itoa(n)}); err != nil {
			return result{}, err
		}
		return child([]string{lb, "rss", "-db", db, "-n", itoa(n), "-warm", itoa(n / 10)})
	}
	if !o.want("memory") {
		rss = nil
	}
	var kept []*row
	for _, r := range rows {
		if o.want(r.section) && (o.rows == nil || o.rows.MatchString(r.name)) {
			kept = append(kept, r)
		}
	}
	return kept, scales, rss
}

func itoa(i int) string { return strconv.Itoa(i) }

// cliCycle: each cycle is two processes, `leases claim --token-out` and
// `leases complete --token-file`, as a shell worker runs them.
func cliCycle(o *opts, lb, dir string, n int) (result, error) {
	db := filepath.Join(dir, "cli.db")
	if _, err := child([]string{lb, "fill", "-db", db, "-n", itoa(n)}); err != nil {
		return result{}, err
	}
	tok := filepath.Join(dir, "token")
	start := time.Now()
	for i := 0; i < n; i++ {
		os.Remove(tok)
		for _, argv := range [][]string{
			{o.cli, "--db", db, "claim", "--production", prod, "--worker", worker, "--duration", "1h", "--token-out", tok},
			{o.cli, "--db", db, "complete", "--token-file", tok},
		} {
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			if err != nil {
				return result{}, fmt.Errorf("%s: %v: %s", argv[3], err, strings.TrimSpace(string(out)))
			}
		}
	}
	return result{Ops: n, Secs: time.Since(start).Seconds()}, nil
}

func contend(lb, dir string, procs int, secs float64) (result, error) {
	db := filepath.Join(dir, "c.db")
	if _, err := child([]string{lb, "fill", "-db", db, "-n", itoa(int(3000*secs) + 500)}); err != nil {
		return result{}, err
	}
	start := time.Now().Add(500 * time.Millisecond)
	end := start.Add(time.Duration(secs * float64(time.Second)))
	type out struct {
		r   result
		err error
	}
	ch := make(chan out, procs)
	for i := 0; i < procs; i++ {
		go func() {
			r, err := child([]string{lb, "contend-worker", "-db", db,
				"-start", strconv.FormatInt(start.UnixNano(), 10), "-end", strconv.FormatInt(end.UnixNano(), 10)})
			ch <- out{r, err}
		}()
	}
	var total result
	var lat []int64
	var errs []error
	for i := 0; i < procs; i++ {
		o := <-ch
		if o.err != nil {
			errs = append(errs, o.err)
			continue
		}
		total.Ops += o.r.Ops
		total.Busy += o.r.Busy
		total.Secs = max(total.Secs, o.r.Secs)
		lat = append(lat, o.r.Lat...)
	}
	if len(errs) > 0 {
		return result{}, errors.Join(errs...)
	}
	total.P50NS, total.P99NS = percentile(lat, 0.5), percentile(lat, 0.99)
	return total, nil
}

// ---- statistics and the table ---------------------------------------------

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func values(r *row, f func(result) float64) []float64 {
	var v []float64
	for _, x := range r.res {
		v = append(v, f(x))
	}
	return v
}

func rates(r *row) []float64 { return values(r, result.rate) }

// ratio is the median of per-repetition ratios a[i]/b[i].
func ratio(a, b []float64) float64 {
	var v []float64
	for i := 0; i < len(a) && i < len(b); i++ {
		if b[i] > 0 {
			v = append(v, a[i]/b[i])
		}
	}
	return median(v)
}

func spread(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%s–%s", num(s[0]), num(s[len(s)-1]))
}

func num(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}

func us(ns float64) string { return num(ns/1000) + " µs" }

func find(rows []*row, section, name string) *row {
	for _, r := range rows {
		if r.section == section && r.name == name {
			return r
		}
	}
	return nil
}

func status(r *row) string {
	switch {
	case r.skip != "":
		return "— (" + r.skip + ")"
	case len(r.res) == 0:
		return "failed: " + strings.Join(uniq(r.errs), "; ")
	}
	return ""
}

// measuredIn returns the rows of section that have figures, in order, and
// writes the table line of each other one (its name, then why it has none,
// then empty cells up to cols).
func measuredIn(rows []*row, section string, cols int, p func(string, ...any)) []*row {
	var out []*row
	for _, r := range rows {
		if r.section != section {
			continue
		}
		if s := status(r); s != "" {
			p("| %s | %s |%s\n", r.name, s, strings.Repeat(" |", cols-2))
			continue
		}
		out = append(out, r)
	}
	return out
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func render(o *opts, rows []*row, scales []*scaleRow, rss *result, rssErr error) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	n := fmt.Sprintf("median of %d interleaved repetitions", o.reps)
	if o.smoke {
		p("**SMOKE RUN: tiny sizes, the figures mean nothing.**\n\n")
	}

	floor := map[string]*row{"FULL": find(rows, "cycle", "floor (hand-written SQL) FULL"),
		"NORMAL": find(rows, "cycle", "floor (hand-written SQL) NORMAL")}
	coreFull := find(rows, "cycle", "Go core FULL")
	single := find(rows, "edit", "single claims (no edit) FULL")
	if o.want("cycle") {
		p("### 1. Cycle: claim → complete of one job, two commits (%s)\n\n", n)
		p("| row | cycles/s | range | × floor (same sync) | CPU µs/cycle |\n|---|---:|---:|---:|---:|\n")
		for _, r := range measuredIn(rows, "cycle", 5, p) {
			sync := "FULL"
			if strings.Contains(r.name, "NORMAL") {
				sync = "NORMAL"
			}
			rt := rates(r)
			rel := "—"
			if f := floor[sync]; f != nil && len(f.res) > 0 {
				rel = fmt.Sprintf("%.2f×", ratio(rt, rates(f)))
				if strings.Contains(r.name, "defaults") {
					rel += " (vs FULL floor)"
				}
			}
			cpu := "—"
			if c := median(values(r, func(x result) float64 { return x.CPUNS })); c > 0 {
				cpu = num(c / 1000)
			}
			p("| %s | %s | %s | %s | %s |\n", r.name, num(median(rt)), spread(rt), rel, cpu)
		}
		p("\nCPU µs/cycle: user+sys CPU of the row's process during the timed loop, per cycle (all threads; River's\n" +
			"includes its background services). Far less sensitive to the disk than cycles/s. — where not measured.\n")
		p("\nPeers: \"our pragmas\" is WAL, the given synchronous level, busy_timeout 10 s, foreign keys, BEGIN IMMEDIATE;\n" +
			"\"at its defaults\" is a plain `sql.Open` of the file (rollback journal, synchronous FULL) and the peer's own default settings.\n" +
			"goqite cycle = Receive + Delete (two commits). River cycle = one job through a started client with a no-op worker,\n" +
			"timed from Start until every job's completion event (River fetches and completes in batches).\n\n")
		p("Pages per commit (`leasesbench frames`, synchronous=NORMAL, not timed): the WAL frames each commit appends, one per\n" +
			"page it changed, while a reader holds the WAL back; the core's projection of the event log's indexes\n" +
			"(docs/schema.md, \"Schema 13\") runs in windows of its own, its frames counted per event it projects.\n\n")
		p("| row | claim commit | completion commit | the projection, per event |\n|---|---:|---:|---:|\n")
		for _, r := range measuredIn(rows, "frames", 4, p) {
			frames := func(k string, prec int) string {
				return strconv.FormatFloat(median(values(r, func(x result) float64 { return x.Extra[k] })), 'f', prec, 64)
			}
			proj := "—" // the floor has no projection
			if r.name == "core" {
				proj = frames("projector_frames_per_event", 2)
			}
			p("| %s | %s | %s | %s |\n", r.name, frames("claim_frames", 1), frames("complete_frames", 1), proj)
		}
		p("\n")

	}
	if o.want("edit") {
		p("### 2. One commit (%s, synchronous=FULL)\n\n", n)
		p("| row | per s | range | ratio |\n|---|---:|---:|---:|\n")
		for _, r := range measuredIn(rows, "edit", 4, p) {
			rt := rates(r)
			rel := ""
			switch {
			case (strings.HasPrefix(r.name, "claim+complete") || strings.HasPrefix(r.name, "complete-and")) && coreFull != nil:
				rel = fmt.Sprintf("%.2f× the two-commit core cycle", ratio(rt, rates(coreFull)))
			case strings.Contains(r.name, "per edit") && single != nil:
				rel = fmt.Sprintf("%.2f× single claims", ratio(rt, rates(single)))
			}
			unit := "claims"
			if strings.HasPrefix(r.name, "claim+complete") || strings.HasPrefix(r.name, "complete-and") {
				unit = "cycles"
			}
			p("| %s | %s %s | %s | %s |\n", r.name, num(median(rt)), unit, spread(rt), rel)
		}

	}
	if len(scales) > 0 {
		p("\n### 3. Scaling: claim latency (%s of %d claims each, synchronous=NORMAL so fsync does not hide the query)\n\n", n, o.n(200))
		p("| jobs in the file | claim p50 | claim p99 | p99 ÷ p99 at %d jobs | DB bytes per job |\n|---|---:|---:|---:|---:|\n", scales[0].jobs)
		base := values(scales[0].row, func(r result) float64 { return float64(r.P99NS) })
		for _, s := range scales {
			name := fmt.Sprintf("%d", s.jobs)
			if s.outstanding > 0 {
				name = fmt.Sprintf("%d, of which %d claimed and unexpired", s.jobs, s.outstanding)
			}
			if s.delayed > 0 {
				name = fmt.Sprintf("%d, of which %d delayed at the highest priority", s.jobs, s.delayed)
			}
			if st := status(s.row); st != "" {
				p("| %s | %s | | | |\n", name, st)
				continue
			}
			p50 := values(s.row, func(r result) float64 { return float64(r.P50NS) })
			p99 := values(s.row, func(r result) float64 { return float64(r.P99NS) })
			p("| %s | %s | %s | %.2f× | %.0f |\n", name, us(median(p50)), us(median(p99)), ratio(p99, base), s.bytesPerJob)
		}
		if !o.full {
			p("| 1000000 | not run by `make bench` (takes minutes to fill); `make bench-full` adds it | | | |\n")
		}

	}
	if o.want("contention") {
		p("\n### 4. Contention: worker processes on one file, claim → complete for %.1f s each, synchronous=FULL (%s)\n\n", max(2*o.scale, 0.3), n)
		p("| processes | total cycles/s | range | claim p50 | claim p99 | BUSY (sum over repetitions) |\n|---|---:|---:|---:|---:|---:|\n")
		for _, r := range measuredIn(rows, "contention", 6, p) {
			rt := rates(r)
			busy := 0
			for _, x := range r.res {
				busy += x.Busy
			}
			p("| %s | %s | %s | %s | %s | %d |\n", strings.TrimSuffix(r.name, " processes"), num(median(rt)), spread(rt),
				us(median(values(r, func(x result) float64 { return float64(x.P50NS) }))),
				us(median(values(r, func(x result) float64 { return float64(x.P99NS) }))), busy)
		}

	}
	if o.want("boundary") {
		p("\n### 5. Boundary cost: ns per call (%s)\n\n", n)
		p("| caller | `leases_abi_version` | `leases_lease_expiry` |\n|---|---:|---:|\n")
		for _, r := range measuredIn(rows, "boundary", 3, p) {
			p("| %s | %s | %s |\n", r.name, num(median(values(r, func(x result) float64 { return x.NSOp }))),
				num(median(values(r, func(x result) float64 { return x.Extra["expiry_ns"] }))))
		}

	}
	if o.want("memory") {
		p("\n### 6. Memory: peak RSS (VmHWM) of one Go worker process, one run, synchronous=NORMAL\n\n")
		switch {
		case rssErr != nil:
			p("failed: %v\n", rssErr)
		case rss != nil:
			e := rss.Extra
			p("| idle (opened) | after %d warm-up cycles | after %d cycles | growth after warm-up |\n|---:|---:|---:|---:|\n",
				rss.Ops/10, rss.Ops)
			p("| %.1f MiB | %.1f MiB | %.1f MiB | %+.1f MiB |\n", e["idle_hwm_kb"]/1024, e["warm_hwm_kb"]/1024,
				e["after_hwm_kb"]/1024, (e["after_hwm_kb"]-e["warm_hwm_kb"])/1024)
		}

	}
	if o.want("workers") {
		renderWorkers(o, &b, rows, floor["FULL"], n)
	}
	if o.want("waiting") {
		renderWaiting(o, &b, rows, n)
	}
	if o.want("observe") {
		renderObserve(o, &b, rows, o.observeJobs, n)
	}
	if o.want("web") {
		renderWeb(o, &b, rows, o.webJobs, n)
	}
	if o.want("pgloop") {
		renderPGLoop(o, &b, rows, n)
	}
	if o.want("steady") {
		renderSteady(&b, rows, n)
	}
	if o.want("faces") {
		renderFaces(o, &b, rows, n)
	}
	p("\n### Targets\n\n")
	p("| target | figure | |\n|---|---|---|\n")
	target := func(name string, got float64, want float64, ok bool, have bool) {
		if !have {
			p("| %s | not measured | |\n", name)
			return
		}
		p("| %s | %.2f (want ≥ %.2f) | %s |\n", name, got, want, met(ok))
	}
	// The cycle targets: the Go core against the floor (0.9 at FULL,
	// 0.8 at NORMAL), the C ABI within 5 % of the Go core it wraps, Python
	// at 0.8 of the C ABI it calls.
	pair := func(name string, a, b *row, want float64) {
		have := a != nil && len(a.res) > 0 && b != nil && len(b.res) > 0
		var r float64
		if have {
			r = ratio(rates(a), rates(b))
		}
		target(name, r, want, r >= want, have)
	}
	for _, sync := range []string{"FULL", "NORMAL"} {
		want := map[string]float64{"FULL": 0.9, "NORMAL": 0.8}[sync]
		pair("Go core ÷ floor, "+sync, find(rows, "cycle", "Go core "+sync), floor[sync], want)
		pair("C ABI ÷ Go core, "+sync+" (within 5 %)", find(rows, "cycle", "C ABI "+sync), find(rows, "cycle", "Go core "+sync), 0.95)
	}
	pair("Python ÷ C ABI, FULL", find(rows, "cycle", "Python FULL"), find(rows, "cycle", "C ABI FULL"), 0.8)
	// The fair-writers target: 16 goroutines keep 1 goroutine's throughput
	// (section 7, SQLite) and no claim starves (p99 within 20× the p50).
	if w16 := find(rows, "workers", workersName("SQLite FULL", 16)); w16 != nil && len(w16.res) > 0 {
		pair("16 goroutines ÷ 1 goroutine, SQLite FULL", w16, find(rows, "workers", workersName("SQLite FULL", 1)), 1)
		p50 := median(values(w16, func(x result) float64 { return float64(x.P50NS) }))
		p99 := median(values(w16, func(x result) float64 { return float64(x.P99NS) }))
		if p50 > 0 {
			p("| claim p99 ÷ p50 at 16 goroutines, SQLite FULL | %.2f (want ≤ 20) | %s |\n", p99/p50, met(p99 <= 20*p50))
		}
	}
	for _, peer := range []string{"goqite", "river"} {
		for _, sync := range []string{"FULL", "NORMAL"} {
			pr := find(rows, "cycle", peer+" "+sync+" (our pragmas)")
			c := find(rows, "cycle", "Go core "+sync)
			have := pr != nil && len(pr.res) > 0 && c != nil && len(c.res) > 0
			var r float64
			if have {
				r = ratio(rates(c), rates(pr))
			}
			target(fmt.Sprintf("Go core ÷ %s, %s", peer, sync), r, 1, r > 1, have)
		}
	}
	in := find(rows, "edit", "claim+complete in one edit FULL")
	if in != nil && coreFull != nil && len(in.res) > 0 && len(coreFull.res) > 0 {
		r := ratio(rates(in), rates(coreFull))
		target("one-edit claim+complete ÷ two-commit cycle", r, 1.6, r >= 1.6, true)
	}
	next := find(rows, "edit", "complete-and-claim-next loop FULL")
	if next != nil && coreFull != nil && len(next.res) > 0 && len(coreFull.res) > 0 {
		r := ratio(rates(next), rates(coreFull))
		target("complete-and-claim-next loop ÷ two-commit cycle", r, 1.8, r >= 1.8, true)
	}
	e100 := find(rows, "edit", "100 claims per edit FULL")
	if e100 != nil && single != nil && len(e100.res) > 0 && len(single.res) > 0 {
		r := ratio(rates(e100), rates(single))
		target("100 claims per edit ÷ single claims", r, 10, r >= 10, true)
	}
	if len(scales) >= 2 && len(scales[len(scales)-2].row.res) > 0 && len(scales[0].row.res) > 0 {
		last := scales[len(scales)-2] // the largest plain size
		base := values(scales[0].row, func(r result) float64 { return float64(r.P99NS) })
		r := ratio(values(last.row, func(r result) float64 { return float64(r.P99NS) }), base)
		p("| p99 at %d jobs ÷ p99 at %d jobs | %.2f (want ≤ 2; the target names 1M jobs%s) | %s |\n",
			last.jobs, scales[0].jobs, r, map[bool]string{true: "", false: ", run by `make bench-full`"}[o.full], met(r <= 2))
	}
	observeTargets(p, rows, o.observeJobs)
	webTargets(p, rows, o.webJobs)
	pgLoopTargets(p, rows)
	if rss != nil && rssErr == nil {
		g := (rss.Extra["after_hwm_kb"] - rss.Extra["warm_hwm_kb"]) / 1024
		p("| RSS growth after warm-up | %+.1f MiB (want ≈ 0; < 2 MiB counts as none) | %s |\n", g, met(g < 2))
	}
	return b.String()
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func machine(o *opts, began time.Time, load0 string) string {
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# libleases benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (bench/go/cmd/leasesbench). Regenerate rather than edit.\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n", began.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "| duration | %s |\n", time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "| nproc | %s |\n", run("nproc"))
	fmt.Fprintf(&b, "| CPU | %s |\n", cpu)
	fmt.Fprintf(&b, "| load average (start → end) | %s → %s |\n", load0, loadavg())
	fmt.Fprintf(&b, "| kernel | %s |\n", run("uname", "-r"))
	fmt.Fprintf(&b, "| Go | %s |\n", run("go", "version"))
	fmt.Fprintf(&b, "| gcc | %s |\n", run("gcc", "--version"))
	fmt.Fprintf(&b, "| libleases | %s (commit %s) |\n", run(o.cli, "version"), run("git", "-C", o.repo, "rev-parse", "--short", "HEAD"))
	fmt.Fprintf(&b, "| peers | maragu.dev/goqite v0.4.0, github.com/riverqueue/river v0.51.2 + riversqlite + riverpgxv5, modernc.org/sqlite v1.62.0 |\n")
	if o.want("workers") || o.want("faces") {
		fmt.Fprintf(&b, "| PostgreSQL (sections 7, 13) | %s |\n", pgInfo(o.pg))
	}
	fmt.Fprintf(&b, "| scale | BENCH_SCALE=%g, %d repetitions, 1M-job row: %v |\n\n", o.scale, o.reps, o.full)
	fmt.Fprintf(&b, "The machine is shared and noisy: read the ratios (each the median of per-repetition ratios\n"+
		"measured seconds apart) rather than the absolute rates. What bounds each figure: docs/PERFORMANCE.md.\n\n")
	return b.String()
}
