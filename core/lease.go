package core

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
)

// LeaseState is the local state of a lease handle.
type LeaseState int

const (
	// LeasePending: claimed inside an edit that has not committed yet.
	LeasePending LeaseState = iota
	// LeaseActive: the claim is committed; operations ask the store.
	LeaseActive
	// LeaseClosed: released, failed, completed, or its edit failed.
	LeaseClosed
)

func (s LeaseState) String() string {
	switch s {
	case LeasePending:
		return "pending"
	case LeaseActive:
		return "active"
	case LeaseClosed:
		return "closed"
	}
	return fmt.Sprintf("LeaseState(%d)", int(s))
}

// Lease is the owning handle of one claim: production, job, secret and
// expiry. It is safe for concurrent use; operations on one lease are
// serialized. Dropping a Lease writes nothing: an unreleased claim lasts until
// its expiry or a coordinator cancel.
//
// Lock order: an operation on the lease holds mu while it waits for the
// writer (SQLite's writer lock, in this process's queue; PostgreSQL's row
// locks), so nothing that holds the writer may wait for mu: an edit holds
// the writer from Begin to Commit, and its caller's code runs meanwhile.
// state, edit and expiry are therefore written under mu and smu together
// and read under either; smu is never held while waiting for anything, and
// the edit and the accessors read them under smu.
type Lease struct {
	a            *Authority
	mu           sync.Mutex
	productionID string
	production   string
	jobID        string
	worker       string
	// fmt prints this unexported field by reflection (a Lease formatted by
	// value, as %v of *l does), never through Secret's methods: Secret is
	// made for that (an opaque pointer, shown as an address).
	secret    Secret
	claimedAt int64
	expiry    int64
	state     LeaseState
	closedHow string // what closed it (closeHere): "completed", …
	edit      *Edit  // while pending
	// heldUntil is when, on this host's monotonic clock, the expiry last
	// confirmed comes at the earliest: the local start of the operation
	// that set it plus the time it granted on the authority's clock. A
	// keep-alive renews before it and gives up after it.
	heldUntil time.Time

	// smu guards the loss report and the renewer, and with mu the local
	// state, edit and expiry. It is taken inside l.mu, never the other way
	// round (keepalive.go), and held only briefly, never while waiting.
	smu     sync.Mutex
	lost    chan struct{} // closed once the lease is known to be over (Done)
	lostErr error
	keeper  *keeper
	kmu     sync.Mutex // serializes starting and stopping the renewer
}

// JobID is the claimed job's id.
func (l *Lease) JobID() string { return l.jobID }

// Production is the production's name.
func (l *Lease) Production() string { return l.production }

// ProductionID is the production's id.
func (l *Lease) ProductionID() string { return l.productionID }

// Worker is the attribution given at claim.
func (l *Lease) Worker() string { return l.worker }

// Expiry is the expiry last confirmed by the authority.
func (l *Lease) Expiry() time.Time {
	l.smu.Lock()
	defer l.smu.Unlock()
	return time.UnixMicro(l.expiry).UTC()
}

// ExpiryUnixUS is Expiry in unix microseconds.
func (l *Lease) ExpiryUnixUS() int64 {
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.expiry
}

// Payload reads the claimed job's payload bytes, the worker's input. It works
// on an active lease and on a pending one (so an edit can claim, read, work
// and complete in one commit); it reads only and never changes the claim.
func (l *Lease) Payload() ([]byte, error) {
	if err := l.nilCheck(); err != nil {
		return nil, err
	}
	l.smu.Lock()
	closed := l.state == LeaseClosed
	l.smu.Unlock()
	if closed {
		return nil, l.closedErr()
	}
	if err := l.a.usable(); err != nil {
		return nil, err
	}
	j, err := l.a.b.JobByID(context.Background(), l.jobID)
	if errors.Is(err, store.ErrNoRow) {
		return nil, errf(KindNotFound, "job %s does not exist", l.jobID)
	}
	if err != nil {
		return nil, storageErr("read payload", err)
	}
	return j.Payload, nil
}

// State is the local state.
func (l *Lease) State() LeaseState {
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.state
}

// String never includes the secret.
func (l *Lease) String() string {
	return fmt.Sprintf("lease{production=%q job=%s worker=%q}", l.production, l.jobID, l.worker)
}

// GoString never includes the secret.
func (l *Lease) GoString() string { return l.String() }

// Format shows String for every verb and flag.
func (l *Lease) Format(f fmt.State, verb rune) { formatAs(f, verb, l.String()) }

// leaseJSON is what a lease shows marshalled or logged: never its secret.
type leaseJSON struct {
	Production   string `json:"production"`
	ProductionID string `json:"production_id"`
	JobID        string `json:"job_id"`
	Worker       string `json:"worker"`
	Expiry       int64  `json:"expiry_unix_us"`
	State        string `json:"state"`
}

func (l *Lease) public() leaseJSON {
	l.smu.Lock()
	defer l.smu.Unlock()
	return leaseJSON{l.production, l.productionID, l.jobID, l.worker, l.expiry, l.state.String()}
}

// MarshalJSON writes production, job, worker, expiry and local state.
func (l *Lease) MarshalJSON() ([]byte, error) { return json.Marshal(l.public()) }

// LogValue logs production, job, worker, expiry and local state.
func (l *Lease) LogValue() slog.Value {
	p := l.public()
	return slog.GroupValue(slog.String("production", p.Production), slog.String("job_id", p.JobID),
		slog.String("worker", p.Worker), slog.Int64("expiry_unix_us", p.Expiry), slog.String("state", p.State))
}

// localCheck is rule 3 of the rejection order: closed or pending locally.
// It reads the state under smu, so a caller need not hold l.mu (one that
// may hold the writer must not wait for it: type Lease, the lock order).
func (l *Lease) localCheck() error {
	l.smu.Lock()
	state := l.state
	l.smu.Unlock()
	switch state {
	case LeaseClosed:
		return l.closedErr()
	case LeasePending:
		return errf(KindClosed, "lease for job %s is pending until its edit commits", l.jobID)
	}
	return l.a.usable()
}

func newSecret() (Secret, error) {
	u, err := uuid.NewRandomFromReader(rand.Reader)
	if err != nil {
		return Secret{}, &Error{Kind: KindInternal, Msg: "random source failed", Err: err}
	}
	return NewSecret(u), nil
}

// checkHeld applies the claimant rules in the documented order after the
// local check: clock regressed, not found (or another production), cancelled,
// lease lost, wrong state, expired. It returns the job and the first sample.
func checkHeld(g *guard, l *Lease) (store.Job, int64, error) {
	now, err := g.sample()
	if err != nil {
		return store.Job{}, 0, err
	}
	j, err := g.tx.JobByID(g.ctx, l.jobID)
	if err := l.jobFound(j, err); err != nil {
		return j, 0, err
	}
	if now, err = g.locked(now); err != nil {
		return j, 0, err
	}
	if err := g.follows(now, j); err != nil {
		return j, 0, err
	}
	if err := l.holds(j, now); err != nil {
		return j, 0, err
	}
	g.mustOutlive(j.ID, j.Expiry)
	return j, now, nil
}

// jobFound is the part of the claimant rules decided on the job row alone:
// not found (or another production's), cancelled. err is the row's lookup.
func (l *Lease) jobFound(j store.Job, err error) error {
	// A job row names its production (a foreign key), so a job found in the
	// lease's production proves that production exists too.
	if errors.Is(err, store.ErrNoRow) {
		return errf(KindNotFound, "job %s does not exist", l.jobID)
	}
	if err != nil {
		return storageErr("look up job", err)
	}
	if j.ProductionID != l.productionID {
		return errf(KindNotFound, "job %s does not belong to production %q", l.jobID, l.production)
	}
	if j.State == store.StateCancelled {
		return errf(KindCancelled, "job %s was cancelled by the coordinator", l.jobID)
	}
	return nil
}

// holds is the rest, at now on the authority's clock: lease lost, wrong
// state, expired.
func (l *Lease) holds(j store.Job, now int64) error {
	if !l.secret.matches(j.ClaimHash) {
		switch j.State {
		case store.StateRequested:
			return errf(KindLeaseLost, "job %s is not held by this lease: it is requested (the claim ended, or never committed)", l.jobID)
		case store.StateDead:
			return errf(KindLeaseLost, "job %s is not held by this lease: its claims ended and it is dead (attempts used up)", l.jobID)
		}
		return errf(KindLeaseLost, "job %s is no longer held by this lease; another claim has taken it", l.jobID)
	}
	if j.State != store.StateClaimed {
		return errf(KindWrongState, "this claim on job %s already finished: the job is %s", l.jobID, j.State)
	}
	if now >= j.Expiry {
		return errf(KindExpired, "the claim on job %s expired at %s", l.jobID, describeUS(j.Expiry))
	}
	return nil
}

// ---- claiming --------------------------------------------------------------

// Claim claims the next claimable job of production (FIFO by request order; a
// claimed job whose expiry has passed is claimable again) for duration d.
// It returns ErrNothingToClaim when there is none.
func (a *Authority) Claim(production, worker string, d time.Duration) (*Lease, error) {
	return a.claimOne(context.Background(), production, "", worker, d)
}

// ClaimJob claims one given job.
func (a *Authority) ClaimJob(production, jobID, worker string, d time.Duration) (*Lease, error) {
	if err := checkID("job id", jobID); err != nil {
		return nil, err
	}
	return a.claimOne(context.Background(), production, jobID, worker, d)
}

func checkClaim(production, worker string, d time.Duration) (int64, error) {
	us, err := ValidateDuration(d)
	if err != nil {
		return 0, err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return 0, err
	}
	if err := checkName("worker name", worker, MaxNameLen, false); err != nil {
		return 0, err
	}
	return us, nil
}

func (a *Authority) claimOne(ctx context.Context, production, jobID, worker string, d time.Duration) (*Lease, error) {
	us, err := checkClaim(production, worker, d)
	if err != nil {
		return nil, err
	}
	if err := a.usable(); err != nil {
		return nil, err
	}
	var l *Lease
	for more := true; more; {
		more = false
		err = a.retrying(ctx, func() error {
			g, err := a.beginGuard(ctx)
			if err != nil {
				return err
			}
			g.setBackLimit = demoteBatch
			if l, err = claimIn(g, production, jobID, worker, us); err != nil {
				if g.keep && (KindOf(err) == KindNothingToClaim || KindOf(err) == KindWrongState) {
					// The claim found nothing, but noticed lapsed claims on
					// the way (jobs that went back to the queue or died), or
					// jobs not yet claimable that were due too early: those
					// transitions stand.
					if cerr := g.commit(); cerr != nil {
						return cerr
					}
					more = g.more
					return err
				}
				return g.abort(err)
			}
			return g.commit()
		})
		// A claim that stopped at its bound of jobs set back (readyIn)
		// looks on in a transaction of its own.
		more = more && KindOf(err) == KindNothingToClaim
	}
	if err == nil {
		l.state = LeaseActive
		return l, nil
	}
	if l == nil { // no job was chosen (or the given one was refused)
		return nil, aboutJob(err, jobID)
	}
	if KindOf(err) == KindOutcomeUnknown {
		// The lease stays here: a handle returned with a failure would
		// break every surface's "no output on failure" (and leak handles
		// in C and the bindings). The job id lets the caller find out.
		err = &Error{Kind: KindOutcomeUnknown, JobID: l.jobID, ClaimedJobID: l.jobID, Err: errors.Unwrap(err),
			Msg: fmt.Sprintf("the claim of job %s in production %q may or may not have committed, and no lease was "+
				"returned: observe the job (worker, attempts), and cancel it or let it expire", l.jobID, l.production)}
	}
	return nil, aboutJob(err, l.jobID)
}

// claimIn performs a claim inside g; the lease comes back pending. Claim-next
// first promotes (lapsed claims end, delayed jobs whose time has come become
// due), then takes the first due job in claim order: priority, claimable
// time, request order. When it ended lapsed claims but fails, g.keep asks
// the caller to commit those transitions anyway.
func claimIn(g *guard, production, jobID, worker string, us int64) (*Lease, error) {
	// The production is read before the first sample: a store with a
	// server clock samples it in that read (one statement where there
	// were two), and the sample is still taken before the claim decides.
	// A clock behind its mark still comes before a production not found
	// (docs/errors.md): that answer waits for the sample.
	p, perr := productionByName(g.ctx, g.tx, production)
	if perr != nil && KindOf(perr) != KindNotFound {
		return nil, perr
	}
	now, err := g.sample()
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	var j store.Job
	if jobID == "" {
		// Promotion decides on the first sample: a lapse it ends became
		// due after every transition of that claim (a renewal moves the
		// lapse), and the claim is timed once it holds its row (readyIn).
		// A claim of the next job never fails because of a job it may not
		// take: it takes another, or there is nothing to claim.
		var found bool
		if j, found, err = promoteAndFind(g, p, now); err != nil {
			return nil, err
		}
		if found {
			if j, now, found, err = readyIn(g, p, j, now); err != nil {
				return nil, err
			}
		}
		if !found {
			return nil, errf(KindNothingToClaim, "production %q has no claimable job", production)
		}
	} else {
		if j, err = jobIn(g.ctx, g.tx, p, jobID); err != nil {
			return nil, err
		}
		switch {
		case j.State == store.StateCancelled:
			return nil, errf(KindCancelled, "job %s was cancelled by the coordinator", jobID)
		case j.State == store.StateClaimed && now < j.Expiry:
			return nil, errf(KindWrongState, "job %s is claimed by %q until %s", jobID, j.Worker, describeUS(j.Expiry))
		case j.State != store.StateRequested && j.State != store.StateClaimed:
			return nil, errf(KindWrongState, "job %s is already %s", jobID, j.State)
		}
		if now, err = g.locked(now); err != nil {
			return nil, err
		}
		if now < j.ReadyAt {
			return nil, errNotReady(j.ID, j.ReadyAt)
		}
		if err := g.follows(now, j); err != nil {
			return nil, err
		}
	}
	if j.State == store.StateClaimed {
		dead, err := lapse(g.ctx, g.tx, p, &j, now)
		if err != nil {
			return nil, err
		}
		if dead {
			g.keep = true
			return nil, errf(KindWrongState, "job %s is dead: %s", j.ID,
				deadDetail(j.Attempts, p.Policy.MaxAttempts, store.EndExpired, expiredReason))
		}
	}
	secret, err := newSecret()
	if err != nil {
		return nil, err
	}
	expiry := now + us
	j.State, j.ClaimHash, j.Worker, j.ClaimedAt, j.Expiry = store.StateClaimed, secret.hash(), worker, now, expiry
	j.Attempts++
	j.Reason, j.UpdatedAt = "", now
	j.ReadyAt, j.Due = lapsedReady(p.Policy, j.Attempts, expiry), false
	if err := g.tx.UpdateJob(g.ctx, j); err != nil {
		return nil, storageErr("claim", err)
	}
	if err := event(g.ctx, g.tx, store.Event{At: now, ProductionID: p.ID, JobID: j.ID, Kind: "claimed",
		Worker: worker, Expiry: expiry}); err != nil {
		return nil, err
	}
	g.mustOutlive(j.ID, expiry)
	return &Lease{a: g.a, productionID: p.ID, production: p.Name, jobID: j.ID, worker: worker,
		secret: secret, claimedAt: now, expiry: expiry, state: LeasePending,
		heldUntil: g.started.Add(time.Duration(us) * time.Microsecond)}, nil
}

// ---- claimant transitions --------------------------------------------------

// transition runs one guarded claimant operation on an active lease. On
// success a non-empty closes (what happened: "completed") closes the lease;
// on any failure the lease stays active locally and its next use asks the
// store again. A verdict that the claim is over is reported by Done.
func (l *Lease) transition(ctx context.Context, closes string, fn func(g *guard) error) error {
	return l.transitionOf(ctx, closes, fn, nil)
}

// transitionOf is transition for an operation that does more than act on
// this lease (complete-and-claim-next also claims): notAbout says whether
// its failure is about something else (the new claim), and then it is no
// verdict about this lease: it closes no Done, and is not attributed to
// this lease's job. A verdict about a lease must be true of that lease.
func (l *Lease) transitionOf(ctx context.Context, closes string, fn func(g *guard) error, notAbout func(error) bool) error {
	if err := l.localCheck(); err != nil {
		l.reportEnd(err)
		return err
	}
	err := l.a.retrying(ctx, func() error {
		g, err := l.a.beginGuard(ctx)
		if err != nil {
			return err
		}
		if err := fn(g); err != nil {
			return g.abort(err)
		}
		return g.commit()
	})
	if err != nil {
		if notAbout != nil && notAbout(err) {
			return err
		}
		err = aboutJob(err, l.jobID)
		l.reportEnd(err)
		return err
	}
	if closes != "" {
		l.closeHere(closes)
	}
	return nil
}

func (l *Lease) nilCheck() error {
	if l == nil || l.a == nil {
		return errf(KindInvalidArgument, "lease is nil")
	}
	return nil
}

// Renew extends the claim to now+d. The new expiry must be later than the
// current one (else NotExtended), and the renewal must commit before the
// current expiry (else Expired, with nothing changed).
func (l *Lease) Renew(d time.Duration) error { return l.renew(context.Background(), d) }

func (l *Lease) renew(ctx context.Context, d time.Duration) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	us, err := ValidateDuration(d)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var newExpiry int64
	var heldUntil time.Time
	err = l.transition(ctx, "", func(g *guard) error {
		j, now, err := checkHeld(g, l)
		if err != nil {
			return err
		}
		newExpiry = now + us
		heldUntil = g.started.Add(time.Duration(us) * time.Microsecond)
		if newExpiry <= j.Expiry {
			return errf(KindNotExtended, "renewing job %s for %s would not extend its expiry %s",
				l.jobID, d, describeUS(j.Expiry))
		}
		// The backoff a lapse would cost moves with the expiry.
		j.ReadyAt += newExpiry - j.Expiry
		j.Expiry, j.UpdatedAt = newExpiry, now
		if err := g.tx.UpdateJob(g.ctx, j); err != nil {
			return storageErr("renew", err)
		}
		return event(g.ctx, g.tx, store.Event{At: now, ProductionID: l.productionID, JobID: l.jobID, Kind: "renewed",
			Worker: l.worker, Expiry: newExpiry})
	})
	if err == nil {
		l.heldUntil = heldUntil
		l.smu.Lock()
		l.expiry = newExpiry
		l.smu.Unlock()
	}
	return err
}

// Release gives the job back: it becomes requested again at once, or dead
// when this was its last attempt (a release ends an attempt). The claim
// must be unexpired. Success closes the lease.
func (l *Lease) Release() error { return l.release(context.Background()) }

func (l *Lease) release(ctx context.Context) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	// A release ends an attempt (a receive, as SQS counts them) and returns
	// the job at once, in its place in the claim order.
	return l.endClaim(ctx, "released", store.EndReleased, "", func(_ store.Production, j store.Job, _ int64) int64 {
		return j.ClaimableAt
	})
}

// Fail marks the job failed with a reason: terminal, not retried (FailRetry
// is the retryable failure). The claim must be unexpired. Success closes
// the lease.
func (l *Lease) Fail(reason string) error { return l.fail(context.Background(), reason) }

func (l *Lease) fail(ctx context.Context, reason string) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	if err := checkText("failure reason", reason, MaxReasonLen, true); err != nil {
		return err
	}
	return l.endClaim(ctx, "failed", store.EndFailed, reason, func(store.Production, store.Job, int64) int64 { return 0 })
}

// Complete marks the job completed and publishes facts, all in one commit.
// The claim must be unexpired at commit. Success closes the lease.
func (l *Lease) Complete(f Facts) error { return l.complete(context.Background(), f) }

func (l *Lease) complete(ctx context.Context, f Facts) error {
	if err := l.nilCheck(); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.transition(ctx, "completed", func(g *guard) error { return completeIn(g, l, f) })
}

func completeIn(g *guard, l *Lease, f Facts) error {
	j, now, err := checkHeld(g, l)
	if err != nil {
		return err
	}
	facts, outs := factRows(l.jobID, f)
	if err := checkUnpublished(g.ctx, g.tx, l.jobID, facts, outs); err != nil {
		return err
	}
	if _, err := endAttempt(g.ctx, g.tx, nil, store.Production{ID: l.productionID}, &j, now, store.EndCompleted, "", 0); err != nil {
		return err
	}
	if err := g.tx.InsertFacts(g.ctx, facts); err != nil {
		return storageErr("publish facts", err)
	}
	if err := g.tx.InsertOutputs(g.ctx, outs); err != nil {
		return storageErr("register outputs", err)
	}
	return event(g.ctx, g.tx, store.Event{At: now, ProductionID: l.productionID, JobID: l.jobID, Kind: "completed",
		Worker: l.worker})
}

// checkUnpublished refuses facts and outputs the job already has. A job
// holds facts before its completion only when it was migrated from the
// pre-lease schema, which wrote them early; a completion publishes, and
// never replaces, so a colliding key is the caller's mistake.
func checkUnpublished(ctx context.Context, r store.Reader, jobID string, facts []store.Fact, outs []store.Output) error {
	if len(facts) > 0 {
		have, err := r.Facts(ctx, jobID)
		if err != nil {
			return storageErr("read facts", err)
		}
		stored := make(map[[2]string]bool, len(have))
		for _, x := range have {
			stored[[2]string{x.Kind, x.Key}] = true
		}
		for _, x := range facts {
			if stored[[2]string{x.Kind, x.Key}] {
				return errf(KindInvalidArgument, "job %s already has a %s fact %q; a completion publishes facts and never replaces one",
					jobID, x.Kind, x.Key)
			}
		}
	}
	if len(outs) > 0 {
		have, err := r.Outputs(ctx, jobID)
		if err != nil {
			return storageErr("read outputs", err)
		}
		stored := make(map[string]bool, len(have))
		for _, o := range have {
			stored[o.Path] = true
		}
		for _, o := range outs {
			if stored[o.Path] {
				return errf(KindInvalidArgument, "job %s already has an output registered at %q", jobID, o.Path)
			}
		}
	}
	return nil
}

// ---- tokens ----------------------------------------------------------------

// Export encodes an active lease as a token for another process. The token
// carries the secret: treat it as a credential.
func (l *Lease) Export() (string, error) {
	if err := l.nilCheck(); err != nil {
		return "", err
	}
	if err := l.localCheck(); err != nil {
		return "", err
	}
	return EncodeToken(Token{ProductionID: l.productionID, JobID: l.jobID, Secret: l.secret})
}

// Import turns a token back into an active lease after checking production,
// job and secret against the current state: the claim must exist, be the
// job's current claim and be unexpired.
func (a *Authority) Import(token string) (*Lease, error) {
	return a.importToken(context.Background(), token)
}

func (a *Authority) importToken(ctx context.Context, token string) (*Lease, error) {
	t, err := DecodeToken(token)
	if err != nil {
		return nil, err
	}
	if err := a.usable(); err != nil {
		return nil, err
	}
	l := &Lease{a: a, productionID: t.ProductionID, jobID: t.JobID, secret: t.Secret, state: LeaseActive}
	var j store.Job
	var local time.Time
	var now int64
	err = a.retrying(ctx, func() error {
		g, err := a.beginGuard(ctx)
		if err != nil {
			return err
		}
		if p, err := g.tx.ProductionByID(ctx, t.ProductionID); err == nil {
			l.production = p.Name
		}
		local = g.started
		if j, now, err = checkHeld(g, l); err != nil {
			return g.abort(err)
		}
		return g.commit()
	})
	if err != nil {
		return nil, aboutJob(err, t.JobID)
	}
	l.worker, l.claimedAt, l.expiry = j.Worker, j.ClaimedAt, j.Expiry
	l.heldUntil = local.Add(time.Duration(j.Expiry-now) * time.Microsecond)
	return l, nil
}
