package core

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/libleases/libleases/core/store"
)

// Edit is one write transaction holding its locks (SQLite's writer lock; on
// PostgreSQL the row locks it takes) until it ends: it may request jobs,
// claim, and complete (with facts) atomically. Leases it claims are pending
// until Commit succeeds; a failed or aborted edit closes them. Leases that
// were already active and are completed in an edit stay active if the edit
// does not commit. An Edit is safe for concurrent use, but holds the writer
// lock until Commit or Abort: keep it short.
type Edit struct {
	a         *Authority
	mu        sync.Mutex
	g         *guard
	pending   []*Lease
	finishing []*Lease
	done      bool
}

// Begin starts an edit (on SQLite, taking the writer lock).
func (a *Authority) Begin() (*Edit, error) { return a.begin(context.Background()) }

// begin starts an edit whose every operation and commit runs on ctx.
func (a *Authority) begin(ctx context.Context) (*Edit, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	// The edit's transaction waits on the caller's code: no other writer's
	// commit may wait on it (store.HoldsCaller).
	g, err := a.beginGuard(store.HoldsCaller(ctx))
	if err != nil {
		return nil, ended(ctx, err)
	}
	e := &Edit{a: a, g: g}
	a.mu.Lock()
	if a.edits == nil {
		a.edits = map[*Edit]struct{}{}
	}
	a.edits[e] = struct{}{}
	a.mu.Unlock()
	return e, nil
}

// String names the jobs the edit has claimed and completed; an edit holds
// leases, and shows none of their secrets.
func (e *Edit) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("edit{claimed=%v completed=%v done=%t}", jobIDs(e.pending), jobIDs(e.finishing), e.done)
}

func jobIDs(ls []*Lease) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.jobID
	}
	return ids
}

// Format shows String for every verb and flag.
func (e *Edit) Format(f fmt.State, verb rune) { formatAs(f, verb, e.String()) }

// LogValue logs String.
func (e *Edit) LogValue() slog.Value { return slog.StringValue(e.String()) }

// forget drops a finished edit from its authority's open set.
func (e *Edit) forget() {
	e.a.mu.Lock()
	delete(e.a.edits, e)
	e.a.mu.Unlock()
}

func (e *Edit) check() error {
	if e == nil || e.a == nil {
		return errf(KindInvalidArgument, "edit is nil")
	}
	if e.done {
		return errf(KindClosed, "edit is already committed or aborted")
	}
	return e.a.usable()
}

// afterOp keeps the edit usable after a rejection (which wrote nothing) but
// aborts it after a storage failure, which may have left partial writes.
func (e *Edit) afterOp(err error) error {
	err = ended(e.g.ctx, err)
	switch KindOf(err) {
	case 0:
		return nil
	case KindStorage, KindBusy, KindInternal, KindOutcomeUnknown:
		e.abortLocked()
		return err
	}
	return err
}

// RequestJob requests a job inside the edit.
func (e *Edit) RequestJob(production, key string, payload []byte) (string, error) {
	return e.RequestJobWith(production, key, payload, RequestOptions{})
}

// RequestJobWith requests a job with options inside the edit.
func (e *Edit) RequestJobWith(production, key string, payload []byte, o RequestOptions) (string, error) {
	if err := checkRequest(production, key, payload, o); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(); err != nil {
		return "", err
	}
	now, err := e.g.unguardedNow()
	if err != nil {
		return "", e.afterOp(err)
	}
	id, err := requestIn(e.g.ctx, e.g.tx, &e.g.wakes, now, production, key, payload, o)
	return id, e.afterOp(err)
}

// Claim claims the next job inside the edit; the lease is pending until Commit.
func (e *Edit) Claim(production, worker string, d time.Duration) (*Lease, error) {
	return e.claim(production, "", worker, d)
}

// ClaimJob claims a given job inside the edit.
func (e *Edit) ClaimJob(production, jobID, worker string, d time.Duration) (*Lease, error) {
	if err := checkID("job id", jobID); err != nil {
		return nil, err
	}
	return e.claim(production, jobID, worker, d)
}

func (e *Edit) claim(production, jobID, worker string, d time.Duration) (*Lease, error) {
	us, err := checkClaim(production, worker, d)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(); err != nil {
		return nil, err
	}
	l, err := claimIn(e.g, production, jobID, worker, us)
	if err != nil {
		return nil, aboutJob(e.afterOp(err), jobID)
	}
	l.edit = e
	e.pending = append(e.pending, l)
	return l, nil
}

// Complete completes a lease inside the edit: a lease this edit claimed, or
// an active one. The facts are published only if the edit commits.
func (e *Edit) Complete(l *Lease, f Facts) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(); err != nil {
		return err
	}
	if l.a != e.a {
		return errf(KindInvalidArgument, "lease belongs to another authority handle")
	}
	// The edit holds the writer: it never waits for l.mu, which an
	// operation on l (its keep-alive's renewal, a Release, ...) holds while
	// it waits for that writer (type Lease: the lock order). The local
	// state is read under smu; completeIn reads only what never changes.
	l.smu.Lock()
	state, edit := l.state, l.edit
	l.smu.Unlock()
	var err error
	switch {
	case state == LeaseClosed:
		err = l.closedErr()
	case state == LeasePending && edit != e:
		err = errf(KindClosed, "lease for job %s is pending in another edit", l.jobID)
	default:
		err = completeIn(e.g, l, f)
	}
	if err != nil {
		return aboutJob(e.afterOp(err), l.jobID)
	}
	e.finishing = append(e.finishing, l)
	return nil
}

// Commit commits the edit and consumes it. On success its pending leases
// become active, and leases it completed close. On failure nothing is
// published, its pending leases close, and other leases stay as they were.
// When the outcome is unknown (KindOutcomeUnknown), every lease of the edit
// is left active: the commit may have persisted, and each lease's next use
// asks the store whether its claim holds.
func (e *Edit) Commit() error {
	if e == nil || e.a == nil {
		return errf(KindInvalidArgument, "edit is nil")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return errf(KindClosed, "edit is already committed or aborted")
	}
	if err := e.a.usable(); err != nil {
		// The authority was closed under the open edit: publish nothing.
		e.abortLocked()
		return err
	}
	e.done = true
	err := ended(e.g.ctx, e.g.commit())
	e.forget()
	unknown := KindOf(err) == KindOutcomeUnknown
	finished := map[*Lease]bool{}
	for _, l := range e.finishing {
		finished[l] = true
	}
	for _, l := range e.pending {
		if l != nil && !finished[l] {
			l.mu.Lock()
			if err == nil || unknown {
				l.leftEdit(LeaseActive)
			} else {
				l.leftEdit(l.state)
				l.closeHere("was claimed in an edit that did not commit")
			}
			l.mu.Unlock()
		}
	}
	for _, l := range e.finishing {
		l.mu.Lock()
		l.leftEdit(l.state)
		switch {
		case unknown:
			l.setState(LeaseActive)
		case err == nil:
			l.closeHere("completed")
		case l.state == LeasePending:
			l.closeHere("was claimed in an edit that did not commit")
		}
		l.mu.Unlock()
	}
	return err
}

// Abort rolls the edit back and consumes it; its pending leases close.
// Aborting a finished edit does nothing.
func (e *Edit) Abort() {
	if e == nil || e.a == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.abortLocked()
}

func (e *Edit) abortLocked() {
	if e.done {
		return
	}
	e.done = true
	e.g.abort(nil) // an edit is the first of its transaction: it read only what was durable
	e.forget()
	for _, l := range append(e.pending, e.finishing...) {
		l.mu.Lock()
		if l.state == LeasePending {
			l.closeHere("was claimed in an edit that was aborted")
		}
		l.leftEdit(l.state)
		l.mu.Unlock()
	}
}
