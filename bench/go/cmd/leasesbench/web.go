// Section 10, the status page: each view's latency from a `leases serve`
// process over a busy production of 100,000 jobs (webFill) on SQLite and on
// PostgreSQL, and the workers' claim throughput with the page open and
// refreshing every second against none. The page is the real CLI server,
// fetched over HTTP as a browser's refresh fetches it.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/libleases/libleases/core"
)

// serve starts `cli --db loc serve` on a free loopback port and returns its
// base URL and a function that stops it.
func serve(cli, loc string) (string, func()) {
	cmd := exec.Command(cli, "--db", loc, "serve", "--listen", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(err)
	must(cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "leases serve: http://") {
		cmd.Process.Kill()
		cmd.Wait()
		fail(fmt.Errorf("leases serve did not start: %q %v", line, err))
	}
	base := strings.TrimSuffix(strings.Fields(line)[2], "/")
	return base, func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
}

// fetch GETs base+path and reads the whole answer; anything but 200 fails.
func fetch(c *http.Client, base, path string) { must(get(c, base, path)) }

// get GETs base+path and reads the whole answer; anything but 200 is an error.
func get(c *http.Client, base, path string) error {
	resp, err := c.Get(base + path)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// webView is one timed view: a label the same on every store, and the path
// fetched (a job id or cursor of the store's own fill).
type webView struct{ label, path string }

// webViews are the views timed: the pages and what they stand on.
func webViews(a *core.Authority, jobs int) []webView {
	ctx := context.Background()
	first, err := a.ListJobs(ctx, prod, core.JobQuery{Limit: 1})
	must(err)
	// A page from the middle of the listing: walk there untimed.
	q := core.JobQuery{Limit: core.MaxPageSize}
	for walked := 0; walked < jobs/2; walked += core.MaxPageSize {
		page, err := a.ListJobs(ctx, prod, q)
		must(err)
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	name := url.Values{"name": {prod}}.Encode()
	job := url.Values{"production": {prod}, "id": {first.Jobs[0].ID}}.Encode()
	return []webView{{"/", "/"}, {"/production?name=bench", "/production?" + name},
		{"/production?name=bench&state=requested", "/production?" + name + "&state=requested"},
		{"/production?name=bench&after=(the middle)", "/production?" + name + "&" + url.Values{"after": {q.After}}.Encode()},
		{"/production?name=bench&q=(a job id)", "/production?" + name + "&q=" + first.Jobs[0].ID},
		{"/job?production=bench&id=(a job id)", "/job?" + job}, {"/events", "/events"}, {"/api/overview", "/api/overview"},
		{"/api/production?name=bench", "/api/production?" + name}, {"/metrics", "/metrics"}}
}

// webFill fills loc for the page views as a busy production looks: jobs
// requested, then most of them claimed and completed by four workers within
// the last hour (an hour of completions for the chart, and of sightings for
// the workers seen), some failed, some claimed and held; the rest wait.
func webFill(loc string, jobs int) {
	fillCore(loc, jobs)
	a := openCore(loc, "NORMAL")
	defer a.Close()
	done, failed, held := jobs*6/10, jobs/200, jobs/500
	for d := 0; d < done; {
		e, err := a.Begin()
		must(err)
		k := min(500, done-d)
		for i := 0; i < k; i++ {
			l, err := e.Claim(prod, "worker-"+itoa(i%4), time.Minute)
			must(err)
			must(e.Complete(l, core.Facts{}))
		}
		must(e.Commit())
		d += k
	}
	for i := 0; i < failed; i++ {
		l, err := a.Claim(prod, "worker-"+itoa(i%4), time.Minute)
		must(err)
		must(l.Fail("bench"))
	}
	for i := 0; i < held; i++ {
		_, err := a.Claim(prod, "holder-"+itoa(i%8), leaseFor)
		must(err)
	}
}

// cmdWebPage times m rounds of every view (webViews) from a `leases serve`
// over db. The first round is untimed: its /metrics is the first scrape of
// a server just started over the file (the server read the log's end when
// it started; the scrape reads the counts and the events since), reported
// on its own.
func cmdWebPage(args []string) {
	fs := flag.NewFlagSet("webpage", flag.ExitOnError)
	db := fs.String("db", "", "filled database file")
	jobs := fs.Int("jobs", 0, "jobs in the file")
	cli := fs.String("cli", "", "the leases CLI")
	m := fs.Int("m", 50, "rounds to time")
	must(fs.Parse(args))
	a := openCore(*db, "NORMAL")
	views := webViews(a, *jobs)
	a.Close()
	base, stop := serve(*cli, *db)
	defer stop()
	c := &http.Client{Timeout: time.Minute}
	t := time.Now()
	fetch(c, base, "/metrics")
	firstScrape := since(t)
	for _, v := range views {
		fetch(c, base, v.path)
	}
	lat := make([]int64, 0, *m*len(views))
	per := make([][]int64, len(views))
	start := time.Now()
	for i := 0; i < *m; i++ {
		for j, v := range views {
			t := time.Now()
			fetch(c, base, v.path)
			ns := since(t)
			lat, per[j] = append(lat, ns), append(per[j], ns)
		}
	}
	secs := time.Since(start).Seconds()
	extra := map[string]float64{"first_metrics_ns": float64(firstScrape)}
	for j, v := range views {
		extra["p99 "+v.label] = float64(percentile(per[j], 0.99))
	}
	emit(result{Ops: len(lat), Secs: secs, P50NS: percentile(lat, 0.5), P99NS: percentile(lat, 0.99), Extra: extra})
}

// webRefresh is how often the open page refreshes: the overview and the
// production page, as two open tabs do.
const webRefresh = time.Second

// webTabPaths are the pages the open tabs fetch at each refresh.
var webTabPaths = []string{"/", "/production?" + url.Values{"name": {prod}}.Encode()}

// pageTabs fetches webTabPaths from a server every refresh until closed, and
// records when each answered fetch started.
type pageTabs struct {
	done       chan struct{}
	wg         sync.WaitGroup
	mu         sync.Mutex
	starts     []time.Time
	err        error
	stopServer func()
}

// openTabs starts refreshing the pages of the server at base: the first
// refresh one interval from now.
func openTabs(base string, every time.Duration) *pageTabs {
	p := &pageTabs{done: make(chan struct{})}
	c := &http.Client{Timeout: time.Minute}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			for _, path := range webTabPaths {
				t := time.Now()
				err := get(c, base, path)
				p.mu.Lock()
				if err != nil {
					p.err = err
				} else {
					p.starts = append(p.starts, t)
				}
				p.mu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	return p
}

// fetchesBetween counts the answered fetches that started from from to to.
func (p *pageTabs) fetchesBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.starts {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

// close stops the refreshes (waiting for one under way), then the server
// when the tabs have one; it returns the error a fetch met, if any.
func (p *pageTabs) close() error {
	close(p.done)
	p.wg.Wait()
	if p.stopServer != nil {
		p.stopServer()
	}
	return p.err
}

// pageOpen serves loc with the CLI and opens the tabs on it (webRefresh).
func pageOpen(cli, loc string) *pageTabs {
	base, stopServe := serve(cli, loc)
	fetch(&http.Client{Timeout: time.Minute}, base, "/") // warm: the server's first answer opens its store
	p := openTabs(base, webRefresh)
	p.stopServer = stopServe
	return p
}

// webLoopSecs is how long the section's workers rows are timed at scale 1:
// several of the page's refreshes, so every "page open" repetition reads
// the page while the workers write (a count of cycles ended before the
// first refresh once the loop got fast enough).
const webLoopSecs = 4

// webJobsPerSecond bounds the 4 workers' rate on each store, with room to
// spare (about 3,000 cycles/s on SQLite FULL, 1,400 on PostgreSQL with fsync
// on): the jobs requested before a timed loop are its duration's worth; a
// loop that drains them fails. PostgreSQL's bound is lower because its
// jobs are requested a round trip each (32,000 take about 10 s).
var webJobsPerSecond = map[string]int{"SQLite FULL": 8000, "PostgreSQL": 4000}

// webLoop is how the section's workers rows of a store are bounded: timed
// for webLoopSecs × scale, never less than two refreshes (the smoke run),
// with the jobs that lasts.
func webLoop(o *opts, store string) (jobs int, dur time.Duration) {
	dur = max(time.Duration(webLoopSecs*o.scale*float64(time.Second)), 2*webRefresh)
	return int(dur.Seconds() * float64(webJobsPerSecond[store])), dur
}

// webRows: section 10's rows. The page rows read a busy file of their own
// (webFill), on SQLite and on PostgreSQL, filled once and read by every
// repetition; the workers rows are section 7's 4-worker loop timed for
// several of the page's refreshes (webLoop), with and without the page open.
func webRows(o *opts, jobs int) []*row {
	lb := o.exe("leasesbench")
	m := max(o.n(30), 3)
	views := func(loc string) (result, error) {
		return child([]string{lb, "webpage", "-db", loc, "-jobs", itoa(jobs), "-cli", o.cli, "-m", itoa(m)})
	}
	var sqliteFill, pgFill sync.Once
	var fillErr [2]error
	db := filepath.Join(o.tmp, "web-views.db")
	var pgLoc string
	rows := []*row{{section: "web", name: webViewsName("SQLite"), run: func(string) (result, error) {
		sqliteFill.Do(func() { _, fillErr[0] = child([]string{lb, "fill", "-busy", "-db", db, "-n", itoa(jobs)}) })
		if fillErr[0] != nil {
			return result{}, fillErr[0]
		}
		return views(db)
	}}}
	pr := &row{section: "web", name: webViewsName("PostgreSQL"), run: func(string) (result, error) {
		pgFill.Do(func() {
			var schema string
			pgLoc, schema, _ = pgSchemaURL(o.pg, 0)
			o.cleanups = append(o.cleanups, func() { pgDropSchema(o.pg, schema) })
			_, fillErr[1] = child([]string{lb, "fill", "-busy", "-db", pgLoc, "-n", itoa(jobs)})
		})
		if fillErr[1] != nil {
			return result{}, fillErr[1]
		}
		return views(pgLoc)
	}}
	if o.pg == "" {
		pr.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
	}
	rows = append(rows, pr)
	var pgEnv []string
	if o.smoke {
		pgEnv = append(pgEnv, "LEASESBENCH_ALLOW_NOFSYNC=1") // smoke may reuse make test's fsync=off cluster
	}
	for _, open := range []bool{false, true} {
		var extra []string
		if open {
			extra = []string{"-web", o.cli}
		}
		rows = append(rows, &row{section: "web", name: webWorkersName("SQLite FULL", open), run: func(dir string) (result, error) {
			wn, wdur := webLoop(o, "SQLite FULL")
			return child(append([]string{lb, "workers", "-db", dir + "/web.db", "-sync", "FULL", "-w", "4", "-n", itoa(wn),
				"-dur", wdur.String()}, extra...))
		}})
		r := &row{section: "web", name: webWorkersName("PostgreSQL", open), run: func(string) (result, error) {
			wn, wdur := webLoop(o, "PostgreSQL")
			return child(append([]string{lb, "workers", "-db", o.pg, "-w", "4", "-n", itoa(wn), "-dur", wdur.String()},
				extra...), pgEnv...)
		}}
		if o.pg == "" {
			r.skip = "no PostgreSQL server: LEASES_TEST_PG_URL unset (make bench starts one)"
		}
		rows = append(rows, r)
	}
	if !exists(o.cli) {
		for _, r := range rows {
			r.skip = o.cli + " not built"
		}
	}
	return rows
}

func webViewsName(store string) string { return "page views from leases serve, " + store }

func webWorkersName(store string, open bool) string {
	if open {
		return store + ", 4 workers, page open (refresh 1 s)"
	}
	return store + ", 4 workers, no page"
}

func renderWeb(o *opts, b *strings.Builder, rows []*row, jobs int, n string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n### 10. The status page: views at %d jobs, and 4 workers with the page open (%s)\n\n", jobs, n)
	stores := []string{"SQLite", "PostgreSQL"}
	var keys []string
	for _, store := range stores {
		r := find(rows, "web", webViewsName(store))
		if r == nil {
			continue
		}
		if s := status(r); s != "" {
			p("page views, %s: %s\n\n", store, s)
			continue
		}
		if keys == nil {
			for k := range r.res[0].Extra {
				if strings.HasPrefix(k, "p99 ") {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
		}
	}
	if keys != nil {
		p("| view (GET, whole answer read) | SQLite p99 | PostgreSQL p99 |\n|---|---:|---:|\n")
		cell := func(store string, f func(x result) float64) string {
			r := find(rows, "web", webViewsName(store))
			if r == nil || len(r.res) == 0 {
				return ""
			}
			return us(median(values(r, f)))
		}
		for _, k := range keys {
			f := func(x result) float64 { return x.Extra[k] }
			p("| `%s` | %s | %s |\n", strings.TrimPrefix(k, "p99 "), cell("SQLite", f), cell("PostgreSQL", f))
		}
		p50 := func(x result) float64 { return float64(x.P50NS) }
		p99 := func(x result) float64 { return float64(x.P99NS) }
		p("| every view | p50 %s, p99 %s | p50 %s, p99 %s |\n", cell("SQLite", p50), cell("SQLite", p99),
			cell("PostgreSQL", p50), cell("PostgreSQL", p99))
		first := func(x result) float64 { return x.Extra["first_metrics_ns"] }
		p("| first `/metrics` of a server just started | %s | %s |\n\n", cell("SQLite", first), cell("PostgreSQL", first))
	}
	sqJobs, wdur := webLoop(o, "SQLite FULL")
	pgJobs, _ := webLoop(o, "PostgreSQL")
	p("| workers, claim → complete for %g s | cycles/s | range | claim p99 | page fetches (each repetition) | open ÷ none |\n"+
		"|---|---:|---:|---:|---:|---:|\n", wdur.Seconds())
	for _, store := range []string{"SQLite FULL", "PostgreSQL"} {
		none, open := find(rows, "web", webWorkersName(store, false)), find(rows, "web", webWorkersName(store, true))
		for _, r := range []*row{none, open} {
			if r == nil { // not run (-rows)
				continue
			}
			if s := status(r); s != "" {
				p("| %s | %s | | | | |\n", r.name, s)
				continue
			}
			fetches, vs := "", ""
			if r == open {
				fetches = pageFetches(r)
				if bad := pageInvalid(r); bad != "" {
					p("| %s | **invalid**: %s | | | %s | |\n", r.name, bad, fetches)
					continue
				}
				if none != nil && len(none.res) > 0 {
					vs = fmt.Sprintf("%.2f×", ratio(rates(open), rates(none)))
				}
			}
			p("| %s | %s | %s | %s | %s | %s |\n", r.name, num(median(rates(r))), spread(rates(r)),
				us(median(values(r, func(x result) float64 { return float64(x.P99NS) }))), fetches, vs)
		}
	}
	p("\nViews: `leases serve` (the release CLI) over a busy production of %d jobs on each store (%d completed by 4\n"+
		"workers within the hour before, %d failed, %d claimed and held, the rest waiting), %d rounds of every view after\n"+
		"one untimed round, each answer read whole over loopback HTTP. Workers: section 7's 4-worker loop timed for %g s\n"+
		"(not a count of cycles, so the page refreshes during it) on %d jobs requested before it on SQLite, %d on\n"+
		"PostgreSQL (more than it can take); \"page open\" runs `leases serve` on the same database and fetches the\n"+
		"overview and the production page every second during the timed loop (two open tabs). Page fetches: the\n"+
		"GETs answered that started within each repetition's timed loop; a \"page open\" repetition with none\n"+
		"fails, and the row is then invalid.\n",
		jobs, jobs*6/10, jobs/200, jobs/500, max(o.n(30), 3), wdur.Seconds(), sqJobs, pgJobs)
}

// webTargets adds the section's targets to the Targets table.
func webTargets(p func(string, ...any), rows []*row, jobs int) {
	for _, store := range []string{"SQLite", "PostgreSQL"} {
		r := find(rows, "web", webViewsName(store))
		if r == nil || len(r.res) == 0 {
			continue
		}
		p99 := median(values(r, func(x result) float64 { return float64(x.P99NS) })) / 1e6
		p("| status page p99 at %d jobs (every view), %s | %.2f ms (want ≤ 100 ms) | %s |\n", jobs, store, p99, met(p99 <= 100))
	}
	for _, store := range []string{"SQLite FULL", "PostgreSQL"} {
		none, open := find(rows, "web", webWorkersName(store, false)), find(rows, "web", webWorkersName(store, true))
		if none == nil || open == nil || len(none.res) == 0 || len(open.res) == 0 {
			continue
		}
		if bad := pageInvalid(open); bad != "" {
			p("| 4 workers with the page open ÷ none, %s | not measured: the \"page open\" row is invalid (%s) | |\n", store, bad)
			continue
		}
		q := ratio(rates(open), rates(none))
		p("| 4 workers with the page open ÷ none, %s | %.2f (want ≥ 0.9: the page does not slow the workers) | %s |\n",
			store, q, met(q >= 0.9))
	}
}

// pageFetches lists the page fetches of each repetition of a "page open"
// row: "8, 8, 10".
func pageFetches(r *row) string {
	var f []string
	for _, x := range r.res {
		f = append(f, strconv.Itoa(int(x.Extra["page_fetches"])))
	}
	return strings.Join(f, ", ")
}

// pageInvalid says why a "page open" row proves nothing about the page, or
// "": a repetition failed (one that fetched no page fails), or one has no
// page fetch on record. Its figures would then compare runs without the
// page, or repetitions of the two rows that do not pair up.
func pageInvalid(r *row) string {
	if len(r.errs) > 0 {
		return fmt.Sprintf("%d of %d repetitions failed: %s", len(r.errs), len(r.errs)+len(r.res), strings.Join(uniq(r.errs), "; "))
	}
	for i, x := range r.res {
		if x.Extra["page_fetches"] < 1 {
			return fmt.Sprintf("repetition %d fetched no page", i+1)
		}
	}
	return ""
}
