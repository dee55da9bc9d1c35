//go:build browser

// The status page in a real browser (Debian's Chromium, headless, driven by
// chromedp): navigation, live updates while a worker process completes a
// job, filters, the pause control, the cancel form, and hostile data that
// must render as text. Built only with the browser tag: make test-web
// installs Chromium first and runs it, so go test ./... leaves it out
// rather than skipping it.

package web

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"net/url"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// chromium is Debian's package (make test-web installs it).
const chromium = "/usr/bin/chromium"

// hostile holds markup and script in every form a page could mishandle:
// each, if it ever ran, sets window.__pwned.
const hostile = `<script>window.__pwned=1</script>"'><img src=x onerror="window.__pwned=1"></title>` +
	`<a href="javascript:window.__pwned=1">x</a> javascript:window.__pwned=1`

// cspWatch runs before any page script: it records every Content-Security-
// Policy violation, so a blocked injection shows as clearly as one that ran.
const cspWatch = `window.__csp = []; document.addEventListener("securitypolicyviolation",
  e => window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || "")));`

// TestMain lets the test binary act as a worker process (see workerProcess).
func TestMain(m *testing.M) {
	if os.Getenv("LEASES_WEB_WORKER") != "" {
		os.Exit(workerProcess())
	}
	os.Exit(m.Run())
}

// workerProcess claims one job, says so on stdout, and completes it when
// its stdin closes: a real worker in a process of its own.
func workerProcess() int {
	loc, production, id := os.Getenv("LEASES_WEB_DB"), os.Getenv("LEASES_WEB_PRODUCTION"), os.Getenv("LEASES_WEB_JOB")
	a, err := leases.Open(loc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer a.Close()
	l, err := a.ClaimJob(production, id, "worker-process", time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("claimed")
	var b [1]byte
	os.Stdin.Read(b[:])
	f, _ := core.ParseFacts(`{"metadata":{"frames":240}}`)
	if err := l.Complete(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("completed")
	return 0
}

// startWorker starts workerProcess on job id and waits for its claim. The
// returned function lets it complete and waits for it to exit.
func startWorker(t *testing.T, location, production, id string) func() {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "LEASES_WEB_WORKER=1", "LEASES_WEB_DB="+location,
		"LEASES_WEB_PRODUCTION="+production, "LEASES_WEB_JOB="+id)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var line [8]byte
	n, _ := out.Read(line[:])
	require.Equal(t, "claimed\n", string(line[:n]), "the worker process did not claim")
	return func() {
		stdin.Close()
		rest := make([]byte, 64)
		n, _ := out.Read(rest)
		require.NoError(t, cmd.Wait())
		require.Equal(t, "completed\n", string(rest[:n]))
	}
}

// browser starts the one Chromium session of the suite.
func browser(t *testing.T) context.Context {
	t.Helper()
	_, err := os.Stat(chromium)
	require.NoError(t, err, "Chromium is missing: make test-web installs Debian's chromium")
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

// tab opens a tab of the session that records CSP violations on every page.
func tab(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelT)
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatch})
	require.NoError(t, err)
	return ctx
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// screenshot saves the page under build/web/ as a test artefact.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	dir := filepath.Join("..", "build", "web")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	return path
}

// textOf is the rendered text of the first element matching sel, read in
// one task of the page (a live update may swap the element between a
// protocol-level query and its read).
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return run(t, ctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`) || {innerText: "(missing)"}).innerText`))
}

// waitFor polls a JavaScript predicate on the open page (never reloading
// it), which must come to hold eventually: it fails only after
// testwait.EventuallyBound, which a loaded or stalled CI host does not reach.
// An evaluation that fails because the page is navigating counts as false:
// the next one runs in the new document.
func waitFor(t *testing.T, ctx context.Context, predicate string) {
	t.Helper()
	within := testwait.EventuallyBound
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("Boolean("+predicate+")"))
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: not true after %s (last error: %v)", predicate, within, last)
}

// clickAndLoad clicks the first element matching sel and waits for the page it leads to: a new
// document (the mark on this one gone), fully loaded.
func clickAndLoad(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	// Clicked from inside the page, in one task: a live update may swap
	// the element between a protocol-level query and its click.
	run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.__leaving = true; document.querySelector(`+strconv.Quote(sel)+`).click()`))
	waitFor(t, ctx, `window.__leaving === undefined && document.readyState === "complete"`)
}

// demo fills a store the way a small farm looks mid-run: two productions,
// workers holding claims, completions, a failure, a lapsed claim.
func demo(t *testing.T, st *site) (render, ingest []string) {
	t.Helper()
	for _, p := range []string{"render-nightly", "ingest"} {
		_, err := st.writer.CreateProduction(p)
		require.NoError(t, err)
	}
	for i := 0; i < 40; i++ {
		id, err := st.writer.RequestJob("render-nightly", fmt.Sprintf("shot-%03d", i), []byte(fmt.Sprintf(`{"shot":%d}`, i)))
		require.NoError(t, err)
		render = append(render, id)
	}
	for i := 0; i < 12; i++ {
		id, err := st.writer.RequestJob("ingest", fmt.Sprintf("batch-%02d", i), []byte("rows"))
		require.NoError(t, err)
		ingest = append(ingest, id)
	}
	f, err := core.ParseFacts(`{"metadata":{"frames":240},"provenance":{"renderer":"cycles 4.2"}}`)
	require.NoError(t, err)
	for i := 0; i < 14; i++ {
		l, err := st.writer.Claim("render-nightly", fmt.Sprintf("gpu-%d", i%4), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(f))
	}
	l, err := st.writer.Claim("render-nightly", "gpu-2", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Fail("out of GPU memory"))
	for i := 0; i < 4; i++ {
		_, err := st.writer.Claim("render-nightly", fmt.Sprintf("gpu-%d", i), 10*time.Minute)
		require.NoError(t, err)
	}
	for i := 0; i < 5; i++ {
		l, err := st.writer.Claim("ingest", "etl-1", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(core.Facts{}))
	}
	_, err = st.writer.Claim("ingest", "etl-2", time.Minute)
	require.NoError(t, err)
	return render, ingest
}

// noScriptRan checks the open page: no injected script ran, no inline
// handler or script reached the document, no CSP violation was reported.
func noScriptRan(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	pwned := run(t, ctx, chromedp.Evaluate[string](`typeof window.__pwned`))
	require.Equal(t, "undefined", pwned, "%s: an injected script ran", where)
	csp := run(t, ctx, chromedp.Evaluate[[]string](`window.__csp`))
	require.Empty(t, csp, "%s: Content-Security-Policy violations (injected markup reached the page)", where)
	scripts := run(t, ctx, chromedp.Evaluate[[]string](`[...document.scripts].map(s => s.src)`))
	require.Len(t, scripts, 1, "%s: only /static/app.js is a script", where)
	require.True(t, strings.HasSuffix(scripts[0], "/static/app.js"), where)
	handlers := run(t, ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("*")].filter(el =>
	  [...el.attributes].some(a => a.name.startsWith("on") || /^\s*javascript:/i.test(a.value))).length`))
	require.Zero(t, handlers, "%s: an element carries an event handler or a javascript: URL", where)
}

func TestStatusPageInARealBrowser(t *testing.T) {
	b := browser(t)
	eachStore(t, func(t *testing.T, location string) {
		store := "sqlite"
		if strings.HasPrefix(location, "postgres") {
			store = "postgres"
		}
		st := newSite(t, location, Config{AllowActions: true, Refresh: 300 * time.Millisecond})
		render, _ := demo(t, st)
		ctx := tab(t, b)

		t.Run("OverviewThenAProductionThenAJob", func(t *testing.T) {
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/"), chromedp.WaitVisible(".production-link"))
			noScriptRan(t, ctx, "overview")
			shot := screenshot(t, ctx, "overview-"+store)
			if store == "sqlite" && os.Getenv("LEASES_WEB_SCREENSHOT") != "" {
				png, err := os.ReadFile(shot)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(os.Getenv("LEASES_WEB_SCREENSHOT"), png, 0o644))
			}
			text := textOf(t, ctx, "main")
			require.Contains(t, text, "render-nightly")
			require.Contains(t, text, "gpu-3")
			require.Contains(t, textOf(t, ctx, "#clock"), "high-water mark")
			clickAndLoad(t, ctx, `a.production-link[href="/production?name=render-nightly"]`)
			require.Equal(t, "render-nightly", textOf(t, ctx, "#production-name"))
			require.Equal(t, 40, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.job").length`)))
			noScriptRan(t, ctx, "production")
			screenshot(t, ctx, "production-"+store)
			clickAndLoad(t, ctx, `tr.job.st-completed a.job-link`)
			require.Equal(t, "completed", textOf(t, ctx, "#job-state"))
			require.Contains(t, textOf(t, ctx, "#provenance"), "cycles 4.2")
			noScriptRan(t, ctx, "job")
			screenshot(t, ctx, "job-"+store)
		})

		t.Run("AFilterAndASearch", func(t *testing.T) {
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly"), chromedp.WaitVisible("#apply"),
				chromedp.Click(`input[name=state][value=claimed]`))
			clickAndLoad(t, ctx, "#apply")
			states := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.state")].map(td => td.textContent)`))
			require.Equal(t, []string{"claimed", "claimed", "claimed", "claimed"}, states)
			require.Contains(t, run(t, ctx, chromedp.Location()), "state=claimed")
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly"), chromedp.WaitVisible("#search"),
				chromedp.SendKeys("#search", "shot-031"))
			clickAndLoad(t, ctx, "#apply")
			keys := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.key")].map(td => td.textContent)`))
			require.Equal(t, []string{"shot-031"}, keys)
			// A key prefix lists the jobs whose key starts with it, in key
			// order, and pages on with the search kept.
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly"), chromedp.WaitVisible("#search"),
				chromedp.SendKeys("#search", "shot-01"))
			clickAndLoad(t, ctx, "#apply")
			keys = run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.key")].map(td => td.textContent)`))
			require.Equal(t, []string{"shot-010", "shot-011", "shot-012", "shot-013", "shot-014", "shot-015", "shot-016",
				"shot-017", "shot-018", "shot-019"}, keys)
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly&q=shot-01&limit=6"), chromedp.WaitVisible("#next-page"))
			keys = run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.key")].map(td => td.textContent)`))
			require.Equal(t, []string{"shot-010", "shot-011", "shot-012", "shot-013", "shot-014", "shot-015"}, keys)
			clickAndLoad(t, ctx, "#next-page")
			keys = run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.key")].map(td => td.textContent)`))
			require.Equal(t, []string{"shot-016", "shot-017", "shot-018", "shot-019"}, keys)
			clickAndLoad(t, ctx, "#prev-page")
			keys = run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.key")].map(td => td.textContent)`))
			require.Equal(t, []string{"shot-010", "shot-011", "shot-012", "shot-013", "shot-014", "shot-015"}, keys)
			// The 8 characters of an id a person copies find its job.
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly"), chromedp.WaitVisible("#search"),
				chromedp.SendKeys("#search", render[12][:8]))
			clickAndLoad(t, ctx, "#apply")
			found := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job a.job-link")].map(a => a.textContent)`))
			require.Equal(t, []string{render[12]}, found)
			screenshot(t, ctx, "filter-"+store)
		})

		t.Run("AFinishedJobsClaimIsHistoryAndTheJobsPageBack", func(t *testing.T) {
			jobIDs := `[...document.querySelectorAll("tr.job a.job-link")].map(a => a.textContent)`
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly&limit=15"), chromedp.WaitVisible("#next-page"))
			first := run(t, ctx, chromedp.Evaluate[[]string](jobIDs))
			require.Len(t, first, 15)
			require.Zero(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#prev-page").length`)))
			// A completed row: its end instead of an expiry, how long it waited and ran.
			row := `tr.job.st-completed`
			require.Contains(t, textOf(t, ctx, row+" td.ended"), "completed")
			require.NotEmpty(t, textOf(t, ctx, row+" td.waited"))
			require.NotEmpty(t, textOf(t, ctx, row+" td.ran"))
			clickAndLoad(t, ctx, "#next-page")
			second := run(t, ctx, chromedp.Evaluate[[]string](jobIDs))
			require.Len(t, second, 15)
			require.NotEqual(t, first, second)
			clickAndLoad(t, ctx, "#prev-page")
			require.Equal(t, first, run(t, ctx, chromedp.Evaluate[[]string](jobIDs)), "back to the first page")
			// The job's page: its last claim as history, no expiry.
			clickAndLoad(t, ctx, row+" a.job-link")
			require.Equal(t, "completed", textOf(t, ctx, "#job-state"))
			claim := textOf(t, ctx, "#final-claim")
			require.Regexp(t, `held by gpu-\d from .* to .*ended: completed`, claim)
			require.NotEqual(t, "—", textOf(t, ctx, "#job-waited"))
			require.Contains(t, textOf(t, ctx, "#job-ran"), "claim to its end")
			require.Zero(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#job-expiry").length`)))
			noScriptRan(t, ctx, "finished job")
			screenshot(t, ctx, "finished-"+store)
			// A worker's name in the list filters the jobs by it.
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/production?name=render-nightly"), chromedp.WaitVisible("a.worker-link"))
			clickAndLoad(t, ctx, `tr.job.st-completed a.worker-link[href$="worker=gpu-1"]`)
			require.Equal(t, "gpu-1", textOf(t, ctx, "#filter-worker"))
			workers := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.job td.worker")].map(td => td.textContent)`))
			require.NotEmpty(t, workers)
			for _, w := range workers {
				require.Equal(t, "gpu-1", w)
			}
			require.Equal(t, "gpu-1", run(t, ctx, chromedp.Evaluate[string](`document.getElementById("worker-filter").value`)))
		})

		t.Run("AJobChangesStateWithoutReloadWhileAWorkerCompletesIt", func(t *testing.T) {
			id := render[30]
			complete := startWorker(t, location, "render-nightly", id)
			do(t, ctx, chromedp.Navigate(st.srv.URL+jobPath("render-nightly", id)), chromedp.WaitVisible("#job-state"))
			require.Equal(t, "claimed", textOf(t, ctx, "#job-state"))
			require.Equal(t, "worker-process", textOf(t, ctx, "#job-worker"))
			// A mark on this document: a reload would lose it.
			run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
			complete()
			waitFor(t, ctx, `document.getElementById("job-state").textContent === "completed"`)
			require.True(t, run(t, ctx, chromedp.Evaluate[bool](`window.__sameDocument === true`)), "the page was reloaded")
			require.Contains(t, textOf(t, ctx, "#metadata"), "240")
			screenshot(t, ctx, "live-"+store)
		})

		t.Run("ThePauseControlStopsUpdates", func(t *testing.T) {
			do(t, ctx, chromedp.Navigate(st.srv.URL+"/events"), chromedp.WaitVisible("#pause"), chromedp.Click("#pause"))
			require.Equal(t, "paused", textOf(t, ctx, "#live-status"))
			newest := run(t, ctx, chromedp.Evaluate[string](`document.querySelector("tr.event").dataset.seq`))
			id, err := st.writer.RequestJob("ingest", "while-paused", nil)
			require.NoError(t, err)
			time.Sleep(1500 * time.Millisecond) // five update periods
			require.Equal(t, newest, run(t, ctx, chromedp.Evaluate[string](`document.querySelector("tr.event").dataset.seq`)),
				"the page updated while paused")
			do(t, ctx, chromedp.Click("#pause"))
			waitFor(t, ctx, `document.querySelector("tr.event").textContent.includes("`+id+`")`)
			require.Contains(t, textOf(t, ctx, "#live-status"), "live")
			// Paused stays paused across pages of this tab, then resumes.
			do(t, ctx, chromedp.Click("#pause"), chromedp.Navigate(st.srv.URL+"/"), chromedp.WaitVisible("#pause"))
			waitFor(t, ctx, `document.getElementById("live-status").textContent !== ""`)
			require.Equal(t, "paused", textOf(t, ctx, "#live-status"))
			do(t, ctx, chromedp.Click("#pause"))
		})

		t.Run("CancelAJobThroughTheForm", func(t *testing.T) {
			id := render[39]
			do(t, ctx, chromedp.Navigate(st.srv.URL+jobPath("render-nightly", id)), chromedp.WaitVisible("#cancel-job"))
			require.Equal(t, "requested", textOf(t, ctx, "#job-state"))
			// The form asks first; the test answers yes.
			run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
			clickAndLoad(t, ctx, "#cancel-job")
			require.Equal(t, "cancelled", textOf(t, ctx, "#job-state"))
			require.Equal(t, "The job was cancelled.", textOf(t, ctx, "#notice"))
			rec, err := st.writer.JobDetail(context.Background(), "render-nightly", id)
			require.NoError(t, err)
			require.Equal(t, core.StateCancelled, rec.State)
			require.Zero(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#cancel-job").length`)),
				"a cancelled job offers no cancel")
			screenshot(t, ctx, "cancelled-"+store)
		})

		t.Run("RedriveADeadJobThroughTheForm", func(t *testing.T) {
			_, err := st.writer.CreateProductionWithPolicy("flaky", core.RetryPolicy{MaxAttempts: 1})
			require.NoError(t, err)
			id, err := st.writer.RequestJob("flaky", "once", nil)
			require.NoError(t, err)
			l, err := st.writer.ClaimJob("flaky", id, "gpu-9", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.FailRetry("driver crashed", 0))
			do(t, ctx, chromedp.Navigate(st.srv.URL+jobPath("flaky", id)), chromedp.WaitVisible("#redrive-job"))
			require.Equal(t, "dead", textOf(t, ctx, "#job-state"))
			require.Contains(t, textOf(t, ctx, "#history"), "driver crashed")
			screenshot(t, ctx, "dead-"+store)
			run(t, ctx, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
			clickAndLoad(t, ctx, "#redrive-job")
			require.Equal(t, "requested", textOf(t, ctx, "#job-state"))
			require.Contains(t, textOf(t, ctx, "#notice"), "redriven")
			require.Equal(t, core.StateRequested, jobState(t, st, "flaky", id))
		})

		// Control and direction-override characters show escaped in the
		// real page: a U+202E does not make the reason read reversed.
		t.Run("ControlAndDirectionCharactersShowEscaped", func(t *testing.T) {
			_, err := st.writer.CreateProduction("sneaky")
			require.NoError(t, err)
			id, err := st.writer.RequestJob("sneaky", "k", nil)
			require.NoError(t, err)
			l, err := st.writer.ClaimJob("sneaky", id, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Fail(sneaky))
			for _, c := range []struct{ path, sel string }{
				{jobPath("sneaky", id), "#job-reason"},
				{jobPath("sneaky", id), "#history td.reason"},
				{"/production?name=sneaky", "tr.job td.reason"},
			} {
				do(t, ctx, chromedp.Navigate(st.srv.URL+c.path), chromedp.WaitVisible("main"))
				require.Equal(t, sneakyShown, textOf(t, ctx, c.sel), "%s %s", c.path, c.sel)
				shown := textOf(t, ctx, "body")
				for _, raw := range rawControls {
					require.NotContains(t, shown, raw, "%s shows %U raw", c.path, []rune(raw)[0])
				}
			}
			screenshot(t, ctx, "escaped-"+store)
		})

		t.Run("HostileDataRendersAsText", func(t *testing.T) {
			p := "x" + hostile
			_, err := st.writer.CreateProduction(p)
			require.NoError(t, err)
			id, err := st.writer.RequestJob(p, hostile, []byte(hostile))
			require.NoError(t, err)
			l, err := st.writer.Claim(p, hostile, time.Minute)
			require.NoError(t, err)
			require.Equal(t, id, l.JobID())
			require.NoError(t, l.Fail(hostile))
			id2, err := st.writer.RequestJob(p, "k2", nil)
			require.NoError(t, err)
			l, err = st.writer.ClaimJob(p, id2, "w", time.Minute)
			require.NoError(t, err)
			f, err := core.ParseFacts(fmt.Sprintf(`{"metadata":{%q:%q},"provenance":{"tool":%q}}`, "k", hostile, hostile))
			require.NoError(t, err)
			require.NoError(t, l.Complete(f))
			for _, path := range []string{"/", "/production?name=" + url.QueryEscape(p), jobPath(p, id), jobPath(p, id2),
				"/events", "/events?production=" + url.QueryEscape(p)} {
				do(t, ctx, chromedp.Navigate(st.srv.URL+path), chromedp.WaitVisible("main"))
				// Across a few live updates too: they swap in fresh markup.
				time.Sleep(700 * time.Millisecond)
				noScriptRan(t, ctx, path)
				require.Contains(t, textOf(t, ctx, "body"), `<script>window.__pwned=1</script>`,
					"%s: the hostile text is shown as text", path)
			}
			do(t, ctx, chromedp.Navigate(st.srv.URL+jobPath(p, id)), chromedp.WaitVisible("#payload"))
			require.Equal(t, hostile, textOf(t, ctx, "#payload"))
			require.Equal(t, hostile, textOf(t, ctx, "#job-reason"))
			require.Equal(t, hostile, textOf(t, ctx, "#job-key"))
			screenshot(t, ctx, "hostile-"+store)
			// The watch must see an injection, or its silence proves nothing.
			run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.body.insertAdjacentHTML("beforeend",
			  '<img src="/nope" onerror="window.__pwned=1">')`))
			waitFor(t, ctx, `window.__csp.length > 0`)
			require.Equal(t, "undefined", run(t, ctx, chromedp.Evaluate[string](`typeof window.__pwned`)))
		})
	})
}
