// Section 9, observations: a page of 100 jobs from a filled file through
// Go, the C ABI and the CLI (latency and peak RSS), and the whole listing
// streamed by `leases job list --json` (rate and peak RSS).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/libleases/libleases/core"
)

const pageSize = 100

// cmdPage walks to the middle of the listing with pages of 1000 (untimed),
// then times m pages of 100 from there, each from the previous cursor, and
// the first page of the listing. Peak RSS is this process's VmHWM.
func cmdPage(args []string) {
	fs := flag.NewFlagSet("page", flag.ExitOnError)
	db := fs.String("db", "", "filled database file")
	jobs := fs.Int("jobs", 0, "jobs in the file (to find its middle)")
	m := fs.Int("m", 200, "pages to time")
	must(fs.Parse(args))
	a := openCore(*db, "NORMAL")
	defer a.Close()
	ctx := context.Background()
	t := time.Now()
	first, err := a.ListJobs(ctx, prod, core.JobQuery{Limit: pageSize})
	must(err)
	firstNS := since(t)
	q := core.JobQuery{After: first.Next, Limit: core.MaxPageSize}
	for walked := pageSize; walked < *jobs/2 && q.After != ""; walked += core.MaxPageSize {
		page, err := a.ListJobs(ctx, prod, q)
		must(err)
		q.After = page.Next
	}
	q.Limit = pageSize
	lat := make([]int64, 0, *m)
	start := time.Now()
	for i := 0; i < *m && q.After != ""; i++ {
		t := time.Now()
		page, err := a.ListJobs(ctx, prod, q)
		lat = append(lat, since(t))
		must(err)
		if len(page.Jobs) != pageSize && page.Next != "" {
			fail(fmt.Errorf("a page of %d jobs before the end", len(page.Jobs)))
		}
		q.After = page.Next
	}
	secs := time.Since(start).Seconds()
	hwm, _ := vm()
	emit(result{Ops: len(lat), Secs: secs, P50NS: percentile(lat, 0.50), P99NS: percentile(lat, 0.99),
		Extra: map[string]float64{"first_page_ns": float64(firstNS), "hwm_kb": float64(hwm)}})
}

// cliListing runs `leases job list` on the filled file: its wall time and
// peak RSS. The rusage of a child of this (Go) driver also counts the
// driver's own peak (the child shares its memory until exec), so the RSS
// is an upper bound; the driver stays far below the figures measured.
func cliListing(o *opts, db string, args ...string) (result, error) {
	argv := append([]string{"--db", db, "job", "list", "--production", prod}, args...)
	cmd := exec.Command(o.cli, argv...)
	out, err := os.Create(os.DevNull)
	if err != nil {
		return result{}, err
	}
	defer out.Close()
	cmd.Stdout = out
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("leases %s: %v: %s", strings.Join(args, " "), err, lastLine(errb.String()))
	}
	wall := time.Since(start)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return result{Ops: 1, Secs: wall.Seconds(), Extra: map[string]float64{"maxrss_kb": float64(ru.Maxrss)}}, nil
}

// observeRows: the section's rows on db, a file of jobs jobs.
func observeRows(o *opts, db string, jobs int) []*row {
	lb, cb := o.exe("leasesbench"), o.exe("cbench")
	m := max(o.n(200), 5)
	rows := []*row{
		{section: "observe", name: "Go: pages of 100", run: func(string) (result, error) {
			return child([]string{lb, "page", "-db", db, "-jobs", itoa(jobs), "-m", itoa(m)})
		}},
		{section: "observe", name: "C ABI: pages of 100 (leases_jobs_page_json)", run: func(string) (result, error) {
			return child([]string{cb, "page", db, itoa(jobs), itoa(m)})
		}},
		{section: "observe", name: "CLI: a page of 100 (job list --limit 100 --json, whole process)", run: func(string) (result, error) {
			return cliListing(o, db, "--limit", itoa(pageSize), "--json")
		}},
		{section: "observe", name: "CLI: every job streamed (job list --json, whole process)", run: func(string) (result, error) {
			r, err := cliListing(o, db, "--json")
			r.Ops = jobs
			return r, err
		}},
	}
	if !exists(cb) {
		rows[1].skip = "build/bench/cbench not built"
	}
	if !exists(o.cli) {
		rows[2].skip, rows[3].skip = o.cli+" not built", o.cli+" not built"
	}
	return rows
}

// observeFile is the file the section reads: the largest plain file of the
// scaling rows when they run (100,000 jobs; 1,000,000 with -full), else one
// filled for it.
func observeFile(o *opts, scales []*scaleRow) (string, int) {
	if len(scales) >= 2 {
		s := scales[len(scales)-2]
		return s.db, s.jobs
	}
	jobs := o.n(100000)
	if o.full {
		jobs = o.n(1000000)
	}
	db := filepath.Join(o.tmp, "observe.db")
	t := time.Now()
	_, err := child([]string{o.exe("leasesbench"), "fill", "-db", db, "-n", itoa(jobs)})
	must(err)
	fmt.Fprintf(os.Stderr, "bench: filled %d jobs for the observation rows in %s\n", jobs, time.Since(t).Round(time.Millisecond))
	return db, jobs
}

func renderObserve(o *opts, b *strings.Builder, rows []*row, jobs int, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n### 9. Observations: a page of %d from a file of %d jobs, and every job streamed (%s)\n\n", pageSize, jobs, n)
	p("| row | page p50 | page p99 | first page | whole process | peak RSS |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range measuredIn(rows, "observe", 6, p) {
		if strings.HasPrefix(r.name, "CLI") {
			wall := median(values(r, func(x result) float64 { return x.Secs }))
			rss := median(values(r, func(x result) float64 { return x.Extra["maxrss_kb"] })) / 1024
			extra := ""
			if strings.Contains(r.name, "every job") {
				extra = fmt.Sprintf(" (%s jobs/s)", num(median(rates(r))))
			}
			p("| %s | | | | %s ms%s | %.1f MiB |\n", r.name, num(wall*1000), extra, rss)
			continue
		}
		p("| %s | %s | %s | %s | | %.1f MiB |\n", r.name,
			us(median(values(r, func(x result) float64 { return float64(x.P50NS) }))),
			us(median(values(r, func(x result) float64 { return float64(x.P99NS) }))),
			us(median(values(r, func(x result) float64 { return x.Extra["first_page_ns"] }))),
			median(values(r, func(x result) float64 { return x.Extra["hwm_kb"] }))/1024)
	}
	p("\nGo and C: %d consecutive pages of %d timed from the middle of the listing (each from the previous\n"+
		"cursor), after walking there with pages of 1000; peak RSS is the process's VmHWM, the walk included.\n"+
		"CLI: the whole process (start, open, read, print to /dev/null, exit); its peak RSS is the child's rusage,\n"+
		"an upper bound (a child of the Go driver shares the driver's memory until exec).\n", max(o.n(200), 5), pageSize)
}

// observeTargets adds the section's targets to the Targets table.
func observeTargets(p func(string, ...any), rows []*row, jobs int) {
	for _, r := range rows {
		if r.section != "observe" || len(r.res) == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(r.name, "CLI: every job"):
			rss := median(values(r, func(x result) float64 { return x.Extra["maxrss_kb"] })) / 1024
			p("| every job of %d streamed by the CLI in constant memory | %.1f MiB (want ≤ 100 MiB) | %s |\n", jobs, rss, met(rss <= 100))
		case strings.HasPrefix(r.name, "CLI"):
			wall := median(values(r, func(x result) float64 { return x.Secs })) * 1000
			rss := median(values(r, func(x result) float64 { return x.Extra["maxrss_kb"] })) / 1024
			p("| a page of %d at %d jobs, CLI (whole process) | %s ms, %.1f MiB (want ≤ 50 ms, ≤ 50 MiB) | %s |\n",
				pageSize, jobs, num(wall), rss, met(wall <= 50 && rss <= 50))
		default:
			p99 := median(values(r, func(x result) float64 { return float64(x.P99NS) })) / 1e6
			rss := median(values(r, func(x result) float64 { return x.Extra["hwm_kb"] })) / 1024
			lang := strings.SplitN(r.name, ":", 2)[0]
			p("| a page of %d at %d jobs, %s p99 | %.2f ms, %.1f MiB (want ≤ 50 ms, ≤ 50 MiB) | %s |\n",
				pageSize, jobs, lang, p99, rss, met(p99 <= 50 && rss <= 50))
		}
	}
}
