// Keeping a lease alive: a background renewer, the lease's loss report
// (Done, Err) and Check, which asks the store whether the claim still holds.
package core

import (
	"context"
	"time"
)

// MinKeepAliveInterval is the shortest renewal interval KeepAlive accepts.
const MinKeepAliveInterval = time.Millisecond

// keepAliveRetry is the first pause before a renewal that failed with a
// retryable status is tried again; the pause doubles, up to a quarter of
// the interval (and never less than keepAliveRetry).
const keepAliveRetry = 10 * time.Millisecond

// keeper is a renewer. Its goroutine starts at the first renewal's time
// (start fires then): a lease settled sooner, as most are, never has one,
// and stopping it costs no goroutine handoff. Stopped before it fires, the
// renewer never runs and its stopper ends it (ended).
type keeper struct {
	cancel context.CancelFunc
	done   chan struct{}
	start  *time.Timer
}

// ended is what a renewer's end does: the lease forgets it, the authority
// no longer stops it, and its stopper learns that it ended (done).
func (k *keeper) ended(l *Lease) {
	l.smu.Lock()
	if l.keeper == k {
		l.keeper = nil
	}
	l.smu.Unlock()
	l.a.unkeep(l)
	close(k.done)
}

// stopNow makes a renewer that has not started start at once, to find its
// context cancelled and end; l.smu is held. A stop that found the timer
// pending prevented its run, so the renewer still runs exactly once, and a
// stopper that stops it again first ends it itself.
func (k *keeper) stopNow() {
	if k.start != nil && k.start.Stop() {
		k.start.Reset(0)
	}
}

// KeepAliveOption adjusts KeepAlive.
type KeepAliveOption func(*keepAliveConfig)

type keepAliveConfig struct {
	interval time.Duration
}

// KeepAliveInterval sets the time between renewals. The default is a third
// of the duration, which leaves two thirds of it to retry a renewal that
// failed (docs/workers.md says how much margin a duration needs).
func KeepAliveInterval(interval time.Duration) KeepAliveOption {
	return func(c *keepAliveConfig) { c.interval = interval }
}

// Done returns a channel that is closed once this process learns that the
// lease is over: it closed here (completed, released or failed through this
// handle, or its edit did not commit); an operation on it, a Check or its
// keep-alive found that it no longer holds its claim (cancelled, expired,
// lost, finished through another handle); its keep-alive gave up (the
// authority's clock stayed behind its high-water mark, or renewals kept
// failing, until the expiry passed by this host's estimate); or its
// authority was closed. Err then says why. Without a keep-alive nothing
// watches the claim: Done closes on what operations and Check find.
func (l *Lease) Done() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
	}
	return l.lost
}

// Err is nil while Done is open, and then the reason the lease is over: an
// error of the kind its next operation would get (KindCancelled,
// KindExpired, KindLeaseLost, KindWrongState, KindClockRegressed, and
// KindClosed once it closed here or its authority closed).
func (l *Lease) Err() error {
	if l == nil {
		return errf(KindInvalidArgument, "lease is nil")
	}
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.lostErr
}

// markLost records why the lease is over, closes Done and stops the renewer
// (without waiting for it: the renewer may be the caller). The first reason
// stays.
func (l *Lease) markLost(why error) {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.lostErr != nil {
		return
	}
	l.lostErr = why
	if l.lost == nil {
		l.lost = make(chan struct{})
	}
	close(l.lost)
	if l.keeper != nil {
		l.keeper.cancel()
		l.keeper.stopNow()
	}
}

// endsClaim reports whether an operation's failure proves that the lease's
// claim is over for good (and not merely that the operation failed).
func endsClaim(err error) bool {
	switch KindOf(err) {
	case KindNotFound, KindCancelled, KindLeaseLost, KindWrongState, KindExpired:
		return true
	}
	return false
}

// reportEnd closes Done when err says the claim is over, or that the
// lease's authority closed.
func (l *Lease) reportEnd(err error) {
	if endsClaim(err) || (KindOf(err) == KindClosed && l.a.closed.Load()) {
		l.markLost(err)
	}
}

// closeHere closes the lease locally; l.mu is held. what says what happened.
func (l *Lease) closeHere(what string) {
	l.smu.Lock()
	l.state, l.closedHow = LeaseClosed, what
	l.smu.Unlock()
	l.markLost(errf(KindClosed, "lease for job %s %s", l.jobID, what))
}

// setState sets the local state; l.mu is held (type Lease: the lock order).
func (l *Lease) setState(s LeaseState) {
	l.smu.Lock()
	l.state = s
	l.smu.Unlock()
}

// leftEdit ends the lease's membership of its edit, in state s; l.mu is
// held.
func (l *Lease) leftEdit(s LeaseState) {
	l.smu.Lock()
	l.state, l.edit = s, nil
	l.smu.Unlock()
}

// closedErr is the error of a use of a closed lease: what ended it, and
// that a settled lease stays closed, so a second complete says it was
// already completed, and by this lease. The caller must not hold l.smu.
func (l *Lease) closedErr() error {
	const settled = "; a lease is closed once it has completed, released or failed its claim"
	l.smu.Lock()
	how := l.closedHow
	l.smu.Unlock()
	switch how {
	case "completed", "released", "failed":
		return errf(KindClosed, "lease for job %s is closed: this lease already %s the job%s", l.jobID, how, settled)
	case "failed (retryable)":
		return errf(KindClosed, "lease for job %s is closed: this lease already failed the job (retryable)%s", l.jobID, settled)
	case "":
		return errf(KindClosed, "lease for job %s is closed", l.jobID)
	}
	return errf(KindClosed, "lease for job %s is closed: it %s", l.jobID, how)
}

// KeepAlive starts renewing the lease in the background, by the rules of
// Renew(d): each renewal sets the expiry to the authority's now + d, and must
// commit before the current expiry. A renewal runs every interval (default
// d/3, KeepAliveInterval); one that fails with busy, outcome_unknown,
// storage or clock_regressed is retried with back-off until the expiry
// passes by this host's estimate. The renewer stops when the lease closes,
// when StopKeepAlive is called, when its authority closes, and when a
// renewal is rejected; Done and Err then report a rejection or a give-up
// (never silently). Calling KeepAlive again replaces the running renewer.
// The lease must be active.
func (l *Lease) KeepAlive(d time.Duration, opts ...KeepAliveOption) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	if _, err := ValidateDuration(d); err != nil {
		return err
	}
	cfg := keepAliveConfig{interval: d / 3}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.interval < MinKeepAliveInterval || cfg.interval >= d {
		return errf(KindInvalidDuration, "keep-alive interval %s must be at least %s and shorter than the duration %s",
			cfg.interval, MinKeepAliveInterval, d)
	}
	if err := l.localCheck(); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	// The first renewal: when less than d-interval is left (renewLoop).
	l.mu.Lock()
	first := time.Until(l.heldUntil.Add(cfg.interval - d))
	l.mu.Unlock()
	l.kmu.Lock()
	defer l.kmu.Unlock()
	l.stopKeeper()
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{cancel: cancel, done: make(chan struct{})}
	if !l.a.keep(l) {
		cancel()
		return errf(KindClosed, "authority is closed")
	}
	l.smu.Lock()
	if l.lostErr != nil { // lost meanwhile
		l.smu.Unlock()
		l.a.unkeep(l)
		cancel()
		return l.Err()
	}
	// Published under smu, so that markLost sees the timer with the keeper.
	k.start = time.AfterFunc(first, func() { l.renewLoop(ctx, k, d, cfg.interval) })
	l.keeper = k
	l.smu.Unlock()
	return nil
}

// StopKeepAlive stops the renewer, if one runs, and returns once it has
// stopped: no renewal of this lease is written after it returns (one whose
// commit had started has finished). The lease stays as it is.
func (l *Lease) StopKeepAlive() {
	if l == nil {
		return
	}
	l.kmu.Lock()
	defer l.kmu.Unlock()
	l.stopKeeper()
}

func (l *Lease) stopKeeper() {
	l.smu.Lock()
	k := l.keeper
	l.keeper = nil
	l.smu.Unlock()
	if k != nil {
		k.cancel()
		if k.start.Stop() { // it never ran, and now never will
			k.ended(l)
		}
		<-k.done
	}
}

func (l *Lease) renewLoop(ctx context.Context, k *keeper, d, interval time.Duration) {
	defer k.ended(l)
	if ctx.Err() != nil { // stopped before its first renewal
		return
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	pause := keepAliveRetry
	failing, extendedLater := false, false
	for {
		l.mu.Lock()
		heldUntil := l.heldUntil
		l.mu.Unlock()
		// Renew when less than d-interval is left: every interval after the
		// last renewal, and at once for a lease that has less left already.
		next := heldUntil.Add(interval - d)
		switch {
		case failing:
			next = time.Now().Add(pause)
			pause = min(2*pause, max(keepAliveRetry, interval/4))
		case extendedLater:
			// The claim runs later than a renewal would take it (a longer
			// claim, or this host's estimate lags): look again in an interval.
			next = time.Now().Add(interval)
		}
		t.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.renew(ctx, d)
		extendedLater = KindOf(err) == KindNotExtended
		switch {
		case err == nil, extendedLater: // held (until later than asked, when not extended)
			failing, pause = false, keepAliveRetry
		case ctx.Err() != nil: // stopped while renewing
			return
		case retryableRenewal(err):
			failing = true
			l.mu.Lock()
			heldUntil = l.heldUntil
			l.mu.Unlock()
			if !time.Now().Before(heldUntil) {
				l.markLost(gaveUp(l, err))
				return
			}
		default:
			l.markLost(err)
			return
		}
	}
}

// retryableRenewal: the renewal failed, but the claim may still be held.
func retryableRenewal(err error) bool {
	switch KindOf(err) {
	case KindBusy, KindOutcomeUnknown, KindStorage, KindClockRegressed:
		return true
	}
	return false
}

// gaveUp is the keep-alive's report once its claim's expiry has passed, by
// this host's estimate, while renewals kept failing with last.
func gaveUp(l *Lease, last error) error {
	if KindOf(last) == KindClockRegressed {
		return last
	}
	return &Error{Kind: KindExpired, JobID: l.jobID, Err: last,
		Msg: "the claim on job " + l.jobID + " expired (by this host's estimate) while renewals kept failing"}
}

// Check asks the store, without writing, whether the lease still holds its
// claim now on the authority's clock. It returns nil if it does, and
// otherwise the error its next operation would get, in the same order
// (closed, clock_regressed, not_found, cancelled, lease_lost, wrong_state,
// expired); a verdict that the claim is over also closes Done. A failure to
// ask (busy, storage, or ctx ending) says nothing about the claim.
func (l *Lease) Check(ctx context.Context) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	if ctx == nil {
		return errf(KindInvalidArgument, "context is nil")
	}
	err := l.localCheck()
	if err == nil {
		err = l.checkStore(ctx)
	}
	err = aboutJob(ended(ctx, err), l.jobID)
	l.reportEnd(err)
	return err
}

// checkStore reads the mark, then samples the clock, then reads the job. In
// that order the mark compared with the sample holds only samples taken
// before it: a guarded commit between the two reads (a renewal every few
// milliseconds) cannot move it past the sample, so only a clock that went
// back reads as clock_regressed.
func (l *Lease) checkStore(ctx context.Context) error {
	hwm, err := l.a.b.HWM(ctx)
	if err != nil {
		return storageErr("read high-water mark", err)
	}
	now, err := l.a.observedNow(ctx)
	if err != nil {
		return err
	}
	if now < hwm {
		return errf(KindClockRegressed,
			"the authority clock (%s) is behind its high-water mark (%s); guarded operations resume when it catches up",
			describeUS(now), describeUS(hwm))
	}
	j, err := l.a.b.JobByID(ctx, l.jobID)
	if err := l.jobFound(j, err); err != nil {
		return err
	}
	return l.holds(j, now)
}

// keep registers a kept-alive lease, so that Close stops its renewer; false
// once the authority is closed.
func (a *Authority) keep(l *Lease) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() {
		return false
	}
	if a.keepers == nil {
		a.keepers = map[*Lease]struct{}{}
	}
	a.keepers[l] = struct{}{}
	return true
}

func (a *Authority) unkeep(l *Lease) {
	a.mu.Lock()
	delete(a.keepers, l)
	a.mu.Unlock()
}

// stopKeepers stops every renewer (Close): their leases report closed.
func (a *Authority) stopKeepers() {
	for _, l := range lockedKeys(&a.mu, a.keepers) {
		l.markLost(errf(KindClosed, "authority is closed"))
		l.StopKeepAlive()
	}
}
