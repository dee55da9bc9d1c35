// Keep-alive, Done/Err and Check: a kept-alive lease outlives many of its
// durations, stops writing when told, and never loses its claim silently.
package core

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// realFixture is a fixture on the system clock, for renewals in real time.
func realFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.a.setClock(systemClock)
	return f
}

func (f *fixture) renewals(jobID string) int {
	f.t.Helper()
	evs, err := f.a.Events("p", 0)
	require.NoError(f.t, err)
	n := 0
	for _, e := range evs {
		if e.JobID == jobID && e.Kind == "renewed" {
			n++
		}
	}
	return n
}

// keptAlive is a lease on a fresh job of f, kept alive every 5 ms, once
// its keep-alive has renewed at least renewals times.
func (f *fixture) keptAlive(renewals int) (*Lease, string) {
	f.t.Helper()
	id := f.request(1)[0]
	l := f.claim("w", time.Second)
	require.NoError(f.t, l.KeepAlive(time.Second, KeepAliveInterval(5*time.Millisecond)))
	testwait.Eventually(f.t, func() bool { return f.renewals(id) >= renewals })
	return l, id
}

// requireNoMoreRenewals checks that nothing renews id any more.
func (f *fixture) requireNoMoreRenewals(id string) {
	f.t.Helper()
	n := f.renewals(id)
	time.Sleep(100 * time.Millisecond)
	require.Equal(f.t, n, f.renewals(id), "a renewal was written after the keep-alive stopped")
}

// requireDone waits for l's Done, which must close eventually: how soon is
// the business of the tests that time it, not of this bound.
func requireDone(t *testing.T, l *Lease, kind Kind) {
	t.Helper()
	testwait.Receive(t, l.Done(), testwait.EventuallyBound, "the lease's Done")
	requireKind(t, l.Err(), kind)
}

func requireNotDone(t *testing.T, l *Lease) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("Done closed: %v", l.Err())
	default:
	}
	require.NoError(t, l.Err())
}

func TestKeepAliveRenewsBeforeExpiryForTenTimesItsDuration(t *testing.T) {
	// Real durations: a claim must commit within its duration, even on a
	// loaded machine, so they are seconds long (the tests with the clock
	// seam are fast).
	f := realFixture(t)
	id := f.request(1)[0]
	// Long enough for a claim to commit on a loaded machine; renewed every
	// third of it, the claim survives a host stalled for two seconds (a
	// 2-core machine running the soak beside this suite stalled a renewal
	// for over 1.3 s, which a duration of 2 s did not survive).
	const d = 3 * time.Second
	l := f.claim("w", d)
	require.NoError(t, l.KeepAlive(d))
	time.Sleep(10 * d)
	requireNotDone(t, l)
	require.NoError(t, l.Check(context.Background()), "still held after ten durations")
	require.GreaterOrEqual(t, f.renewals(id), 10)
	require.NoError(t, l.Complete(Facts{}))
	requireDone(t, l, KindClosed)
	evs, err := f.a.Events("p", 0)
	require.NoError(t, err)
	for _, e := range evs {
		require.NotEqual(t, "claim_expired", e.Kind)
	}
}

func TestStopKeepAliveWritesNothingAfterItReturns(t *testing.T) {
	f := realFixture(t)
	l, id := f.keptAlive(3)
	l.StopKeepAlive()
	f.requireNoMoreRenewals(id)
	requireNotDone(t, l)
	require.Equal(t, LeaseActive, l.State())
	l.StopKeepAlive() // again: nothing
	require.NoError(t, l.Release())
}

func TestKeepAliveStopsWhenTheLeaseCloses(t *testing.T) {
	f := realFixture(t)
	l, id := f.keptAlive(1)
	require.NoError(t, l.Release())
	requireDone(t, l, KindClosed)
	require.Contains(t, l.Err().Error(), "released")
	testwait.Eventually(t, func() bool { f.a.mu.Lock(); defer f.a.mu.Unlock(); return len(f.a.keepers) == 0 })
	f.requireNoMoreRenewals(id)
}

func TestACoordinatorsCancelReachesAKeptAliveLeaseWithinOneInterval(t *testing.T) {
	f := realFixture(t)
	id := f.request(1)[0]
	l := f.claim("w", time.Hour)
	const interval = 100 * time.Millisecond
	require.NoError(t, l.KeepAlive(time.Hour, KeepAliveInterval(interval)))
	start := time.Now()
	require.NoError(t, f.a.Cancel("p", id))
	requireDone(t, l, KindCancelled)
	// One interval, plus the renewal's own time on a busy or stalled CI
	// host (seconds, not the milliseconds it takes): far below the hour the
	// claim would otherwise have run.
	require.Less(t, time.Since(start), interval+30*time.Second)
	require.ErrorIs(t, l.Err(), ErrCancelled)
}

func TestKeepAliveReportsExpiryWhenTheAuthoritysClockJumpsForward(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.KeepAlive(time.Minute, KeepAliveInterval(20*time.Millisecond)))
	time.Sleep(60 * time.Millisecond)
	requireNotDone(t, l)
	f.clk.advance(2 * time.Minute)
	requireDone(t, l, KindExpired)
}

func TestKeepAliveReportsAClockThatStaysBehindItsHighWaterMark(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	const d = 300 * time.Millisecond
	l := f.claim("w", d)
	require.NoError(t, l.KeepAlive(d, KeepAliveInterval(20*time.Millisecond)))
	f.clk.set(t0 - time.Hour.Microseconds())
	// Renewals fail as clock_regressed, are retried while the claim may
	// still hold, and then reported.
	requireDone(t, l, KindClockRegressed)
}

// flakyBackend fails the next fails write transactions as busy (at BEGIN).
type flakyBackend struct {
	store.Backend
	fails atomic.Int64
}

func (b *flakyBackend) BeginWrite(ctx context.Context) (store.Tx, error) {
	if b.fails.Add(-1) >= 0 {
		return nil, store.ErrBusy
	}
	return b.Backend.BeginWrite(ctx)
}

func TestKeepAliveKeepsWorkingThroughAnInjectedBusy(t *testing.T) {
	f := realFixture(t)
	id := f.request(1)[0]
	const d = 2 * time.Second // room for a slow renewal after the injected failure, on a loaded machine
	l := f.claim("w", d)
	flaky := &flakyBackend{Backend: f.a.b}
	f.a.b = flaky
	flaky.fails.Store(3) // the first renewal fails three times in a row
	require.NoError(t, l.KeepAlive(d))
	time.Sleep(3 * d)
	require.Negative(t, flaky.fails.Load(), "the failures were consumed")
	requireNotDone(t, l)
	require.NoError(t, l.Check(context.Background()))
	require.GreaterOrEqual(t, f.renewals(id), 3)
	require.NoError(t, l.Complete(Facts{}))
}

func TestKeepAliveKeepsWorkingThroughARenewalWhoseOutcomeIsUnknown(t *testing.T) {
	f := realFixture(t)
	id := f.request(1)[0]
	const d = 2 * time.Second // room for a slow renewal after the injected failure, on a loaded machine
	l := f.claim("w", d)
	var lose atomic.Bool
	lose.Store(true)
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return &ackOnce{Tx: tx, lose: &lose} })
	require.NoError(t, l.KeepAlive(d))
	time.Sleep(3 * d)
	require.False(t, lose.Load(), "a commit's acknowledgement was lost")
	requireNotDone(t, l)
	require.NoError(t, l.Check(context.Background()))
	require.GreaterOrEqual(t, f.renewals(id), 3)
}

// ackOnce commits, and reports the first commit as failed.
type ackOnce struct {
	store.Tx
	lose *atomic.Bool
}

func (t *ackOnce) Commit() error {
	if err := t.Tx.Commit(); err != nil {
		return err
	}
	if t.lose.Swap(false) {
		return context.DeadlineExceeded // anything but a retry: the outcome is unknown
	}
	return nil
}

func TestKeepAliveGivesUpOnceTheExpiryPassesWhileRenewalsFail(t *testing.T) {
	f := realFixture(t)
	f.request(1)
	const d = time.Second
	l := f.claim("w", d)
	flaky := &flakyBackend{Backend: f.a.b}
	f.a.b = flaky
	flaky.fails.Store(1 << 40)
	require.NoError(t, l.KeepAlive(d))
	requireDone(t, l, KindExpired)
	require.ErrorIs(t, l.Err(), ErrBusy, "the report carries the last failure")
}

func TestClosingTheAuthorityStopsEveryKeepAlive(t *testing.T) {
	f := realFixture(t)
	f.request(2)
	a, b := f.claim("w", time.Second), f.claim("w", time.Second)
	for _, l := range []*Lease{a, b} {
		require.NoError(t, l.KeepAlive(time.Second, KeepAliveInterval(5*time.Millisecond)))
	}
	require.NoError(t, f.a.Close())
	for _, l := range []*Lease{a, b} {
		requireDone(t, l, KindClosed)
	}
	require.Empty(t, f.a.keepers)
	requireKind(t, a.KeepAlive(time.Second), KindClosed)
}

func TestKeepAliveRejectsBadDurationsAndLeasesThatAreNotActive(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Minute)
	requireKind(t, l.KeepAlive(0), KindInvalidDuration)
	requireKind(t, l.KeepAlive(MaxDuration+time.Microsecond), KindInvalidDuration)
	requireKind(t, l.KeepAlive(time.Minute, KeepAliveInterval(time.Minute)), KindInvalidDuration)
	requireKind(t, l.KeepAlive(time.Minute, KeepAliveInterval(MinKeepAliveInterval-1)), KindInvalidDuration)
	requireKind(t, l.KeepAlive(2*time.Millisecond), KindInvalidDuration) // a third is below the minimum
	var nilLease *Lease
	requireKind(t, nilLease.KeepAlive(time.Minute), KindInvalidArgument)
	nilLease.StopKeepAlive()
	e, err := f.a.Begin()
	require.NoError(t, err)
	pending, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	requireKind(t, pending.KeepAlive(time.Minute), KindClosed)
	e.Abort()
	requireDone(t, pending, KindClosed)
	require.NoError(t, l.Release())
	requireKind(t, l.KeepAlive(time.Minute), KindClosed)
}

func TestKeepAliveAgainReplacesTheRenewer(t *testing.T) {
	f := realFixture(t)
	id := f.request(1)[0]
	l := f.claim("w", time.Hour)
	require.NoError(t, l.KeepAlive(time.Hour, KeepAliveInterval(time.Hour-time.Second)))
	require.NoError(t, l.KeepAlive(time.Second, KeepAliveInterval(5*time.Millisecond)))
	require.Len(t, f.a.keepers, 1)
	l.StopKeepAlive()
	f.requireNoMoreRenewals(id) // the first renewer too
}

func TestCheckAsksTheStoreWithoutWritingAndReportsTheVerdict(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	writes := countWrites(f.a)
	ctx := context.Background()
	held := f.claim("w", time.Minute)
	cancelled := f.claim("w", time.Minute)
	expiring := f.claim("w", time.Minute)
	begun := writes.begun.Load()
	require.NoError(t, held.Check(ctx))
	require.Equal(t, begun, writes.begun.Load(), "Check writes nothing")
	requireNotDone(t, held)

	require.NoError(t, f.a.Cancel("p", ids[1]))
	requireKind(t, cancelled.Check(ctx), KindCancelled)
	requireDone(t, cancelled, KindCancelled)

	// A clock behind the mark: clock_regressed, first, and not a verdict.
	f.clk.set(t0 - time.Second.Microseconds())
	requireKind(t, held.Check(ctx), KindClockRegressed)
	requireNotDone(t, held)
	f.clk.set(t0)

	f.clk.advance(2 * time.Minute)
	requireKind(t, expiring.Check(ctx), KindExpired)
	requireDone(t, expiring, KindExpired)
	taker := f.claim("other", time.Minute) // the expired claim's job, claimed again
	require.Equal(t, ids[0], taker.JobID())
	requireKind(t, held.Check(ctx), KindLeaseLost)
	require.NoError(t, taker.Complete(Facts{}))
	requireKind(t, taker.Check(ctx), KindClosed)

	requireKind(t, taker.Check(nil), KindInvalidArgument) //nolint:staticcheck // the nil context is the input under test
	var nilLease *Lease
	requireKind(t, nilLease.Check(ctx), KindInvalidArgument)
}

func TestDoneReportsWhatOperationsLearnWithoutAKeepAlive(t *testing.T) {
	f := newFixture(t)
	ids := f.request(2)
	l := f.claim("w", time.Minute)
	requireKind(t, l.Renew(time.Second), KindNotExtended)
	requireNotDone(t, l) // a renewal that would not extend says nothing about the claim
	require.NoError(t, f.a.Cancel("p", ids[0]))
	requireKind(t, l.Renew(time.Hour), KindCancelled)
	requireDone(t, l, KindCancelled)

	m := f.claim("w", time.Minute)
	require.NoError(t, f.a.Close())
	requireKind(t, m.Renew(time.Hour), KindClosed)
	requireDone(t, m, KindClosed)
}

// A lease's Check compares its clock sample with a mark no later than that
// sample could see: a guarded commit (here a renewal of another lease) that
// moves the mark past the sample after it was taken does not make a clock
// that never went back read as clock_regressed.
func TestALeaseCheckNeverCallsTheClockRegressedOverAMarkMovedAfterItsSample(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	held := f.claim("w", time.Minute)
	other := f.claim("w", time.Minute)
	var armed atomic.Bool
	renewed := make(chan error, 1)
	f.a.setClock(func() int64 {
		v := f.clk.Now()
		if armed.CompareAndSwap(true, false) {
			// Check has taken its sample v: a renewal commits at a later
			// sample, and the mark moves past v.
			f.clk.set(v + time.Millisecond.Microseconds())
			renewed <- other.Renew(time.Minute)
		}
		return v
	})
	f.clk.set(t0 + time.Millisecond.Microseconds())
	armed.Store(true)
	require.NoError(t, held.Check(context.Background()), "the clock never went back")
	require.False(t, armed.Load(), "the check sampled the clock")
	require.NoError(t, <-renewed)
	require.Greater(t, f.hwm(), t0+time.Millisecond.Microseconds(), "the renewal moved the mark past the check's sample")
	requireNotDone(t, held)
}

func (f *fixture) keepers() int {
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	return len(f.a.keepers)
}

// A keep-alive's renewer runs from its first renewal's time on; one stopped
// before then stops at once, writes nothing and leaves no renewer behind.
func TestAKeepAliveStoppedBeforeItsFirstRenewalStopsAtOnceAndWritesNothing(t *testing.T) {
	f := realFixture(t)
	id := f.request(1)[0]
	const d = 600 * time.Millisecond
	l := f.claim("w", d)
	require.NoError(t, l.KeepAlive(d))
	require.Equal(t, 1, f.keepers())
	stopped := make(chan struct{})
	go func() { l.StopKeepAlive(); close(stopped) }()
	testwait.Receive(t, stopped, testwait.EventuallyBound, "StopKeepAlive's return")
	require.Zero(t, f.keepers())
	time.Sleep(d / 2) // past the first renewal's time, a third of d
	require.Zero(t, f.renewals(id))
	requireNotDone(t, l)
	require.NoError(t, l.Release())
}

// A lease found lost before its keep-alive's first renewal ends its renewer
// at once, not when that renewal would have been due.
func TestALeaseLostBeforeItsKeepAlivesFirstRenewalEndsItsRenewerAtOnce(t *testing.T) {
	f := realFixture(t)
	id := f.request(1)[0]
	l := f.claim("w", time.Hour)
	require.NoError(t, l.KeepAlive(time.Hour)) // first renewal in twenty minutes
	require.NoError(t, f.a.Cancel("p", id))
	require.Error(t, l.Check(context.Background()))
	requireDone(t, l, KindCancelled)
	testwait.Eventually(t, func() bool { return f.keepers() == 0 })
	l.StopKeepAlive() // returns: nothing left to stop
	require.Zero(t, f.renewals(id))
}
