// Waiting claims: ClaimWait, and the waitroom that wakes its waiters when a
// job may have become claimable (docs/workers.md).
package core

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/libleases/libleases/core/internal/wake"
	"github.com/libleases/libleases/core/store"
)

// MaxWait is the longest wait ClaimWait accepts. A longer wait is a loop of
// waits (the bindings wait in short slices anyway).
const MaxWait = 24 * time.Hour

// safetyPoll is how often a production's first waiter looks even though
// nothing woke it (jittered by ±20%): PostgreSQL notices can be lost (a
// dropped LISTEN connection), and a look costs one read.
var safetyPoll = time.Second

// watchLinger keeps the store's watcher running this long after its last
// waiter left: a worker that waits in short slices keeps one watcher
// instead of starting one per slice.
var watchLinger = time.Second

// minWakeIn is the shortest sleep before looking again at a claim expiry:
// the authority's clock and this host's timers do not tick together, and a
// look a little early must not become a busy loop.
const minWakeIn = time.Millisecond

// lostRaceRelook is the first pause before looking again after another
// claimer took the job this waiter found (doubling while it keeps losing, up
// to the safety poll): the winner's claim, not yet committed when this
// waiter looked for the next expiry, is seen by the next look.
const lostRaceRelook = 10 * time.Millisecond

// wakes lists the productions a transaction may make claimable. add is the
// one place that says so: a request and a release call it inside their
// transaction (so does an edit's request); a transition that makes a job
// claimable again at a later time would call it too.
type wakes []string

func (w *wakes) add(ctx context.Context, tx store.Tx, productionID string) error {
	if n, ok := tx.(store.Notifier); ok {
		if err := n.Claimable(ctx, productionID); err != nil {
			return storageErr("notify waiting claims", err)
		}
	}
	*w = append(*w, productionID)
	return nil
}

// waitroom holds an authority's waiting claims and the store watcher that
// wakes them for commits made elsewhere. The watcher runs only while someone
// waits (and watchLinger after).
type waitroom struct {
	hub     *wake.Hub
	watcher store.Watcher // nil: the store has none

	mu     sync.Mutex
	users  int
	stop   func() // the running watcher's
	linger *time.Timer
	closed bool
}

func newWaitroom(b store.Backend) *waitroom {
	r := &waitroom{hub: wake.New(safetyPoll)}
	r.watcher, _ = b.(store.Watcher)
	return r
}

// committed wakes the first waiter of every production a transaction may
// have made claimable, once it committed, or may have (outcome unknown).
func (r *waitroom) committed(err error, w wakes) {
	if err != nil && KindOf(err) != KindOutcomeUnknown {
		return
	}
	for _, id := range w {
		r.hub.Wake(id)
	}
}

// changed is the watcher's report of a commit made elsewhere.
func (r *waitroom) changed(productionID string) {
	if productionID == "" {
		r.hub.WakeAny()
		return
	}
	r.hub.Wake(productionID)
}

func (r *waitroom) enter() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users++
	if r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	if r.stop == nil && r.watcher != nil && !r.closed {
		r.stop = r.watcher.Watch(r.changed)
	}
}

func (r *waitroom) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users--
	if r.users == 0 && r.stop != nil && r.linger == nil {
		r.linger = time.AfterFunc(watchLinger, r.idle)
	}
}

func (r *waitroom) idle() {
	r.mu.Lock()
	stop := r.stop
	if r.users > 0 || stop == nil {
		r.mu.Unlock()
		return
	}
	r.stop, r.linger = nil, nil
	r.mu.Unlock()
	stop()
}

// watching reports whether the store's watcher runs.
func (r *waitroom) watching() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stop != nil
}

// close ends every wait (they report closed) and stops the watcher.
func (r *waitroom) close() {
	r.hub.Close()
	r.mu.Lock()
	r.closed = true
	if r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// ClaimWait claims the next claimable job of production for d, like Claim,
// waiting up to wait for one to become claimable. It returns as soon as a job
// is claimed, and ErrNothingToClaim once wait has passed; wait 0 is Claim.
// Every decision about the lease is Claim's, on the authority's clock, in
// the claim's transaction; wait is this caller's own patience, measured on
// this host's monotonic clock.
//
// While it waits it writes nothing and takes no writer lock: it reads the
// store when it is woken, and runs a claim transaction only when that read
// found a claimable job. It wakes when a request or a release commits
// (through this authority at once; through another handle or process on the
// same SQLite file within milliseconds; on PostgreSQL by a notification from
// any host), when the earliest claim of the production expires, and at least
// once a second whatever happens. Of many waiters of one production, one is
// woken per change, in the order they started waiting.
//
// When ctx ends first it returns an error of KindInterrupted that wraps
// ctx's cause (errors.Is(err, context.Canceled)); nothing was claimed.
// Closing the authority ends the wait with KindClosed.
func (a *Authority) ClaimWait(ctx context.Context, production, worker string, d, wait time.Duration) (*Lease, error) {
	if ctx == nil {
		return nil, errf(KindInvalidArgument, "context is nil")
	}
	if _, err := checkClaim(production, worker, d); err != nil {
		return nil, err
	}
	if wait < 0 || wait > MaxWait {
		return nil, errf(KindInvalidArgument, "wait %s is out of range: 0 (do not wait) up to %s", wait, MaxWait)
	}
	if err := a.usable(); err != nil {
		return nil, err
	}
	if wait == 0 {
		l, err := a.claimOne(ctx, production, "", worker, d)
		return l, asInterrupted(ctx, err)
	}
	l, err := a.claimWaiting(ctx, production, worker, d, wait)
	return l, asInterrupted(ctx, err)
}

func (a *Authority) claimWaiting(ctx context.Context, production, worker string, d, wait time.Duration) (*Lease, error) {
	p, err := productionByName(ctx, a.b, production)
	if err != nil {
		return nil, err
	}
	w, err := a.waits.hub.Join(p.ID)
	if err != nil {
		return nil, errf(KindClosed, "authority is closed")
	}
	a.waits.enter()
	defer a.waits.leave()
	passOn := false
	defer func() { w.Leave(passOn) }()
	bound := time.NewTimer(wait)
	defer bound.Stop()
	relook := lostRaceRelook
	for {
		w.Arm()
		found, err := a.look(ctx, p.ID, w)
		if err != nil {
			return nil, err
		}
		if found {
			l, err := a.claimOne(ctx, production, "", worker, d)
			if err == nil {
				passOn = true // more jobs may be there
				return l, nil
			}
			if KindOf(err) != KindNothingToClaim {
				passOn = true
				return nil, err
			}
			// Another claimer took it first: wait again.
			if err := a.scheduleExpiry(ctx, p.ID, w); err != nil {
				return nil, err
			}
			w.WakeIn(relook)
			relook = min(2*relook, safetyPoll)
		} else {
			relook = lostRaceRelook
		}
		select {
		case <-w.C():
		case <-bound.C:
			return nil, errf(KindNothingToClaim, "production %q had no claimable job within %s", production, wait)
		case <-ctx.Done():
			return nil, interrupted(ctx)
		case <-a.waits.hub.Done():
			return nil, errf(KindClosed, "authority is closed")
		}
	}
}

// look reads, without writing, whether production has a claimable job now on
// the authority's clock. When it has none, the waiter's queue is set to wake
// at the earliest claim expiry.
func (a *Authority) look(ctx context.Context, productionID string, w *wake.Waiter) (bool, error) {
	now, err := a.sampleOutside(ctx)
	if err != nil {
		return false, err
	}
	_, err = a.b.NextClaimable(ctx, productionID, now)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, store.ErrNoRow) {
		return false, storageErr("look for a claimable job", err)
	}
	return false, a.wakeAtExpiry(ctx, productionID, now, w)
}

func (a *Authority) scheduleExpiry(ctx context.Context, productionID string, w *wake.Waiter) error {
	now, err := a.sampleOutside(ctx)
	if err != nil {
		return err
	}
	return a.wakeAtExpiry(ctx, productionID, now, w)
}

// wakeAtExpiry converts the production's next wake time, an instant on the
// authority's clock, into a local sleep from now, a sample of that clock.
func (a *Authority) wakeAtExpiry(ctx context.Context, productionID string, now int64, w *wake.Waiter) error {
	at, ok, err := a.b.NextWakeAt(ctx, productionID)
	if err != nil {
		return storageErr("look for the next claim expiry", err)
	}
	if ok {
		w.WakeIn(max(minWakeIn, time.Duration(at-now)*time.Microsecond))
	}
	return nil
}

// interrupted is the error of a wait whose context ended.
func interrupted(ctx context.Context) error {
	why := context.Cause(ctx)
	return &Error{Kind: KindInterrupted, Msg: "the wait was interrupted (" + why.Error() + "); nothing was claimed", Err: why}
}

// asInterrupted reports a waiting call's failure that its context's end
// caused (an abandoned store call: busy or storage) as interrupted.
func asInterrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	switch KindOf(err) {
	case KindBusy, KindStorage:
		return interrupted(ctx)
	}
	return err
}
