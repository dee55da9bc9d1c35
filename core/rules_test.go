package core

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ---- durations --------------------------------------------------------------

func TestDurationMustBePositiveWholeMicrosecondsUpTo24h(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Microsecond, 1500 * time.Nanosecond, 24*time.Hour + time.Microsecond,
		time.Nanosecond, -24 * time.Hour, 1<<63 - 1} {
		_, err := ValidateDuration(d)
		requireKind(t, err, KindInvalidDuration)
	}
	for _, d := range []time.Duration{time.Microsecond, 24 * time.Hour, 30 * time.Second} {
		us, err := ValidateDuration(d)
		require.NoError(t, err)
		require.Equal(t, d.Microseconds(), us)
	}
}

func TestDurationVectorsAgreeWithTheRule(t *testing.T) {
	raw, err := os.ReadFile(vectorDir + "durations.json")
	require.NoError(t, err)
	var v durationVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.Equal(t, MaxDurationUS, v.MaxUS)
	require.NotEmpty(t, v.Accepted)
	require.NotEmpty(t, v.Rejected)
	for _, c := range v.Accepted {
		ns, err := strconv.ParseInt(c.Nanoseconds, 10, 64)
		require.NoError(t, err)
		_, err = ValidateDuration(time.Duration(ns))
		require.NoError(t, err, c.Nanoseconds)
	}
	for _, c := range v.Rejected {
		ns, err := strconv.ParseInt(c.Nanoseconds, 10, 64)
		require.NoError(t, err)
		_, err = ValidateDuration(time.Duration(ns))
		requireKind(t, err, KindInvalidDuration)
	}
}

func TestDurationIsCheckedBeforeAnyStoreAccessOnEverySurface(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	before := f.snapshot()
	_, err := f.a.Claim("p", "w", 1500*time.Nanosecond)
	requireKind(t, err, KindInvalidDuration)
	_, err = f.a.Claim("no-such-production", "w", 0)
	requireKind(t, err, KindInvalidDuration) // duration before not-found
	l := f.claim("w", time.Minute)
	mid := f.snapshot()
	requireKind(t, l.Renew(24*time.Hour+time.Microsecond), KindInvalidDuration)
	require.Equal(t, mid, f.snapshot())
	e, err := f.a.Begin()
	require.NoError(t, err)
	_, err = e.Claim("p", "w", -time.Second)
	requireKind(t, err, KindInvalidDuration)
	e.Abort()
	_ = before
	us, err := ValidateDurationUS(86_400_000_001)
	requireKind(t, err, KindInvalidDuration)
	require.Zero(t, us)
}

// ---- claiming ---------------------------------------------------------------

func TestClaimTakesJobsInRequestOrder(t *testing.T) {
	f := newFixture(t)
	ids := f.request(5)
	for _, want := range ids {
		l := f.claim("w", time.Minute)
		require.Equal(t, want, l.JobID())
	}
	_, err := f.a.Claim("p", "w", time.Minute)
	requireKind(t, err, KindNothingToClaim)
}

func TestExpiredClaimIsClaimableAgain(t *testing.T) {
	f := newFixture(t) // no backoff: TestAnExpiredClaimBacksOffFromItsExpiry covers the default policy
	ids := f.request(2)
	old := f.claim("w1", time.Second)
	f.clk.advance(time.Second) // expiry is exclusive: at the expiry instant the claim is over
	again := f.claim("w2", time.Minute)
	require.Equal(t, ids[0], again.JobID(), "the expired first job comes before the second")
	require.Equal(t, old.JobID(), again.JobID())
	j := f.job(ids[0])
	require.Equal(t, "w2", j.Worker)
	require.EqualValues(t, 2, j.Attempts)
	evs, err := f.a.Events("p", 0)
	require.NoError(t, err)
	kinds := []string{}
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	require.Contains(t, kinds, "claim_expired")
}

func TestUnexpiredClaimIsNotClaimable(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	f.claim("w1", time.Second)
	f.clk.advance(time.Second - time.Microsecond)
	_, err := f.a.Claim("p", "w2", time.Second)
	requireKind(t, err, KindNothingToClaim)
	_, err = f.a.ClaimJob("p", ids[0], "w2", time.Second)
	requireKind(t, err, KindWrongState)
}

func TestClaimJobClaimsTheGivenJob(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	l, err := f.a.ClaimJob("p", ids[2], "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, ids[2], l.JobID())
	_, err = f.a.ClaimJob("p", "00000000-0000-4000-8000-000000000000", "w", time.Minute)
	requireKind(t, err, KindNotFound)
	require.NoError(t, l.Complete(Facts{}))
	_, err = f.a.ClaimJob("p", ids[2], "w", time.Minute)
	requireKind(t, err, KindWrongState)
}

func TestClaimOfUnknownProductionIsNotFound(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.Claim("nope", "w", time.Second)
	requireKind(t, err, KindNotFound)
}

func TestRequestIsIdempotentByKey(t *testing.T) {
	f := newFixture(t)
	a, err := f.a.RequestJob("p", "frame-1", []byte("x"))
	require.NoError(t, err)
	b, err := f.a.RequestJob("p", "frame-1", []byte("x"))
	require.NoError(t, err)
	require.Equal(t, a, b)
	js, err := f.a.Jobs("p")
	require.NoError(t, err)
	require.Len(t, js, 1)
}

// An idempotent re-request only reads the job: it must not keep claims from
// it. On PostgreSQL a row lock would make claims pass over the job
// (SKIP LOCKED), reporting nothing to claim while it is requested; SQLite's
// edit holds its one writer lock, so there a claim waits (busy), and never
// hears nothing_to_claim either.
func TestAnIdempotentReRequestNeverHidesItsJobFromClaims(t *testing.T) {
	f := newFixture(t)
	id, err := f.a.RequestJob("p", "frame-1", []byte("x"))
	require.NoError(t, err)
	e, err := f.a.Begin()
	require.NoError(t, err)
	defer e.Abort()
	again, err := e.RequestJob("p", "frame-1", []byte("x"))
	require.NoError(t, err)
	require.Equal(t, id, again)
	other, err := OpenWith(f.path, Options{BusyTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	defer other.Close()
	other.setClock(f.clk.Now)
	l, err := other.Claim("p", "w", time.Minute)
	if !testingPostgres() {
		requireKind(t, err, KindBusy)
		require.NoError(t, e.Commit())
		l, err = other.Claim("p", "w", time.Minute)
	}
	require.NoError(t, err)
	require.Equal(t, id, l.JobID())
	if testingPostgres() {
		require.NoError(t, e.Commit())
	}
	require.Equal(t, StateClaimed, f.job(id).State)
}

func TestSameKeyWithAnotherPayloadIsWrongState(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.RequestJob("p", "frame-1", []byte("x"))
	require.NoError(t, err)
	before := f.snapshot()
	_, err = f.a.RequestJob("p", "frame-1", []byte("y"))
	requireKind(t, err, KindWrongState)
	require.Equal(t, before, f.snapshot())
}

func TestKeysAreScopedToTheirProduction(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	a, err := f.a.RequestJob("p", "k", []byte("x"))
	require.NoError(t, err)
	b, err := f.a.RequestJob("q", "k", []byte("y"))
	require.NoError(t, err)
	require.NotEqual(t, a, b)
}

func TestCreateProductionIsIdempotent(t *testing.T) {
	f := newFixture(t)
	p1, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	p2, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	require.Equal(t, p1.ID, p2.ID)
	ps, err := f.a.Productions()
	require.NoError(t, err)
	require.Len(t, ps, 2)
}

// ---- renewal ----------------------------------------------------------------

func TestRenewalMustExtendTheCurrentExpiry(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	f.clk.advance(10 * time.Second)
	before := f.snapshot()
	// now+40s < claimed+60s: not an extension
	requireKind(t, l.Renew(40*time.Second), KindNotExtended)
	// now+50s == claimed+60s: equal is not an extension either
	requireKind(t, l.Renew(50*time.Second), KindNotExtended)
	require.Equal(t, before, f.snapshot())
	require.Equal(t, LeaseActive, l.State())
	require.NoError(t, l.Renew(51*time.Second))
	require.Equal(t, t0+61_000_000, l.ExpiryUnixUS())
	require.Equal(t, t0+61_000_000, f.job(l.JobID()).Expiry.UnixMicro())
}

func TestRenewalMustCommitBeforeThePreviousExpiry(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	expiry := l.ExpiryUnixUS()
	before := f.snapshot()
	// The first sample is in time; the pre-commit sample lands exactly on the
	// previous expiry: the renewal must be rejected and rolled back.
	f.clk.operation(expiry-1, expiry)
	requireKind(t, l.Renew(time.Hour), KindExpired)
	after := f.snapshot()
	require.Equal(t, before.jobs, after.jobs, "the renewal was rolled back")
	require.Equal(t, before.events, after.events)
	require.Equal(t, expiry, after.hwm, "the observed pre-commit sample is recorded")
	require.Equal(t, expiry, l.ExpiryUnixUS())
	require.Equal(t, LeaseActive, l.State(), "a failed operation leaves the lease active locally")
}

// ---- expiry -----------------------------------------------------------------

func TestReleaseFailAndCompleteRequireAnUnexpiredClaim(t *testing.T) {
	ops := map[string]func(*Lease) error{
		"release": func(l *Lease) error { return l.Release() },
		"fail":    func(l *Lease) error { return l.Fail("why") },
		"complete": func(l *Lease) error {
			return l.Complete(Facts{Metadata: map[string]json.RawMessage{"a": json.RawMessage(`1`)}})
		},
		"renew": func(l *Lease) error { return l.Renew(time.Hour) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.request(1)
			l := f.claim("w", time.Second)
			f.clk.advance(time.Second)
			before := f.snapshot()
			requireKind(t, op(l), KindExpired)
			require.Equal(t, before, f.snapshot())
			require.Equal(t, LeaseActive, l.State())
		})
	}
}

func TestEveryOperationOnTheOldLeaseIsLostAfterAnotherWorkerClaims(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	old := f.claim("w1", time.Second)
	tok, err := old.Export()
	require.NoError(t, err)
	f.clk.advance(2 * time.Second)
	f.claim("w2", time.Minute)
	before := f.snapshot()
	requireKind(t, old.Renew(time.Hour), KindLeaseLost)
	requireKind(t, old.Release(), KindLeaseLost)
	requireKind(t, old.Fail("x"), KindLeaseLost)
	requireKind(t, old.Complete(Facts{}), KindLeaseLost)
	_, err = f.a.Import(tok)
	requireKind(t, err, KindLeaseLost)
	e, err := f.a.Begin()
	require.NoError(t, err)
	requireKind(t, e.Complete(old, Facts{}), KindLeaseLost)
	e.Abort()
	require.Equal(t, before, f.snapshot())
}

func TestLeaseIsLostWhenAnotherClaimFinishedTheJob(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	old := f.claim("w1", time.Second)
	f.clk.advance(3 * time.Second) // past the expiry and its backoff (at most 1.2 s by default)
	require.NoError(t, f.claim("w2", time.Minute).Complete(Facts{}))
	requireKind(t, old.Complete(Facts{}), KindLeaseLost)
}

func TestForwardClockJumpExpiresClaimsImmediately(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Hour)
	f.clk.advance(25 * time.Hour)
	requireKind(t, l.Complete(Facts{}), KindExpired)
	again := f.claim("w2", time.Minute)
	require.Equal(t, l.JobID(), again.JobID())
}

// ---- cancel -----------------------------------------------------------------

func TestAfterCancelTheHoldersNextOperationFailsAsCancelled(t *testing.T) {
	ops := map[string]func(*Lease) error{
		"renew":    func(l *Lease) error { return l.Renew(time.Hour) },
		"release":  func(l *Lease) error { return l.Release() },
		"fail":     func(l *Lease) error { return l.Fail("x") },
		"complete": func(l *Lease) error { return l.Complete(Facts{}) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.request(1)
			l := f.claim("w", time.Minute)
			require.NoError(t, f.a.Cancel("p", l.JobID()))
			requireKind(t, op(l), KindCancelled)
			require.Equal(t, StateCancelled, f.job(l.JobID()).State)
		})
	}
}

func TestCancelWorksOnRequestedJobsAndIsNotClaimable(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	require.NoError(t, f.a.Cancel("p", ids[0]))
	require.NoError(t, f.a.Cancel("p", ids[0]), "cancelling again changes nothing and succeeds")
	_, err := f.a.Claim("p", "w", time.Second)
	requireKind(t, err, KindNothingToClaim)
	_, err = f.a.ClaimJob("p", ids[0], "w", time.Second)
	requireKind(t, err, KindCancelled)
}

func TestCancelOfFinishedJobIsWrongState(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.Complete(Facts{}))
	requireKind(t, f.a.Cancel("p", l.JobID()), KindWrongState)
	requireKind(t, f.a.Cancel("nope", l.JobID()), KindNotFound)
	requireKind(t, f.a.Cancel("p", "00000000-0000-4000-8000-000000000000"), KindNotFound)
}

func TestCancelIsNotBlockedByClockRegression(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	f.clk.set(t0 - int64(time.Hour/time.Microsecond))
	require.NoError(t, f.a.Cancel("p", l.JobID()))
	require.Equal(t, StateCancelled, f.job(l.JobID()).State)
}

// ---- closing ----------------------------------------------------------------

func TestSuccessfulReleaseFailOrCompleteClosesTheLease(t *testing.T) {
	for name, op := range map[string]func(*Lease) error{
		"release":  func(l *Lease) error { return l.Release() },
		"fail":     func(l *Lease) error { return l.Fail("bad input") },
		"complete": func(l *Lease) error { return l.Complete(Facts{}) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.request(1)
			l := f.claim("w", time.Minute)
			require.NoError(t, op(l))
			require.Equal(t, LeaseClosed, l.State())
			requireKind(t, l.Renew(time.Hour), KindClosed)
			_, err := l.Export()
			requireKind(t, err, KindClosed)
		})
	}
}

func TestReleasedJobIsRequestedAgain(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.Release())
	j := f.job(l.JobID())
	require.Equal(t, StateRequested, j.State)
	require.Empty(t, j.Worker)
	require.Equal(t, l.JobID(), f.claim("w2", time.Minute).JobID())
}

func TestFailRecordsTheReason(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.Fail("exit status 3"))
	j := f.job(l.JobID())
	require.Equal(t, StateFailed, j.State)
	require.Equal(t, "exit status 3", j.Reason)
}

func TestWrongStateWhenThisClaimAlreadyFinishedThroughAnotherHandle(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	tok, err := l.Export()
	require.NoError(t, err)
	other, err := f.a.Import(tok)
	require.NoError(t, err)
	require.NoError(t, other.Complete(Facts{}))
	requireKind(t, l.Renew(time.Hour), KindWrongState)
	requireKind(t, l.Release(), KindWrongState)
	_, err = f.a.Import(tok)
	requireKind(t, err, KindWrongState)
}

func TestFreeingALeaseWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	func() {
		l := f.claim("w", time.Minute)
		_ = l
	}()
	before := f.snapshot()
	for i := 0; i < 3; i++ {
		runtimeGC()
	}
	f.clk.advance(30 * time.Second)
	require.Equal(t, before, f.snapshot())
	js, err := f.a.Jobs("p")
	require.NoError(t, err)
	require.Equal(t, StateClaimed, js[0].State, "a dropped lease is neither released nor renewed")
}

// ---- observations -------------------------------------------------------------

func TestObservationsCarryAttributionAndExpiry(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	l := f.claim("render-7", 30*time.Second)
	j := f.job(ids[0])
	require.Equal(t, "render-7", j.Worker)
	require.Equal(t, StateClaimed, j.State)
	require.Equal(t, t0, j.ClaimedAt.UnixMicro())
	require.Equal(t, l.ExpiryUnixUS(), j.Expiry.UnixMicro())
	b, err := json.Marshal(j)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"id", "production", "key", "state", "worker", "claimed_at_unix_us", "expiry_unix_us", "attempts", "reason",
		"priority", "claimable_at_unix_us"} {
		require.Contains(t, m, k)
	}
	require.Len(t, m, 11)
}

func TestFactsArePublishedByCompletion(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	facts, err := ParseFacts(`{"metadata": {"frames": 24, "codec": "av1"}, "provenance": {"tool": {"name": "render", "v": 2}}}`)
	require.NoError(t, err)
	require.NoError(t, l.Complete(facts))
	got, err := f.a.FactsOf("p", l.JobID())
	require.NoError(t, err)
	require.JSONEq(t, `24`, string(got.Metadata["frames"]))
	require.JSONEq(t, `"av1"`, string(got.Metadata["codec"]))
	require.JSONEq(t, `{"name":"render","v":2}`, string(got.Provenance["tool"]))
}

func TestFactsJSONIsValidatedBeforeAnyWrite(t *testing.T) {
	for _, bad := range []string{`{`, `[]`, `{"meta": {}}`, `{"metadata": []}`, `{"metadata": {"a": 1}} x`,
		`{"metadata": {"": 1}}`, "{\"metadata\": {\"a\": \"\xff\"}}", `null x`} {
		_, err := ParseFacts(bad)
		requireKind(t, err, KindInvalidArgument)
	}
	f, err := ParseFacts(`{}`)
	require.NoError(t, err)
	require.Empty(t, f.Metadata)
}

func TestALeaseReadsItsJobsPayloadWhileActiveOrPending(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.RequestJob("p", "k", []byte("input bytes"))
	require.NoError(t, err)
	_, err = f.a.RequestJob("p", "", nil)
	require.NoError(t, err)
	l := f.claim("w", time.Minute)
	b, err := l.Payload()
	require.NoError(t, err)
	require.Equal(t, []byte("input bytes"), b)
	e, err := f.a.Begin()
	require.NoError(t, err)
	pending, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	b, err = pending.Payload()
	require.NoError(t, err)
	require.Empty(t, b)
	e.Abort()
	_, err = pending.Payload()
	requireKind(t, err, KindClosed)
	require.NoError(t, l.Complete(Facts{}))
	_, err = l.Payload()
	requireKind(t, err, KindClosed)
}

func TestEmptyListingsMarshalAsEmptyArrays(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.CreateProduction("empty")
	require.NoError(t, err)
	js, err := f.a.Jobs("empty")
	require.NoError(t, err)
	require.Equal(t, "[]", mustJSON(t, js))
	evs, err := f.a.Events("p", 1<<40)
	require.NoError(t, err)
	require.Equal(t, "[]", mustJSON(t, evs))
	f.reopen()
	ps, err := f.a.Productions()
	require.NoError(t, err)
	require.NotNil(t, ps)
}
