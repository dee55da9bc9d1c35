// Completing a lease and claiming the next job in one commit: every rule of
// both operations, the completion's first, and one transaction for both.
package core

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// countCommits counts the write transactions of a that commit.
type countCommits struct {
	store.Tx
	n *atomic.Int32
}

func (t countCommits) Commit() error {
	err := t.Tx.Commit()
	if err == nil {
		t.n.Add(1)
	}
	return err
}

func eventsAfter(t *testing.T, f *fixture, after int64) []string {
	t.Helper()
	es, err := f.a.Events("p", after)
	require.NoError(t, err)
	kinds := []string{}
	for _, e := range es {
		kinds = append(kinds, e.Kind+" "+e.JobID)
	}
	return kinds
}

func lastSeq(t *testing.T, f *fixture) int64 {
	t.Helper()
	es, err := f.a.Events("", 0)
	require.NoError(t, err)
	return es[len(es)-1].Seq
}

func TestCompleteAndClaimNextCompletesAndClaimsTheNextJobInOneCommit(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	l := f.claim("w", time.Minute)
	require.Equal(t, ids[0], l.JobID())
	var commits atomic.Int32
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return countCommits{Tx: tx, n: &commits} })
	after := lastSeq(t, f)
	facts := Facts{Metadata: map[string]json.RawMessage{"frames": json.RawMessage(`3`)}}
	next, err := l.CompleteAndClaimNext(facts, 2*time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, commits.Load(), "one write transaction for both")
	require.NotNil(t, next)
	require.Equal(t, ids[1], next.JobID())
	require.Equal(t, LeaseClosed, l.State())
	require.Equal(t, LeaseActive, next.State())
	require.Equal(t, "w", next.Worker())
	require.Equal(t, "p", next.Production())
	require.Equal(t, StateCompleted, f.job(ids[0]).State)
	j := f.job(ids[1])
	require.Equal(t, StateClaimed, j.State)
	require.Equal(t, "w", j.Worker)
	require.Equal(t, next.Expiry(), j.Expiry)
	require.Equal(t, j.ClaimedAt.Add(2*time.Minute), j.Expiry)
	require.Equal(t, StateRequested, f.job(ids[2]).State)
	got, err := f.a.FactsOf("p", ids[0])
	require.NoError(t, err)
	require.JSONEq(t, `3`, string(got.Metadata["frames"]))
	require.Equal(t, []string{"completed " + ids[0], "claimed " + ids[1]}, eventsAfter(t, f, after),
		"the completion's events, then the claim's")
	// The new lease is a lease like any other.
	next, err = next.CompleteAndClaimNext(Facts{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, ids[2], next.JobID())
	require.NoError(t, next.Complete(Facts{}))
}

func TestCompleteAndClaimNextWithNothingToClaimStillCompletes(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	l := f.claim("w", time.Minute)
	next, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
	require.NoError(t, err, "nothing to claim is not a failure of the completion")
	require.Nil(t, next)
	require.Equal(t, LeaseClosed, l.State())
	require.Equal(t, StateCompleted, f.job(ids[0]).State)
	_, err = f.a.Claim("p", "w", time.Minute)
	requireKind(t, err, KindNothingToClaim)
}

// The next job is the one Claim would take: the first in request order
// among requested jobs and claims that expired (with the expiry recorded).
func TestCompleteAndClaimNextTakesTheJobClaimWouldTake(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	l := f.claim("w", time.Hour)
	lapsing := f.claim("gone", time.Minute)
	require.Equal(t, ids[1], lapsing.JobID())
	f.clk.advance(2 * time.Minute)
	after := lastSeq(t, f)
	next, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, ids[1], next.JobID(), "the expired claim comes before the later requested job")
	require.Equal(t, []string{"completed " + ids[0], "claim_expired " + ids[1], "claimed " + ids[1]}, eventsAfter(t, f, after))
	require.EqualValues(t, 2, f.job(ids[1]).Attempts)
	err = lapsing.Complete(Facts{})
	requireKind(t, err, KindLeaseLost)
}

// The completion's rules come first: a refused completion claims nothing,
// writes nothing, and reports the completion's error.
func TestCompleteAndClaimNextClaimsNothingWhenTheCompletionIsRefused(t *testing.T) {
	cases := map[string]struct {
		kind  Kind
		setup func(f *fixture, l *Lease)
	}{
		"expired": {KindExpired, func(f *fixture, l *Lease) { f.clk.advance(2 * time.Minute) }},
		"cancelled": {KindCancelled, func(f *fixture, l *Lease) {
			require.NoError(t, f.a.Cancel("p", l.JobID()))
		}},
		"lost": {KindLeaseLost, func(f *fixture, l *Lease) {
			f.clk.advance(2 * time.Minute)
			other, err := f.a.ClaimJob("p", l.JobID(), "thief", time.Hour)
			require.NoError(t, err)
			require.Equal(t, l.JobID(), other.JobID())
		}},
		"already finished": {KindWrongState, func(f *fixture, l *Lease) {
			tok, err := l.Export()
			require.NoError(t, err)
			twin, err := f.a.Import(tok)
			require.NoError(t, err)
			require.NoError(t, twin.Complete(Facts{}))
		}},
		"clock behind its mark": {KindClockRegressed, func(f *fixture, l *Lease) {
			f.clk.advance(-time.Second)
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.request(3)
			l := f.claim("w", time.Minute)
			c.setup(f, l)
			before := f.snapshot()
			next, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
			requireKind(t, err, c.kind)
			require.Nil(t, next)
			require.Equal(t, l.JobID(), err.(*Error).JobID, "the error names the completed job")
			after := f.snapshot()
			if c.kind == KindClockRegressed {
				after.hwm = before.hwm // the clock rule may record what it saw
			}
			require.Equal(t, before, after, "nothing claimed, nothing completed")
		})
	}
}

// A completion whose facts collide with the job's stored ones is refused
// the same way (invalid_argument in the transaction), and bad input before
// any store access.
func TestCompleteAndClaimNextRefusesBadInputAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Minute)
	before := f.snapshot()
	next, err := l.CompleteAndClaimNext(Facts{}, 0)
	requireKind(t, err, KindInvalidDuration)
	require.Nil(t, next)
	next, err = l.CompleteAndClaimNext(Facts{Metadata: map[string]json.RawMessage{"x": json.RawMessage(`{`)}}, time.Minute)
	requireKind(t, err, KindInvalidArgument)
	require.Nil(t, next)
	next, err = l.CompleteAndClaimNext(Facts{Outputs: []Output{{Path: "a", SHA256: "x"}, {Path: "a", SHA256: "x"}}}, time.Minute)
	requireKind(t, err, KindInvalidArgument)
	require.Nil(t, next)
	var nilLease *Lease
	next, err = nilLease.CompleteAndClaimNext(Facts{}, time.Minute)
	requireKind(t, err, KindInvalidArgument)
	require.Nil(t, next)
	require.Equal(t, before, f.snapshot())
	require.Equal(t, LeaseActive, l.State())
	_, err = l.CompleteAndClaimNext(Facts{}, time.Minute)
	require.NoError(t, err, "the lease still holds its claim")
	_, err = l.CompleteAndClaimNext(Facts{}, time.Minute)
	requireKind(t, err, KindClosed)
}

// Both claims the commit relies on must outlive it: the completed one and
// the new one. A new claim that would be born expired (its duration is over
// by the pre-commit sample) fails the whole commit, completion included:
// invalid_duration, as the completed claim still holds (expired is the
// verdict on the completed claim only when it is the one that expired).
func TestCompleteAndClaimNextCommitsNothingWhenEitherClaimWouldNotOutliveTheCommit(t *testing.T) {
	for name, c := range map[string]struct {
		d         time.Duration
		preCommit int64 // µs after the operation's first sample
		kind      Kind
	}{
		"the new claim would be born expired":   {time.Millisecond, 2_000, KindInvalidDuration},
		"the completed claim expired meanwhile": {time.Hour, time.Minute.Microseconds(), KindExpired},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.request(2)
			l := f.claim("w", time.Minute)
			before := f.snapshot()
			now := t0 + 1
			f.clk.set(now)
			// Samples: the completion's, the claim's, then the pre-commit
			// one; on PostgreSQL each operation samples again once it holds
			// its row.
			if testingPostgres() {
				f.clk.then(now, now, now, now, now+c.preCommit)
			} else {
				f.clk.then(now, now, now+c.preCommit)
			}
			next, err := l.CompleteAndClaimNext(Facts{}, c.d)
			requireKind(t, err, c.kind)
			require.Nil(t, next)
			after := f.snapshot()
			require.Equal(t, before.jobs, after.jobs)
			require.Equal(t, before.events, after.events)
			require.Equal(t, LeaseActive, l.State())
		})
	}
}

// A commit whose outcome is unknown returns no new lease, leaves the
// completed lease active (its next use asks the store) and names both jobs.
func TestCompleteAndClaimNextWhoseOutcomeIsUnknownReturnsNoLeaseAndNamesBothJobs(t *testing.T) {
	f := newFixture(t)
	ids := f.request(2)
	l := f.claim("w", time.Minute)
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return failCommit{Tx: tx} })
	next, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
	requireKind(t, err, KindOutcomeUnknown)
	require.Nil(t, next)
	require.Equal(t, ids[0], err.(*Error).JobID)
	require.Contains(t, err.Error(), ids[1])
	require.Equal(t, LeaseActive, l.State())
}

// failCommit rolls back and reports a commit that failed after it was sent.
type failCommit struct{ store.Tx }

func (t failCommit) Commit() error {
	t.Tx.Rollback()
	return errors.New("injected: the commit failed after it was sent")
}

// The claim half takes the job a plain claim would: highest priority, then
// earliest claimable, then request order; a delayed job and one backing off
// after a retryable failure not before their time.
func TestCompleteAndClaimNextServesHighestPriorityThenEarliestClaimableThenRequestOrder(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(3, 10*time.Second))
	order := f.requestClaimOrderMix()
	l := f.claim("w", time.Hour)
	require.Equal(t, order[0], l.JobID())
	next := func(want string) {
		t.Helper()
		n, err := l.CompleteAndClaimNext(Facts{}, time.Hour)
		require.NoError(t, err)
		require.NotNil(t, n, "expected %s", want)
		require.Equal(t, want, n.JobID())
		l = n
	}
	for _, want := range order[1:] {
		next(want)
	}

	// Not before their time: x backs off 10 s after a retryable failure,
	// late waits a minute; y and z are claimable now.
	x := f.requestWith(RequestOptions{Priority: 9})
	other := f.claim("other", time.Hour)
	require.Equal(t, x, other.JobID())
	require.NoError(t, other.FailRetry("again", 0))
	late := f.requestWith(RequestOptions{Priority: 9, Delay: time.Minute})
	y := f.requestWith(RequestOptions{})
	z := f.requestWith(RequestOptions{})
	next(y)
	f.clk.advance(10 * time.Second)
	next(x) // its backoff is over; priority 9 before z
	f.clk.advance(time.Minute)
	next(late)
	next(z)
	n, err := l.CompleteAndClaimNext(Facts{}, time.Hour)
	require.NoError(t, err)
	require.Nil(t, n)
	for _, id := range append(order, x, late, y, z) {
		require.Equal(t, StateCompleted, f.job(id).State)
	}
}

// The completion half ends the attempt as a completion: the attempt history
// records it (worker, claim and end times, "completed"), as Complete's does,
// and the claim half starts the next job's first attempt.
func TestCompleteAndClaimNextRecordsTheCompletedAttempt(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(3, time.Second))
	ids := f.request(2)
	first := f.claim("w1", time.Hour)
	require.NoError(t, first.FailRetry("flaky", 0))
	f.clk.advance(time.Second)
	l, err := f.a.ClaimJob("p", ids[0], "w2", time.Hour) // the retry put it behind ids[1]
	require.NoError(t, err)
	claimedAt := f.clk.Now()
	f.clk.advance(5 * time.Second)
	n, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, ids[1], n.JobID())
	r := f.record(ids[0])
	require.Equal(t, StateCompleted, r.State)
	require.EqualValues(t, 2, r.Attempts)
	require.Len(t, r.History, 2)
	require.Equal(t, "retry", r.History[0].Ending)
	got := r.History[1]
	require.EqualValues(t, 2, got.Number)
	require.Equal(t, "w2", got.Worker)
	require.Equal(t, "completed", got.Ending)
	require.Empty(t, got.Reason)
	require.Equal(t, claimedAt, got.ClaimedAt.UnixMicro())
	require.Equal(t, f.clk.Now(), got.EndedAt.UnixMicro())
	nr := f.record(ids[1])
	require.Equal(t, StateClaimed, nr.State)
	require.EqualValues(t, 1, nr.Attempts)
	require.Empty(t, nr.History, "an attempt enters the history when it ends")
	require.NoError(t, n.Complete(Facts{}))
	require.Equal(t, "completed", f.record(ids[1]).History[0].Ending)
}

// A claim whose outcome is unknown returns no lease, so its error names the
// job the claim chose in a field of its own (ClaimedJobID), whichever call
// claimed: Claim, ClaimWait, ClaimJob or CompleteAndClaimNext, whose JobID
// stays the completed lease's job. Other errors name no claimed job.
func TestAnOutcomeUnknownClaimNamesTheJobItChoseInItsOwnField(t *testing.T) {
	f := newFixture(t)
	ids := f.request(5)
	l := f.claim("w", time.Minute)
	_, err := f.a.ClaimJob("p", ids[0], "w", time.Minute) // refused: taken
	require.Error(t, err)
	require.Empty(t, err.(*Error).ClaimedJobID)
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return failCommit{Tx: tx} })
	claimed := func(err error) (string, string) {
		t.Helper()
		requireKind(t, err, KindOutcomeUnknown)
		return err.(*Error).JobID, err.(*Error).ClaimedJobID
	}

	next, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
	require.Nil(t, next)
	job, chosen := claimed(err)
	require.Equal(t, ids[0], job)
	require.Equal(t, ids[1], chosen)

	_, err = f.a.Claim("p", "w", time.Minute)
	job, chosen = claimed(err)
	require.Equal(t, ids[1], job) // the failed commit rolled back: the same job again
	require.Equal(t, ids[1], chosen)

	_, err = f.a.ClaimWait(context.Background(), "p", "w", time.Minute, time.Second)
	_, chosen = claimed(err)
	require.Equal(t, ids[1], chosen)

	_, err = f.a.ClaimJob("p", ids[3], "w", time.Minute)
	_, chosen = claimed(err)
	require.Equal(t, ids[3], chosen)
}

// A verdict about a lease must be true of that lease. When only the claim
// half of complete-and-claim-next fails (the new claim would be born
// expired: its duration is shorter than the commit took), nothing commits,
// the completion neither, and the lease being completed still holds its
// claim: the call reports invalid_duration (no "not held" verdict), its
// Done stays open, its keep-alive goes on renewing, and a later Complete
// succeeds. Only when the completed claim is itself the one that expired is
// it reported expired, and its Done closes.
func TestAVerdictOfCompleteAndClaimNextIsTrueOfTheLeaseItIsAbout(t *testing.T) {
	t.Run("the new claim would be born expired", func(t *testing.T) {
		f := newFixture(t)
		ids := f.request(2)
		l := f.claim("w", time.Minute)
		// Renewals come every 20 s of real time: none during the test.
		require.NoError(t, l.KeepAlive(time.Minute))
		before := f.snapshot()
		now := t0 + 1
		f.clk.set(now)
		if testingPostgres() {
			f.clk.then(now, now, now, now, now+2_000)
		} else {
			f.clk.then(now, now, now+2_000)
		}
		next, err := l.CompleteAndClaimNext(Facts{}, time.Millisecond)
		requireNotDone(t, l)
		requireKind(t, err, KindInvalidDuration)
		require.Nil(t, next)
		require.False(t, errors.Is(err, ErrNotHeld), "no verdict that the lease is not held: %v", err)
		require.Equal(t, ids[0], err.(*Error).JobID, "the error is the call's on this lease")
		require.Contains(t, err.Error(), ids[1], "the message names the job the claim chose")
		after := f.snapshot()
		require.Equal(t, before.jobs, after.jobs)
		require.Equal(t, before.events, after.events)
		requireNotDone(t, l)
		require.Equal(t, LeaseActive, l.State())
		l.smu.Lock()
		kept := l.keeper != nil
		l.smu.Unlock()
		require.True(t, kept, "the keep-alive still runs")
		f.clk.set(now + 2_000) // the failed commit recorded the mark it observed
		require.NoError(t, l.Check(context.Background()), "the claim is held")
		require.NoError(t, l.Complete(Facts{}), "the lease still completes")
		require.Equal(t, StateCompleted, f.job(ids[0]).State)
		requireDone(t, l, KindClosed)
	})
	t.Run("the new claim would be born expired, on the real clock", func(t *testing.T) {
		f := realFixture(t)
		ids := f.request(2)
		l := f.claim("w", time.Minute)
		require.NoError(t, l.KeepAlive(time.Minute, KeepAliveInterval(5*time.Millisecond)))
		testwait.Eventually(t, func() bool { return f.renewals(ids[0]) >= 1 })
		next, err := l.CompleteAndClaimNext(Facts{}, time.Microsecond)
		requireNotDone(t, l)
		requireKind(t, err, KindInvalidDuration)
		require.Nil(t, next)
		n := f.renewals(ids[0])
		testwait.Eventually(t, func() bool { return f.renewals(ids[0]) > n })
		requireNotDone(t, l)
		require.Equal(t, StateRequested, f.job(ids[1]).State, "nothing claimed")
		require.NoError(t, l.Complete(Facts{}))
		require.Equal(t, StateCompleted, f.job(ids[0]).State)
	})
	t.Run("the completed claim expired meanwhile", func(t *testing.T) {
		f := newFixture(t)
		f.request(2)
		l := f.claim("w", time.Minute)
		now := t0 + 1
		f.clk.set(now)
		late := now + time.Minute.Microseconds()
		if testingPostgres() {
			f.clk.then(now, now, now, now, late)
		} else {
			f.clk.then(now, now, late)
		}
		_, err := l.CompleteAndClaimNext(Facts{}, time.Hour)
		requireKind(t, err, KindExpired)
		require.Equal(t, l.JobID(), err.(*Error).JobID)
		requireDone(t, l, KindExpired)
		f.clk.set(late)
		requireKind(t, l.Check(context.Background()), KindExpired)
	})
}

// ownClockAuthority opens a fresh authority on its own clock (no test
// seam: on PostgreSQL the server's), with production "p" whose lapsed
// claims are claimable again at their expiry.
func ownClockAuthority(t *testing.T) *Authority {
	t.Helper()
	a, err := Open(newLocation(t, "leases.db"))
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	_, err = a.CreateProductionWithPolicy("p", noBackoff)
	require.NoError(t, err)
	return a
}

// A claim of the next job promotes a delayed job whose time has come by the
// authority's own clock, and takes it, alone or after a completion in the
// same commit: a store may skip the promotion only when nothing is due.
func TestAClaimOfTheNextJobTakesADelayedJobWhoseTimeHasComeOnTheAuthoritysOwnClock(t *testing.T) {
	a := ownClockAuthority(t)
	first, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	l, err := a.Claim("p", "w", time.Hour)
	require.NoError(t, err)
	require.Equal(t, first, l.JobID())
	delayed, err := a.RequestJobWith("p", "", nil, RequestOptions{Delay: 50 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(80 * time.Millisecond)
	n, err := l.CompleteAndClaimNext(Facts{}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, n, "the delayed job's time has come")
	require.Equal(t, delayed, n.JobID())

	alone, err := a.RequestJobWith("p", "", nil, RequestOptions{Delay: 50 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(80 * time.Millisecond)
	m, err := a.Claim("p", "w", time.Hour)
	require.NoError(t, err, "the delayed job's time has come")
	require.Equal(t, alone, m.JobID())
}

// A claim of the next job ends a claim whose expiry has passed by the
// authority's own clock and takes its job, alone or after a completion in
// the same commit: a store may skip the lapsed claims' look only when none
// has lapsed.
func TestAClaimOfTheNextJobEndsALapsedClaimOnTheAuthoritysOwnClock(t *testing.T) {
	a := ownClockAuthority(t)
	ids := make([]string, 3)
	for i := range ids {
		id, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
		ids[i] = id
	}
	short, err := a.Claim("p", "gone", 30*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, ids[0], short.JobID())
	l, err := a.Claim("p", "w", time.Hour)
	require.NoError(t, err)
	require.Equal(t, ids[1], l.JobID())
	time.Sleep(60 * time.Millisecond)
	n, err := l.CompleteAndClaimNext(Facts{}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, n)
	require.Equal(t, ids[0], n.JobID(), "the lapsed claim's job comes first in claim order")
	j, err := a.Job("p", ids[0])
	require.NoError(t, err)
	require.EqualValues(t, 2, j.Attempts)

	short, err = a.Claim("p", "gone", 30*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, ids[2], short.JobID())
	time.Sleep(60 * time.Millisecond)
	m, err := a.Claim("p", "w", time.Hour)
	require.NoError(t, err, "the claim on %s has lapsed", ids[2])
	require.Equal(t, ids[2], m.JobID())
}

// A worker loop's step records the completion's event before the claim's,
// in seq order, on the authority's own clock (where a store may send both
// events, and both jobs' updates, as one statement each), step after step.
func TestAWorkerLoopStepRecordsTheCompletionsEventBeforeTheClaimsEvent(t *testing.T) {
	a := ownClockAuthority(t)
	ids := make([]string, 5)
	for i := range ids {
		id, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
		ids[i] = id
	}
	l, err := a.Claim("p", "w", time.Hour)
	require.NoError(t, err)
	for i := 1; i < len(ids); i++ {
		es, err := a.Events("p", 0)
		require.NoError(t, err)
		after := es[len(es)-1].Seq
		n, err := l.CompleteAndClaimNext(Facts{}, time.Hour)
		require.NoError(t, err)
		require.NotNil(t, n)
		require.Equal(t, ids[i], n.JobID())
		es, err = a.Events("p", after)
		require.NoError(t, err)
		got := []string{}
		for _, e := range es {
			got = append(got, e.Kind+" "+e.JobID)
		}
		require.Equal(t, []string{"completed " + ids[i-1], "claimed " + ids[i]}, got, "step %d", i)
		require.Equal(t, StateCompleted, mustJob(t, a, ids[i-1]).State)
		require.Equal(t, StateClaimed, mustJob(t, a, ids[i]).State)
		require.Equal(t, n.Expiry(), mustJob(t, a, ids[i]).Expiry)
		l = n
	}
	require.NoError(t, l.Complete(Facts{}))
}

func mustJob(t *testing.T, a *Authority, id string) Job {
	t.Helper()
	j, err := a.Job("p", id)
	require.NoError(t, err)
	return j
}
