// A waiting claim's answer is one a plain claim could give at its return:
// behind the mark it is clock_regressed, and a job that a forward step of
// the authority's clock made claimable is claimed, whatever the host's
// monotonic timers say.
package core

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/internal/clockstep"
	"github.com/stretchr/testify/require"
)

// runningClock is an authority clock that runs with this host's monotonic
// clock from t0, and that a test can step by any amount.
type runningClock struct {
	start time.Time
	step  atomic.Int64 // µs added to the running time
}

func newRunningClock() *runningClock { return &runningClock{start: time.Now()} }

func (c *runningClock) Now() int64 {
	return t0 + time.Since(c.start).Microseconds() + c.step.Load()
}

func (c *runningClock) jump(d time.Duration) { c.step.Add(d.Microseconds()) }

func TestAWaitingClaimBehindTheMarkAnswersClockRegressedAsAClaimDoes(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	f.clk.set(t0 + hour())
	l := f.claim("w", time.Minute) // the mark is now t0 + 1 h
	require.NoError(t, l.Complete(Facts{}))
	_, err := f.a.RequestJobWith("p", "", nil, RequestOptions{Delay: time.Minute})
	require.NoError(t, err) // claimable at t0 + 1 h + 1 min: nothing to claim at t0
	f.clk.set(t0)           // behind the mark
	_, err = f.a.Claim("p", "w", time.Minute)
	requireKind(t, err, KindClockRegressed)
	before := f.snapshot()
	start := time.Now()
	_, err = f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 2*time.Second)
	requireKind(t, err, KindClockRegressed)
	require.Less(t, time.Since(start), 2*time.Second, "a waiting claim behind the mark answers at once, as a claim does")
	require.Equal(t, before, f.snapshot())
	// A slice that joins after a quiet look answers the same.
	f.clk.set(t0 + hour() + 1)
	_, err = f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 5*time.Millisecond)
	requireKind(t, err, KindNothingToClaim)
	f.clk.set(t0)
	_, err = f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 5*time.Millisecond)
	requireKind(t, err, KindClockRegressed)
}

// jumpCases are the ways a forward step of the clock makes a job
// claimable with no write: a delayed job's time, and a lapsed claim.
var jumpCases = map[string]func(f *fixture) string{
	"a delayed job": func(f *fixture) string {
		id, err := f.a.RequestJobWith("p", "", nil, RequestOptions{Delay: time.Hour})
		require.NoError(f.t, err)
		return id
	},
	"a lapsed claim": func(f *fixture) string {
		id := f.request(1)[0]
		f.claim("holder", time.Hour)
		return id
	},
}

// afterAQuietLook sets up a jump case on a running clock, then waits
// briefly and finds nothing: a quiet look, whose next wake is an hour away
// on this host's timers. It returns the job the case made.
func afterAQuietLook(t *testing.T, setUp func(*fixture) string) (*fixture, *runningClock, string) {
	t.Helper()
	longSafetyPoll(t)
	f := newFixture(t)
	clk := newRunningClock()
	f.a.setClock(clk.Now)
	id := setUp(f)
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 20*time.Millisecond)
	requireKind(t, err, KindNothingToClaim)
	return f, clk, id
}

func TestAWaitingClaimTakesAJobAForwardClockStepMadeClaimable(t *testing.T) {
	for name, setUp := range jumpCases {
		t.Run(name, func(t *testing.T) {
			f, clk, id := afterAQuietLook(t, setUp)
			bg := context.Background()
			clk.jump(2 * time.Hour)
			// A claim at the return would take the job: so must a waiting
			// claim that joins after the quiet look, however short its wait.
			l, err := f.a.ClaimWait(bg, "p", "w", time.Minute, 5*time.Millisecond)
			require.NoError(t, err)
			require.Equal(t, id, l.JobID())
		})
	}
}

func TestAWaitingClaimTakesAJobAForwardClockStepMadeClaimableWhileItWaited(t *testing.T) {
	for name, setUp := range jumpCases {
		t.Run(name, func(t *testing.T) {
			// Only the end of the wait may see the step: no clock check
			// during it, and a quiet look before it, so that the waiter
			// need not look when it starts.
			old := clockstep.SetPeriod(time.Hour)
			t.Cleanup(func() { clockstep.SetPeriod(old) })
			f, clk, id := afterAQuietLook(t, setUp)
			c := startWaiting(t, context.Background(), f.a, "w", time.Minute, 300*time.Millisecond)
			clk.jump(2 * time.Hour)
			r := receive(t, c)
			require.NoError(t, r.err, "the wait ended with nothing though a claim at its return takes the job")
			require.Equal(t, id, r.l.JobID())
		})
	}
}

func TestAWaitingClaimWakesSoonAfterAForwardClockStepMadeAJobClaimable(t *testing.T) {
	// A sleeping waiter's timers run on this host's monotonic clock, which a
	// step of the wall clock does not move: it checks the clock against
	// them, without reading the store.
	for name, setUp := range jumpCases {
		t.Run(name, func(t *testing.T) {
			f, clk, id := afterAQuietLook(t, setUp) // the waiter need not look when it starts
			c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
			start := time.Now()
			clk.jump(2 * time.Hour)
			requireWokenBy(t, c, id, start)
		})
	}
}

func TestWaitingInShortSlicesOnARunningClockReadsTheStoreOnlyAfterItStepped(t *testing.T) {
	// The check of the clock against this host's monotonic clock costs no
	// read while the clock runs right: a step costs one look, then the
	// slices are quiet again.
	longSafetyPoll(t)
	f := newFixture(t)
	clk := newRunningClock()
	f.a.setClock(clk.Now)
	_, err := f.a.RequestJobWith("p", "", nil, RequestOptions{Delay: time.Hour})
	require.NoError(t, err)
	looks := &lookCounter{Backend: f.a.b}
	f.a.b = looks
	bg := context.Background()
	slices := func() {
		t.Helper()
		for i := 0; i < 20; i++ {
			_, err := f.a.ClaimWait(bg, "p", "w", time.Minute, 5*time.Millisecond)
			requireKind(t, err, KindNothingToClaim)
		}
	}
	slices()
	require.LessOrEqual(t, looks.looks.Load(), int64(3), "the first slice looks, and the watcher's start may ask once more")
	clk.jump(10 * time.Minute) // a step, still before the job's time
	before := looks.looks.Load()
	slices()
	require.Equal(t, before+1, looks.looks.Load(), "one look after the step, none after it")
}

// idleRealClockWaiters opens n authorities on this host's clock (no seam)
// and starts per waiting claims on each that nothing will wake, with the
// safety poll an hour away. It returns the authorities and a function that
// ends the waits.
func idleRealClockWaiters(t *testing.T, n, per int) ([]*Authority, func()) {
	t.Helper()
	longSafetyPoll(t)
	ctx, cancel := context.WithCancel(context.Background())
	var as []*Authority
	var results []<-chan waitResult
	for i := 0; i < n; i++ {
		a, err := Open(newLocation(t, "leases.db"))
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
		_, err = a.CreateProduction("p")
		require.NoError(t, err)
		for j := 0; j < per; j++ {
			results = append(results, startWaiting(t, ctx, a, "w", time.Minute, time.Hour))
		}
		as = append(as, a)
	}
	return as, func() {
		cancel()
		for _, c := range results {
			r := receive(t, c)
			requireKind(t, r.err, KindInterrupted)
		}
	}
}

func TestWaitingClaimsOfOneProcessShareOneClockWatcher(t *testing.T) {
	old := watchLinger
	watchLinger = 50 * time.Millisecond
	t.Cleanup(func() { watchLinger = old })
	as, stop := idleRealClockWaiters(t, 2, 8)
	want := int64(1)
	if !as[0].clockIsLocal() {
		want = 0 // the server's clock: nothing on this host to watch
	}
	require.Equal(t, want, clockWatchersRunning(), "16 waiting claims of two authorities: one clock watcher for the process")
	stop()
	require.Eventually(t, func() bool { return clockWatchersRunning() == 0 }, wakeBound, 10*time.Millisecond,
		"the clock watcher stops once nobody waits")
}

func TestIdleWaitersAreNotWokenToCheckAClockThatDoesNotStep(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tells a process that its wall clock was set; elsewhere the clock is checked every " + clockstep.Period().String())
	}
	_, stop := idleRealClockWaiters(t, 1, 16)
	before := clockChecks.Load()
	time.Sleep(time.Second)
	checks := clockChecks.Load() - before
	stop()
	require.Zero(t, checks, "16 idle waiters were woken to check the clock though it did not step")
}
