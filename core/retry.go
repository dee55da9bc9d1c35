// Retries, poison jobs, run-at and priorities (docs/CONCEPTS.md "Attempts
// and retries"): the retry policy, request options, how an attempt ends,
// the promotion of delayed jobs and lapsed claims, and redrive.
package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/libleases/libleases/core/store"
)

// Documented bounds of every surface (docs/CONCEPTS.md).
const (
	// MaxAttemptsLimit is the largest MaxAttempts of a policy (SQS's
	// maxReceiveCount has the same bound).
	MaxAttemptsLimit = 1000
	// MaxPriority is the highest job priority; 0 is the lowest and the default.
	MaxPriority = 1000
	// MaxDelay bounds how far ahead a run-at, a delay, a retry's delay and a
	// backoff cap may reach: 366 days.
	MaxDelay = 366 * 24 * time.Hour
	// AttemptHistoryLen is how many ended attempts a job keeps (the newest).
	AttemptHistoryLen = 20
	// promoteBatch bounds how many delayed jobs one claim marks due, and
	// lapseBatch how many lapsed claims it ends: a claim's cost stays
	// bounded however many jobs come due at once (the rest wait for the
	// next claims, earliest first).
	promoteBatch = 1000
	lapseBatch   = 64
	// demoteBatch bounds how many jobs due too early (requested while the
	// clock read later than the claim's time) one claim transaction sets
	// back before it looks on in another (readyIn).
	demoteBatch = 64
	// redriveBatch is how many jobs one transaction of Redrive returns.
	redriveBatch = 500
)

// RetryPolicy is a production's policy for claims that end without
// completion. The backoff after attempt n is BackoffBase·2^(n-1), jittered
// by ±JitterPercent and then capped at BackoffCap.
type RetryPolicy struct {
	MaxAttempts   int           // 1..MaxAttemptsLimit claims; then the job is dead
	BackoffBase   time.Duration // 0..BackoffCap, whole µs (0: retry at once)
	BackoffCap    time.Duration // BackoffBase..MaxDelay, whole µs
	JitterPercent int           // 0..100
}

// DefaultRetryPolicy is the policy of a production created without one, and
// of every production that existed before policies (schema 4): 25 attempts
// (River's and Faktory's default), backoff from 1 s doubling to a cap of
// 1 h with ±20 % jitter, so 25 attempts span about half a day.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 25, BackoffBase: time.Second, BackoffCap: time.Hour, JitterPercent: 20}
}

// MarshalJSON writes the policy as listings show it (µs).
func (p RetryPolicy) MarshalJSON() ([]byte, error) { return marshalPolicy(p) }

func wholeUS(what string, d time.Duration, lo, hi time.Duration) (int64, error) {
	if d < lo || d > hi {
		return 0, errf(KindInvalidArgument, "%s must be within %dus..%dus, got %dus", what,
			lo.Microseconds(), hi.Microseconds(), d.Microseconds())
	}
	if d%time.Microsecond != 0 {
		return 0, errf(KindInvalidArgument, "%s must be a whole number of microseconds, got %s", what, d)
	}
	return d.Microseconds(), nil
}

// check validates the policy and returns its stored form.
func (p RetryPolicy) check() (store.Policy, error) {
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsLimit {
		return store.Policy{}, errf(KindInvalidArgument, "max attempts must be within 1..%d, got %d", MaxAttemptsLimit, p.MaxAttempts)
	}
	capUS, err := wholeUS("backoff cap", p.BackoffCap, 0, MaxDelay)
	if err != nil {
		return store.Policy{}, err
	}
	baseUS, err := wholeUS("backoff base", p.BackoffBase, 0, p.BackoffCap)
	if err != nil {
		return store.Policy{}, err
	}
	if p.JitterPercent < 0 || p.JitterPercent > 100 {
		return store.Policy{}, errf(KindInvalidArgument, "jitter must be within 0..100 percent, got %d", p.JitterPercent)
	}
	return store.Policy{MaxAttempts: int64(p.MaxAttempts), BackoffBaseUS: baseUS, BackoffCapUS: capUS,
		JitterPercent: int64(p.JitterPercent)}, nil
}

func toPolicy(p store.Policy) RetryPolicy {
	return RetryPolicy{MaxAttempts: int(p.MaxAttempts), BackoffBase: time.Duration(p.BackoffBaseUS) * time.Microsecond,
		BackoffCap: time.Duration(p.BackoffCapUS) * time.Microsecond, JitterPercent: int(p.JitterPercent)}
}

// backoffUS is the wait after attempt n (n >= 1) ended: base·2^(n-1),
// scaled by 1 + jitter·(2u-1) for u in [0, 1), then capped. u is the only
// randomness, so tests can pin it.
func backoffUS(p store.Policy, n int64, u float64) int64 {
	if p.BackoffBaseUS <= 0 {
		return 0
	}
	d := float64(p.BackoffBaseUS) * math.Pow(2, float64(max(n-1, 0)))
	d *= 1 + float64(p.JitterPercent)/100*(2*u-1)
	if d >= float64(p.BackoffCapUS) {
		return p.BackoffCapUS
	}
	return max(int64(d), 0)
}

// RequestOptions are the optional parts of a request. RunAt and Delay both
// say when the job becomes claimable, on the authority's clock; at most one
// may be given (none: at once).
type RequestOptions struct {
	Priority int           // 0..MaxPriority; higher is claimed first
	RunAt    time.Time     // zero: none; not after the authority's now + MaxDelay
	Delay    time.Duration // 0: none; whole µs, at most MaxDelay
}

func (o RequestOptions) check() error {
	if o.Priority < 0 || o.Priority > MaxPriority {
		return errf(KindInvalidArgument, "priority must be within 0..%d, got %d", MaxPriority, o.Priority)
	}
	if o.Delay != 0 {
		if !o.RunAt.IsZero() {
			return errf(KindInvalidArgument, "give a run-at or a delay, not both")
		}
		if _, err := wholeUS("delay", o.Delay, time.Microsecond, MaxDelay); err != nil {
			return err
		}
	}
	if !o.RunAt.IsZero() && o.RunAt.Sub(o.RunAt.Truncate(time.Microsecond)) != 0 {
		return errf(KindInvalidArgument, "run-at must be a whole number of microseconds")
	}
	return nil
}

// readyAt is when a job requested at now with o becomes claimable. A run-at
// in the past means now: the job does not jump ahead of waiting ones.
func (o RequestOptions) readyAt(now int64) (int64, error) {
	switch {
	case o.Delay != 0:
		return now + o.Delay.Microseconds(), nil
	case o.RunAt.IsZero():
		return now, nil
	}
	at := o.RunAt.UnixMicro()
	if at > now+MaxDelay.Microseconds() {
		return 0, errf(KindInvalidArgument, "run-at %s is more than %s after the authority's time %s",
			describeUS(at), MaxDelay, describeUS(now))
	}
	return max(at, now), nil
}

// ---- ending an attempt -------------------------------------------------------

// endAttempt ends the job's current claim (j must be claimed) the way
// ending says, at now (an expired claim ended at its expiry), records it in
// the history, and for a claim that ended without completion (released,
// retry, expired) sends the job back to the queue or, when its attempts are
// used up, to dead with a dead event. readyAt is when a returned job becomes
// claimable; a returned job wakes waiting claims through w (nil: none to
// wake, as when claim-next ends lapsed claims: their ready time has passed,
// so waiters already woke for them). j is updated and stored; it reports
// whether the job died.
func endAttempt(ctx context.Context, tx store.Tx, w *wakes, p store.Production, j *store.Job, now int64,
	ending, reason string, readyAt int64) (bool, error) {
	ended := now
	if ending == store.EndExpired {
		ended = j.Expiry
	}
	if err := tx.InsertAttempt(ctx, store.Attempt{JobID: j.ID, Number: j.Attempts, Worker: j.Worker,
		ClaimedAt: j.ClaimedAt, EndedAt: ended, Ending: ending, Reason: reason}, AttemptHistoryLen); err != nil {
		return false, storageErr("record the attempt", err)
	}
	j.UpdatedAt, j.Due = now, false
	switch ending {
	case store.EndCompleted:
		j.State = store.StateCompleted
	case store.EndFailed:
		j.State, j.Reason = store.StateFailed, reason
	case store.EndCancelled:
		j.State = store.StateCancelled
	default:
		if j.Attempts >= p.Policy.MaxAttempts {
			j.State, j.Reason = store.StateDead, reason
			if err := tx.UpdateJob(ctx, *j); err != nil {
				return false, storageErr("end the attempt", err)
			}
			return true, event(ctx, tx, store.Event{At: now, ProductionID: p.ID, JobID: j.ID, Kind: "dead", Worker: j.Worker,
				Detail: deadDetail(j.Attempts, p.Policy.MaxAttempts, ending, reason)})
		}
		// The claim hash stays so that another handle of this same claim
		// reports WrongState rather than LeaseLost.
		j.State, j.Worker, j.ClaimedAt, j.Expiry = store.StateRequested, "", 0, 0
		j.ReadyAt, j.Due = readyAt, readyAt <= now
		if ending == store.EndRetry {
			j.ClaimableAt = readyAt
		}
		// Claimable now, or later: a waiter looks again and sleeps until
		// its next wake time, which this job may have made earlier.
		if w != nil {
			if err := w.add(ctx, tx, p.ID); err != nil {
				return false, err
			}
		}
	}
	if err := tx.UpdateJob(ctx, *j); err != nil {
		return false, storageErr("end the attempt", err)
	}
	return false, nil
}

func deadDetail(attempts, maxAttempts int64, ending, reason string) string {
	d := fmt.Sprintf("attempts used up (%d of %d); the last attempt %s", attempts, maxAttempts, map[string]string{
		store.EndRetry: "failed with a retry", store.EndReleased: "was released", store.EndExpired: "expired"}[ending])
	if reason != "" {
		d += ": " + reason
	}
	return d
}

// expiredReason is the reason an expired attempt records.
const expiredReason = "the claim expired before it finished"

// lapse ends a claim whose expiry (and the backoff it costs) has passed: the
// claim_expired event of today, the attempt history, then back to the queue
// or dead. It reports whether the job died.
func lapse(ctx context.Context, tx store.Tx, p store.Production, j *store.Job, now int64) (bool, error) {
	if err := event(ctx, tx, store.Event{At: now, ProductionID: p.ID, JobID: j.ID, Kind: "claim_expired",
		Worker: j.Worker, Expiry: j.Expiry, Detail: "the previous claim expired before it finished"}); err != nil {
		return false, err
	}
	// The lapsed claim is no longer the job's: its holder is told lease_lost,
	// as when another claim has taken the job (the claim did not finish, so
	// wrong_state would mislead).
	j.ClaimHash = nil
	return endAttempt(ctx, tx, nil, p, j, now, store.EndExpired, expiredReason, j.ReadyAt)
}

// lapsedReady is when a claim taken at attempt n with expiry becomes
// claimable again if it lapses: after its backoff, or at the expiry itself
// when it is the last attempt (it then goes dead when noticed).
func lapsedReady(p store.Policy, n, expiry int64) int64 {
	if n >= p.MaxAttempts {
		return expiry
	}
	return expiry + backoffUS(p, n, rand.Float64())
}

// promoteAndFind is claim-next's look, inside its transaction: it ends the
// production's lapsed claims (bounded, earliest first) and marks due the
// delayed jobs whose time has come, so the claim order's index holds every
// job claimable now, and finds the first of them (found false: none). The
// store sends its three reads at once (store.Tx.ClaimScan); when claims
// lapsed, the first job is looked for again after their transitions. What
// it wrote sets g.keep.
func promoteAndFind(g *guard, p store.Production, now int64) (j store.Job, found bool, err error) {
	sc, err := g.tx.ClaimScan(g.ctx, p.ID, now, lapseBatch, promoteBatch)
	if err != nil {
		return j, false, storageErr("find claimable job", err)
	}
	for i := range sc.Lapsed {
		if _, err := lapse(g.ctx, g.tx, p, &sc.Lapsed[i], now); err != nil {
			return j, false, err
		}
	}
	g.keep = g.keep || len(sc.Lapsed) > 0 || sc.Promoted > 0
	if len(sc.Lapsed) == 0 {
		return sc.Next, sc.Found, nil
	}
	j, err = g.tx.NextClaimable(g.ctx, p.ID, now)
	if errors.Is(err, store.ErrNoRow) {
		return j, false, nil
	}
	if err != nil {
		return j, false, storageErr("find claimable job", err)
	}
	return j, true, nil
}

// readyIn is claim-next's choice once promoteAndFind found j: the operation
// is timed once it holds j's row (guard.locked), and j is taken if it is
// claimable then. A due job is not always: one requested (or redriven)
// while the clock read later than this claim's time — the clock then
// stepped back, not behind the mark, which unguarded writes do not move —
// is due by its own time but not yet by this claim's. Such a job is set
// back to delayed (promotion marks it due again when its time comes, and a
// waiting claim sleeps until then) and the next job is looked for. It
// never fails because of a job it may not take. A job set back sets g.keep:
// that write stands even if nothing is claimed. A transaction of its own
// (Claim's: g.setBackLimit) sets back at most demoteBatch jobs, then
// reports none found and asks the caller to look on in another (g.more);
// a claim in a transaction it shares (an edit's, complete-and-claim-next's)
// sets back as many as it meets.
func readyIn(g *guard, p store.Production, j store.Job, first int64) (store.Job, int64, bool, error) {
	for demoted := 0; ; demoted++ {
		now, err := g.locked(first)
		if err != nil {
			return j, 0, false, err
		}
		if j.ReadyAt <= now {
			if err := g.follows(now, j); err != nil {
				return j, 0, false, err
			}
			return j, now, true, nil
		}
		if g.setBackLimit > 0 && demoted == g.setBackLimit {
			g.more = true
			return j, now, false, nil
		}
		j.Due = false
		if err := g.tx.UpdateJob(g.ctx, j); err != nil {
			return j, 0, false, storageErr("set back a job not yet claimable", err)
		}
		g.keep = true
		j, err = g.tx.NextClaimable(g.ctx, p.ID, now)
		if errors.Is(err, store.ErrNoRow) {
			return j, now, false, nil
		}
		if err != nil {
			return j, 0, false, storageErr("find claimable job", err)
		}
	}
}

// ---- productions ------------------------------------------------------------

// CreateProductionWithPolicy creates a production with a retry policy, or
// returns the existing one of that name when its policy is the same (a
// different policy is WrongState: change it with SetRetryPolicy).
func (a *Authority) CreateProductionWithPolicy(name string, policy RetryPolicy) (Production, error) {
	sp, err := policy.check()
	if err != nil {
		return Production{}, err
	}
	return a.createProduction(context.Background(), name, &sp)
}

// SetRetryPolicy is the coordinator's change of a production's policy. It
// applies to every attempt that ends after it commits (a lapsed claim's
// backoff was chosen when the claim was taken). A policy_changed event
// records it.
func (a *Authority) SetRetryPolicy(production string, policy RetryPolicy) error {
	return a.setRetryPolicy(context.Background(), production, policy)
}

func (a *Authority) setRetryPolicy(ctx context.Context, production string, policy RetryPolicy) error {
	sp, err := policy.check()
	if err != nil {
		return err
	}
	return a.changeProduction(ctx, production, func(tx store.Tx, p store.Production, now int64) error {
		if p.Policy == sp {
			return nil
		}
		if err := tx.UpdatePolicy(ctx, p.ID, sp); err != nil {
			return storageErr("set retry policy", err)
		}
		return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, Kind: "policy_changed", Detail: describePolicy(sp)})
	})
}

// changeProduction is a coordinator's change of one production's settings
// (its retry policy, its retention): change runs on the production as read
// in one write, after the authority and the name are checked.
func (a *Authority) changeProduction(ctx context.Context, production string,
	change func(tx store.Tx, p store.Production, now int64) error) error {
	if err := a.usable(); err != nil {
		return err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return err
	}
	return a.write(ctx, func(tx store.Tx, now int64, _ *wakes) error {
		p, err := productionByName(ctx, tx, production)
		if err != nil {
			return err
		}
		return change(tx, p, now)
	})
}

func describePolicy(p store.Policy) string {
	return fmt.Sprintf("max_attempts=%d backoff_base_us=%d backoff_cap_us=%d jitter_percent=%d",
		p.MaxAttempts, p.BackoffBaseUS, p.BackoffCapUS, p.JitterPercent)
}

// ---- failing with a retry -----------------------------------------------------

// FailRetry fails the claim as retryable: the attempt ends, and the job
// returns to the queue after delay (0: the policy's backoff for this
// attempt), or goes dead if this was its last attempt. delay is whole µs, at
// most MaxDelay. The claim must be unexpired. Success closes the lease.
func (l *Lease) FailRetry(reason string, delay time.Duration) error {
	return l.failRetry(context.Background(), reason, delay)
}

func (l *Lease) failRetry(ctx context.Context, reason string, delay time.Duration) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	if err := checkText("failure reason", reason, MaxReasonLen, true); err != nil {
		return err
	}
	if delay != 0 {
		if _, err := wholeUS("retry delay", delay, time.Microsecond, MaxDelay); err != nil {
			return err
		}
	}
	return l.endClaim(ctx, "retry", store.EndRetry, reason, func(p store.Production, j store.Job, now int64) int64 {
		if delay != 0 {
			return now + delay.Microseconds()
		}
		return now + backoffUS(p.Policy, j.Attempts, rand.Float64())
	})
}

// endClaim ends the claim without completion (a release, a retryable or a
// terminal failure): the worker's event, then the attempt's end, which for
// a release or a retry returns the job to the queue at readyAt or, on its
// last attempt, makes it dead.
func (l *Lease) endClaim(ctx context.Context, kind, ending, reason string,
	readyAt func(p store.Production, j store.Job, now int64) int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	closes := kind
	if kind == "retry" {
		closes = "failed (retryable)"
	}
	return l.transition(ctx, closes, func(g *guard) error {
		j, now, err := checkHeld(g, l)
		if err != nil {
			return err
		}
		p, err := g.tx.ProductionByID(g.ctx, l.productionID)
		if err != nil {
			return storageErr("look up production", err)
		}
		if err := event(g.ctx, g.tx, store.Event{At: now, ProductionID: l.productionID, JobID: l.jobID, Kind: kind,
			Worker: l.worker, Detail: reason}); err != nil {
			return err
		}
		_, err = endAttempt(g.ctx, g.tx, &g.wakes, p, &j, now, ending, reason, readyAt(p, j, now))
		return err
	})
}

// ---- redrive ------------------------------------------------------------------

// redrivable are the states a coordinator may return to the queue.
var redrivable = []string{StateFailed, StateDead, StateCancelled}

// RetryJob is the coordinator's redrive of one failed, dead or cancelled
// job: it becomes requested and claimable at once, its attempts reset to 0
// (the history keeps the old ones), and a redriven event records the state
// it left. Any other state is WrongState.
func (a *Authority) RetryJob(production, jobID string) error {
	return a.retryJob(context.Background(), production, jobID)
}

func (a *Authority) retryJob(ctx context.Context, production, jobID string) error {
	return a.coordinate(ctx, production, jobID, func(tx store.Tx, w *wakes, p store.Production, j store.Job, now int64) error {
		if !contains(redrivable, j.State) {
			return errf(KindWrongState, "job %s is %s; only a failed, dead or cancelled job is retried", jobID, j.State)
		}
		return redrive(ctx, tx, w, p, &j, now)
	})
}

// Redrive returns every job of a production in state ("failed", "dead" or
// "cancelled") to the queue, as RetryJob does each, and returns how many.
// It works in transactions of a few hundred jobs, so it never holds the
// writer lock for long: each job's redrive is atomic, the whole is not.
func (a *Authority) Redrive(production, state string) (int64, error) {
	return a.redriveAll(context.Background(), production, state)
}

func (a *Authority) redriveAll(ctx context.Context, production, state string) (int64, error) {
	if err := a.usable(); err != nil {
		return 0, err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return 0, err
	}
	if err := checkText("state", state, MaxNameLen, false); err != nil {
		return 0, err
	}
	if !contains(redrivable, state) {
		return 0, errf(KindInvalidArgument, "state %q cannot be redriven (failed, dead or cancelled)", state)
	}
	var total int64
	for {
		var n int64
		err := a.write(ctx, func(tx store.Tx, now int64, w *wakes) error {
			n = 0
			p, err := productionByName(ctx, tx, production)
			if err != nil {
				return err
			}
			js, err := tx.JobsInState(ctx, p.ID, state, redriveBatch)
			if err != nil {
				return storageErr("redrive", err)
			}
			for i := range js {
				if err := redrive(ctx, tx, w, p, &js[i], afterLastChange(now, js[i])); err != nil {
					return err
				}
			}
			n = int64(len(js))
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < redriveBatch {
			return total, nil
		}
	}
}

// redrive returns j to the queue, claimable at once, and wakes waiting
// claims through w. The job starts afresh: no claim it had before is its
// claim any more, so a handle of one is lease_lost (not wrong_state, which
// says the job's last claim finished through another handle).
func redrive(ctx context.Context, tx store.Tx, w *wakes, p store.Production, j *store.Job, now int64) error {
	from := j.State
	j.State, j.Worker, j.ClaimedAt, j.Expiry, j.Attempts, j.Reason = store.StateRequested, "", 0, 0, 0, ""
	j.ClaimHash = nil
	j.ClaimableAt, j.ReadyAt, j.Due, j.UpdatedAt = now, now, true, now
	if err := tx.UpdateJob(ctx, *j); err != nil {
		return storageErr("redrive", err)
	}
	if err := w.add(ctx, tx, p.ID); err != nil {
		return err
	}
	return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, JobID: j.ID, Kind: "redriven",
		Detail: "returned from " + from + "; attempts reset to 0"})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// errNotReady is the refusal of a claim by id before the job's time.
func errNotReady(jobID string, at int64) error {
	return errf(KindWrongState, "job %s is not claimable before %s", jobID, describeUS(at))
}
