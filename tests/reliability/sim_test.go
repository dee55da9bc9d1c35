//go:build leasesworkers && leasestest

// Built only with both tags: the simulation drives the authority's clock
// through the test seam (core.SetClockForTest) and injects store faults
// through another (core.InjectCommitFaultsForTest), both present only in
// builds with the leasestest tag. make test-sim and make soak set them.

package reliability

// The seeded simulation. One seed fixes a schedule: the controller's
// sequence of actions (clock steps forward, clock jumps, small steps back,
// spells of a clock behind the mark, requests, injected store faults, kill
// -9 of a worker process) and every worker goroutine's sequence of
// operations and durations. Several worker processes (this test binary run again with
// LEASES_SIM_WORKER set) each share ONE authority handle among several
// goroutines, so SQLite's group commit is in play; on PostgreSQL they all
// open the same schema.
//
// The clock. Every process's authority reads one shared clock through the
// seam: the host's clock plus an offset kept in a file all of them map
// (simShared). The controller moves the offset. Small steps forward (up to
// 5 ms) at any moment: a sample taken during a call then still lies between
// the clock read at the call and at the return, which is what the race
// model (race_model_test.go) assumes of every history. Jumps forward (0.3 to
// 3 s, past every claim's expiry) and steps back only behind a barrier (the
// gate word and an flock no call runs without): the controller closes the
// gate, waits until no call is in flight, moves the clock and opens the gate
// again. A step back goes a day back (behind every sample the authority
// ever recorded, so behind its mark); later, behind the barrier again, the
// clock comes back ahead of every earlier reading. Calls made while the
// clock was behind are logged apart (*.reg): by the clock policy
// (docs/CLOCK.md) each guarded operation among them must answer
// clock_regressed and change nothing; the simulation checks that directly,
// and leaves them out of the history the model checks, whose times must not
// go back. Every move is told to each process's waiting claims as setting
// the seam tells them (tellMoves).
//
// Small steps back. The workers' authorities read the shared clock plus a
// skew (simSkew), which the controller moves 1-5 ms back (or, once 15 ms
// behind, back to none) behind the barrier, opening it only once the clock
// reads later than when it closed: later than every sample taken before,
// so ahead of the mark, and no call answers clock_regressed for it. The
// histories stay on the shared clock, whose time never goes back; each call
// line carries the skew, so the model reads the call's samples on its
// worker's clock (raceOp.Skew), as it does in the race.
//
// Requests. 40 jobs exist at the start; the others are requests of the
// history: the workers' goroutines act as coordinators now and then, as the
// race's workers do (request with a key, priority, delay or run-at; cancel;
// retry_job; redrive), and the controller requests too, half of its
// requests sampled while its own authority's clock runs 0.1 to 2 s ahead.
// A request a kill cut short names its job by its key (keyedRequests).
// Coordinator calls write without the guard, so they, like keep-alives, wait
// for the clock to be ahead of the mark.
//
// Faults. Each worker's authority has core.InjectCommitFaultsForTest: the
// controller arms one fault at a time in the shared file (a commit refused;
// a commit that reached the disk and lost its acknowledgement; or, on
// SQLite, a whole group commit lost, as SQLite rolling back the transaction
// the writers of a handle share does), and the first commit of any worker
// takes it (a group loss: the first that shares its transaction with
// members before it) and counts it there. Kills: the
// controller kill -9s a worker process's group at random and starts the next
// generation; a call the kill cut short ends when the process (and on
// PostgreSQL its sessions) are gone, with an unknown outcome.
//
// The check. Every history of the run (one file per goroutine, the race's
// format: race_worker_test.go) goes through checkRaceHistory, the race's
// check against the lease model; then the controller drains the production
// and checks the event log (checkEventInvariants) and that every
// acknowledged completion, failure and cancel is in the store
// (checkAcknowledgedEnds).
//
// Replay: a failing run prints its seed; LEASES_SIM_SEED=N replays it (the
// same schedule of operations and clock steps; the interleaving of the
// processes is the operating system's). LEASES_SIM_ACTIONS sets the length
// of a run in controller actions, LEASES_SIM_SEEDS how many seeds run.

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/anishathalye/porcupine"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	// A worker process of the simulation; it runs until it is killed.
	if name := os.Getenv("LEASES_SIM_WORKER"); name != "" {
		os.Exit(simWorkerMain(name))
	}
}

// The shared file's words.
const (
	simOffset      = iota // µs added to the host's clock
	simRegressed          // 1 while the clock is behind the mark
	simGate               // 1 while the controller wants the barrier
	simArmed              // the armed fault: a core.CommitFault, 0 for none
	simRefused            // commits refused, counted by the worker that refused one
	simAckLost            // commits whose acknowledgement was lost, counted likewise
	simClockMoves         // counts the controller's moves of the clock
	simSkew               // µs the workers' authority clocks run ahead of the shared clock (a clock fault)
	simGroupLost          // whole group commits lost, counted like simRefused
	simMembersLost        // members lost with the member that met a group loss
)

// simProcesses worker processes of simGoroutines goroutines each.
const (
	simProcesses  = 3
	simGoroutines = 3
)

type simShared struct{ mem []byte }

func openSimShared(path string) (*simShared, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &simShared{mem: mem}, nil
}

func (s *simShared) word(i int) *int64 { return (*int64)(unsafe.Pointer(&s.mem[i*8])) }
func (s *simShared) load(i int) int64  { return atomic.LoadInt64(s.word(i)) }
func (s *simShared) store(i int, v int64) {
	atomic.StoreInt64(s.word(i), v)
}

// now is the simulation's clock, in unix µs: the histories' time.
func (s *simShared) now() int64 { return time.Now().UnixMicro() + s.load(simOffset) }

// clock is what the workers' authorities read: now plus the skew, which
// the controller changes only behind the barrier (no call in flight), so
// each call's samples are on one clock, its skew from call to return.
func (s *simShared) clock() int64 { return s.now() + s.load(simSkew) }

// takeFault is a worker authority's commit hook: the first commit after the
// controller armed a fault takes it; a group loss, the first commit that
// shares its transaction with other members (so that it loses more than
// itself).
func (s *simShared) takeFault(shared bool) core.CommitFault {
	f := s.load(simArmed)
	if f == 0 || (core.CommitFault(f) == core.CommitGroupLost && !shared) || !atomic.CompareAndSwapInt64(s.word(simArmed), f, 0) {
		return core.CommitNormally
	}
	switch core.CommitFault(f) {
	case core.CommitRefused:
		atomic.AddInt64(s.word(simRefused), 1)
	case core.CommitGroupLost:
		atomic.AddInt64(s.word(simGroupLost), 1)
	default:
		atomic.AddInt64(s.word(simAckLost), 1)
	}
	return core.CommitFault(f)
}

// tellMoves tells a's waiting claims of every move of the clock, as the seam
// does when it is set (core.SetClockForTest wakes every waiter, which looks
// again): a waiting claim sleeps for a time computed from its last sample,
// and would not notice by itself that the clock moved meanwhile (see
// docs/RELIABILITY.md, "The seeded simulation", for what that means for a
// real clock step).
func (s *simShared) tellMoves(a *core.Authority) {
	var seen int64
	for {
		if m := s.load(simClockMoves); m != seen {
			seen = m
			core.SetClockForTest(a, s.clock)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// ---- the worker process ------------------------------------------------------

// simG is one goroutine of a worker process: its history files and its own
// descriptor of the barrier's lock file (flock locks belong to the open
// file, so each goroutine opens its own).
type simG struct {
	w        string
	sh       *simShared
	lock     int
	hist     *os.File
	reg      *os.File
	n        int
	out      *os.File // the file of the call in flight
	lockFile *os.File // kept open: lock is its descriptor
}

// enter waits for an open gate and takes the barrier's shared lock for one
// call; the clock cannot go back or come back while it is held. Starting
// and stopping a keep-alive (ahead) wait, besides, until the clock is ahead
// of the mark: they write nothing, so nothing checks them behind it, and
// the model must see every keep-alive (its renewals go on in the
// background, after the clock comes back).
func (g *simG) enter(ahead bool) {
	for {
		for g.sh.load(simGate) != 0 {
			time.Sleep(100 * time.Microsecond)
		}
		for syscall.Flock(g.lock, syscall.LOCK_SH) == syscall.EINTR {
		}
		g.out = g.hist
		if g.sh.load(simRegressed) == 0 {
			return
		}
		if !ahead {
			g.out = g.reg
			return
		}
		g.leave()
		time.Sleep(time.Millisecond)
	}
}

func (g *simG) leave() { syscall.Flock(g.lock, syscall.LOCK_UN) }

func (g *simG) write(x raceLine) {
	b, _ := json.Marshal(x)
	g.out.Write(append(b, '\n'))
}

func (g *simG) call(op, lease, job string, dur time.Duration) int {
	return g.callWith(raceLine{Op: op, Lease: lease, Job: job, DurUS: dur.Microseconds()})
}

// callWith writes x as the call line of the next call, with its worker,
// number, time and skew. A coordinator's call (unguarded: nothing answers
// it clock_regressed) waits, as a keep-alive does, for the clock to be
// ahead of the mark.
func (g *simG) callWith(x raceLine) int {
	g.enter(!guarded(x.Op))
	g.n++
	x.W, x.N, x.Ev, x.T, x.Skew = g.w, g.n, "call", g.sh.now(), g.sh.load(simSkew)
	g.write(x)
	return g.n
}

func (g *simG) ret(id int, err error, job string, expiry int64) {
	t := g.sh.now()
	k, m := "ok", ""
	if err != nil {
		k, m = core.KindOf(err).String(), err.Error()
	}
	g.write(raceLine{W: g.w, N: id, Ev: "ret", Kind: k, Job: job, Expiry: expiry, Msg: m, T: t})
	g.leave()
	// The members the group losses of this process lost, told to the
	// controller as they are known.
	if n := core.GroupMembersLostForTest(); n > simLostTold.Load() {
		if was := simLostTold.Swap(n); n > was {
			atomic.AddInt64(g.sh.word(simMembersLost), n-was)
		}
	}
}

// simLostTold is how many of core.GroupMembersLostForTest this worker
// process has told the controller.
var simLostTold atomic.Int64

func simWorkerMain(name string) int {
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 2
	}
	dir := os.Getenv("LEASES_SIM_DIR")
	sh, err := openSimShared(filepath.Join(dir, "shared"))
	if err != nil {
		return fail("shared", err)
	}
	seed, _ := strconv.ParseUint(os.Getenv("LEASES_SIM_SEED"), 10, 64)
	a, err := leases.Open(os.Getenv("LEASES_SIM_DB"))
	if err != nil {
		return fail("open", err)
	}
	core.SetClockForTest(a, sh.clock)
	if err := core.InjectCommitFaultsForTest(a, sh.takeFault); err != nil {
		return fail("faults", err)
	}
	go sh.tellMoves(a)
	var wg sync.WaitGroup
	for i := 0; i < simGoroutines; i++ {
		g := &simG{w: fmt.Sprintf("%sg%d", name, i), sh: sh}
		open := func(ext string) *os.File {
			f, err := os.OpenFile(filepath.Join(dir, g.w+ext), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				panic(err)
			}
			return f
		}
		g.hist, g.reg = open(".hist"), open(".reg")
		lf, err := os.Open(filepath.Join(dir, "barrier"))
		if err != nil {
			return fail("barrier", err)
		}
		g.lockFile, g.lock = lf, int(lf.Fd())
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			simLoop(a, g, rng)
		}(rand.New(rand.NewPCG(seed, uint64(i))))
	}
	wg.Wait()
	return 0
}

// simLoop is the race's Go worker loop (race_worker_test.go) on a shared
// handle: now and then, between leases, a coordinator's call (simCoordinate);
// claim (or claim with a wait), keep alive or renew now and then, then
// release, fail, fail retryably (after a delay, or the production's
// backoff), complete, or complete and claim the next job in one commit. It
// runs until the process is killed (a bound of ten minutes guards against a
// controller that died).
func simLoop(a *core.Authority, g *simG, rng *rand.Rand) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	deadline := time.Now().Add(10 * time.Minute)
	var l *core.Lease
	var label string
	var d time.Duration
	var co raceCoordinator
	for time.Now().Before(deadline) {
		if l == nil && rng.IntN(5) == 0 {
			simCoordinate(a, g, rng, &co)
		}
		if l == nil {
			d = ms(20, 150)
			waiting := rng.IntN(3) == 0
			wait := ms(0, 60)
			op := "claim"
			if waiting {
				op = "claim_wait"
			}
			id := g.call(op, "", "", d)
			label = g.w + ":" + strconv.Itoa(id)
			var err error
			if waiting {
				l, err = a.ClaimWait(context.Background(), raceProduction, g.w, d, wait)
			} else {
				l, err = a.Claim(raceProduction, g.w, d)
			}
			if err != nil {
				l = nil
				g.ret(id, err, "", 0)
				time.Sleep(ms(1, 5))
				continue
			}
			g.ret(id, nil, l.JobID(), l.ExpiryUnixUS())
		}
		job := l.JobID()
		time.Sleep(ms(0, 20))
		if rng.IntN(4) == 0 {
			id := g.call("keep_alive", label, job, d)
			g.ret(id, l.KeepAlive(d), job, 0)
			time.Sleep(ms(10, 80))
			id = g.call("stop_keep_alive", label, job, 0)
			l.StopKeepAlive()
			g.ret(id, nil, job, l.ExpiryUnixUS())
		}
		if rng.IntN(3) == 0 {
			rd := ms(20, 200)
			id := g.call("renew", label, job, rd)
			err := l.Renew(rd)
			var exp int64
			if err == nil {
				exp = l.ExpiryUnixUS()
			}
			g.ret(id, err, job, exp)
		}
		time.Sleep(ms(0, 10))
		facts := core.Facts{Metadata: map[string]json.RawMessage{
			"by": json.RawMessage(strconv.Quote(g.w)), "lease": json.RawMessage(strconv.Quote(label))}}
		switch r := rng.IntN(20); {
		case r < 4:
			id := g.call("release", label, job, 0)
			g.ret(id, l.Release(), job, 0)
		case r < 6:
			var delay time.Duration // half of them after a delay, else the backoff
			if rng.IntN(2) == 0 {
				delay = ms(1, 50)
			}
			id := g.call("fail_retry", label, job, delay)
			g.ret(id, l.FailRetry("sim retry by "+g.w, delay), job, 0)
		case r < 7:
			id := g.call("fail", label, job, 0)
			err := l.Fail("sim failure by " + g.w)
			g.ret(id, err, job, 0)
			if err == nil {
				co.failed = append(co.failed, job)
			}
		case r < 12:
			id := g.call("complete", label, job, 0)
			g.ret(id, l.Complete(facts), job, 0)
		default:
			nd := ms(20, 150)
			id := g.call("complete_next", label, job, nd)
			next, err := l.CompleteAndClaimNext(facts, nd)
			if next == nil {
				g.ret(id, err, "", 0)
			} else {
				g.ret(id, nil, next.JobID(), next.ExpiryUnixUS())
			}
			l, label, d = next, g.w+":"+strconv.Itoa(id), nd
			continue
		}
		l = nil
	}
}

// simCoordinate is a coordinator's call, as the race's workers make them
// (race_worker_test.go): half the time a request (key "W-N", priority 0-2,
// a delay of 1-200 ms one time in three, a run-at 0-200 ms ahead one time
// in four), else a cancel of one of the goroutine's jobs, a retry_job of one
// it failed (or requested), or a redrive of the failed, dead or cancelled
// jobs (one time in ten).
func simCoordinate(a *core.Authority, g *simG, rng *rand.Rand, co *raceCoordinator) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	switch r := rng.IntN(10); {
	case r < 5:
		x := raceLine{Op: "request", Key: g.w + "-" + strconv.Itoa(g.n+1), Prio: rng.IntN(3)}
		o := core.RequestOptions{Priority: x.Prio}
		switch rng.IntN(12) {
		case 0, 1, 2, 3:
			o.Delay = ms(1, 200)
			x.DurUS = o.Delay.Microseconds()
		case 4, 5, 6:
			x.RunAt = g.sh.clock() + ms(0, 200).Microseconds()
			o.RunAt = time.UnixMicro(x.RunAt)
		}
		id := g.callWith(x)
		job, err := a.RequestJobWith(raceProduction, x.Key, []byte("sim-"+x.Key), o)
		g.ret(id, err, job, 0)
		if err == nil {
			co.mine = append(co.mine, job)
		}
	case r < 7:
		if job := co.pick(rng, false); job != "" {
			id := g.call("cancel", "", job, 0)
			g.ret(id, a.Cancel(raceProduction, job), job, 0)
		}
	case r < 9:
		if job := co.pick(rng, true); job != "" {
			id := g.call("retry_job", "", job, 0)
			g.ret(id, a.RetryJob(raceProduction, job), job, 0)
		}
	default:
		st := []string{core.StateFailed, core.StateDead, core.StateCancelled}[rng.IntN(3)]
		id := g.callWith(raceLine{Op: "redrive", State: st})
		_, err := a.Redrive(raceProduction, st)
		g.ret(id, err, "", 0)
	}
}

// ---- the controller ---------------------------------------------------------

// simFigures are counted by the simulation as it runs, for
// docs/RELIABILITY.md and build/reliability/figures.jsonl.
type simFigures struct {
	seeds, actions, operations, regressedCalls, pending, unknown       int
	steps, jumps, regressions, requests, refused, ackLost, kills, jobs int
	acknowledged, lost, histories                                      int
	stepsBack, skewed, requestsAhead, workerRequests, groupLost        int
	membersLost, cancels, retries, redrives                            int
	failRetryDelay, failRetryBackoff                                   int
}

func (f simFigures) figures() map[string]int {
	return map[string]int{"seeds": f.seeds, "actions": f.actions, "operations": f.operations,
		"calls_behind_the_mark": f.regressedCalls, "pending_at_a_kill": f.pending, "outcome_unknown": f.unknown,
		"clock_steps": f.steps, "clock_jumps": f.jumps, "clock_behind_the_mark": f.regressions, "requests": f.requests,
		"commits_refused": f.refused, "acks_lost": f.ackLost, "kills": f.kills, "jobs": f.jobs,
		"acknowledged_outcomes_found": f.acknowledged, "histories_checked": f.histories, "lost": f.lost,
		"clock_steps_back": f.stepsBack, "operations_on_a_skewed_clock": f.skewed,
		"requests_sampled_ahead": f.requestsAhead, "worker_requests": f.workerRequests,
		"group_commits_lost": f.groupLost, "members_lost_with_a_group": f.membersLost, "cancels": f.cancels,
		"retry_jobs": f.retries, "redrives": f.redrives, "fail_retries_after_a_delay": f.failRetryDelay,
		"fail_retries_after_the_backoff": f.failRetryBackoff}
}

// simSeeds are the seeds to run: LEASES_SIM_SEED alone, or n new ones.
func simSeeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv("LEASES_SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "LEASES_SIM_SEED")
		return []uint64{v}
	}
	if v, err := strconv.Atoi(os.Getenv("LEASES_SIM_SEEDS")); err == nil && v > 0 {
		n = v
	}
	base := uint64(time.Now().UnixNano()) % 1_000_000_000
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

func simActions() int {
	if v, err := strconv.Atoi(os.Getenv("LEASES_SIM_ACTIONS")); err == nil && v > 0 {
		return v
	}
	if soak() {
		return 3000 // longer runs make the claim-order check slow (it grows with jobs times claims): more seeds instead
	}
	return 1500
}

func TestSimulationOfProcessesGoroutinesClockStepsFaultsAndKillsIsLinearizable(t *testing.T) {
	simSuite(t, "sim", func(t *testing.T) string { return "" })
}

func TestSimulationOnPostgresOfProcessesGoroutinesClockStepsFaultsAndKillsIsLinearizable(t *testing.T) {
	pgtest.URL(t, false)
	simSuite(t, "sim_postgres", func(t *testing.T) string { return pgtest.FreshSchema(t, false) })
}

func simSuite(t *testing.T, figure string, db func(*testing.T) string) {
	var fig simFigures
	for _, seed := range simSeeds(t, iterations(1, 8)) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the simulation failed with seed %d; replay it: LEASES_SIM_SEED=%d go test -tags leasesworkers,leasestest -count=1 -run '%s' ./tests/reliability/",
						seed, seed, strings.Split(t.Name(), "/")[0])
				}
			})
			simRun(t, seed, db(t), &fig)
		})
	}
	t.Logf("%s: %+v", figure, fig)
	recordFigure(t, figure, fig.figures())
}

type simProc struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	pg   string
	app  string
	gone int64
}

// simRun runs one seed against db, or a new SQLite file when db is "".
func simRun(t *testing.T, seed uint64, db string, fig *simFigures) {
	dir := t.TempDir()
	onPG := db != ""
	if !onPG {
		db = filepath.Join(dir, "sim.db")
	}
	sh, err := openSimShared(filepath.Join(dir, "shared"))
	require.NoError(t, err)
	defer syscall.Munmap(sh.mem)
	lf, err := os.Create(filepath.Join(dir, "barrier"))
	require.NoError(t, err)
	defer lf.Close()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	a, err := leases.Open(db)
	require.NoError(t, err)
	defer func() { a.Close() }()
	// The controller's authority reads the workers' clock, or that clock
	// further ahead (ahead, µs) for a request sampled while it runs ahead.
	var ahead atomic.Int64
	core.SetClockForTest(a, func() int64 { return sh.clock() + ahead.Load() })
	_, err = a.CreateProductionWithPolicy(raceProduction, racePolicy)
	require.NoError(t, err)
	// A guarded commit sets the mark at the start, so that a clock a day
	// back is behind it from the first spell on (requests and the creation
	// of productions do not move it). It is made in a production of its
	// own, which the model does not see.
	_, err = a.CreateProduction("mark")
	require.NoError(t, err)
	_, err = a.RequestJob("mark", "", nil)
	require.NoError(t, err)
	ml, err := a.Claim("mark", "controller", time.Minute)
	require.NoError(t, err)
	require.NoError(t, ml.Complete(core.Facts{}))

	k := keptHistory{Window: fifo, MaxAttempts: raceMaxAttempts, Backoff: raceBackoff{
		BaseUS: racePolicy.BackoffBase.Microseconds(), CapUS: racePolicy.BackoffCap.Microseconds(), Jitter: racePolicy.JitterPercent}}
	if onPG {
		k.Window = skipLockedWindow
	}
	// The schedule: every action and its parameters, drawn from the seed
	// alone (never from what the run met), and its digest, which a replay
	// of the seed prints again.
	schedule := fnv.New64a()
	note := func(format string, args ...any) { fmt.Fprintf(schedule, format+";", args...) }
	known := map[string]bool{}
	request := func(n int) {
		for i := 0; i < n; i++ {
			o := core.RequestOptions{Priority: rng.IntN(3)}
			switch rng.IntN(8) {
			case 0:
				o.Delay = time.Duration(rng.IntN(2000)) * time.Millisecond
				note("job %d delay %s", o.Priority, o.Delay)
			case 1:
				us := int64(rng.IntN(2_000_000))
				o.RunAt = time.UnixMicro(sh.now() + us)
				note("job %d run-at now+%d", o.Priority, us)
			default:
				note("job %d", o.Priority)
			}
			_, err := a.RequestJobWith(raceProduction, "", []byte("sim"), o)
			require.NoError(t, err)
		}
		// Each new job as it was at its request: nobody can have touched it.
		js, err := a.Jobs(raceProduction)
		require.NoError(t, err)
		for _, j := range js {
			if !known[j.ID] {
				known[j.ID] = true
				k.Order = append(k.Order, j.ID)
				k.Jobs = append(k.Jobs, keptJob{Priority: j.Priority, ClaimableUS: j.ClaimableAt.UnixMicro()})
			}
		}
	}
	request(40)

	// The controller's own requests during the run are operations of the
	// history, like the workers' (its calls are never cut short).
	ctl := &simG{w: "ctl", sh: sh}
	ctl.hist, err = os.Create(filepath.Join(dir, "ctl.hist"))
	require.NoError(t, err)
	defer ctl.hist.Close()
	ctlRequest := func(aheadUS int64) {
		ahead.Store(aheadUS)
		defer ahead.Store(0)
		ctl.n++
		x := raceLine{W: ctl.w, N: ctl.n, Ev: "call", Op: "request", Key: "ctl-" + strconv.Itoa(ctl.n), Prio: rng.IntN(3),
			Skew: sh.load(simSkew) + aheadUS}
		o := core.RequestOptions{Priority: x.Prio}
		var runAt int64
		switch rng.IntN(4) {
		case 0:
			o.Delay = time.Duration(rng.IntN(2000)) * time.Millisecond
			x.DurUS = o.Delay.Microseconds()
		case 1:
			runAt = int64(rng.IntN(2_000_000))
			x.RunAt = sh.clock() + runAt
			o.RunAt = time.UnixMicro(x.RunAt)
		}
		note("request %d ahead %d delay %d run-at %d", x.Prio, aheadUS, x.DurUS, runAt)
		x.T = sh.now()
		ctl.out = ctl.hist
		ctl.write(x)
		id, err := a.RequestJobWith(raceProduction, x.Key, []byte("sim-"+x.Key), o)
		k := "ok"
		if err != nil {
			k = core.KindOf(err).String()
		}
		ctl.write(raceLine{W: ctl.w, N: x.N, Ev: "ret", Kind: k, Job: id, T: sh.now()})
		require.NoError(t, err, "the controller's request")
		fig.requests++
		if aheadUS != 0 {
			fig.requestsAhead++
		}
	}

	gen := map[int]int{}
	var all []*simProc
	procs := make([]*simProc, simProcesses)
	start := func(i int) {
		name := fmt.Sprintf("p%dx%d", i, gen[i])
		gen[i]++
		out, err := os.Create(filepath.Join(dir, name+".out"))
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = out, out
		wdb, app := workerDB(t, db, name)
		cmd.Env = append(os.Environ(), "LEASES_SIM_WORKER="+name, "LEASES_SIM_DB="+wdb, "LEASES_SIM_DIR="+dir,
			"LEASES_SIM_SEED="+strconv.FormatUint(seed*1000+uint64(i*100+gen[i]), 10))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		require.NoError(t, cmd.Start())
		p := &simProc{name: name, cmd: cmd, out: out, app: app}
		if app != "" {
			p.pg = db
		}
		procs[i] = p
		all = append(all, p)
	}
	kill := func(p *simProc) {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd.Wait()
		p.out.Close()
		waitGroupGone(t, p.cmd.Process.Pid)
		if p.pg != "" {
			pgtest.WaitSessionsEnd(t, p.pg, p.app, time.Minute)
		}
		p.gone = sh.now()
		fig.kills++
	}
	defer func() { // a failed require must not leave workers running
		for _, p := range procs {
			if p != nil && p.gone == 0 {
				syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				p.cmd.Wait()
			}
		}
	}()
	for i := range procs {
		start(i)
	}

	// The barrier: no call in flight, none begins until it opens.
	barrier := func(fn func()) {
		sh.store(simGate, 1)
		require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_EX))
		fn()
		require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_UN))
		sh.store(simGate, 0)
	}
	step := func(us int64) {
		atomic.AddInt64(sh.word(simOffset), us)
		atomic.AddInt64(sh.word(simClockMoves), 1)
	}
	const day = int64(24 * time.Hour / time.Microsecond)
	behind := 0 // actions left with the clock behind the mark
	actions := simActions()
	for n := 0; n < actions; n++ {
		pause := time.Duration(1000+rng.IntN(6000)) * time.Microsecond
		time.Sleep(pause)
		note("%d sleep %s", n, pause)
		if behind > 0 {
			// Then back ahead of every earlier reading.
			if behind--; behind == 0 {
				us := int64(rng.IntN(1000))
				barrier(func() {
					step(day + us)
					sh.store(simRegressed, 0)
				})
				note("ahead %d", us)
			}
			continue
		}
		switch r := rng.IntN(1000); {
		case r < 750:
			us := int64(rng.IntN(5000))
			step(us)
			note("step %d", us)
			fig.steps++
		case r < 780:
			us := int64(300_000 + rng.IntN(2_700_000))
			barrier(func() { step(us) })
			note("jump %d", us)
			fig.jumps++
		case r < 790:
			// Behind the mark for 1-6 actions (2-50 ms).
			behind = 1 + rng.IntN(6)
			barrier(func() {
				step(-day)
				sh.store(simRegressed, 1)
			})
			note("behind %d", behind)
			fig.regressions++
		case r < 830:
			// Requests, half of them sampled while the controller's clock
			// runs 0.1 to 2 s ahead of the workers'.
			n := 1 + rng.IntN(3)
			for i := 0; i < n; i++ {
				var us int64
				if rng.IntN(2) == 0 {
					us = int64(100_000 + rng.IntN(1_900_000))
				}
				ctlRequest(us)
			}
		case r < 860:
			// The workers' clock steps back 1-5 ms (or, once 15 ms behind,
			// comes back to the shared clock) behind the barrier, and the
			// barrier opens only once it reads later than when it closed:
			// later than every sample taken before, so still ahead of the
			// mark. The histories' clock does not move: the calls after it
			// sample a clock behind their call and return times (Skew).
			us := int64(1000 + rng.IntN(4000))
			barrier(func() {
				before := sh.clock()
				if sh.load(simSkew) < -15_000 {
					sh.store(simSkew, 0)
				} else {
					sh.store(simSkew, sh.load(simSkew)-us)
				}
				atomic.AddInt64(sh.word(simClockMoves), 1)
				for sh.clock() <= before {
					time.Sleep(100 * time.Microsecond)
				}
			})
			note("back %d", us)
			fig.stepsBack++
		case r < 900:
			// Armed unless one is still armed (then it is this one): a
			// commit refused, one whose acknowledgement is lost, or (on
			// SQLite, whose writers of one handle share a transaction) a
			// whole group commit lost.
			f := []core.CommitFault{core.CommitRefused, core.CommitAckLost, core.CommitGroupLost}[rng.IntN(3)]
			if onPG && f == core.CommitGroupLost {
				f = core.CommitRefused
			}
			sh.store(simArmed, int64(f))
			note("fault %d", f)
		case r < 910:
			i := rng.IntN(simProcesses)
			kill(procs[i])
			start(i)
			note("kill %d", i)
		}
	}
	if behind > 0 {
		barrier(func() {
			step(day)
			sh.store(simRegressed, 0)
		})
	}
	t.Logf("seed %d: schedule of %d actions, digest %016x", seed, actions, schedule.Sum64())
	for _, p := range procs {
		kill(p)
	}
	sh.store(simArmed, 0)
	fig.seeds++
	fig.actions += actions
	fig.refused += int(sh.load(simRefused))
	fig.ackLost += int(sh.load(simAckLost))
	fig.groupLost += int(sh.load(simGroupLost))
	fig.membersLost += int(sh.load(simMembersLost))

	hist, regressed := readSimHistories(t, dir, all)
	keyedRequests(t, a, hist)
	fig.regressedCalls += checkCallsBehindTheMark(t, regressed)
	hist = splitCompleteNext(hist)
	k.Ops = hist
	for _, o := range hist {
		switch {
		case o.Op == "cancel":
			fig.cancels++
		case o.Op == "retry_job":
			fig.retries++
		case o.Op == "redrive":
			fig.redrives++
		case o.Op == "fail_retry" && o.DurUS != 0:
			fig.failRetryDelay++
		case o.Op == "fail_retry":
			fig.failRetryBackoff++
		case o.Op == "request" && o.W != "ctl":
			fig.workerRequests++
		}
		if o.Skew != 0 {
			fig.skewed++
		}
		switch {
		case o.Kind == "killed":
			fig.pending++
		case raceUnknown[o.Kind]:
			fig.unknown++
		default:
			require.True(t, simAnswer(o), "%s %s returned %q: %s", o.W, o.Op, o.Kind, o.Msg)
		}
	}
	checkStart := time.Now()
	c := checkRaceHistory(k, raceCheckTimeout)
	if c.Result != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("leases-sim-%d-history.json", seed))
		require.NoError(t, k.save(path))
		if c.Order == nil {
			html := strings.TrimSuffix(path, ".json") + ".html"
			if err := porcupine.VisualizePath(c.Model, c.Info, html); err == nil {
				t.Logf("porcupine visualization of the partition that failed: %s", html)
			}
		}
		t.Fatalf("seed %d: the history of %d operations is %s against the lease model (%v); kept in %s", seed, len(hist), c.Result, c.Order, path)
	}
	fig.histories++
	fig.operations += len(hist)
	t.Logf("seed %d: %d operations checked in %s (%d partitions, the largest %d); %d calls behind the mark", seed, len(hist),
		time.Since(checkStart).Round(time.Millisecond), c.Partitions, c.MaxPartition, len(regressed))

	// Nothing lost: drain, then the event log and every acknowledged end.
	step(day) // past every expiry, run-at and delay
	for {
		l, err := a.Claim(raceProduction, "drain", time.Hour)
		if err != nil {
			require.ErrorIs(t, err, core.ErrNothingToClaim)
			break
		}
		require.NoError(t, l.Complete(core.Facts{Metadata: map[string]json.RawMessage{
			"by": json.RawMessage(`"drain"`), "lease": json.RawMessage(`"drain"`)}}))
	}
	js, err := a.Jobs(raceProduction)
	require.NoError(t, err)
	for _, j := range js {
		require.NotContains(t, []string{core.StateRequested, core.StateClaimed}, j.State, "the drain left job %s %s", j.ID, j.State)
	}
	fig.jobs += len(js)
	found, lost := checkAcknowledgedEnds(t, a, hist)
	fig.acknowledged += found
	fig.lost += lost
	require.Zero(t, lost, "acknowledged outcomes lost")
	checkEventInvariants(t, a, hist)
}

// The completion half of a complete-and-claim-next whose claim would have
// been born expired answers invalid_duration (the lease still holds), a
// verdict the model decides (a call at least the claim's duration long);
// an invalid_duration of anything else, or an internal error, is not.
func TestTheSimulationLeavesACompleteAndClaimNextBornExpiredToTheModel(t *testing.T) {
	done := &raceOp{W: "w", N: 2, Op: "complete_next", Lease: "w:1", Job: "j0", DurUS: 30, Call: 10, Ret: 50, Kind: "invalid_duration"}
	split := splitCompleteNext([]*raceOp{done})
	require.Len(t, split, 1, "nothing was claimed")
	require.True(t, simAnswer(split[0]), "the completion half's invalid_duration")
	require.False(t, simAnswer(&raceOp{Op: "complete", Kind: "invalid_duration"}), "a plain completion's invalid_duration")
	require.False(t, simAnswer(&raceOp{Op: "claim", Kind: "internal"}))
}

// readSimHistories reads every goroutine's history: the calls made while
// the clock was ahead of the mark (for the model), and those made while it
// was behind. A call a kill cut short returns when its process was gone.
func readSimHistories(t *testing.T, dir string, procs []*simProc) (hist, regressed []*raceOp) {
	gone := map[string]int64{}
	for _, p := range procs {
		gone[p.name] = p.gone
	}
	read := func(ext string) []*raceOp {
		files, err := filepath.Glob(filepath.Join(dir, "*"+ext))
		require.NoError(t, err)
		var out []*raceOp
		for _, f := range files {
			for _, c := range readRaceHistory(t, f) {
				if c.Ret == math.MaxInt64 {
					p := c.W[:strings.LastIndexByte(c.W, 'g')]
					require.Contains(t, gone, p)
					c.Ret, c.Kind = max(c.Call, gone[p]), "killed"
				}
				out = append(out, c)
			}
		}
		return out
	}
	return read(".hist"), read(".reg")
}

// checkCallsBehindTheMark: while the clock is behind the mark, every
// guarded operation answers clock_regressed (and so changes nothing); no
// keep-alive starts or stops (simG.enter). A waiting claim is a claim:
// clock_regressed too, never nothing_to_claim. A call a kill cut short is
// not known to have answered. It returns how many calls answered.
func checkCallsBehindTheMark(t *testing.T, calls []*raceOp) (answered int) {
	for _, o := range calls {
		if o.Kind == "killed" {
			continue
		}
		answered++
		require.Equal(t, "clock_regressed", o.Kind, "%s %s (call %d) answered %q with the clock behind the mark: %s", o.W, o.Op, o.N, o.Kind, o.Msg)
	}
	return answered
}

// checkAcknowledgedEnds: every acknowledged completion left its job
// completed with the facts of its lease; every acknowledged failure and
// cancel left its job failed or cancelled, or else in the event log (a
// failed event of its worker, a cancelled event) with a retry_job of that
// job or a redrive of that state called after it, which may have returned
// the job to the queue. It returns how many it found, and how many it did
// not (each reported as an error).
func checkAcknowledgedEnds(t *testing.T, a *core.Authority, hist []*raceOp) (found, lost int) {
	js, err := a.Jobs(raceProduction)
	require.NoError(t, err)
	state := map[string]string{}
	for _, j := range js {
		state[j.ID] = j.State
	}
	evs, err := a.Events(raceProduction, 0)
	require.NoError(t, err)
	logged := map[string]bool{} // job|kind|worker
	for _, e := range evs {
		logged[e.JobID+"|"+e.Kind+"|"+e.Worker] = true
		logged[e.JobID+"|"+e.Kind+"|"] = true
	}
	// returnedAfter: a retry_job of the job, or a redrive of st, that may
	// have happened after o.
	returnedAfter := func(o *raceOp, st string) bool {
		for _, y := range hist {
			if y.Ret >= o.Call && (y.Kind == "ok" || unknownOutcome(y)) &&
				((y.Op == "retry_job" && y.Job == o.Job) || (y.Op == "redrive" && y.State == st)) {
				return true
			}
		}
		return false
	}
	for _, o := range hist {
		if o.Kind != "ok" || (o.Op != "complete" && o.Op != "fail" && o.Op != "cancel") {
			continue
		}
		ok := false
		switch {
		case o.Op == "fail" && state[o.Job] != core.StateFailed && returnedAfter(o, core.StateFailed):
			ok = assert.True(t, logged[o.Job+"|failed|"+o.W], "%s's acknowledged failure of job %s is not in the event log", o.Lease, o.Job)
		case o.Op == "fail":
			ok = assert.Equal(t, core.StateFailed, state[o.Job], "%s's acknowledged failure of job %s", o.Lease, o.Job)
		case o.Op == "cancel" && state[o.Job] != core.StateCancelled && returnedAfter(o, core.StateCancelled):
			ok = assert.True(t, logged[o.Job+"|cancelled|"], "%s's acknowledged cancel of job %s is not in the event log", o.W, o.Job)
		case o.Op == "cancel":
			ok = assert.Equal(t, core.StateCancelled, state[o.Job], "%s's acknowledged cancel of job %s", o.W, o.Job)
		case assert.Equal(t, core.StateCompleted, state[o.Job], "%s's acknowledged completion of job %s", o.Lease, o.Job):
			f, err := a.FactsOf(raceProduction, o.Job)
			require.NoError(t, err)
			var label string
			require.NoError(t, json.Unmarshal(f.Metadata["lease"], &label))
			ok = assert.Equal(t, o.Lease, label, "job %s: the facts of another lease than the acknowledged one", o.Job)
		}
		if ok {
			found++
		} else {
			lost++
		}
	}
	return found, lost
}

// TestAnInjectedRefusedCommitWritesNothingAndALostAcknowledgementKeepsTheWrite
// proves the simulation's fault seam on both stores: a refused commit
// reports a failure and leaves the store as it was; a commit whose
// acknowledgement was lost reports outcome_unknown and is in the store.
func TestAnInjectedRefusedCommitWritesNothingAndALostAcknowledgementKeepsTheWrite(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "faults.db")
			if store == "postgres" {
				db = pgtest.FreshSchema(t, false)
			}
			a, err := leases.Open(db)
			require.NoError(t, err)
			defer a.Close()
			_, err = a.CreateProduction("p")
			require.NoError(t, err)
			id, err := a.RequestJob("p", "", nil)
			require.NoError(t, err)
			var next atomic.Int64
			require.NoError(t, core.InjectCommitFaultsForTest(a, func(bool) core.CommitFault {
				return core.CommitFault(next.Swap(int64(core.CommitNormally)))
			}))

			next.Store(int64(core.CommitRefused))
			_, err = a.Claim("p", "w", time.Minute)
			require.Error(t, err)
			require.ErrorIs(t, err, core.ErrInjectedFault)
			require.Equal(t, core.KindStorage, core.KindOf(err), "%v", err)
			j, err := a.Job("p", id)
			require.NoError(t, err)
			require.Equal(t, core.StateRequested, j.State, "a refused claim wrote nothing")
			require.Zero(t, j.Attempts)

			next.Store(int64(core.CommitAckLost))
			_, err = a.Claim("p", "w", time.Minute)
			require.ErrorIs(t, err, core.ErrInjectedFault)
			require.Equal(t, core.KindOutcomeUnknown, core.KindOf(err), "%v", err)
			j, err = a.Job("p", id)
			require.NoError(t, err)
			require.Equal(t, core.StateClaimed, j.State, "the claim whose acknowledgement was lost committed")
			require.Equal(t, "w", j.Worker)

			_, err = a.Claim("p", "w", time.Minute)
			require.ErrorIs(t, err, core.ErrNothingToClaim, "no fault armed: the store answers")
		})
	}
}
