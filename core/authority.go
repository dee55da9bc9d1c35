// Package core is the lease authority: every rule of docs/DESIGN.md lives
// here, written against the storage contract of package store. It knows
// nothing of C and no SQL dialect.
package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core/store"
)

// Authority is one opened authority database. It is safe for concurrent use
// by many goroutines, and many processes may open the same file.
type Authority struct {
	b      store.Backend
	seam   atomic.Pointer[func() int64] // test builds only; nil in release builds
	closed atomic.Bool
	waits  *waitroom                   // waiting claims (wait.go)
	logger atomic.Pointer[slog.Logger] // SetLogger; nil: slog.Default()

	mu         sync.Mutex
	edits      map[*Edit]struct{}  // open edits, aborted by Close
	keepers    map[*Lease]struct{} // leases kept alive, stopped by Close (keepalive.go)
	pruner     func()              // stops the background pruner (retention.go)
	lastPrune  BackgroundPrune     // the background pruner's last pass (retention.go)
	noteLogged string              // the last PruneResult.Note the background pruner logged
}

// systemClock is the authority's private clock: wall time in unix µs.
func systemClock() int64 { return time.Now().UnixMicro() }

// OpenStore returns the authority over the store open returns, which it
// then owns (Close closes it). location is checked first as caller text
// (not empty, valid UTF-8, no NUL, at most MaxPathLen bytes); a failure of
// open is reported as an *Error of the matching kind, naming the store by
// name (which must hold no password). Core chooses no store itself: package
// leases, at the module root, opens one by location (leases.Open), and a
// program with a store.Backend of its own can pass it here. The rules never
// depend on which store it is.
func OpenStore(location, name string, open func() (store.Backend, error)) (*Authority, error) {
	if err := checkText("database location", location, MaxPathLen, false); err != nil {
		return nil, err
	}
	b, err := open()
	if err != nil {
		return nil, storageErr("open "+name, err)
	}
	a := &Authority{b: b, waits: newWaitroom(b)}
	a.SetPruneInterval(DefaultPruneInterval)
	return a, nil
}

// SetLogger sets where the authority writes what it cannot return to a
// caller: today the background pruner's failed passes (SetPruneInterval).
// nil, the default, is slog.Default() at the time of each record. It may be
// called at any time, from any goroutine.
func (a *Authority) SetLogger(l *slog.Logger) { a.logger.Store(l) }

// log is the logger of SetLogger, or slog.Default().
func (a *Authority) log() *slog.Logger {
	if l := a.logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// now is the clock of a store without a server clock (SQLite): this host's
// wall clock, or the seam in test builds.
func (a *Authority) now() int64 {
	if f := a.seam.Load(); f != nil {
		return (*f)()
	}
	return systemClock()
}

// sampleIn samples the authority clock for a transaction. A store with a
// server clock (PostgreSQL) is always asked, inside the transaction, so every
// host shares one clock; in test builds the seam then replaces the server's
// answer, so clock tests drive the same path. Otherwise it is now().
func (a *Authority) sampleIn(ctx context.Context, tx store.Tx) (int64, error) {
	c, ok := tx.(store.Clock)
	if !ok {
		return a.now(), nil
	}
	v, err := c.Now(ctx)
	if err != nil {
		return 0, storageErr("sample the authority clock", err)
	}
	if f := a.seam.Load(); f != nil {
		return (*f)(), nil
	}
	return v, nil
}

// setClock installs the clock seam; only test builds reach it (clock_seam*.go).
// Every waiting claim looks again: a moved clock may have expired a claim,
// and nothing was written that would wake it.
func (a *Authority) setClock(f func() int64) {
	a.seam.Store(&f)
	if a.waits != nil {
		a.waits.hub.WakeAll()
	}
}

// Close closes the database. Leases of a closed authority report Closed.
func (a *Authority) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	// Waits end (closed), and renewers stop before the store closes: none
	// writes after Close returns.
	a.waits.close()
	a.stopKeepers()
	a.SetPruneInterval(0)
	// An edit left open would keep its transaction, and with PostgreSQL its
	// row locks, until the process ends: roll each back (it then reports
	// closed, and commits nothing).
	for _, e := range lockedKeys(&a.mu, a.edits) {
		e.Abort()
	}
	if err := a.b.Close(); err != nil {
		return storageErr("close", err)
	}
	return nil
}

// lockedKeys lists m's keys under mu, so that each can then be acted on
// without holding it.
func lockedKeys[K comparable](mu *sync.Mutex, m map[K]struct{}) []K {
	mu.Lock()
	defer mu.Unlock()
	return slices.Collect(maps.Keys(m))
}

func (a *Authority) usable() error {
	if a == nil {
		return errf(KindInvalidArgument, "authority is nil")
	}
	if a.closed.Load() {
		return errf(KindClosed, "authority is closed")
	}
	return nil
}

// storageErr maps backend errors to kinds. Messages come from the store's
// driver (SQLite, or PostgreSQL with the URL's password redacted) and our own
// text; no store ever sees a secret, so none can appear.
func storageErr(op string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrAbandoned):
		return &Error{Kind: KindBusy, Msg: op + ": abandoned before commit; nothing was written", Err: err}
	case errors.Is(err, store.ErrBusy):
		return &Error{Kind: KindBusy, Msg: op + ": a lock (SQLite's writer lock or a PostgreSQL row lock) was not obtained within the busy timeout", Err: err}
	case errors.Is(err, store.ErrRetry), errors.Is(err, store.ErrConflict):
		return &Error{Kind: KindBusy, Msg: op + ": a concurrent transaction conflicted with this one; nothing was written", Err: err}
	case errors.Is(err, store.ErrConstraint):
		return &Error{Kind: KindStorage, Msg: op + ": the store refused the write (nothing was written)", Err: err}
	case errors.Is(err, store.ErrInvalid):
		return &Error{Kind: KindInvalidArgument, Msg: op, Err: err}
	case errors.Is(err, store.ErrNotExist):
		return &Error{Kind: KindNotFound, Msg: op, Err: err}
	case errors.Is(err, store.ErrSchemaTooNew):
		return &Error{Kind: KindSchemaTooNew, Msg: op, Err: err}
	default:
		return &Error{Kind: KindStorage, Msg: op, Err: err}
	}
}

// ---- productions and jobs -------------------------------------------------

// CreateProduction creates a production with the default retry policy
// (DefaultRetryPolicy), or returns the existing one of that name whatever
// its policy (creating is idempotent).
func (a *Authority) CreateProduction(name string) (Production, error) {
	return a.createProduction(context.Background(), name, nil)
}

// createProduction creates name with policy (nil: the default; an existing
// production is then returned as it is).
func (a *Authority) createProduction(ctx context.Context, name string, policy *store.Policy) (Production, error) {
	return a.createProductionWith(ctx, name, policy, nil)
}

// createProductionWith creates name with policy and retention (nil: the
// default; an existing production is then returned whatever its own).
func (a *Authority) createProductionWith(ctx context.Context, name string, policy *store.Policy,
	retention *store.Retention) (Production, error) {
	if err := a.usable(); err != nil {
		return Production{}, err
	}
	if err := checkName("production name", name, MaxNameLen, false); err != nil {
		return Production{}, err
	}
	var out Production
	err := a.write(ctx, func(tx store.Tx, now int64, _ *wakes) error {
		p, err := tx.ProductionByName(ctx, name)
		if err == nil {
			if policy != nil && p.Policy != *policy {
				return errf(KindWrongState, "production %q exists with another retry policy (%s); change it with set-policy",
					name, describePolicy(p.Policy))
			}
			if retention != nil && p.Retention != *retention {
				return errf(KindWrongState, "production %q exists with another retention policy (%s); change it with set-retention",
					name, describeRetention(p.Retention))
			}
			out = toProduction(p)
			return nil
		}
		if !errors.Is(err, store.ErrNoRow) {
			return storageErr("create production", err)
		}
		id, err := newUUID()
		if err != nil {
			return err
		}
		sp, _ := DefaultRetryPolicy().check()
		if policy != nil {
			sp = *policy
		}
		sr, _ := DefaultRetentionPolicy().check()
		if retention != nil {
			sr = *retention
		}
		p = store.Production{ID: id, Name: name, CreatedAt: now, Policy: sp, Retention: sr}
		if err := tx.InsertProduction(ctx, p); err != nil {
			return storageErr("create production", err)
		}
		if err := tx.InsertEvent(ctx, store.Event{At: now, ProductionID: id, Kind: "production_created",
			Detail: describePolicy(sp)}); err != nil {
			return storageErr("create production", err)
		}
		out = toProduction(p)
		return nil
	})
	return out, err
}

// Productions lists every production by name. Listings are never nil, so an
// empty one marshals as []. It reads every page of ListProductions.
func (a *Authority) Productions() ([]Production, error) {
	out := []Production{}
	q := ProductionQuery{Limit: MaxPageSize}
	for {
		page, err := a.ListProductions(context.Background(), q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Productions...)
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

func toProduction(p store.Production) Production {
	return Production{ID: p.ID, Name: p.Name, CreatedAt: time.UnixMicro(p.CreatedAt).UTC(), Policy: toPolicy(p.Policy),
		Retention: toRetention(p.Retention)}
}

// RequestJob adds a job to a production and returns its id. With a key the
// request is idempotent: the same key and payload return the same job; the
// same key with another payload is a WrongState error. key "" means no key.
// The job has priority 0 and is claimable at once.
func (a *Authority) RequestJob(production, key string, payload []byte) (string, error) {
	return a.request(context.Background(), production, key, payload, RequestOptions{})
}

// RequestJobWith is RequestJob with a priority and a run-at or delay. A
// repeated keyed request returns the existing job as it is: the first
// request's options stand.
func (a *Authority) RequestJobWith(production, key string, payload []byte, o RequestOptions) (string, error) {
	return a.request(context.Background(), production, key, payload, o)
}

func (a *Authority) request(ctx context.Context, production, key string, payload []byte, o RequestOptions) (string, error) {
	if err := a.usable(); err != nil {
		return "", err
	}
	if err := checkRequest(production, key, payload, o); err != nil {
		return "", err
	}
	var id string
	err := a.write(ctx, func(tx store.Tx, now int64, w *wakes) error {
		var err error
		id, err = requestIn(ctx, tx, w, now, production, key, payload, o)
		return err
	})
	return id, err
}

func checkRequest(production, key string, payload []byte, o RequestOptions) error {
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return err
	}
	if err := checkName("job key", key, MaxNameLen, true); err != nil {
		return err
	}
	if len(payload) > MaxPayloadLen {
		return errf(KindInvalidArgument, "payload is %d bytes, the limit is %d", len(payload), MaxPayloadLen)
	}
	return o.check()
}

func requestIn(ctx context.Context, tx store.Tx, w *wakes, now int64, production, key string, payload []byte, o RequestOptions) (string, error) {
	ready, err := o.readyAt(now)
	if err != nil {
		return "", err
	}
	p, err := productionByName(ctx, tx, production)
	if err != nil {
		return "", err
	}
	if key != "" {
		j, err := tx.JobByKey(ctx, p.ID, key)
		if err == nil {
			if !bytes.Equal(j.Payload, payload) {
				return "", errf(KindWrongState, "job key %q already names a job with another payload", key)
			}
			return j.ID, nil
		}
		if !errors.Is(err, store.ErrNoRow) {
			return "", storageErr("request job", err)
		}
	}
	id, err := newUUID()
	if err != nil {
		return "", err
	}
	if payload == nil {
		payload = []byte{}
	}
	j := store.Job{ID: id, ProductionID: p.ID, Key: key, HasKey: key != "", Payload: payload,
		State: store.StateRequested, RequestedAt: now, UpdatedAt: now,
		Priority: int64(o.Priority), ClaimableAt: ready, ReadyAt: ready, Due: ready <= now}
	if err := tx.InsertJob(ctx, j); err != nil {
		return "", storageErr("request job", err)
	}
	detail := ""
	if ready > now || o.Priority != 0 {
		detail = fmt.Sprintf("priority %d, claimable at %s", o.Priority, describeUS(ready))
	}
	if err := tx.InsertEvent(ctx, store.Event{At: now, ProductionID: p.ID, JobID: id, Kind: "requested", Detail: detail}); err != nil {
		return "", storageErr("request job", err)
	}
	if err := w.add(ctx, tx, p.ID); err != nil {
		return "", err
	}
	return id, nil
}

func productionByName(ctx context.Context, r store.Reader, name string) (store.Production, error) {
	p, err := r.ProductionByName(ctx, name)
	if errors.Is(err, store.ErrNoRow) {
		e := errf(KindNotFound, "production %q does not exist", name)
		e.missingProduction = name
		return p, e
	}
	if err != nil {
		return p, storageErr("look up production", err)
	}
	return p, nil
}

// Cancel is the coordinator's recovery tool: it cancels a requested or
// claimed job by id, with no secret. The holder's next operation fails as
// Cancelled. It is not blocked by clock regression. Cancelling a cancelled job
// succeeds and changes nothing; a completed or failed job is WrongState.
func (a *Authority) Cancel(production, jobID string) error {
	return a.cancel(context.Background(), production, jobID)
}

func (a *Authority) cancel(ctx context.Context, production, jobID string) error {
	return a.coordinate(ctx, production, jobID, func(tx store.Tx, _ *wakes, p store.Production, j store.Job, now int64) error {
		switch j.State {
		case store.StateCancelled:
			return nil
		case store.StateCompleted, store.StateFailed, store.StateDead:
			return errf(KindWrongState, "job %s is already %s", jobID, j.State)
		}
		worker := ""
		if j.State == store.StateClaimed {
			// The claim's attempt ends here (whether or not it had expired).
			worker = j.Worker
			if _, err := endAttempt(ctx, tx, nil, p, &j, now, store.EndCancelled, "cancelled by the coordinator", 0); err != nil {
				return err
			}
		} else {
			j.State, j.UpdatedAt, j.Due = store.StateCancelled, now, false
			if err := tx.UpdateJob(ctx, j); err != nil {
				return storageErr("cancel", err)
			}
		}
		return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, JobID: j.ID, Kind: "cancelled", Worker: worker})
	})
}

// coordinate runs a coordinator's operation on one job (no secret, no clock
// policy): the arguments are checked, then fn decides in one write
// transaction with the production and the job.
func (a *Authority) coordinate(ctx context.Context, production, jobID string,
	fn func(tx store.Tx, w *wakes, p store.Production, j store.Job, now int64) error) error {
	if err := a.usable(); err != nil {
		return err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return err
	}
	if err := checkID("job id", jobID); err != nil {
		return err
	}
	return aboutJob(a.write(ctx, func(tx store.Tx, now int64, w *wakes) error {
		p, err := productionByName(ctx, tx, production)
		if err != nil {
			return err
		}
		j, err := jobIn(ctx, tx, p, jobID)
		if err != nil {
			return err
		}
		return fn(tx, w, p, j, afterLastChange(now, j))
	}), jobID)
}

// afterLastChange is the time of an unguarded write that changes j: now,
// but never before j's last change, so that a job's own times never run
// backwards (an attempt a cancel ends never ends before it was claimed,
// even on a store that locks the job's row only after the mark was read,
// while a claim of it was committing).
func afterLastChange(now int64, j store.Job) int64 { return max(now, j.UpdatedAt) }

func jobIn(ctx context.Context, r store.Reader, p store.Production, jobID string) (store.Job, error) {
	j, err := r.JobByID(ctx, jobID)
	if errors.Is(err, store.ErrNoRow) || (err == nil && j.ProductionID != p.ID) {
		return j, errf(KindNotFound, "job %s does not exist in production %q", jobID, p.Name)
	}
	if err != nil {
		return j, storageErr("look up job", err)
	}
	return j, nil
}

func event(ctx context.Context, tx store.Tx, e store.Event) error {
	if err := tx.InsertEvent(ctx, e); err != nil {
		return storageErr("record event", err)
	}
	return nil
}

// write runs an unguarded writing transaction (no clock policy): creating
// productions, requesting jobs, cancelling. A transaction the store aborted
// over a concurrent conflict is run again (retrying). Its time is
// unguardedNow's.
func (a *Authority) write(ctx context.Context, fn func(tx store.Tx, now int64, w *wakes) error) error {
	return a.writeHeld(ctx, nil, fn)
}

// writeHeld is write, adding to *held (when held is not nil) how long each
// try held the writer: from BeginWrite's return to the end of its Commit or
// Rollback.
func (a *Authority) writeHeld(ctx context.Context, held *time.Duration, fn func(tx store.Tx, now int64, w *wakes) error) error {
	return a.writeTx(ctx, held, true, fn)
}

// deleteHeld is writeHeld for a transaction that records no time: it only
// deletes what reads outside it chose (pruning's batches), so it reads
// neither the mark nor the clock, and fn gets now 0.
func (a *Authority) deleteHeld(ctx context.Context, held *time.Duration, fn func(tx store.Tx) error) error {
	return a.writeTx(ctx, held, false, func(tx store.Tx, _ int64, _ *wakes) error { return fn(tx) })
}

func (a *Authority) writeTx(ctx context.Context, held *time.Duration, timed bool, fn func(tx store.Tx, now int64, w *wakes) error) error {
	return a.retrying(ctx, func() error {
		tx, err := a.b.BeginWrite(ctx)
		if err != nil {
			return storageErr("begin", err)
		}
		if held != nil {
			began := time.Now()
			defer func() { *held += time.Since(began) }()
		}
		var w wakes
		var now int64
		if timed {
			now, err = a.unguardedNow(ctx, tx)
		}
		if err == nil {
			err = fn(tx, now, &w)
		}
		if err != nil {
			return aborted(tx.Rollback(), err)
		}
		if err := tx.Commit(); err != nil {
			err = commitErr(err)
			a.waits.committed(err, w)
			return err
		}
		a.waits.committed(nil, w)
		return nil
	})
}

// unguardedNow is the time of an unguarded write (docs/CLOCK.md): the
// clock's sample, but never earlier than the durable mark, so that nothing
// it records — an event, a creation or request time, a run-at, a delay's
// start, the end of an attempt it cancels — comes before a time a guarded
// operation already acted on. A clock behind the mark blocks nothing here
// (cancel is the recovery tool): the write records the mark instead. The
// mark is read first, and on a store with a server clock the sample comes
// from the same statement; the read takes no lock, so no guarded commit
// waits for it, and the mark is never written here.
func (a *Authority) unguardedNow(ctx context.Context, tx store.Tx) (int64, error) {
	hwm, err := tx.HWM(ctx)
	if err != nil {
		return 0, storageErr("read high-water mark", err)
	}
	now, err := a.sampleIn(ctx, tx)
	if err != nil {
		return 0, err
	}
	return max(now, hwm), nil
}

// ---- observations ----------------------------------------------------------

// Jobs lists the jobs of a production in request order. No secret appears.
// It holds them all in memory (EachJob streams them): it reads every page of
// ListJobs, each in its own short read.
func (a *Authority) Jobs(production string) ([]Job, error) {
	out := []Job{}
	err := a.EachJob(context.Background(), production, JobQuery{Limit: MaxPageSize}, func(j Job) error {
		out = append(out, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Job observes one job.
func (a *Authority) Job(production, jobID string) (Job, error) {
	if err := a.usable(); err != nil {
		return Job{}, err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return Job{}, err
	}
	if err := checkID("job id", jobID); err != nil {
		return Job{}, err
	}
	ctx := context.Background()
	p, err := productionByName(ctx, a.b, production)
	if err != nil {
		return Job{}, err
	}
	j, err := jobIn(ctx, a.b, p, jobID)
	if err != nil {
		return Job{}, err
	}
	return toJob(p.Name, j), nil
}

// Payload returns a job's payload bytes.
func (a *Authority) Payload(production, jobID string) ([]byte, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	if err := checkID("job id", jobID); err != nil {
		return nil, err
	}
	ctx := context.Background()
	p, err := productionByName(ctx, a.b, production)
	if err != nil {
		return nil, err
	}
	j, err := jobIn(ctx, a.b, p, jobID)
	if err != nil {
		return nil, err
	}
	return j.Payload, nil
}

func toJob(production string, j store.Job) Job {
	out := Job{ID: j.ID, Production: production, Key: j.Key, State: j.State, Attempts: j.Attempts, Reason: j.Reason,
		Priority: int(j.Priority)}
	if j.State == store.StateRequested || j.State == store.StateClaimed {
		out.ClaimableAt = time.UnixMicro(j.ReadyAt).UTC()
	}
	if j.State != store.StateRequested && j.ClaimedAt != 0 {
		out.Worker = j.Worker
		out.ClaimedAt = time.UnixMicro(j.ClaimedAt).UTC()
		// A job that finished under the pre-lease schema (migrated) has a
		// claim time and no expiry: 0 stands for none, not for 1970.
		if j.Expiry != 0 {
			out.Expiry = time.UnixMicro(j.Expiry).UTC()
		}
	}
	return out
}

// Events lists events with Seq > after, oldest first; production "" means
// every production. No secret appears. It holds them all in memory
// (EachEvent streams them): it reads every page of ListEvents.
func (a *Authority) Events(production string, after int64) ([]Event, error) {
	out := []Event{}
	_, err := a.EachEvent(context.Background(), EventQuery{Production: production, After: after, Limit: MaxPageSize}, func(e Event) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FactsOf returns the facts a committed completion published for a job.
func (a *Authority) FactsOf(production, jobID string) (Facts, error) {
	if err := a.usable(); err != nil {
		return Facts{}, err
	}
	if err := checkID("job id", jobID); err != nil {
		return Facts{}, err
	}
	ctx := context.Background()
	p, err := productionByName(ctx, a.b, production)
	if err != nil {
		return Facts{}, err
	}
	if _, err := jobIn(ctx, a.b, p, jobID); err != nil {
		return Facts{}, err
	}
	return factsOf(ctx, a.b, jobID)
}

func factRows(jobID string, f Facts) ([]store.Fact, []store.Output) {
	var rows []store.Fact
	for _, kv := range []struct {
		kind string
		m    map[string]json.RawMessage
	}{{"metadata", f.Metadata}, {"provenance", f.Provenance}} {
		keys := make([]string, 0, len(kv.m))
		for k := range kv.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var buf bytes.Buffer
			if err := json.Compact(&buf, kv.m[k]); err != nil {
				buf.Reset()
				buf.Write(kv.m[k])
			}
			rows = append(rows, store.Fact{JobID: jobID, Kind: kv.kind, Key: k, Value: buf.String()})
		}
	}
	outs := make([]store.Output, len(f.Outputs))
	for i, o := range f.Outputs {
		outs[i] = store.Output{JobID: jobID, Path: o.Path, Size: o.Size, SHA256: o.SHA256, Nonce: o.Nonce}
	}
	return rows, outs
}
