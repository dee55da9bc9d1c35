package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/libleases/libleases/core/store"
)

// guard is one guarded write transaction under the clock policy
// (docs/CLOCK.md): the clock is sampled when an operation starts and must not be
// behind the durable high-water mark; it is sampled again before commit, when
// every claim the transaction relies on must still be unexpired; the mark is
// advanced in the same transaction. If that commit fails, the transaction is
// rolled back first and the observed mark is then stored on its own.
type guard struct {
	a         *Authority
	ctx       context.Context // the operation's (an edit's: its Begin's)
	tx        store.Tx
	hwm       int64 // durable mark read inside this write transaction (once marked)
	marked    bool  // hwm was read: on the first need, not at begin (mark)
	observed  int64 // greatest sample taken so far
	guarded   bool  // at least one guarded operation ran
	keep      bool  // a failed claim made transitions that must commit (lapsed claims)
	deadlines []deadline
	wakes     wakes // productions this transaction may make claimable
	// started is this host's monotonic time before the transaction began:
	// every clock sample of the transaction is taken after it, so an expiry
	// granted by the transaction comes no earlier, locally, than started
	// plus the time granted.
	started time.Time
	// setBackLimit bounds the jobs due too early that a claim sets back
	// (readyIn; 0: no bound); more reports that a claim stopped at it.
	setBackLimit int
	more         bool
}

func (a *Authority) beginGuard(ctx context.Context) (*guard, error) {
	started := time.Now()
	tx, err := a.b.BeginWrite(ctx)
	if err != nil {
		return nil, storageErr("begin", err)
	}
	return &guard{a: a, ctx: ctx, tx: tx, started: started}, nil
}

// mark reads the durable mark inside the transaction, once, when a sample
// first needs it: always before that sample, as at the transaction's
// begin, and then a store may answer it from a read the operation made
// first (PostgreSQL reads it with a claim's production, in one statement).
func (g *guard) mark() (int64, error) {
	if !g.marked {
		hwm, err := g.tx.HWM(g.ctx)
		if err != nil {
			return 0, storageErr("read high-water mark", err)
		}
		g.hwm, g.marked = hwm, true
	}
	return g.hwm, nil
}

// sample is the first sample of a guarded operation: a clock behind the mark
// (or behind an earlier sample of this transaction) rejects it.
func (g *guard) sample() (int64, error) {
	hwm, err := g.mark()
	if err != nil {
		return 0, err
	}
	now, err := g.a.sampleIn(g.ctx, g.tx)
	if err != nil {
		return 0, err
	}
	floor := max(hwm, g.observed)
	if now < floor {
		return 0, errf(KindClockRegressed,
			"the authority clock (%s) is behind its high-water mark (%s); guarded operations resume when it catches up",
			describeUS(now), describeUS(floor))
	}
	g.observed = now
	g.guarded = true
	return now, nil
}

// unguardedNow is the time of an unguarded operation inside the
// transaction (an edit's request): the clock's sample, never earlier than
// the mark read when the transaction began, nor than a sample the
// transaction already acted on. It checks nothing and moves no mark.
func (g *guard) unguardedNow() (int64, error) {
	hwm, err := g.mark()
	if err != nil {
		return 0, err
	}
	now, err := g.a.sampleIn(g.ctx, g.tx)
	if err != nil {
		return 0, err
	}
	return max(now, hwm, g.observed), nil
}

// locked is the operation's time once it holds the rows it decides on. Under
// SQLite's writer lock that is the first sample. A store with a server clock
// locks rows as it reads them (PostgreSQL), so a transaction may have started
// before another one on the same job committed: the clock is read again now,
// so that a transition is never timed before the one it follows. The sample
// must not be behind the ones before it.
func (g *guard) locked(first int64) (int64, error) {
	if _, ok := g.tx.(store.Clock); !ok {
		return first, nil
	}
	now, err := g.a.sampleIn(g.ctx, g.tx)
	if err != nil {
		return 0, err
	}
	if now < g.observed {
		return 0, wentBack(now, g.observed)
	}
	g.observed = now
	return now, nil
}

// follows checks that now, the operation's time once it holds j's row, is
// not behind j's last change: a transition is never timed before the one it
// follows. Under SQLite's writer lock the mark check of the first sample
// already ensures it. PostgreSQL reads the mark before it locks the row, so
// a transition of the job (a release, a renewal, another claim) may commit
// in between at a later time than this clock reads — a clock that stepped
// back, or another host's seam ahead — and then the mark is past now as
// well: clock_regressed, as the operation would be had it started after
// that commit. A claim calls it only once j is claimable at now (a job
// requested or redriven at a time ahead of the mark is not yet, and is
// passed over or not ready, never clock_regressed).
func (g *guard) follows(now int64, j store.Job) error {
	if now < j.UpdatedAt {
		return errf(KindClockRegressed,
			"the authority clock (%s) is behind the last change of job %s (%s), committed while this operation ran; guarded operations resume when it catches up",
			describeUS(now), j.ID, describeUS(j.UpdatedAt))
	}
	return nil
}

func wentBack(now, observed int64) error {
	return errf(KindClockRegressed, "the authority clock went back during the operation (%s < %s); nothing was committed",
		describeUS(now), describeUS(observed))
}

// deadline is a claim the transaction relies on: its job and its expiry.
type deadline struct {
	jobID  string
	expiry int64
}

// mustOutlive records that the transaction relies on the claim on jobID
// expiring at expiry: the pre-commit sample must be before it. The
// rejection names that job, so that a transaction relying on two claims
// (complete-and-claim-next) tells which one would not outlive it.
func (g *guard) mustOutlive(jobID string, expiry int64) {
	g.deadlines = append(g.deadlines, deadline{jobID, expiry})
}

// abort rolls back a transaction that will not commit and returns what the
// operation answers: verdict (a rule's refusal, a failed statement), unless
// the store says the transaction may have read writes that never became
// durable (store.ErrReadUncommitted: writes of other writers it shared a
// transaction with, SQLite group commit). No answer may rest on those: the
// operation is then run again (retrying), on what is durable, or reports
// busy.
func (g *guard) abort(verdict error) error { return aborted(g.tx.Rollback(), verdict) }

// aborted is the answer of a transaction rolled back (rollback is the
// Rollback's result) after verdict.
func aborted(rollback, verdict error) error {
	if errors.Is(rollback, store.ErrReadUncommitted) {
		return storageErr("roll back", rollback)
	}
	return verdict
}

// commit applies the pre-commit checks and commits; then waiting claims
// learn what it may have made claimable.
func (g *guard) commit() error {
	err := g.commitTx()
	g.a.waits.committed(err, g.wakes)
	return err
}

func (g *guard) commitTx() error {
	if !g.guarded {
		if err := g.tx.Commit(); err != nil {
			return commitErr(err)
		}
		return nil
	}
	now, err := g.a.sampleIn(g.ctx, g.tx)
	if err != nil {
		return g.fail(g.observed, err)
	}
	if now < g.observed {
		return g.fail(g.observed, wentBack(now, g.observed))
	}
	for _, d := range g.deadlines {
		if now >= d.expiry {
			e := errf(KindExpired, "the claim expired at %s, before the operation could commit at %s; nothing was committed",
				describeUS(d.expiry), describeUS(now))
			e.JobID = d.jobID
			return g.fail(now, e)
		}
	}
	if err := g.tx.SetHWM(g.ctx, now); err != nil {
		return g.fail(now, storageErr("record high-water mark", err))
	}
	if err := g.tx.Commit(); err != nil {
		// An abandoned commit never started, and one refused before COMMIT
		// ran failed as a write of the operation does: nothing to record.
		// A commit shared with other writers and lost through another's
		// failure is a failed commit of this operation: it records.
		refused := errors.Is(err, store.ErrNotCommitted) && !errors.Is(err, store.ErrLostWithOthers)
		if !errors.Is(err, store.ErrAbandoned) && !refused {
			g.a.recordHWM(g.ctx, now)
		}
		return commitErr(err)
	}
	return nil
}

// fail is clock policy rule 3 for a guarded transaction that will not
// commit: roll it back first (nothing is published), then store the observed
// sample as the mark in a transaction of its own.
func (g *guard) fail(observed int64, err error) error {
	rollback := g.tx.Rollback()
	g.a.recordHWM(g.ctx, observed)
	return aborted(rollback, err)
}

// commitErr reports a failed commit. A store that aborted the commit over a
// concurrent conflict, or refused a write sent with it (ErrNotCommitted),
// guarantees nothing was written (and the operation may be retried, if the
// refusal was a conflict); any other failure leaves the outcome unknown.
func commitErr(err error) error {
	if errors.Is(err, store.ErrRetry) || errors.Is(err, store.ErrAbandoned) || errors.Is(err, store.ErrReconnect) ||
		errors.Is(err, store.ErrNotCommitted) {
		return storageErr("commit", err)
	}
	return outcomeUnknown(err)
}

// retrying runs one whole transaction, running it again when the store
// aborted it over a conflict with a concurrent transaction (PostgreSQL
// serialization failures and deadlocks; row-uniqueness races between two
// creators of one name), or when its connection failed before it committed
// (store.ErrReconnect: a terminated backend, a session left read-only).
// After maxAttempts it reports Busy; after maxReconnects failed connections,
// the last failure (storage).
func (a *Authority) retrying(ctx context.Context, op func() error) error {
	var err error
	reconnects := 0
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			// Jittered exponential back-off: 1ms, 2ms, 4ms … capped at 64ms.
			d := time.Millisecond << min(attempt-1, 6)
			t := time.NewTimer(d/2 + rand.N(d/2+1))
			select {
			case <-ctx.Done():
				t.Stop()
				return abandoned(ctx, err)
			case <-t.C:
			}
		}
		err = ended(ctx, op())
		if errors.Is(err, store.ErrReconnect) {
			// The store discarded a failed connection before anything was
			// sent for commit: run again on a fresh one, a few times (a
			// session that fails on fresh connections too is reported).
			if reconnects++; reconnects == maxReconnects {
				return err
			}
			continue
		}
		if !retryable(err) {
			return err
		}
	}
	return &Error{Kind: KindBusy, Err: err, Msg: fmt.Sprintf(
		"the operation conflicted with concurrent transactions %d times in a row; nothing was written", maxAttempts)}
}

// maxAttempts bounds retrying; maxReconnects bounds the attempts that
// failed on their connection (store.ErrReconnect) among them.
const (
	maxAttempts   = 12
	maxReconnects = 3
)

func retryable(err error) bool {
	return err != nil && (errors.Is(err, store.ErrRetry) || errors.Is(err, store.ErrConflict))
}

// ended reports err, the outcome of an operation on ctx: once ctx has ended,
// a storage failure or a wait given up is the context's doing, and is
// reported as abandoned. A rule's verdict, and outcome_unknown (the commit
// had started), stay as they are: a commit is never interrupted.
func ended(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	switch KindOf(err) {
	case KindStorage, KindBusy:
		return abandoned(ctx, err)
	}
	return err
}

// abandoned is the error of an operation whose context ended before it
// committed: KindBusy (nothing was written, as after a lock wait that ran
// out), wrapping the context's cause, so errors.Is(err, context.Canceled)
// and context.DeadlineExceeded hold. cause, the store's report, may be nil.
func abandoned(ctx context.Context, cause error) error {
	why := context.Cause(ctx)
	msg := "the operation was abandoned before it committed (" + why.Error() + "); nothing was written"
	if cause != nil && !errors.Is(cause, why) {
		return &Error{Kind: KindBusy, Msg: msg, Err: fmt.Errorf("%w (%v)", why, cause)}
	}
	return &Error{Kind: KindBusy, Msg: msg, Err: why}
}

func outcomeUnknown(err error) error {
	return &Error{Kind: KindOutcomeUnknown,
		Msg: "commit failed; the change may or may not have persisted, so the next use asks the store again", Err: err}
}

// recordHWM stores an observed clock sample in its own transaction, after a
// guarded commit failed and was rolled back. Best effort: if the store cannot
// write, the operation already reported its own failure.
func (a *Authority) recordHWM(ctx context.Context, sample int64) {
	tx, err := a.b.BeginWrite(ctx)
	if err != nil {
		return
	}
	if err := tx.SetHWM(ctx, sample); err != nil {
		tx.Rollback()
		return
	}
	tx.Commit()
}

// HighWaterMark reports the durable clock high-water mark.
func (a *Authority) HighWaterMark() (time.Time, error) {
	if err := a.usable(); err != nil {
		return time.Time{}, err
	}
	v, err := a.b.HWM(context.Background())
	if err != nil {
		return time.Time{}, storageErr("read high-water mark", err)
	}
	return time.UnixMicro(v).UTC(), nil
}
