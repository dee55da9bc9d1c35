package core

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func runtimeGC() { runtime.GC() }

func hour() int64 { return int64(time.Hour / time.Microsecond) }

func TestClockBehindTheMarkRejectsGuardedOperationsAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	ids := f.request(2)
	l := f.claim("w", time.Hour)
	tok, err := l.Export()
	require.NoError(t, err)
	f.clk.advance(time.Minute)
	require.NoError(t, l.Renew(2*time.Hour)) // the mark is now t0+1min
	mark := f.hwm()
	require.Equal(t, t0+60_000_000, mark)

	f.clk.set(mark - 1)
	before := f.snapshot()
	requireKind(t, l.Renew(3*time.Hour), KindClockRegressed)
	requireKind(t, l.Release(), KindClockRegressed)
	requireKind(t, l.Fail("x"), KindClockRegressed)
	requireKind(t, l.Complete(Facts{}), KindClockRegressed)
	_, err = f.a.Claim("p", "w2", time.Hour)
	requireKind(t, err, KindClockRegressed)
	_, err = f.a.ClaimJob("p", ids[1], "w2", time.Hour)
	requireKind(t, err, KindClockRegressed)
	_, err = f.a.Import(tok)
	requireKind(t, err, KindClockRegressed)
	e, err := f.a.Begin()
	require.NoError(t, err)
	_, err = e.Claim("p", "w2", time.Hour)
	requireKind(t, err, KindClockRegressed)
	e.Abort()
	require.Equal(t, before, f.snapshot(), "a clock regression changes nothing, not even the mark")
	require.Equal(t, LeaseActive, l.State())
}

func TestGuardedOperationsResumeWhenTheClockCatchesUp(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Hour)
	f.clk.advance(time.Minute)
	require.NoError(t, l.Renew(time.Hour))
	mark := f.hwm()
	f.clk.set(mark - 10)
	requireKind(t, l.Renew(2*time.Hour), KindClockRegressed)
	f.clk.set(mark) // equal to the mark is not behind it
	require.NoError(t, l.Renew(2*time.Hour))
	_, err := f.a.Claim("p", "w2", time.Hour)
	require.NoError(t, err)
}

func TestTheMarkSurvivesReopen(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	f.clk.advance(time.Hour)
	l := f.claim("w", time.Hour)
	mark := f.hwm()
	require.Equal(t, t0+hour(), mark)
	f.reopen()
	require.Equal(t, mark, f.hwm())
	f.clk.set(mark - 1)
	_, err := f.a.Claim("p", "w2", time.Minute)
	requireKind(t, err, KindClockRegressed)
	_ = l
}

func TestAFailedGuardedCommitPublishesNoFactsButRecordsTheMark(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Second)
	exp := l.ExpiryUnixUS()
	// First sample in time, pre-commit sample 5µs past the expiry.
	f.clk.operation(exp-100, exp+5)
	facts := Facts{Metadata: map[string]json.RawMessage{"frames": json.RawMessage(`3`)}}
	requireKind(t, l.Complete(facts), KindExpired)
	got, err := f.a.FactsOf("p", l.JobID())
	require.NoError(t, err)
	require.Empty(t, got.Metadata, "no fact was published")
	require.Equal(t, StateClaimed, f.job(l.JobID()).State)
	require.Equal(t, exp+5, f.hwm(), "the observed sample was recorded after the rollback")
}

func TestAClockJumpBackBetweenTheTwoSamplesRejects(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Hour)
	before := f.snapshot()
	f.clk.operation(t0+1000, t0+500)
	requireKind(t, l.Complete(Facts{}), KindClockRegressed)
	after := f.snapshot()
	require.Equal(t, before.jobs, after.jobs)
	require.Equal(t, t0+1000, after.hwm, "the larger observed sample is kept")
}

func TestSuccessfulGuardedOperationAdvancesTheMarkToThePreCommitSample(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	f.clk.operation(t0+10, t0+20)
	f.claim("w", time.Hour)
	require.Equal(t, t0+20, f.hwm())
}

func TestAClaimThatWouldBeBornExpiredDoesNotCommit(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	before := f.snapshot()
	f.clk.operation(t0, t0+2_000_000) // 2s pass between the samples of a 1s claim
	_, err := f.a.Claim("p", "w", time.Second)
	requireKind(t, err, KindExpired)
	after := f.snapshot()
	require.Equal(t, before.jobs, after.jobs)
}

func TestUnguardedWritesDoNotMoveTheMark(t *testing.T) {
	f := newFixture(t)
	f.clk.advance(time.Hour)
	f.request(1)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	require.Zero(t, f.hwm())
}
