//go:build leasestest

// The background pruner's passes (SetPruneInterval) are logged when they
// fail, and the last one is kept (LastBackgroundPrune). Built with the
// leasestest tag: the failing passes come from InjectCommitFaultsForTest.
package core

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

const (
	pruneFailed    = "leases: background prune failed"
	pruneNoVacuum  = "leases: background prune could not vacuum"
	pruneRecovered = "leases: background prune recovered"
)

// logRecorder is a slog handler that keeps every record, and each as the
// text and JSON handlers write it.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	written bytes.Buffer
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	if err := slog.NewTextHandler(&h.written, nil).Handle(ctx, r); err != nil {
		return err
	}
	return slog.NewJSONHandler(&h.written, nil).Handle(ctx, r)
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler {
	panic("the authority logs no attributes of its own")
}
func (h *logRecorder) WithGroup(string) slog.Handler { panic("the authority logs no group") }

// all is every record so far; with, those with message msg.
func (h *logRecorder) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.records...)
}

func (h *logRecorder) with(msg string) []slog.Record {
	var out []slog.Record
	for _, r := range h.all() {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

func (h *logRecorder) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.written.String()
}

// recordAttrs is a record's attributes by key.
func recordAttrs(r slog.Record) map[string]slog.Value {
	out := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value
		return true
	})
	return out
}

// logTo makes a log its records to a new recorder.
func logTo(a *Authority) *logRecorder {
	h := &logRecorder{}
	a.SetLogger(slog.New(h))
	return h
}

func TestAFailedBackgroundPrunePassIsLoggedOnceWithItsError(t *testing.T) {
	f := &fixture{t: t, path: newLocation(t, "leases.db"), clk: &fakeClock{now: t0}}
	f.a = f.open()
	var failing atomic.Bool
	var refused atomic.Int64
	require.NoError(t, InjectCommitFaultsForTest(f.a, func(bool) CommitFault {
		if failing.Load() {
			refused.Add(1)
			return CommitRefused
		}
		return CommitNormally
	}))
	_, err := f.a.CreateProductionWithPolicy("p", noBackoff)
	require.NoError(t, err)
	f.retention(RetentionPolicy{Completed: time.Hour})
	done := []string{f.finished(StateCompleted), f.finished(StateCompleted)}
	payload := []byte("a payload that no log shows")
	id, err := f.a.RequestJob("p", "", payload)
	require.NoError(t, err)
	l, err := f.a.ClaimJob("p", id, "w", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Complete(Facts{}))
	done = append(done, id)
	// The production's newest job, claimed: a token exists while the
	// passes fail.
	f.request(1)
	held := f.claim("w", 24*time.Hour)
	tok, err := held.Export()
	require.NoError(t, err)
	f.clk.advance(2 * time.Hour)
	log := logTo(f.a)

	failing.Store(true)
	f.a.SetPruneInterval(20 * time.Millisecond)
	testwait.Eventually(t, func() bool { return len(log.with(pruneFailed)) >= 3 })
	f.a.SetPruneInterval(0)

	failed := log.with(pruneFailed)
	require.Len(t, log.all(), len(failed), "a failed pass logs nothing else")
	for i, r := range failed {
		require.Equal(t, slog.LevelWarn, r.Level)
		at := recordAttrs(r)
		require.EqualValues(t, i+1, at["failures"].Int64(), "the failures count up, one record a pass")
		require.Contains(t, at["err"].String(), ErrInjectedFault.Error())
		for _, k := range []string{"jobs", "events", "batches"} {
			require.Contains(t, at, k)
			require.Zero(t, at[k].Int64(), "the pass failed at its first batch: %s", k)
		}
	}
	last := f.a.LastBackgroundPrune()
	require.ErrorIs(t, last.Err, ErrInjectedFault)
	require.EqualValues(t, len(failed), last.Failures)
	require.False(t, last.Ended.IsZero())
	// Each failed pass refused one commit; the pass that SetPruneInterval(0)
	// cut short may have refused one more, and is neither logged nor kept.
	require.GreaterOrEqual(t, refused.Load(), int64(len(failed)))
	require.LessOrEqual(t, refused.Load(), int64(len(failed))+1)
	for _, id := range done {
		require.Equal(t, StateCompleted, f.job(id).State, "nothing was pruned")
	}

	// The faults stop: the next pass recovers, and says so once.
	failing.Store(false)
	f.a.SetPruneInterval(20 * time.Millisecond)
	testwait.Eventually(t, func() bool { return len(log.with(pruneRecovered)) == 1 })
	recovered := log.with(pruneRecovered)[0]
	require.Equal(t, slog.LevelInfo, recovered.Level)
	require.EqualValues(t, len(failed), recordAttrs(recovered)["failures"].Int64(), "how many passes failed before")
	after := f.a.LastBackgroundPrune()
	require.NoError(t, after.Err)
	require.Zero(t, after.Failures)
	for _, id := range done {
		f.gone(id)
	}
	// Later passes succeed and say nothing.
	testwait.Eventually(t, func() bool { return f.a.LastBackgroundPrune().Ended.After(after.Ended) })
	f.a.SetPruneInterval(0)
	require.Len(t, log.all(), len(failed)+1, "no record after the recovery")
	require.Equal(t, StateClaimed, f.job(held.JobID()).State)

	// No record holds the claim's secret, its token, or a payload.
	written := log.text()
	require.NotEmpty(t, written)
	requireNoLeak(t, leakForms(held.secret.Bytes()), written, "the background pruner's log")
	require.NotContains(t, written, tok)
	require.NotContains(t, written, string(payload))
}

func TestASuccessfulBackgroundPrunePassLogsNothing(t *testing.T) {
	f := newFixture(t)
	log := logTo(f.a)
	f.retention(RetentionPolicy{Completed: time.Hour})
	require.True(t, f.a.LastBackgroundPrune().Ended.IsZero(), "no pass yet")
	f.a.SetPruneInterval(20 * time.Millisecond)
	var ended time.Time
	for round := 0; round < 2; round++ {
		done := []string{f.finished(StateCompleted), f.finished(StateCompleted)}
		f.request(1)
		f.clk.advance(2 * time.Hour)
		// A pass with work...
		testwait.Eventually(t, func() bool {
			for _, id := range done {
				if _, err := f.a.Job("p", id); !errors.Is(err, ErrNotFound) {
					return false
				}
			}
			return true
		})
		// ...then passes with none.
		for i := 0; i < 2; i++ {
			prev := f.a.LastBackgroundPrune().Ended
			testwait.Eventually(t, func() bool { return f.a.LastBackgroundPrune().Ended.After(prev) })
		}
		last := f.a.LastBackgroundPrune()
		require.True(t, last.Ended.After(ended), "Ended advances")
		ended = last.Ended
		require.NoError(t, last.Err)
		require.Zero(t, last.Failures)
		require.Zero(t, last.Result.Jobs, "the last passes found nothing")
	}
	f.a.SetPruneInterval(0)
	require.Empty(t, log.all(), "a pass that succeeds logs nothing")
}

// closingTx holds a pruning batch's deletes until its context ends, then
// fails them, as a statement interrupted by its context does.
type closingTx struct {
	store.Tx
	entered chan<- struct{}
}

func (c closingTx) DeleteFinishedJobs(ctx context.Context, ids []string, state string, by int64) (int64, int64, error) {
	select {
	case c.entered <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
	case <-time.After(testwait.EventuallyBound):
	}
	return 0, 0, errors.New("the statement was interrupted")
}

func TestClosingTheAuthorityDuringABackgroundPruneLogsNoFailure(t *testing.T) {
	f := newFixture(t)
	log := logTo(f.a)
	f.retention(RetentionPolicy{Completed: time.Hour})
	done := f.finished(StateCompleted)
	f.request(1)
	f.clk.advance(2 * time.Hour)
	entered := make(chan struct{}, 1)
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return closingTx{Tx: tx, entered: entered} })

	// The interval changes while a batch is in flight, then the authority
	// closes while the new pruner's batch is.
	f.a.SetPruneInterval(20 * time.Millisecond)
	testwait.Receive(t, entered, testwait.EventuallyBound, "the first pruner's batch")
	f.a.SetPruneInterval(20 * time.Millisecond)
	testwait.Receive(t, entered, testwait.EventuallyBound, "the second pruner's batch")
	require.NoError(t, f.a.Close())

	require.Empty(t, log.with(pruneFailed), "a pass cut short by Close or SetPruneInterval is no failure")
	require.Empty(t, log.all())
	require.True(t, f.a.LastBackgroundPrune().Ended.IsZero(), "a pass cut short is not kept")
	f.reopen()
	require.Equal(t, StateCompleted, f.job(done).State)
}

func TestABackgroundPrunePassThatCouldNotVacuumIsLoggedWithItsNoteOnceWhileItStaysTheSame(t *testing.T) {
	f := newFixture(t)
	f.a.SetPruneInterval(0)
	log := logTo(f.a)
	const note = "the space of the deleted rows is left to the server's autovacuum"
	const other = "the vacuum failed"
	f.a.backgroundPassEnded(PruneResult{Jobs: 3, Batches: 1, Note: note}, nil)
	f.a.backgroundPassEnded(PruneResult{Jobs: 1}, &Error{Kind: KindStorage, Msg: "prune jobs"})
	f.a.backgroundPassEnded(PruneResult{Jobs: 2, Batches: 1, Note: note}, nil)
	f.a.backgroundPassEnded(PruneResult{Jobs: 2, Batches: 1, Note: note}, nil)
	f.a.backgroundPassEnded(PruneResult{Jobs: 2, Batches: 1, Note: other}, nil)
	rs := log.all()
	require.Len(t, rs, 4)
	for i, want := range []struct {
		level slog.Level
		msg   string
	}{{slog.LevelWarn, pruneNoVacuum}, {slog.LevelWarn, pruneFailed}, {slog.LevelInfo, pruneRecovered},
		{slog.LevelWarn, pruneNoVacuum}} {
		require.Equal(t, want.level, rs[i].Level, i)
		require.Equal(t, want.msg, rs[i].Message, i)
	}
	require.Equal(t, note, recordAttrs(rs[0])["note"].String())
	require.EqualValues(t, 1, recordAttrs(rs[1])["jobs"].Int64(), "what the pass deleted before it failed")
	require.EqualValues(t, 1, recordAttrs(rs[2])["failures"].Int64())
	require.Equal(t, other, recordAttrs(rs[3])["note"].String(), "a different note is news")
	last := f.a.LastBackgroundPrune()
	require.Equal(t, other, last.Result.Note)
	require.Zero(t, last.Failures)

	// nil is slog.Default() at the time of logging.
	f.a.SetLogger(nil)
	require.Same(t, slog.Default(), f.a.log())
}
