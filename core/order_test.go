package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One conformance test per row of the rejection-order table (docs/errors.md):
// when two rejections apply, the earlier row wins.

func TestOrderInvalidArgumentBeforeClosed(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.Release())
	requireKind(t, l.Renew(0), KindInvalidDuration)
	requireKind(t, l.Fail("bad\xff"), KindInvalidArgument)
}

func TestOrderClosedBeforeClockRegressed(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, l.Release())
	f.clk.set(t0 - 1)
	requireKind(t, l.Renew(time.Hour), KindClosed)
}

func TestOrderClockRegressedBeforeNotFound(t *testing.T) {
	f := newFixture(t)
	f.clk.advance(time.Minute)
	f.request(1)
	f.claim("w", time.Minute)
	f.clk.set(t0)
	_, err := f.a.Claim("no-such-production", "w", time.Minute)
	requireKind(t, err, KindClockRegressed)
}

func TestOrderNotFoundBeforeCancelled(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	tok, err := l.Export()
	require.NoError(t, err)
	require.NoError(t, f.a.Cancel("p", l.JobID()))
	q, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	d, _ := DecodeToken(tok)
	d.ProductionID = q.ID
	s, _ := EncodeToken(d)
	_, err = f.a.Import(s)
	requireKind(t, err, KindNotFound)
}

func TestOrderCancelledBeforeLeaseLost(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	old := f.claim("w1", time.Second)
	f.clk.advance(2 * time.Second)
	f.claim("w2", time.Minute)
	require.NoError(t, f.a.Cancel("p", old.JobID()))
	requireKind(t, old.Complete(Facts{}), KindCancelled)
}

func TestOrderLeaseLostBeforeWrongState(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	old := f.claim("w1", time.Second)
	f.clk.advance(2 * time.Second)
	require.NoError(t, f.claim("w2", time.Minute).Complete(Facts{}))
	// The job is completed (a wrong state for anyone) but by another claim.
	requireKind(t, old.Release(), KindLeaseLost)
}

func TestOrderWrongStateBeforeExpired(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Second)
	tok, _ := l.Export()
	other, err := f.a.Import(tok)
	require.NoError(t, err)
	require.NoError(t, other.Fail("x"))
	f.clk.advance(time.Hour)
	requireKind(t, l.Complete(Facts{}), KindWrongState)
}

func TestOrderExpiredBeforeNotExtended(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	f.clk.advance(time.Minute)
	// A 1µs renewal would also fail to extend; expiry is reported first.
	requireKind(t, l.Renew(time.Microsecond), KindExpired)
}

func TestEveryKindWorksWithErrorsIsAndAs(t *testing.T) {
	sentinels := map[Kind]error{
		KindInvalidArgument: ErrInvalidArgument, KindInvalidDuration: ErrInvalidDuration, KindNotFound: ErrNotFound,
		KindNothingToClaim: ErrNothingToClaim, KindWrongState: ErrWrongState, KindLeaseLost: ErrLeaseLost,
		KindExpired: ErrExpired, KindCancelled: ErrCancelled, KindNotExtended: ErrNotExtended,
		KindClockRegressed: ErrClockRegressed, KindClosed: ErrClosed, KindBadToken: ErrBadToken, KindBusy: ErrBusy,
		KindStorage: ErrStorage, KindOutcomeUnknown: ErrOutcomeUnknown, KindSchemaTooNew: ErrSchemaTooNew,
		KindForked: ErrForked, KindInternal: ErrInternal, KindInterrupted: ErrInterrupted,
	}
	require.Len(t, sentinels, len(Kinds()))
	names := map[string]bool{}
	for _, k := range Kinds() {
		err := fmt.Errorf("wrapped: %w", errf(k, "something"))
		require.True(t, errors.Is(err, sentinels[k]), k.String())
		for other, s := range sentinels {
			if other != k {
				require.False(t, errors.Is(err, s))
			}
		}
		var e *Error
		require.True(t, errors.As(err, &e))
		require.Equal(t, k, e.Kind)
		require.Equal(t, k, KindOf(err))
		require.False(t, names[k.String()], "kind names are distinct")
		names[k.String()] = true
	}
	require.Equal(t, KindInternal, KindOf(errors.New("foreign")))
	require.Equal(t, Kind(0), KindOf(nil))
}

func TestBadInputGetsAClearErrorAndLosesNothing(t *testing.T) {
	f := newFixture(t)
	ids := f.request(2)
	held := f.claim("w", time.Minute)
	before := f.snapshot()
	long := strings.Repeat("x", MaxNameLen+1)
	cases := []struct {
		name string
		err  error
	}{
		{"empty production", second(f.a.RequestJob("", "", nil))},
		{"bad utf-8 production", second(f.a.RequestJob("p\xff", "", nil))},
		{"nul in key", second(f.a.RequestJob("p", "a\x00b", nil))},
		{"oversize key", second(f.a.RequestJob("p", long, nil))},
		{"oversize payload", second(f.a.RequestJob("p", "", make([]byte, MaxPayloadLen+1)))},
		{"empty worker", second(f.a.Claim("p", "", time.Second))},
		{"oversize worker", second(f.a.Claim("p", long, time.Second))},
		{"upper-case job id", second(f.a.ClaimJob("p", strings.ToUpper(ids[0]), "w", time.Second))},
		{"braced job id", second(f.a.ClaimJob("p", "{"+ids[0]+"}", "w", time.Second))},
		{"cancel bad id", f.a.Cancel("p", "nope")},
		{"oversize reason", held.Fail(strings.Repeat("r", MaxReasonLen+1))},
		{"bad utf-8 reason", held.Fail("\xfe")},
		{"bad facts", held.Complete(Facts{Metadata: map[string]json.RawMessage{"a": json.RawMessage("{")}})},
		{"negative events cursor", second(f.a.Events("p", -1))},
	}
	for _, c := range cases {
		require.Error(t, c.err, c.name)
		k := KindOf(c.err)
		require.True(t, k == KindInvalidArgument, "%s: %v", c.name, c.err)
	}
	var nilLease *Lease
	requireKind(t, nilLease.Renew(time.Second), KindInvalidArgument)
	var nilAuth *Authority
	_, err := nilAuth.Claim("p", "w", time.Second)
	requireKind(t, err, KindInvalidArgument)
	require.Equal(t, before, f.snapshot())
}

func second[T any](_ T, err error) error { return err }

func TestAClosedAuthorityReportsClosed(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	require.NoError(t, f.a.Close())
	require.NoError(t, f.a.Close(), "closing twice is harmless")
	requireKind(t, l.Renew(time.Hour), KindClosed)
	_, err := f.a.Jobs("p")
	requireKind(t, err, KindClosed)
}

func TestErrNotHeldMatchesExactlyTheKindsThatSayTheClaimIsNoLongerHeld(t *testing.T) {
	notHeld := map[Kind]bool{KindLeaseLost: true, KindExpired: true, KindCancelled: true}
	for _, k := range Kinds() {
		err := fmt.Errorf("wrapped: %w", errf(k, "something"))
		require.Equal(t, notHeld[k], errors.Is(err, ErrNotHeld), k.String())
		require.Equal(t, notHeld[k], k.NotHeld(), k.String())
	}
	// A real one, from the rules: a lease whose claim expired.
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	f.clk.advance(time.Minute)
	require.ErrorIs(t, l.Renew(time.Minute), ErrNotHeld)
	require.NotErrorIs(t, errf(KindBusy, "x"), ErrNotHeld)
}
