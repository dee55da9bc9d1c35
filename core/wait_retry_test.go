// Waiting claims and retry delays: a waiter wakes when a run-at or a
// backoff passes on the authority's clock (the store's NextWakeAt), and when
// a retryable failure or a redrive commits, here or elsewhere, long before
// the safety poll. On both stores.
package core

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// realClockAuthority is an authority on the real clock whose waiters only
// its own commits and timers can wake, with production "p" under policy.
func realClockAuthority(t *testing.T, policy RetryPolicy) *Authority {
	t.Helper()
	longSafetyPoll(t)
	a, err := Open(newLocation(t, "leases.db"))
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	noWatcher(a)
	_, err = a.CreateProductionWithPolicy("p", policy)
	require.NoError(t, err)
	return a
}

// requireWokenAfter checks that a waiter got a lease on job within wakeBound
// of since, and not before notBefore had passed since since: the job was
// not claimable before then.
func requireWokenAfter(t *testing.T, c <-chan waitResult, job string, since time.Time, notBefore time.Duration) {
	t.Helper()
	requireWokenBy(t, c, job, since)
	require.GreaterOrEqual(t, time.Since(since), notBefore, "woken before the job was claimable")
}

func TestAWaiterWakesWhenARunAtPassesOnTheAuthoritysClock(t *testing.T) {
	a := realClockAuthority(t, noBackoff)
	const delay = 400 * time.Millisecond
	start := time.Now()
	id, err := a.RequestJobWith("p", "", nil, RequestOptions{Delay: delay})
	require.NoError(t, err)
	c := startWaiting(t, context.Background(), a, "w", time.Minute, time.Hour)
	requireWokenAfter(t, c, id, start, delay)
}

func TestAWaiterWakesWhenARetrysBackoffPassesOnTheAuthoritysClock(t *testing.T) {
	const backoff = 400 * time.Millisecond
	a := realClockAuthority(t, RetryPolicy{MaxAttempts: 5, BackoffBase: backoff, BackoffCap: time.Hour})
	id, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	l, err := a.Claim("p", "crashing", time.Minute)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, l.FailRetry("try again", 0)) // the policy's backoff, no jitter
	c := startWaiting(t, context.Background(), a, "w", time.Minute, time.Hour)
	requireWokenAfter(t, c, id, start, backoff)
}

func TestAWaiterWakesWhenALapsedClaimsBackoffPassesOnTheAuthoritysClock(t *testing.T) {
	// Nothing is written when a claim expires or its backoff passes: the
	// waiter's timer, set at the production's earliest ready time (the
	// expiry plus the backoff), wakes it.
	const backoff = 400 * time.Millisecond
	a := realClockAuthority(t, RetryPolicy{MaxAttempts: 5, BackoffBase: backoff, BackoffCap: time.Hour})
	id, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	const d = time.Second // a real claim must commit within it, also on a loaded machine
	start := time.Now()
	_, err = a.Claim("p", "crashed", d)
	require.NoError(t, err)
	c := startWaiting(t, context.Background(), a, "w", time.Minute, time.Hour)
	requireWokenAfter(t, c, id, start, d+backoff)
	require.Equal(t, int64(2), jobOf(t, a, id).Attempts)
}

func TestMovingTheClockSeamPastABackoffWakesAWaiter(t *testing.T) {
	f := ownCommitsOnly(t)
	id := f.request(1)[0]
	require.NoError(t, f.claim("crashing", time.Minute).FailRetry("later", time.Hour))
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	// A clock moved short of the backoff wakes the waiter (a new clock is
	// news) and it sleeps again; retry_test.go pins the microsecond.
	f.clk.advance(time.Hour - time.Minute)
	f.a.setClock(f.clk.Now)
	select {
	case r := <-c:
		t.Fatalf("woken before the backoff passed: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	f.clk.advance(time.Minute)
	f.a.setClock(f.clk.Now)
	requireWokenBy(t, c, id, start)
}

// A waiter asleep until a far claim expiry must not sleep through a job
// that a retryable failure makes claimable sooner: the failure's commit
// wakes it, and its next look finds the earlier time.
func TestARetryableFailureWakesAWaiterThatSleptUntilALaterTime(t *testing.T) {
	a := realClockAuthority(t, noBackoff)
	id, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	l, err := a.Claim("p", "holder", time.Hour)
	require.NoError(t, err)
	c := startWaiting(t, context.Background(), a, "w", time.Minute, time.Hour)
	const delay = 300 * time.Millisecond
	start := time.Now()
	require.NoError(t, l.FailRetry("in a moment", delay))
	requireWokenAfter(t, c, id, start, delay)
}

func TestARetryableFailureWithoutBackoffWakesAWaiterAtOnce(t *testing.T) {
	f := ownCommitsOnly(t)
	id := f.request(1)[0]
	l := f.claim("holder", time.Hour)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	require.NoError(t, l.FailRetry("again", 0)) // noBackoff: claimable at once
	requireWokenBy(t, c, id, start)
}

func TestARedriveWakesAWaiter(t *testing.T) {
	f := ownCommitsOnly(t)
	ids := f.request(2)
	for range ids {
		require.NoError(t, f.claim("holder", time.Hour).Fail("broken"))
	}
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	require.NoError(t, f.a.RetryJob("p", ids[0]))
	requireWokenBy(t, c, ids[0], start)

	c = startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start = time.Now()
	n, err := f.a.Redrive("p", StateFailed)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	requireWokenBy(t, c, ids[1], start)
}

// SQLite: the other handle's commit reaches this one through the file;
// PostgreSQL: through the NOTIFY sent with the commit.
func TestARetryOrRedriveThroughAnotherHandleWakesAWaiter(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	other := f.open()
	id := f.request(1)[0]
	l, err := other.Claim("p", "holder", time.Hour)
	require.NoError(t, err)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	require.NoError(t, l.FailRetry("again", 0))
	require.NoError(t, requireWokenBy(t, c, id, start).Fail("broken"))

	c = startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start = time.Now()
	require.NoError(t, other.RetryJob("p", id))
	requireWokenBy(t, c, id, start)
}

func TestARedriveByAnotherProcessWakesAWaiter(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	f.a.setClock(systemClock) // the other process uses the real clock
	id := f.request(1)[0]
	require.NoError(t, f.claim("holder", time.Hour).Fail("broken"))
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	require.Equal(t, id, requireWokenByAnotherProcess(t, c, f.path, "redrive").JobID())
}

func jobOf(t *testing.T, a *Authority, id string) Job {
	t.Helper()
	j, err := a.Job("p", id)
	require.NoError(t, err)
	return j
}
