// Waiting claims: ClaimWait, and the waitroom that wakes its waiters when a
// job may have become claimable (docs/workers.md).
package core

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core/internal/clockstep"
	"github.com/libleases/libleases/core/internal/wake"
	"github.com/libleases/libleases/core/store"
)

// MaxWait is the longest wait ClaimWait accepts. A longer wait is a loop of
// waits (the bindings wait in short slices anyway).
const MaxWait = 24 * time.Hour

// MaxWaitUS is MaxWait in microseconds (LEASES_MAX_WAIT_US).
const MaxWaitUS int64 = 86_400_000_000

// safetyPoll is how often a production's first waiter looks even though
// nothing woke it (jittered by ±20%), when the store's watcher can miss
// changes (PostgreSQL notices are lost with a dropped LISTEN connection) or
// there is none. A watcher that misses nothing (SQLite's) leaves the poll
// only the slow commits it does not wait for: reliableSafetyPolls times as
// long. Tests lengthen it to prove that wakes do not come from it.
var safetyPoll = time.Second

const reliableSafetyPolls = 10

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

// wakes lists the productions a transaction may make claimable, now or at a
// later time (a waiter then looks again and sleeps until that time). add is
// the one place that says so: a request, a release, a retryable failure and
// a redrive call it inside their transaction (so does an edit's request), and
// so does a production's deletion (its waiters' claims answer not_found).
type wakes []string

func (w *wakes) add(ctx context.Context, tx store.Tx, productionID string) error {
	if slices.Contains(*w, productionID) {
		return nil // a batch (a redrive) wakes a production once
	}
	if n, ok := tx.(store.Notifier); ok {
		if err := n.Claimable(ctx, productionID); err != nil {
			return storageErr("notify waiting claims", err)
		}
	}
	*w = append(*w, productionID)
	return nil
}

// waitroom holds an authority's waiting claims, the store watcher that
// wakes them for commits made elsewhere, and its subscription to the
// process's clock-step watcher (clockstep), which tells the waiters whose
// clock is this host's to check it. Both run only while someone waits (and
// watchLinger after).
type waitroom struct {
	hub     *wake.Hub
	watcher store.Watcher // nil: the store has none

	handedOver atomic.Int64 // looks a waiter left to the first of its queue (tests read it)

	mu     sync.Mutex
	quiet  map[string]quietClock // per production, its last look that found nothing
	ids    map[string]string     // production name → id, while someone waits (and watchLinger after)
	users  int
	stop   func() // the running watcher's
	clock  *clockstep.Sub
	tick   chan struct{} // closed when the clock may have stepped, then replaced
	linger *time.Timer
	closed bool
}

func newWaitroom(b store.Backend) *waitroom {
	w, _ := b.(store.Watcher)
	safety := safetyPoll
	if w != nil && !w.MissesChanges() {
		safety *= reliableSafetyPolls
	}
	return &waitroom{hub: wake.New(safety), watcher: w, quiet: map[string]quietClock{}, ids: map[string]string{},
		tick: make(chan struct{})}
}

// quietClock is when a look found nothing: on this host's monotonic clock,
// on the authority's, and the authority's time at which a job becomes
// claimable by itself (hasWake false: none).
type quietClock struct {
	mono    time.Time
	clock   int64
	wakeAt  int64
	hasWake bool
}

func (r *waitroom) remember(productionID string, q quietClock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.quiet[productionID]; !ok || !q.mono.Before(old.mono) {
		r.quiet[productionID] = q
	}
}

func (r *waitroom) forget(productionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.quiet, productionID)
}

// productionID is the id of the production named name that a wait looked
// up while the waitroom was in use (someone waited, or did within
// watchLinger): a caller that waits in slices looks it up once, not once a
// slice. Every look checks that the production still exists (a look that
// does not find it goes to the claim, which looks it up by name and answers
// not_found), and a look that finds something drops the entry.
func (r *waitroom) productionID(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.ids[name]
	return id, ok
}

func (r *waitroom) knowProduction(name, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.users > 0 && !r.closed {
		r.ids[name] = id
	}
}

func (r *waitroom) forgetProduction(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ids, name)
}

// stale reports whether the last look at productionID that found nothing
// may no longer stand for the present as far as the clock goes, now being
// a sample of the authority's clock read on this host: there was none; the
// clock reached the time a job becomes claimable by itself; it stepped
// back (it may be behind the mark); or it ran ahead of this host's
// monotonic clock by more than clockDrift allows (a forward step, which a
// monotonic timer does not see). A clock that stands still is not stale:
// nothing becomes claimable by it.
func (r *waitroom) stale(productionID string, now int64) bool {
	r.mu.Lock()
	q, ok := r.quiet[productionID]
	r.mu.Unlock()
	if !ok {
		return true
	}
	if q.hasWake && now >= q.wakeAt {
		return true
	}
	if now < q.clock {
		return true
	}
	elapsed := time.Since(q.mono)
	return time.Duration(now-q.clock)*time.Microsecond > elapsed+clockDrift(elapsed)
}

// clockDrift is how far the authority's clock may run ahead of this host's
// monotonic clock over elapsed without counting as a step: 1 ms, and 0.1%
// (twice the 500 ppm an NTP slew may reach).
func clockDrift(elapsed time.Duration) time.Duration {
	return time.Millisecond + elapsed/1000
}

// clockChecks counts the checks of the clock that the clock-step watcher
// woke a waiter for (tests read it).
var clockChecks atomic.Int64

// clockWatchersRunning is how many clock-step watchers run in this process.
func clockWatchersRunning() int64 { return clockstep.Running() }

// clockTick is closed when this host's wall clock may have been set (on a
// system that cannot tell, and for a clock seam, every clockstep.Period): a
// waiter whose authority clock is this host's then checks it against the
// monotonic clock, without reading the store. Take it before the look or
// check it is to follow.
func (r *waitroom) clockTick() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tick
}

// clockMayHaveStepped is the clock-step watcher's report: every waiter's
// tick fires.
func (r *waitroom) clockMayHaveStepped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.tick)
	r.tick = make(chan struct{})
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

// enter counts a waiter in. localClock: its authority's clock is this
// host's, and the process's clock-step watcher is to tell it of steps;
// poll: it is a seam that no kernel sees move, to check every
// clockstep.Period.
func (r *waitroom) enter(localClock, poll bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users++
	if r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	if localClock && !r.closed {
		if r.clock == nil {
			r.clock = clockstep.Subscribe(r.clockMayHaveStepped, poll)
		} else if poll {
			r.clock.Poll()
		}
	}
	if r.stop == nil && r.watcher != nil && !r.closed {
		// Commits made while no watcher ran were seen by nobody: no look
		// made meanwhile stands for the present.
		r.hub.Invalidate()
		r.stop = r.watcher.Watch(r.changed)
	}
}

func (r *waitroom) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users--
	if r.users == 0 && (r.stop != nil || r.clock != nil) && r.linger == nil {
		r.linger = time.AfterFunc(watchLinger, r.idle)
	}
}

func (r *waitroom) idle() {
	r.mu.Lock()
	stop, clock := r.stop, r.clock
	if r.users > 0 || stop == nil && clock == nil {
		r.mu.Unlock()
		return
	}
	r.stop, r.clock, r.linger = nil, nil, nil
	clear(r.ids) // nobody looks at them any more: the next wait looks them up
	r.mu.Unlock()
	if clock != nil {
		clock.Cancel() // not under mu: its report takes mu
	}
	if stop != nil {
		stop()
		r.hub.Invalidate()
	}
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
	stop, clock := r.stop, r.clock
	r.stop, r.clock = nil, nil
	r.mu.Unlock()
	if clock != nil {
		clock.Cancel()
	}
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
// woken per change, in the order they started waiting, and only the first
// looks: one change costs one claim transaction.
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
	id, known := a.waits.productionID(production)
	if !known {
		p, err := productionByName(ctx, a.b, production)
		if err != nil {
			return nil, err
		}
		id = p.ID
	}
	p := store.Production{ID: id, Name: production}
	w, look, err := a.waits.hub.Join(p.ID)
	if err != nil {
		return nil, errf(KindClosed, "authority is closed")
	}
	local := a.clockIsLocal()
	a.waits.enter(local, a.seam.Load() != nil)
	defer a.waits.leave()
	if !known {
		a.waits.knowProduction(production, id)
	}
	passOn := false
	defer func() { w.Leave(passOn) }()
	bound := time.NewTimer(wait)
	defer bound.Stop()
	var check <-chan struct{} // the clock check, when the clock is this host's
	if local {
		check = a.waits.clockTick()
	}
	look = look || (check != nil && a.waits.stale(p.ID, a.now()))
	relook := lostRaceRelook
	for {
		if look && !w.MayLook() {
			// A waiter behind the first leaves the look to it: looking
			// too, it could find the job the first is claiming, and run a
			// claim transaction that finds nothing.
			a.waits.handedOver.Add(1)
			look = false
		}
		if look { // else nothing happened since the last look found nothing
			found, err := a.look(ctx, p.ID, w)
			if err != nil {
				return nil, a.closedOr(err)
			}
			if found {
				// The claim looks the production up by name: it may be
				// gone (not_found), or another of that name.
				a.waits.forgetProduction(production)
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
				wakeIn, err := a.untilNextWake(ctx, p.ID)
				if err != nil {
					return nil, a.closedOr(err)
				}
				if wakeIn > 0 {
					w.WakeIn(wakeIn)
				}
				w.WakeIn(relook)
				relook = min(2*relook, safetyPoll)
			} else {
				relook = lostRaceRelook
			}
		}
		look = true
		select {
		case <-w.C():
		case <-check:
			clockChecks.Add(1)
			check = a.waits.clockTick()
			look = a.waits.stale(p.ID, a.now())
		case <-bound.C:
			var l *Lease
			l, passOn, err = a.lastLook(ctx, p.ID, w, production, worker, d, wait)
			return l, err
		case <-ctx.Done():
			return nil, interrupted(ctx)
		case <-a.waits.hub.Done():
			return nil, errf(KindClosed, "authority is closed")
		}
	}
}

// lastLook ends a wait that passed: its answer must be one a claim could
// give now. It looks once more unless the last look that found nothing
// still stands for the present: nobody woke this waiter since, and the
// authority's clock is this host's and ran with its monotonic clock (a
// store whose clock is a server's is asked, as it cannot be checked here).
// A look that finds a job, or a clock behind the mark, claims: the claim's
// answer (a lease, clock_regressed, nothing_to_claim when another claimer
// won) is the wait's. passOn: the next waiter is to be woken, as after any
// claim that did not lose the race (more jobs may be there).
func (a *Authority) lastLook(ctx context.Context, productionID string, w *wake.Waiter, production, worker string, d, wait time.Duration) (l *Lease, passOn bool, err error) {
	nothing := errf(KindNothingToClaim, "production %q had no claimable job within %s", production, wait)
	woken := false
	select {
	case <-w.C():
		woken = true
	default:
	}
	if !woken && a.clockIsLocal() && !a.waits.stale(productionID, a.now()) {
		return nil, false, nothing
	}
	found, err := a.look(ctx, productionID, w)
	if err != nil {
		return nil, false, a.closedOr(err)
	}
	if !found {
		return nil, false, nothing
	}
	a.waits.forgetProduction(production)
	l, err = a.claimOne(ctx, production, "", worker, d)
	if err != nil && KindOf(err) == KindNothingToClaim {
		return nil, false, nothing
	}
	return l, true, err
}

// clockIsLocal reports whether the authority's clock is read on this host
// (SQLite, or the test seam), so that a waiter can check it against this
// host's monotonic clock without reading the store.
func (a *Authority) clockIsLocal() bool {
	_, server := a.b.(store.Clock)
	return !server || a.seam.Load() != nil
}

// closedOr is err of a waiter's read, or closed when the authority was
// closed under it: the read then failed on a store Close had shut (a race a
// slow host makes likely), and the wait ended because of the close.
func (a *Authority) closedOr(err error) error {
	if a.closed.Load() {
		return errf(KindClosed, "authority is closed")
	}
	return err
}

// look reads, without writing, whether production has a claimable job now on
// the authority's clock. One that finds none sets the waiter's queue to wake
// at the next time a job becomes claimable by itself (NextWakeAt), and is
// remembered: waiters that join before anything happens need not look again.
func (a *Authority) look(ctx context.Context, productionID string, w *wake.Waiter) (bool, error) {
	epoch := w.Arm()
	started := time.Now()
	var now, mark, at int64
	var found, ok bool
	var err error
	if lk, isLooker := a.b.(store.Looker); isLooker && a.seam.Load() == nil {
		// One round trip; the seam, when set, replaces the store's clock,
		// which this path cannot.
		now, mark, found, at, ok, err = lk.Look(ctx, productionID)
		if err != nil {
			return false, storageErr("look for a claimable job", err)
		}
	} else {
		// The mark is read before the clock: a mark read after the sample
		// could hold a later commit's sample, and the look would take a
		// clock that runs right for one behind the mark.
		if mark, err = a.b.HWM(ctx); err != nil {
			return false, storageErr("read the high-water mark", err)
		}
		if now, err = a.observedNow(ctx); err != nil {
			return false, err
		}
		la, oneRead := a.b.(store.LookerAt)
		switch {
		case now < mark: // the claim answers clock_regressed
		case oneRead:
			// One read after the sample (SQLite): an idle waiter, which
			// every commit that rang no doorbell makes look, reads twice.
			if found, at, ok, err = la.LookAt(ctx, productionID, now); err != nil {
				return false, storageErr("look for a claimable job", err)
			}
		default:
			if found, err = a.b.HasClaimable(ctx, productionID, now); err != nil {
				return false, storageErr("look for a claimable job", err)
			}
			if !found {
				if at, ok, err = a.b.NextWakeAt(ctx, productionID); err != nil {
					return false, storageErr("look for the next claim expiry", err)
				}
			}
		}
	}
	if found || now < mark {
		// A claim answers: it takes the job, or, behind the mark, it is
		// clock_regressed as every guarded operation is.
		a.waits.forget(productionID)
		return true, nil
	}
	var until time.Duration // exact: how long after the clock was read something expires
	if ok {
		until = max(time.Duration(at-now)*time.Microsecond, time.Microsecond)
	}
	a.waits.remember(productionID, quietClock{mono: started, clock: now, wakeAt: at, hasWake: ok})
	w.FoundNothing(epoch, started, until, minWakeIn)
	return false, nil
}

// untilNextWake samples the clock and converts the production's next wake
// time into a local sleep (0: none).
func (a *Authority) untilNextWake(ctx context.Context, productionID string) (time.Duration, error) {
	now, err := a.observedNow(ctx)
	if err != nil {
		return 0, err
	}
	at, ok, err := a.b.NextWakeAt(ctx, productionID)
	if err != nil {
		return 0, storageErr("look for the next claim expiry", err)
	}
	return untilWake(at, ok, now), nil
}

// untilWake converts a wake time at, an instant on the authority's clock,
// into a local sleep from now, a sample of that clock; 0 when there is none.
func untilWake(at int64, ok bool, now int64) time.Duration {
	if !ok {
		return 0
	}
	return max(minWakeIn, time.Duration(at-now)*time.Microsecond)
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
