// Contexts reach the store: an operation whose context ends before it
// commits writes nothing and says so (busy, wrapping the context's error);
// one whose commit has started is never reported as failed, except as
// outcome_unknown.
package core

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// requireAbandoned checks the error of an operation whose context ended.
func requireAbandoned(t *testing.T, err error, cause error) {
	t.Helper()
	requireKind(t, err, KindBusy)
	require.ErrorIs(t, err, cause)
	require.Contains(t, err.Error(), "nothing was written")
}

func TestACancelledContextIsHonouredAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	l := f.claim("w", time.Minute)
	tok, err := l.Export()
	require.NoError(t, err)
	before := f.snapshot()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	late, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	for _, c := range []struct {
		ctx   context.Context
		cause error
	}{{cancelled, context.Canceled}, {late, context.DeadlineExceeded}} {
		ctx := c.ctx
		ops := map[string]func() error{
			"create production": func() error { _, err := f.a.createProduction(ctx, "q", nil); return err },
			"request":           func() error { _, err := f.a.request(ctx, "p", "k", nil, RequestOptions{}); return err },
			"cancel":            func() error { return f.a.cancel(ctx, "p", ids[2]) },
			"claim":             func() error { _, err := f.a.claimOne(ctx, "p", "", "w", time.Minute); return err },
			"claim job":         func() error { _, err := f.a.claimOne(ctx, "p", ids[1], "w", time.Minute); return err },
			"renew":             func() error { return l.renew(ctx, time.Hour) },
			"release":           func() error { return l.release(ctx) },
			"fail":              func() error { return l.fail(ctx, "r") },
			"complete":          func() error { return l.complete(ctx, Facts{}) },
			"complete and claim next": func() error {
				_, err := l.completeAndClaimNext(ctx, Facts{}, time.Minute)
				return err
			},
			"import": func() error { _, err := f.a.importToken(ctx, tok); return err },
			"begin":  func() error { _, err := f.a.begin(ctx); return err },
			"create production with policies": func() error {
				_, err := f.a.CreateProductionWithPoliciesContext(ctx, "q", DefaultRetryPolicy(), DefaultRetentionPolicy())
				return err
			},
			"set retention policy": func() error {
				return f.a.SetRetentionPolicyContext(ctx, "p", RetentionPolicy{Completed: time.Hour})
			},
		}
		for name, op := range ops {
			err := op()
			requireAbandoned(t, err, c.cause)
			require.Equal(t, before, f.snapshot(), name)
			require.Equal(t, LeaseActive, l.State(), name)
		}
	}
	require.NoError(t, l.Renew(time.Hour), "the lease still holds its claim")
}

func TestAContextThatEndsWhileWaitingForALockEndsTheWait(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	e, err := f.a.Begin()
	require.NoError(t, err)
	defer e.Abort()
	// The edit holds the writer lock (SQLite) or the job's row (PostgreSQL).
	_, err = e.ClaimJob("p", ids[0], "holder", time.Minute)
	require.NoError(t, err)
	other, err := OpenWith(f.path, Options{BusyTimeout: time.Minute}) // far beyond the bound below
	require.NoError(t, err)
	defer other.Close()
	other.setClock(f.clk.Now)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = other.claimOne(ctx, "p", ids[0], "w", time.Minute)
	requireAbandoned(t, err, context.Canceled)
	// Seconds to spare for a stalled host, and still half the busy timeout.
	require.Less(t, time.Since(start), 30*time.Second, "the wait ended with the context, well before the busy timeout")
	e.Abort()
	require.Equal(t, StateRequested, f.job(ids[0]).State)
	_, err = other.ClaimJob("p", ids[0], "w", time.Minute)
	require.NoError(t, err, "the store is usable after the abandoned wait")
}

// cancelAtCommit ends the operation's context just before its commit, after
// every statement of the transaction ran.
type cancelAtCommit struct {
	store.Tx
	cancel context.CancelFunc
}

func (t cancelAtCommit) Commit() error {
	t.cancel()
	return t.Tx.Commit()
}

func TestAContextThatEndsBeforeCommitWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Minute)
	before := f.snapshot()
	base := f.a.b
	for name, op := range map[string]func(ctx context.Context) error{
		"claim":    func(ctx context.Context) error { _, err := f.a.claimOne(ctx, "p", "", "w", time.Minute); return err },
		"renew":    func(ctx context.Context) error { return l.renew(ctx, time.Hour) },
		"complete": func(ctx context.Context) error { return l.complete(ctx, Facts{}) },
		"complete and claim next": func(ctx context.Context) error {
			_, err := l.completeAndClaimNext(ctx, Facts{}, time.Minute)
			return err
		},
		"request": func(ctx context.Context) error {
			_, err := f.a.request(ctx, "p", "", nil, RequestOptions{})
			return err
		},
		"create production with policies": func(ctx context.Context) error {
			_, err := f.a.CreateProductionWithPoliciesContext(ctx, "q", DefaultRetryPolicy(), DefaultRetentionPolicy())
			return err
		},
		"set retention policy": func(ctx context.Context) error {
			return f.a.SetRetentionPolicyContext(ctx, "p", RetentionPolicy{Completed: time.Hour})
		},
		"edit": func(ctx context.Context) error {
			e, err := f.a.begin(ctx)
			require.NoError(t, err)
			_, err = e.Claim("p", "w", time.Minute)
			require.NoError(t, err)
			return e.Commit()
		},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		f.a.b = base
		wrapTxs(f.a, func(tx store.Tx) store.Tx { return cancelAtCommit{Tx: tx, cancel: cancel} })
		requireAbandoned(t, op(ctx), context.Canceled)
		f.a.b = base
		require.Equal(t, before, f.snapshot(), name)
		require.Equal(t, LeaseActive, l.State(), name)
	}
}

// A context may end at any moment of an operation: before its commit,
// nothing is written and the error says the context ended; once the commit
// has started, it runs to its end, and the operation reports success (or, if
// the commit itself failed, outcome_unknown). Never anything else.
func TestACommitInFlightIsNeverReportedAsAnyOtherFailure(t *testing.T) {
	f := newFixture(t)
	const rounds = 150
	f.request(rounds + 2)
	// The context ends anywhere from the start to well past the commit of a
	// claim (timed once the statements are prepared).
	f.claim("w", time.Minute)
	start := time.Now()
	f.claim("w", time.Minute)
	span := 2 * time.Since(start)
	claimed, abandonedN := 2, 0
	for i := 0; i < rounds; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(rand.N(span), cancel)
		l, err := f.a.claimOne(ctx, "p", "", "w", time.Minute)
		cancel()
		js, jerr := f.a.Jobs("p")
		require.NoError(t, jerr)
		held := 0
		for _, j := range js {
			if j.State == StateClaimed {
				held++
			}
		}
		switch {
		case err == nil:
			claimed++
			require.Equal(t, StateClaimed, f.job(l.JobID()).State)
		case KindOf(err) == KindOutcomeUnknown:
			claimed = held // either way; the store says which
		default:
			requireAbandoned(t, err, context.Canceled)
			abandonedN++
		}
		require.Equal(t, claimed, held, "round %d: %v", i, err)
	}
	t.Logf("%d claims committed, %d abandoned", claimed, abandonedN)
}

func TestAnAbandonedEditClosesItsPendingLeases(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	before := f.snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := f.a.begin(ctx)
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	cancel()
	err = e.Commit()
	requireAbandoned(t, err, context.Canceled)
	require.True(t, errors.Is(err, ErrBusy))
	require.Equal(t, LeaseClosed, l.State())
	require.Equal(t, before, f.snapshot())
}
