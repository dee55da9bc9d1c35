//go:build leasesworkers

// Built only with the leasesworkers tag: these tests drive worker programs
// (C, C++, Rust, the CLI) that make builds first (make test-race sets the tag),
// so a plain `go test ./...` leaves them out rather than skipping them.

package reliability

// The multi-language race: Go, C, Python, C++, Rust and CLI workers share one
// database, killed and restarted at random, then kill -9'd mid-call at the end.
// Their histories (schema in race_worker_test.go) are checked for
// linearizability with porcupine against the sequential lease model of
// race_model_test.go; the authority's event log is checked for the ownership
// invariants; and every byte the run left behind is scanned for the claim
// secrets (leak_test.go). The worker programs are built by make
// (mk/80-reliability.mk), which runs this file with -tags leasesworkers.

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// racePolicy is the race production's: few attempts, so jobs go dead, and
// a short backoff, so retried and lapsed jobs wait a little.
var racePolicy = core.RetryPolicy{MaxAttempts: raceMaxAttempts, BackoffBase: 2 * time.Millisecond,
	BackoffCap: 16 * time.Millisecond, JitterPercent: 20}

type raceWorker struct {
	lang string
	argv []string
	env  []string
}

func raceWorkers(t *testing.T, root string) []raceWorker {
	testLib := filepath.Join(root, "build/test/libleases.so")
	bin := filepath.Join(root, "build/reliability")
	py := os.Getenv("LEASES_REL_PYTHON")
	if py == "" {
		py = "python3"
	}
	ws := []raceWorker{
		{"go", []string{os.Args[0], "-test.run=^$"}, nil},
		{"c", []string{filepath.Join(bin, "race_worker_c")}, nil},
		{"cpp", []string{filepath.Join(bin, "race_worker_cpp")}, nil},
		{"rust", []string{filepath.Join(root, "build/rust/debug/examples/race_worker")}, nil},
		// The test library: the Python worker makes clock faults through its seam.
		{"py", []string{py, filepath.Join(root, "tests/reliability/race/worker.py")},
			[]string{"PYTHONPATH=" + filepath.Join(root, "bindings/python"), "LEASES_LIBRARY=" + testLib}},
		// The test build of the CLI: the CLI worker makes clock faults
		// through its seam (LEASES_TEST_CLOCK_OFFSET_US, per command).
		{"cli", []string{"bash", filepath.Join(root, "tests/reliability/race/cli_worker.sh")},
			[]string{"LEASES_CLI=" + filepath.Join(root, "build/test/leases")}},
	}
	for _, w := range ws {
		if w.lang == "go" || w.lang == "py" {
			continue
		}
		if w.lang == "cli" {
			_, err := os.Stat(filepath.Join(root, "build/test/leases"))
			require.NoError(t, err, "the test build of the CLI is built by make test-race")
			continue
		}
		_, err := os.Stat(w.argv[0])
		require.NoError(t, err, "the %s worker is built by make test-reliability", w.lang)
	}
	return ws
}

type raceProc struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	pg   string // the PostgreSQL URL, whose sessions of this worker must end after a kill
	app  string // the application_name of those sessions
	gone int64  // unix µs after the kill by which nothing the worker began can still take effect
}

// workerDB names a worker's PostgreSQL sessions after it and the round's
// schema (application_name), so that their end can be seen on the server.
func workerDB(t *testing.T, db, name string) (string, string) {
	if !strings.HasPrefix(db, "postgres") {
		return db, ""
	}
	u, err := url.Parse(db)
	require.NoError(t, err)
	q := u.Query()
	app := name + "@" + q.Get("search_path")
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), app
}

func startRaceWorker(t *testing.T, dir, db string, w raceWorker, name string, seed int, runMS int) *raceProc {
	out, err := os.Create(filepath.Join(dir, name+".out"))
	require.NoError(t, err)
	cmd := exec.Command(w.argv[0], w.argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	wdb, app := workerDB(t, db, name)
	cmd.Env = append(append(os.Environ(), w.env...),
		"LEASES_RACE_WORKER="+name, "LEASES_RACE_DB="+wdb,
		"LEASES_RACE_LOG="+filepath.Join(dir, name+".hist"),
		"LEASES_RACE_TOKENS="+filepath.Join(dir, "tokens", name+".tokens"),
		"LEASES_RACE_TOKEN_DIR="+filepath.Join(dir, "tokens"),
		"LEASES_RACE_SEED="+strconv.Itoa(seed), "LEASES_RACE_RUN_MS="+strconv.Itoa(runMS))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	p := &raceProc{name: name, cmd: cmd, out: out, app: app}
	if app != "" {
		p.pg = db
	}
	return p
}

// kill kills the worker's process group and waits until its calls are over:
// on SQLite when the process is dead (it commits itself); on PostgreSQL when
// the server has also ended its sessions (a COMMIT sent before the kill is
// still carried out). A call the kill cut short returns then, as "killed".
func (p *raceProc) kill(t *testing.T) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
	p.out.Close()
	waitGroupGone(t, p.cmd.Process.Pid)
	if p.pg != "" {
		pgtest.WaitSessionsEnd(t, p.pg, p.app, time.Minute)
	}
	p.gone = time.Now().UnixMicro()
}

// waitGroupGone waits until no process of group pgid runs any more: the CLI
// worker's leases child may still be finishing a system call (a write of
// its commit) when the shell has been reaped. A zombie has finished.
func waitGroupGone(t *testing.T, pgid int) {
	deadline := time.Now().Add(time.Minute)
	for {
		running := 0
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, f := range stats {
			b, err := os.ReadFile(f)
			i := strings.LastIndexByte(string(b), ')')
			if err != nil || i < 0 {
				continue // gone meanwhile
			}
			// After "pid (comm)": state, ppid, pgrp.
			if x := strings.Fields(string(b[i+1:])); len(x) > 2 && x[2] == strconv.Itoa(pgid) && x[0] != "Z" {
				running++
			}
		}
		if running == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d processes of killed group %d still run", running, pgid)
		time.Sleep(time.Millisecond)
	}
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// raceFigures accumulate over the rounds for docs/RELIABILITY.md.
type raceFigures struct {
	rounds, ops, pending, unknown, kills, jobs, checked, skewed int
}

func TestRaceOfSixLanguagesIsLinearizableAndKeepsTheInvariants(t *testing.T) {
	root := repoRoot(t)
	workers := raceWorkers(t, root)
	rounds := iterations(1, 3)
	runMS := 10000
	jobs := 500
	if soak() {
		runMS, jobs = 30000, 1500
	}
	var fig raceFigures
	for round := 0; round < rounds; round++ {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			raceRound(t, workers, round, runMS, jobs, "", &fig)
		})
	}
	t.Logf("race: %d rounds, %d operations (%d pending at a kill, %d outcome unknown), %d kills, %d jobs; linearizable, invariants hold, no secret found",
		fig.rounds, fig.ops, fig.pending, fig.unknown, fig.kills, fig.jobs)
	recordFigure(t, "race", map[string]int{"rounds": fig.rounds, "operations": fig.ops, "pending": fig.pending,
		"outcome_unknown": fig.unknown, "kills": fig.kills, "jobs": fig.jobs, "secrets_checked": fig.checked,
		"clock_faulted": fig.skewed, "lost": 0, "leaks": 0})
}

// TestRaceOfSixLanguagesOnPostgresIsLinearizableAndKeepsTheInvariants is
// the same race with the authority on PostgreSQL: every worker process opens
// the same postgres:// URL (a schema of its own on the test server).
func TestRaceOfSixLanguagesOnPostgresIsLinearizableAndKeepsTheInvariants(t *testing.T) {
	root := repoRoot(t)
	workers := raceWorkers(t, root)
	runMS, jobs := 8000, 400
	if soak() {
		runMS, jobs = 30000, 1500
	}
	var fig raceFigures
	for round := 0; round < iterations(1, 2); round++ {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			raceRound(t, workers, round, runMS, jobs, pgtest.FreshSchema(t, false), &fig)
		})
	}
	t.Logf("race on PostgreSQL: %d rounds, %d operations (%d pending at a kill, %d outcome unknown), %d kills, %d jobs; linearizable, invariants hold, no secret found",
		fig.rounds, fig.ops, fig.pending, fig.unknown, fig.kills, fig.jobs)
	recordFigure(t, "race_postgres", map[string]int{"rounds": fig.rounds, "operations": fig.ops, "pending": fig.pending,
		"outcome_unknown": fig.unknown, "kills": fig.kills, "jobs": fig.jobs, "secrets_checked": fig.checked,
		"clock_faulted": fig.skewed, "lost": 0, "leaks": 0})
}

// raceRound runs one round against db, or against a new SQLite file in the
// round's directory when db is "".
func raceRound(t *testing.T, workers []raceWorker, round, runMS, nJobs int, db string, fig *raceFigures) {
	dir := t.TempDir()
	onPG := db != ""
	if !onPG {
		db = filepath.Join(dir, "race.db")
	}
	// On PostgreSQL the store's rows are scanned for secrets as a file here.
	dumpStore := func() {
		if onPG {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "store-dump.txt"), []byte(pgtest.Dump(t, db)), 0o600))
		}
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "tokens"), 0o700))
	a, err := leases.Open(db)
	require.NoError(t, err)
	_, err = a.CreateProductionWithPolicy(raceProduction, racePolicy)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(round)))
	// A few priorities, and one job in ten due only a while into the run.
	for i := 0; i < nJobs; i++ {
		o := core.RequestOptions{Priority: rng.IntN(3)}
		if rng.IntN(10) == 0 {
			o.Delay = time.Duration(rng.IntN(runMS)) * time.Millisecond
		}
		_, err := a.RequestJobWith(raceProduction, "", []byte("payload-"+strconv.Itoa(i)), o)
		require.NoError(t, err)
	}
	initial, err := a.Jobs(raceProduction)
	require.NoError(t, err)
	require.NoError(t, a.Close())

	gen := map[string]int{}
	start := func(w raceWorker) *raceProc {
		name := fmt.Sprintf("%s%d", w.lang, gen[w.lang])
		gen[w.lang]++
		// The worker would stop by itself a little after the end; it is
		// killed before that, mid-call.
		return startRaceWorker(t, dir, db, w, name, round*100+len(gen)*10+gen[w.lang], runMS+3000)
	}
	procs := map[string]*raceProc{}
	var all []*raceProc
	for _, w := range workers {
		procs[w.lang] = start(w)
		all = append(all, procs[w.lang])
	}
	// Kill and restart the Go and Python workers at random points.
	end := time.Now().Add(time.Duration(runMS) * time.Millisecond)
	kills := 0
	for time.Now().Before(end) {
		time.Sleep(time.Duration(800+rng.IntN(1500)) * time.Millisecond)
		if !time.Now().Before(end) {
			break
		}
		w := workers[0]
		if rng.IntN(3) == 0 {
			w = workers[4]
		}
		procs[w.lang].kill(t)
		kills++
		procs[w.lang] = start(w)
		all = append(all, procs[w.lang])
	}
	for _, p := range procs {
		p.kill(t)
		kills++
	}

	hist := readRaceHistories(t, dir)
	endKilledCalls(t, hist, all)
	hist = splitCompleteNext(hist)
	tokens := readTokens(t, filepath.Join(dir, "tokens"))
	// Scan now, while the killed workers' -wal and -shm files still exist.
	dumpStore()
	checked := scanForSecrets(t, dir, tokens) // the same secrets are scanned for again after the drain

	a, err = leases.Open(db)
	require.NoError(t, err)
	defer a.Close()
	window := fifo
	if onPG {
		window = skipLockedWindow
	}
	keyedRequests(t, a, hist)
	requireClockFaultsTookEffect(t, a, hist)
	ops, pending, unknown := checkLinearizable(t, dir, hist, initial, window)
	requireEveryLanguageWorked(t, hist, workers)
	requireEveryLanguageMadeClockFaults(t, hist, workers)
	drain(t, a)
	checkEventInvariants(t, a, hist)
	c, err := a.Counts(context.Background(), raceProduction)
	require.NoError(t, err)
	t.Logf("round %d ends with %d completed, %d failed, %d dead", round, c.Completed, c.Failed, c.Dead)
	dumpListings(t, a, dir)
	dumpStore()
	scanForSecrets(t, dir, tokens)

	fig.rounds++
	fig.ops += ops
	fig.pending += pending
	fig.unknown += unknown
	fig.kills += kills
	fig.jobs += nJobs
	fig.checked += checked
	skewed := 0
	for _, o := range hist {
		if o.Skew != 0 {
			skewed++
		}
	}
	fig.skewed += skewed
	t.Logf("round %d: %d operations (%d pending, %d unknown, %d under a clock fault), %d kills, %d tokens scanned for",
		round, ops, pending, unknown, skewed, kills, len(tokens))
}

func readRaceHistories(t *testing.T, dir string) []*raceOp {
	files, err := filepath.Glob(filepath.Join(dir, "*.hist"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var all []*raceOp
	for _, f := range files {
		all = append(all, readRaceHistory(t, f)...)
	}
	return all
}

// readRaceHistory reads one history file: its calls in the order they were
// made, each with its return. A call without a return (its process was
// killed) keeps Ret at math.MaxInt64; a claim without a lease is named by
// its worker and call number.
func readRaceHistory(t *testing.T, f string) []*raceOp {
	fh, err := os.Open(f)
	require.NoError(t, err)
	defer fh.Close()
	calls := map[int]*raceOp{}
	var order []int
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var x raceLine
		if json.Unmarshal(sc.Bytes(), &x) != nil {
			continue // the line a kill tore
		}
		switch x.Ev {
		case "call":
			calls[x.N] = &raceOp{W: x.W, N: x.N, Op: x.Op, Lease: x.Lease, Job: x.Job, DurUS: x.DurUS,
				Call: x.T, Ret: math.MaxInt64, Key: x.Key, Prio: x.Prio, RunAt: x.RunAt, State: x.State, Skew: x.Skew}
			order = append(order, x.N)
		case "ret":
			c := calls[x.N]
			require.NotNil(t, c, "%s: a return without its call: %s", f, sc.Text())
			c.Ret, c.Kind, c.RJob, c.Expiry, c.Msg = x.T, x.Kind, x.Job, x.Expiry, x.Msg
			require.LessOrEqual(t, c.Call, c.Ret, "%s: returned before it was called", f)
		}
	}
	var out []*raceOp
	for _, n := range order {
		c := calls[n]
		if isClaim(c.Op) && c.Lease == "" {
			c.Lease = c.W + ":" + strconv.Itoa(c.N)
		}
		out = append(out, c)
	}
	return out
}

// keyedRequests names the job of each request whose outcome is unknown by
// its key: a job with the key exists when the request happened (no
// job: it did not, and it is in no job's partition).
func keyedRequests(t *testing.T, a *core.Authority, hist []*raceOp) {
	js, err := a.Jobs(raceProduction)
	require.NoError(t, err)
	byKey := map[string]string{}
	for _, j := range js {
		byKey[j.Key] = j.ID
	}
	for _, o := range hist {
		if o.Op == "request" && o.RJob == "" && unknownOutcome(o) {
			o.RJob = byKey[o.Key]
		}
		if o.Op == "request" && o.Kind == "ok" {
			require.Equal(t, byKey[o.Key], o.RJob, "the request with key %s", o.Key)
		}
	}
}

// requireClockFaultsTookEffect: a worker's clock faults reach its
// authority, or the history's skews describe a clock that never was. Each
// request a worker sampled a day ahead is recorded no earlier than its call
// on that clock (a worker whose seam took a truncated clock recorded the
// mark instead, and its guarded calls all read clock_regressed).
func requireClockFaultsTookEffect(t *testing.T, a *core.Authority, hist []*raceOp) {
	for _, o := range hist {
		if o.Op != "request" || o.Kind != "ok" || o.Skew < time.Hour.Microseconds() {
			continue
		}
		j, err := a.JobDetail(context.Background(), raceProduction, o.RJob)
		require.NoError(t, err)
		require.GreaterOrEqual(t, j.RequestedAt.UnixMicro(), o.from(),
			"%s's request %d was sampled %s ahead but recorded at %s: its clock fault did not reach its authority",
			o.W, o.N, time.Duration(o.Skew)*time.Microsecond, j.RequestedAt)
	}
}

// requireEveryLanguageMadeClockFaults: in a test build (the seams, unless
// LEASES_RACE_CLOCK_FAULTS=0) every language's worker makes clock faults, the
// CLI's included (through the test build of the CLI): some of its calls ran
// on a clock off the wall clock, and its history says so.
func requireEveryLanguageMadeClockFaults(t *testing.T, hist []*raceOp, workers []raceWorker) {
	if raceSetClock == nil || os.Getenv("LEASES_RACE_CLOCK_FAULTS") == "0" {
		return
	}
	skewed := map[string]int{}
	for _, o := range hist {
		if o.Skew != 0 {
			skewed[strings.TrimRight(o.W, "0123456789")]++
		}
	}
	for _, w := range workers {
		require.Positive(t, skewed[w.lang], "the %s worker made no clock fault", w.lang)
	}
}

// TestTheReleaseCLIHasNoClockSeam: the clock seam of the CLI is in its test
// build only. The release build/leases was not built with the leasestest
// tag and knows no LEASES_TEST_CLOCK variable; the test build (which the
// race's CLI worker runs) knows it, so the check can tell the two apart.
func TestTheReleaseCLIHasNoClockSeam(t *testing.T) {
	root := repoRoot(t)
	const seam = "LEASES_TEST_CLOCK"
	tags := func(path string) string {
		bi, err := buildinfo.ReadFile(path)
		require.NoError(t, err, "%s is built by make test-race", path)
		for _, s := range bi.Settings {
			if s.Key == "-tags" {
				return s.Value
			}
		}
		return ""
	}
	release := filepath.Join(root, "build/leases")
	require.NotContains(t, strings.Split(tags(release), ","), "leasestest", "the release CLI was built with the test seams")
	b, err := os.ReadFile(release)
	require.NoError(t, err)
	require.False(t, bytes.Contains(b, []byte(seam)), "the release CLI names %s: it has a clock seam", seam)

	test := filepath.Join(root, "build/test/leases")
	require.Contains(t, strings.Split(tags(test), ","), "leasestest")
	b, err = os.ReadFile(test)
	require.NoError(t, err)
	require.True(t, bytes.Contains(b, []byte(seam)), "the test build of the CLI does not name %s", seam)
}

// endKilledCalls gives each call a kill cut short (a call without a return)
// its return: when its worker was gone.
func endKilledCalls(t *testing.T, hist []*raceOp, procs []*raceProc) {
	gone := map[string]int64{}
	for _, p := range procs {
		gone[p.name] = p.gone
	}
	for _, o := range hist {
		if o.Ret == math.MaxInt64 {
			require.Contains(t, gone, o.W)
			require.LessOrEqual(t, o.Call, gone[o.W])
			o.Ret, o.Kind = gone[o.W], "killed"
		}
	}
}

func readTokens(t *testing.T, dir string) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "lt1.") {
				if _, err := core.DecodeToken(line); err == nil {
					out = append(out, line)
				}
			}
		}
	}
	require.NotEmpty(t, out, "the workers exported tokens")
	return out
}

// drain finishes every job the workers left: claims whatever is claimable
// (waiting out the killed workers' expiries) and completes it, and cancels
// the jobs requested on a clock a day ahead.
func drain(t *testing.T, a *core.Authority) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l, err := a.Claim(raceProduction, "drain", 5*time.Second)
		if err == nil {
			require.NoError(t, l.Complete(core.Facts{Metadata: map[string]json.RawMessage{
				"by": json.RawMessage(`"drain"`), "lease": json.RawMessage(`"drain"`)}}))
			continue
		}
		require.ErrorIs(t, err, core.ErrNothingToClaim)
		js, err := a.Jobs(raceProduction)
		require.NoError(t, err)
		open := 0
		for _, j := range js {
			if j.State == core.StateRequested && time.Until(j.ClaimableAt) > time.Minute {
				// Requested on a clock a day ahead: not claimable in this run.
				require.NoError(t, a.Cancel(raceProduction, j.ID))
				continue
			}
			if j.State == core.StateClaimed || j.State == core.StateRequested {
				open++
			}
		}
		if open == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the drain did not finish every job")
}

// checkEventInvariants reads the event log after the drain: every job ends in
// exactly one terminal state; no two live ownerships of a job overlap;
// renewals and terminal transitions come from the owner before its expiry;
// completion facts come from the lease that was current at commit.
func checkEventInvariants(t *testing.T, a *core.Authority, hist []*raceOp) {
	labels := map[string]string{} // job|worker|expiry of an acknowledged claim -> lease label
	for _, o := range hist {
		if isClaim(o.Op) && o.Kind == "ok" {
			labels[fmt.Sprintf("%s|%s|%d", o.RJob, o.W, o.Expiry)] = o.Lease
		}
	}
	evs, err := a.Events(raceProduction, 0)
	require.NoError(t, err)
	type owner struct {
		worker, label, endedBy string
		exp, end               int64
		live                   bool
	}
	cur := map[string]*owner{}
	terminal := map[string]int{}
	for _, e := range evs {
		if e.JobID == "" {
			continue
		}
		at := e.At.UnixMicro()
		o := cur[e.JobID]
		switch e.Kind {
		case "claimed":
			if o != nil {
				require.False(t, o.live && at < o.exp, "job %s claimed at %d by %s while %s owned it until %d", e.JobID, at, e.Worker, o.worker, o.exp)
				require.GreaterOrEqual(t, at, o.end, "job %s claimed by %s before the previous ownership ended (%s by %s)", e.JobID, e.Worker, o.endedBy, o.worker)
				require.Zero(t, terminal[e.JobID], "job %s claimed after it finished", e.JobID)
			}
			exp := e.Expiry.UnixMicro()
			cur[e.JobID] = &owner{worker: e.Worker, exp: exp, live: true,
				label: labels[fmt.Sprintf("%s|%s|%d", e.JobID, e.Worker, exp)]}
		case "renewed":
			require.True(t, o != nil && o.live && o.worker == e.Worker && at < o.exp, "job %s renewed by %s, not the live owner: %+v", e.JobID, e.Worker, o)
			o.exp = e.Expiry.UnixMicro()
		case "dead":
			// After the end of the last attempt (released, retry or
			// claim_expired), in the same transaction.
			require.True(t, o != nil && !o.live, "job %s dead while owned: %+v", e.JobID, o)
			terminal[e.JobID]++
		case "released", "retry", "failed", "completed":
			require.True(t, o != nil && o.live && o.worker == e.Worker && at < o.exp, "job %s %s by %s at %d, not the live owner: %+v", e.JobID, e.Kind, e.Worker, at, o)
			o.live, o.end, o.endedBy = false, at, e.Kind
			if e.Kind == "released" || e.Kind == "retry" {
				continue
			}
			terminal[e.JobID]++
			if e.Kind == "completed" {
				f, err := a.FactsOf(raceProduction, e.JobID)
				require.NoError(t, err)
				var by, label string
				require.NoError(t, json.Unmarshal(f.Metadata["by"], &by))
				require.NoError(t, json.Unmarshal(f.Metadata["lease"], &label))
				require.Equal(t, o.worker, by, "job %s: facts from another worker than the current owner", e.JobID)
				if by != "drain" {
					require.Equal(t, o.label, label, "job %s: facts from another lease than the one current at commit", e.JobID)
				}
			}
		case "claim_expired":
			require.True(t, o != nil && o.live && at >= o.exp, "job %s: claim_expired before the expiry: %+v at %d", e.JobID, o, at)
			o.live, o.end, o.endedBy = false, o.exp, e.Kind
		case "cancelled":
			// The coordinator's: it ends whatever claim is live. A cancel
			// is unguarded: it records its sample, which on a clock ahead
			// (a clock fault) may be later than the sample of a claim
			// after it (docs/CLOCK.md), so only the log's order says it
			// ended the ownership, and its time bounds no later claim.
			require.Zero(t, terminal[e.JobID], "job %s cancelled after it finished", e.JobID)
			if o != nil && o.live {
				o.live = false
			}
			terminal[e.JobID]++
		case "redriven":
			// Back from failed, dead or cancelled: its end is undone.
			require.Equal(t, 1, terminal[e.JobID], "job %s redriven while not finished", e.JobID)
			terminal[e.JobID]--
		}
	}
	js, err := a.Jobs(raceProduction)
	require.NoError(t, err)
	for _, j := range js {
		require.Contains(t, []string{core.StateCompleted, core.StateFailed, core.StateDead, core.StateCancelled}, j.State, "job %s ends %s", j.ID, j.State)
		require.Equal(t, 1, terminal[j.ID], "job %s has %d terminal events", j.ID, terminal[j.ID])
	}
}

func dumpListings(t *testing.T, a *core.Authority, dir string) {
	js, err := a.Jobs(raceProduction)
	require.NoError(t, err)
	evs, err := a.Events("", 0)
	require.NoError(t, err)
	b, err := json.Marshal(map[string]any{"jobs": js, "events": evs})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "listings.json"), b, 0o600))
}

// checkLinearizable checks the history against the lease model, per job and
// the claim order apart (race_check_test.go), so that porcupine always
// decides. initial is every job at its request, in request order. A failed
// check keeps the histories, history.json (replay it with
// LEASES_RACE_REPLAY, race_check_unit_test.go) and the visualization.
func checkLinearizable(t *testing.T, dir string, hist []*raceOp, initial []core.Job, window int) (ops, pending, unknown int) {
	k := keptHistory{Window: window, MaxAttempts: raceMaxAttempts, Ops: hist, Backoff: raceBackoff{
		BaseUS: racePolicy.BackoffBase.Microseconds(), CapUS: racePolicy.BackoffCap.Microseconds(), Jitter: racePolicy.JitterPercent}}
	for _, j := range initial {
		k.Order = append(k.Order, j.ID)
		k.Jobs = append(k.Jobs, keptJob{Priority: j.Priority, ClaimableUS: j.ClaimableAt.UnixMicro()})
	}
	bornExpired := 0
	for _, o := range hist {
		if isClaim(o.Op) && o.Kind == "expired" {
			bornExpired++
		}
		switch {
		case o.Kind == "killed":
			pending++
		case raceUnknown[o.Kind]:
			unknown++
		default:
			require.True(t, simAnswer(o), "%s %s returned %q: %s", o.W, o.Op, o.Kind, o.Msg)
		}
	}
	start := time.Now()
	c := checkRaceHistory(k, raceCheckTimeout)
	took := time.Since(start)
	if c.Result != porcupine.Ok {
		kept := filepath.Join(os.TempDir(), fmt.Sprintf("leases-race-%d", time.Now().UnixNano()))
		require.NoError(t, k.save(filepath.Join(dir, "history.json")))
		exec.Command("cp", "-r", dir, kept).Run()
		if c.Order == nil {
			if err := porcupine.VisualizePath(c.Model, c.Info, filepath.Join(kept, "porcupine.html")); err == nil {
				t.Logf("porcupine visualization: %s", filepath.Join(kept, "porcupine.html"))
			}
		}
		t.Fatalf("the history of %d operations is %s against the lease model (%v; histories kept in %s)", len(hist), c.Result, c.Order, kept)
	}
	t.Logf("lease model: %d operations checked in %s (%d partitions, the largest %d operations); a claim passed over at most %d claimable jobs (window %d); %d claims born expired",
		len(hist), took.Round(time.Millisecond), c.Partitions, c.MaxPartition, c.MaxPassed, window, bornExpired)
	return len(hist), pending, unknown
}

// requireEveryLanguageWorked: each language acknowledged claims and
// completions and made coordinator calls, so the race really mixed them.
func requireEveryLanguageWorked(t *testing.T, hist []*raceOp, workers []raceWorker) {
	done := map[string]map[string]int{}
	coordinated := map[string]int{}
	for _, o := range hist {
		lang := strings.TrimRight(o.W, "0123456789")
		if isCoordinator(o.Op) || o.Op == "redrive" {
			coordinated[lang]++
		}
		if done[lang] == nil {
			done[lang] = map[string]int{}
		}
		if o.Kind == "ok" && o.Next {
			done[lang]["complete_next"]++ // the completion of one; its claim counts as a claim
		} else if o.Kind == "ok" {
			done[lang][o.Op]++
		} else if o.Kind != "" {
			done[lang][o.Kind]++
		}
	}
	for _, w := range workers {
		require.Positive(t, done[w.lang]["claim"], "the %s worker claimed nothing: %v", w.lang, done[w.lang])
		require.Positive(t, done[w.lang]["complete"], "the %s worker completed nothing: %v", w.lang, done[w.lang])
		if w.lang == "go" {
			require.Positive(t, done[w.lang]["complete_next"], "the Go worker never completed and claimed in one commit: %v", done[w.lang])
		}
		require.Positive(t, coordinated[w.lang], "the %s worker made no coordinator call (request, cancel, retry_job, redrive)", w.lang)
		t.Logf("%s: %v", w.lang, done[w.lang])
	}
}

// simAnswer reports whether o's answer is one the lease model decides:
// success or a rule's verdict, among them the invalid_duration of a
// complete_next's completion half whose claim would have been born expired
// (the lease still holds). The race and the simulation both ask it.
func simAnswer(o *raceOp) bool {
	return o.Kind == "ok" || raceRejections[o.Kind] || (o.Kind == "invalid_duration" && o.Next)
}
