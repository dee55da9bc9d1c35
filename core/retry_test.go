// Rules of retries, dead jobs, redrive, run-at and priorities, on the fake
// authority clock; every test runs on SQLite and (LEASES_TEST_STORE=postgres)
// on PostgreSQL.
package core

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// fixed is a policy without jitter, so times are exact.
func fixed(maxAttempts int, base time.Duration) RetryPolicy {
	return RetryPolicy{MaxAttempts: maxAttempts, BackoffBase: base, BackoffCap: time.Hour, JitterPercent: 0}
}

func (f *fixture) policy(p RetryPolicy) {
	f.t.Helper()
	require.NoError(f.t, f.a.SetRetryPolicy("p", p))
}

func (f *fixture) nothing() {
	f.t.Helper()
	_, err := f.a.Claim("p", "w", time.Minute)
	requireKind(f.t, err, KindNothingToClaim)
}

func (f *fixture) record(id string) JobRecord {
	f.t.Helper()
	r, err := f.a.JobDetail(context.Background(), "p", id)
	require.NoError(f.t, err)
	return r
}

func (f *fixture) kinds(id string) []string {
	f.t.Helper()
	page, err := f.a.ListEvents(context.Background(), EventQuery{Production: "p", JobID: id, Limit: MaxPageSize})
	require.NoError(f.t, err)
	out := []string{}
	for _, e := range page.Events {
		out = append(out, e.Kind)
	}
	return out
}

func (f *fixture) requestWith(o RequestOptions) string {
	f.t.Helper()
	id, err := f.a.RequestJobWith("p", "", nil, o)
	require.NoError(f.t, err)
	return id
}

// ---- backoff ---------------------------------------------------------------

func TestAnExpiredClaimBacksOffFromItsExpiry(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(5, 10*time.Second))
	id := f.request(1)[0]
	l := f.claim("w1", time.Second)
	require.Equal(t, l.ExpiryUnixUS()+10_000_000, f.job(id).ClaimableAt.UnixMicro(), "a claimed job shows when a lapse makes it claimable")
	f.clk.set(l.ExpiryUnixUS() + 10_000_000 - 1)
	f.nothing()
	require.Equal(t, StateClaimed, f.job(id).State, "not noticed before its backoff ends")
	requireKind(t, l.Release(), KindExpired) // not noticed yet: the holder hears expired
	f.clk.advance(time.Microsecond)
	again := f.claim("w2", time.Minute)
	require.Equal(t, id, again.JobID())
	require.Equal(t, []string{"requested", "claimed", "claim_expired", "claimed"}, f.kinds(id))
	h := f.record(id).History
	require.Len(t, h, 1)
	require.Equal(t, Attempt{Number: 1, Worker: "w1", ClaimedAt: time.UnixMicro(t0).UTC(),
		EndedAt: time.UnixMicro(l.ExpiryUnixUS()).UTC(), Ending: "expired", Reason: expiredReason}, h[0])
}

func TestARenewalMovesTheBackoffOfALapseWithTheExpiry(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(5, 10*time.Second))
	id := f.request(1)[0]
	l := f.claim("w1", time.Second)
	require.NoError(t, l.Renew(time.Minute))
	require.Equal(t, l.ExpiryUnixUS()+10_000_000, f.job(id).ClaimableAt.UnixMicro())
}

func TestARetryableFailureReturnsTheJobAfterItsBackoff(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(5, 10*time.Second))
	id := f.request(1)[0]
	l := f.claim("w1", time.Minute)
	f.clk.advance(time.Second)
	require.NoError(t, l.FailRetry("disk full", 0))
	require.Equal(t, LeaseClosed, l.State())
	j := f.job(id)
	require.Equal(t, StateRequested, j.State)
	require.Equal(t, t0+11_000_000, j.ClaimableAt.UnixMicro(), "backoff of the first attempt: the base")
	require.Empty(t, j.Worker)
	f.clk.set(t0 + 11_000_000 - 1)
	f.nothing()
	f.clk.advance(time.Microsecond)
	l2 := f.claim("w2", time.Minute)
	require.Equal(t, id, l2.JobID())
	require.EqualValues(t, 2, f.job(id).Attempts)
	// The second attempt's backoff doubles.
	require.NoError(t, l2.FailRetry("still full", 0))
	require.Equal(t, t0+11_000_000+20_000_000, f.job(id).ClaimableAt.UnixMicro())
	h := f.record(id).History
	require.Len(t, h, 2)
	require.Equal(t, "retry", h[0].Ending)
	require.Equal(t, "disk full", h[0].Reason)
	require.Equal(t, []string{"requested", "claimed", "retry", "claimed", "retry"}, f.kinds(id))
}

func TestAFailureWithARetryDelayWaitsExactlyThatDelay(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(5, time.Hour))
	id := f.request(1)[0]
	require.NoError(t, f.claim("w", time.Minute).FailRetry("later", 90*time.Second))
	require.Equal(t, t0+90_000_000, f.job(id).ClaimableAt.UnixMicro())
	f.clk.set(t0 + 90_000_000 - 1)
	f.nothing()
	f.clk.advance(time.Microsecond)
	require.Equal(t, id, f.claim("w", time.Minute).JobID())
}

func TestBackoffDoublesPerAttemptUpToItsCap(t *testing.T) {
	p := store.Policy{MaxAttempts: 100, BackoffBaseUS: 1_000_000, BackoffCapUS: 3_600_000_000, JitterPercent: 20}
	want := int64(1_000_000)
	for n := int64(1); n <= 60; n++ {
		got := backoffUS(p, n, 0.5) // u = 0.5: no jitter
		require.Equal(t, min(want, p.BackoffCapUS), got, "attempt %d", n)
		if want < p.BackoffCapUS {
			want *= 2
		}
		// The cap holds whatever the jitter.
		require.LessOrEqual(t, backoffUS(p, n, 0.999999), p.BackoffCapUS)
	}
	require.Equal(t, p.BackoffCapUS, backoffUS(p, 1_000, 0), "an enormous attempt number saturates at the cap")
}

func TestJitterStaysWithinItsBounds(t *testing.T) {
	p := store.Policy{MaxAttempts: 25, BackoffBaseUS: 1_000_000, BackoffCapUS: 3_600_000_000, JitterPercent: 20}
	require.Equal(t, int64(800_000), backoffUS(p, 1, 0))
	require.InDelta(t, 1_200_000, backoffUS(p, 1, 0.9999999), 1)
	// Through the rules, with the default policy: every first retry waits
	// 0.8 s .. 1.2 s, and they are not all the same.
	f := newFixture(t)
	f.policy(DefaultRetryPolicy())
	ids := f.request(40)
	seen := map[int64]bool{}
	for range ids {
		require.NoError(t, f.claim("w", time.Minute).FailRetry("x", 0))
	}
	for _, id := range ids {
		wait := f.job(id).ClaimableAt.UnixMicro() - t0
		require.GreaterOrEqual(t, wait, int64(800_000))
		require.LessOrEqual(t, wait, int64(1_200_000))
		seen[wait] = true
	}
	require.Greater(t, len(seen), 1, "jitter spreads the retries")
}

// ---- dead ------------------------------------------------------------------

func TestARetryableFailureOfTheLastAttemptIsDead(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(2, 0))
	id := f.request(1)[0]
	require.NoError(t, f.claim("w1", time.Minute).FailRetry("first", 0))
	require.Equal(t, StateRequested, f.job(id).State)
	require.NoError(t, f.claim("w2", time.Minute).FailRetry("second", 0))
	j := f.job(id)
	require.Equal(t, StateDead, j.State)
	require.Equal(t, "second", j.Reason)
	require.EqualValues(t, 2, j.Attempts)
	require.True(t, j.ClaimableAt.IsZero())
	f.nothing()
	require.Equal(t, []string{"requested", "claimed", "retry", "claimed", "retry", "dead"}, f.kinds(id))
	page, err := f.a.ListEvents(context.Background(), EventQuery{Production: "p", Kinds: []string{"dead"}})
	require.NoError(t, err)
	require.Equal(t, "attempts used up (2 of 2); the last attempt failed with a retry: second", page.Events[0].Detail)
	dead, err := f.a.ListJobs(context.Background(), "p", JobQuery{States: []string{StateDead}})
	require.NoError(t, err)
	require.Len(t, dead.Jobs, 1)
	c, err := f.a.Counts(context.Background(), "p")
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Dead)
}

func TestAReleaseEndsAnAttemptAndTheLastOneIsDead(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(2, time.Hour))
	id := f.request(1)[0]
	require.NoError(t, f.claim("w", time.Minute).Release())
	l := f.claim("w", time.Minute)
	require.Equal(t, id, l.JobID(), "a release returns the job at once, without backoff")
	require.EqualValues(t, 2, f.job(id).Attempts)
	require.NoError(t, l.Release())
	require.Equal(t, StateDead, f.job(id).State)
	require.Equal(t, []string{"released", "released"}, endings(f.record(id).History))
}

func endings(h []Attempt) []string {
	out := []string{}
	for _, a := range h {
		out = append(out, a.Ending)
	}
	return out
}

func TestAnExpiredLastAttemptGoesDeadWhenNoticed(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(1, time.Hour))
	ids := f.request(2)
	l := f.claim("w1", time.Second)
	require.Equal(t, l.ExpiryUnixUS(), f.job(ids[0]).ClaimableAt.UnixMicro(), "the last attempt has no backoff to wait")
	require.NoError(t, f.claim("w1", time.Minute).Complete(Facts{}))
	f.clk.set(l.ExpiryUnixUS())
	f.nothing() // nothing to claim, but the lapse it noticed is committed
	j := f.job(ids[0])
	require.Equal(t, StateDead, j.State)
	requireKind(t, l.Release(), KindLeaseLost) // the lapsed claim is no longer the job's
	require.Equal(t, expiredReason, j.Reason)
	require.Equal(t, []string{"requested", "claimed", "claim_expired", "dead"}, f.kinds(ids[0]))
}

func TestClaimingAnExpiredLastAttemptByIDReportsItDead(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(1, time.Hour))
	id := f.request(1)[0]
	l := f.claim("w1", time.Second)
	f.clk.set(l.ExpiryUnixUS())
	_, err := f.a.ClaimJob("p", id, "w2", time.Minute)
	requireKind(t, err, KindWrongState)
	require.Contains(t, err.Error(), "is dead")
	require.Equal(t, StateDead, f.job(id).State, "the refusal commits the death it noticed")
	_, err = f.a.ClaimJob("p", id, "w2", time.Minute)
	requireKind(t, err, KindWrongState)
}

func TestANonRetryableFailureStaysFailedWithAttemptsLeft(t *testing.T) {
	f := newFixture(t)
	id := f.request(1)[0]
	require.NoError(t, f.claim("w", time.Minute).Fail("bad input"))
	require.Equal(t, StateFailed, f.job(id).State)
	f.nothing()
	require.Equal(t, []string{"failed"}, endings(f.record(id).History))
}

// ---- redrive ---------------------------------------------------------------

func TestRetryJobReturnsEachTerminalStateToTheQueueWithAttemptsReset(t *testing.T) {
	for _, state := range []string{StateFailed, StateDead, StateCancelled} {
		t.Run(state, func(t *testing.T) {
			f := newFixture(t)
			f.policy(fixed(1, 0))
			id := f.request(1)[0]
			l := f.claim("w", time.Minute)
			tok, err := l.Export()
			require.NoError(t, err)
			switch state {
			case StateFailed:
				require.NoError(t, l.Fail("no"))
			case StateDead:
				require.NoError(t, l.FailRetry("no", 0))
			case StateCancelled:
				require.NoError(t, f.a.Cancel("p", id))
			}
			require.Equal(t, state, f.job(id).State)
			f.clk.advance(time.Second)
			require.NoError(t, f.a.RetryJob("p", id))
			j := f.job(id)
			require.Equal(t, StateRequested, j.State)
			require.Zero(t, j.Attempts)
			require.Empty(t, j.Reason)
			require.Len(t, f.record(id).History, 1, "the history keeps the old attempts")
			kinds := f.kinds(id)
			require.Equal(t, "redriven", kinds[len(kinds)-1])
			_, err = f.a.Import(tok)
			requireKind(t, err, KindLeaseLost) // the old claim is no longer the job's
			l2 := f.claim("w", time.Minute)
			require.Equal(t, id, l2.JobID())
			require.EqualValues(t, 1, f.job(id).Attempts)
			require.NoError(t, l2.Complete(Facts{}))
		})
	}
}

func TestRetryJobRefusesJobsThatAreNotFailedDeadOrCancelled(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	require.NoError(t, f.claim("w", time.Minute).Complete(Facts{}))
	f.claim("w", time.Minute)
	before := f.snapshot()
	for _, id := range ids {
		requireKind(t, f.a.RetryJob("p", id), KindWrongState)
	}
	requireKind(t, f.a.RetryJob("p", "00000000-0000-4000-8000-000000000000"), KindNotFound)
	require.Equal(t, before, f.snapshot())
}

func TestRedriveReturnsEveryDeadJobOfAProduction(t *testing.T) {
	f := newFixture(t)
	f.policy(fixed(1, 0))
	ids := f.request(7)
	for range 6 {
		require.NoError(t, f.claim("w", time.Minute).FailRetry("x", 0))
	}
	require.NoError(t, f.claim("w", time.Minute).Fail("x"))
	n, err := f.a.Redrive("p", StateDead)
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
	for _, id := range ids[:6] {
		require.Equal(t, StateRequested, f.job(id).State)
		require.Zero(t, f.job(id).Attempts)
	}
	require.Equal(t, StateFailed, f.job(ids[6]).State, "only the state asked for")
	n, err = f.a.Redrive("p", StateDead)
	require.NoError(t, err)
	require.Zero(t, n)
	for _, want := range ids[:6] {
		require.Equal(t, want, f.claim("w", time.Minute).JobID(), "redriven jobs keep their request order")
	}
}

// A redrive starts a job afresh: every claim it had before is over and no
// longer the job's, so a handle of one is lease_lost, as when another claim
// has taken the job (wrong_state would say the claim finished through
// another handle).
func TestAHandleOfAClaimFromBeforeARedriveIsLeaseLost(t *testing.T) {
	for _, how := range []string{"release of the last attempt", "retryable failure of the last attempt",
		"failure", "cancel", "lapse of the last attempt"} {
		for _, redrive := range []string{"job retry", "production redrive"} {
			t.Run(how+", "+redrive, func(t *testing.T) {
				f := newFixture(t)
				f.policy(fixed(1, 0))
				id := f.request(1)[0]
				l := f.claim("w", time.Minute)
				tok, err := l.Export()
				require.NoError(t, err)
				other, err := f.a.Import(tok) // a second handle of the same claim
				require.NoError(t, err)
				state := StateDead
				switch how {
				case "release of the last attempt":
					require.NoError(t, l.Release())
				case "retryable failure of the last attempt":
					require.NoError(t, l.FailRetry("no", 0))
				case "failure":
					require.NoError(t, l.Fail("no"))
					state = StateFailed
				case "cancel":
					require.NoError(t, f.a.Cancel("p", id))
					state = StateCancelled
				case "lapse of the last attempt":
					f.clk.advance(time.Minute)
					f.nothing() // notices the lapse: the job is dead
				}
				require.Equal(t, state, f.job(id).State)
				if redrive == "job retry" {
					require.NoError(t, f.a.RetryJob("p", id))
				} else {
					n, err := f.a.Redrive("p", state)
					require.NoError(t, err)
					require.EqualValues(t, 1, n)
				}
				require.Equal(t, StateRequested, f.job(id).State)
				requireKind(t, other.Renew(time.Hour), KindLeaseLost)
				requireKind(t, other.Complete(Facts{}), KindLeaseLost)
				_, err = f.a.Import(tok)
				requireKind(t, err, KindLeaseLost)
				again := f.claim("w2", time.Minute)
				require.Equal(t, id, again.JobID())
				requireKind(t, other.Release(), KindLeaseLost)
				require.NoError(t, again.Complete(Facts{}))
			})
		}
	}
}

// ---- order -----------------------------------------------------------------

// requestClaimOrderMix requests jobs of every priority, delay and tie, lets
// the delays pass, and returns the jobs in the order claims must take them.
func (f *fixture) requestClaimOrderMix() []string {
	f.t.Helper()
	a := f.requestWith(RequestOptions{})
	b := f.requestWith(RequestOptions{Priority: 5, Delay: 2 * time.Second})
	c := f.requestWith(RequestOptions{Priority: 5})
	d := f.requestWith(RequestOptions{Priority: 5, Delay: time.Second})
	e := f.requestWith(RequestOptions{Priority: 5}) // a tie with c: request order
	g := f.requestWith(RequestOptions{Priority: 1000})
	h := f.requestWith(RequestOptions{})
	f.clk.advance(3 * time.Second)
	return []string{g, c, e, d, b, a, h}
}

func TestClaimServesHighestPriorityThenEarliestClaimableThenRequestOrder(t *testing.T) {
	f := newFixture(t)
	for _, want := range f.requestClaimOrderMix() {
		require.Equal(t, want, f.claim("w", time.Minute).JobID())
	}
	f.nothing()
}

func TestWithoutOptionsClaimOrderIsRequestOrder(t *testing.T) {
	f := newFixture(t)
	ids := f.request(5)
	f.clk.advance(time.Second)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.Release())
	for _, want := range ids {
		require.Equal(t, want, f.claim("w", time.Minute).JobID(), "a released job keeps its place")
	}
}

func TestAnExpiredHighPriorityClaimComesBeforeAFreshLowPriorityJob(t *testing.T) {
	f := newFixture(t)
	hi := f.requestWith(RequestOptions{Priority: 9})
	l := f.claim("w1", time.Second)
	require.Equal(t, hi, l.JobID())
	f.clk.advance(time.Second)
	lo := f.requestWith(RequestOptions{})
	require.Equal(t, hi, f.claim("w2", time.Minute).JobID())
	require.Equal(t, lo, f.claim("w3", time.Minute).JobID())
}

func TestALapseNoticedWithoutAClaimOfThatJobLeavesItsHolderLeaseLost(t *testing.T) {
	f := newFixture(t)
	lapsed := f.requestWith(RequestOptions{})
	l := f.claim("w1", time.Second)
	require.Equal(t, lapsed, l.JobID())
	high := f.requestWith(RequestOptions{Priority: 5})
	f.clk.advance(time.Second)
	require.Equal(t, high, f.claim("w2", time.Minute).JobID(), "the claim took another job, noticing the lapse")
	require.Equal(t, StateRequested, f.job(lapsed).State)
	requireKind(t, l.Complete(Facts{}), KindLeaseLost)
	require.Equal(t, lapsed, f.claim("w3", time.Minute).JobID())
}

func TestAnExpiredClaimKeepsItsPlaceInTheOrder(t *testing.T) {
	f := newFixture(t)
	first := f.request(1)[0]
	f.claim("w1", time.Second)
	f.clk.advance(time.Second)
	later := f.request(1)[0]
	require.Equal(t, first, f.claim("w2", time.Minute).JobID(), "ordered by its original claimable time")
	require.Equal(t, later, f.claim("w3", time.Minute).JobID())
}

func TestRunAtAndDelayAreOnTheAuthorityClock(t *testing.T) {
	f := newFixture(t)
	byDelay := f.requestWith(RequestOptions{Delay: 10 * time.Second})
	byRunAt := f.requestWith(RequestOptions{RunAt: time.UnixMicro(t0 + 20_000_000)})
	require.Equal(t, t0+10_000_000, f.job(byDelay).ClaimableAt.UnixMicro())
	f.clk.set(t0 + 10_000_000 - 1)
	f.nothing()
	_, err := f.a.ClaimJob("p", byDelay, "w", time.Minute)
	requireKind(t, err, KindWrongState)
	require.Contains(t, err.Error(), "not claimable before")
	f.clk.advance(time.Microsecond)
	require.Equal(t, byDelay, f.claim("w", time.Minute).JobID())
	f.clk.set(t0 + 20_000_000 - 1)
	f.nothing()
	f.clk.advance(time.Microsecond)
	l, err := f.a.ClaimJob("p", byRunAt, "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, byRunAt, l.JobID())
}

func TestARunAtInThePastMeansNowAndJumpsNoQueue(t *testing.T) {
	f := newFixture(t)
	first := f.request(1)[0]
	f.clk.advance(time.Second)
	past := f.requestWith(RequestOptions{RunAt: time.UnixMicro(t0 - 3_600_000_000)})
	require.Equal(t, t0+1_000_000, f.job(past).ClaimableAt.UnixMicro())
	require.Equal(t, first, f.claim("w", time.Minute).JobID())
	require.Equal(t, past, f.claim("w", time.Minute).JobID())
}

func TestADelayedJobsIsClaimableInsideAnEditOnceDue(t *testing.T) {
	f := newFixture(t)
	e, err := f.a.Begin()
	require.NoError(t, err)
	id, err := e.RequestJobWith("p", "", nil, RequestOptions{Delay: time.Second, Priority: 3})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	require.Equal(t, 3, f.job(id).Priority)
	f.nothing()
	f.clk.advance(time.Second)
	e, err = f.a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, id, l.JobID())
	require.NoError(t, e.Commit())
}

// ---- policies --------------------------------------------------------------

func TestANewProductionHasTheDefaultPolicyAndCreatingWithAnotherIsWrongState(t *testing.T) {
	f := newFixture(t)
	p, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	require.Equal(t, DefaultRetryPolicy(), p.Policy)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(b), `"policy":{"max_attempts":25,"backoff_base_us":1000000,"backoff_cap_us":3600000000,"jitter_percent":20}`)
	_, err = f.a.CreateProductionWithPolicy("q", DefaultRetryPolicy())
	require.NoError(t, err, "the same policy is idempotent")
	_, err = f.a.CreateProductionWithPolicy("q", fixed(3, time.Second))
	requireKind(t, err, KindWrongState)
	p, err = f.a.CreateProduction("q")
	require.NoError(t, err, "creating without a policy returns the production as it is")
	require.Equal(t, DefaultRetryPolicy(), p.Policy)
}

func TestSetRetryPolicyAppliesToTheNextEndingAndIsRecorded(t *testing.T) {
	f := newFixture(t)
	id := f.request(1)[0]
	l := f.claim("w", time.Minute)
	f.policy(fixed(1, 0))
	require.NoError(t, l.FailRetry("x", 0))
	require.Equal(t, StateDead, f.job(id).State, "one attempt allowed now")
	page, err := f.a.ListEvents(context.Background(), EventQuery{Production: "p", Kinds: []string{"policy_changed"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	ps, err := f.a.Productions()
	require.NoError(t, err)
	require.Equal(t, fixed(1, 0), ps[0].Policy)
}

// ---- history ---------------------------------------------------------------

func TestTheAttemptHistoryIsBoundedAndHoldsNoSecret(t *testing.T) {
	f := newFixture(t)
	id := f.request(1)[0]
	var secrets []string
	for range AttemptHistoryLen + 3 {
		l := f.claim("w", time.Minute)
		b := l.secret.Bytes()
		secrets = append(secrets, uuid.UUID(b).String(), hex.EncodeToString(b[:]))
		require.NoError(t, l.Release())
	}
	r := f.record(id)
	require.Len(t, r.History, AttemptHistoryLen)
	require.EqualValues(t, 4, r.History[0].Number, "the oldest are dropped")
	require.EqualValues(t, AttemptHistoryLen+3, r.History[AttemptHistoryLen-1].Number)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.Contains(t, string(b), `"attempt_history":[{"number":4,"worker":"w"`)
	for _, s := range secrets {
		require.False(t, strings.Contains(string(b), s), "a secret leaked into the record")
	}
}

// ---- bad input ---------------------------------------------------------------

func TestBadRetryInputIsInvalidArgumentAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	id := f.request(1)[0]
	l := f.claim("w", time.Minute)
	before := f.snapshot()
	over := RetryPolicy{MaxAttempts: 25, BackoffBase: time.Second, BackoffCap: MaxDelay + time.Microsecond}
	for name, p := range map[string]RetryPolicy{
		"max attempts 0":         fixed(0, time.Second),
		"max attempts absurd":    fixed(MaxAttemptsLimit+1, time.Second),
		"negative max attempts":  fixed(-1, time.Second),
		"base not whole µs":      fixed(3, time.Second+time.Nanosecond),
		"negative base":          fixed(3, -time.Second),
		"base over the cap":      {MaxAttempts: 3, BackoffBase: 2 * time.Hour, BackoffCap: time.Hour},
		"cap beyond the maximum": over,
		"jitter over 100":        {MaxAttempts: 3, BackoffBase: time.Second, BackoffCap: time.Hour, JitterPercent: 101},
		"negative jitter":        {MaxAttempts: 3, BackoffBase: time.Second, BackoffCap: time.Hour, JitterPercent: -1},
	} {
		requireKind(t, f.a.SetRetryPolicy("p", p), KindInvalidArgument)
		_, err := f.a.CreateProductionWithPolicy("new", p)
		requireKind(t, err, KindInvalidArgument)
		require.NotEmpty(t, name)
	}
	for name, o := range map[string]RequestOptions{
		"negative priority":     {Priority: -1},
		"oversized priority":    {Priority: MaxPriority + 1},
		"run-at beyond 366 d":   {RunAt: time.UnixMicro(t0).Add(MaxDelay + time.Microsecond)},
		"delay beyond 366 d":    {Delay: MaxDelay + time.Microsecond},
		"negative delay":        {Delay: -time.Second},
		"delay not whole µs":    {Delay: time.Second + time.Nanosecond},
		"run-at not whole µs":   {RunAt: time.UnixMicro(t0).Add(time.Nanosecond)},
		"both run-at and delay": {RunAt: time.UnixMicro(t0), Delay: time.Second},
	} {
		_, err := f.a.RequestJobWith("p", "", nil, o)
		requireKind(t, err, KindInvalidArgument)
		require.NotEmpty(t, name)
	}
	requireKind(t, l.FailRetry("x", -time.Second), KindInvalidArgument)
	requireKind(t, l.FailRetry("x", time.Nanosecond), KindInvalidArgument)
	requireKind(t, l.FailRetry("x", MaxDelay+time.Microsecond), KindInvalidArgument)
	for _, s := range []string{"completed", "requested", "claimed", "", "nope"} {
		_, err := f.a.Redrive("p", s)
		requireKind(t, err, KindInvalidArgument)
	}
	requireKind(t, f.a.RetryJob("p", "not-an-id"), KindInvalidArgument)
	require.Equal(t, before, f.snapshot())
	require.Equal(t, LeaseActive, l.State())
	// The edges are accepted.
	_, err := f.a.RequestJobWith("p", "", nil, RequestOptions{Priority: MaxPriority, Delay: MaxDelay})
	require.NoError(t, err)
	_, err = f.a.RequestJobWith("p", "", nil, RequestOptions{RunAt: time.UnixMicro(t0).Add(MaxDelay)})
	require.NoError(t, err)
	require.NoError(t, f.a.SetRetryPolicy("p", RetryPolicy{MaxAttempts: MaxAttemptsLimit, BackoffBase: MaxDelay, BackoffCap: MaxDelay, JitterPercent: 100}))
	require.NoError(t, l.FailRetry("x", MaxDelay))
	_ = id
}

func TestNextClaimableAtIsTheEarliestDelayedJobOrLapse(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	at, err := f.a.NextClaimableAt(ctx, "p")
	require.NoError(t, err)
	require.True(t, at.IsZero(), "nothing waits")
	f.request(1)
	at, err = f.a.NextClaimableAt(ctx, "p")
	require.NoError(t, err)
	require.True(t, at.IsZero(), "a due job is claimable now, not later")
	f.requestWith(RequestOptions{Delay: 10 * time.Second})
	at, err = f.a.NextClaimableAt(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, t0+10_000_000, at.UnixMicro())
	l := f.claim("w", 3*time.Second) // the due job; its lapse comes first
	at, err = f.a.NextClaimableAt(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, l.ExpiryUnixUS(), at.UnixMicro())
	require.NoError(t, l.Complete(Facts{}))
	at, err = f.a.NextClaimableAt(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, t0+10_000_000, at.UnixMicro())
	_, err = f.a.NextClaimableAt(ctx, "nope")
	requireKind(t, err, KindNotFound)
}
