// Package core is the lease authority: every rule of the decision record
// (shared/adr/0057) lives here, written against the storage contract of
// package store. It knows nothing of C.
package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/pgstore"
	"github.com/libleases/libleases/core/store/sqlitestore"
)

// Options tune Open. The zero value is the safe default.
type Options struct {
	// BusyTimeout bounds the wait for the writer lock (default 10s).
	BusyTimeout time.Duration
	// Synchronous is "FULL" (default), "EXTRA" or "NORMAL". NORMAL can lose an
	// acknowledged claim on power loss; it exists for benchmarks.
	Synchronous string
}

// Authority is one opened authority database. It is safe for concurrent use
// by many goroutines, and many processes may open the same file.
type Authority struct {
	b      store.Backend
	clock  store.Clock                  // the store's clock outside transactions, if it owns one
	seam   atomic.Pointer[func() int64] // test builds only; nil in release builds
	closed atomic.Bool
	waits  *waitroom // waiting claims (wait.go)

	mu      sync.Mutex
	edits   map[*Edit]struct{}  // open edits, aborted by Close
	keepers map[*Lease]struct{} // leases kept alive, stopped by Close (keepalive.go)
}

// systemClock is the authority's private clock: wall time in unix µs.
func systemClock() int64 { return time.Now().UnixMicro() }

// Open opens the authority at location, creating and migrating its schema.
// A location starting with postgres:// or postgresql:// is a PostgreSQL
// connection URL; anything else is the path of a SQLite file, created if it
// does not exist.
func Open(location string) (*Authority, error) { return OpenWith(location, Options{}) }

// IsPostgres reports whether location selects the PostgreSQL store.
func IsPostgres(location string) bool { return pgstore.IsURL(location) }

// OpenWith is Open with options.
func OpenWith(location string, opts Options) (*Authority, error) {
	if err := checkText("database location", location, MaxPathLen, false); err != nil {
		return nil, err
	}
	a := &Authority{}
	var b store.Backend
	var err error
	if IsPostgres(location) {
		if opts.Synchronous != "" {
			return nil, errf(KindInvalidArgument, "synchronous is a SQLite setting; PostgreSQL commits durably")
		}
		b, err = pgstore.Open(location, pgstore.Options{BusyTimeout: opts.BusyTimeout})
		if errors.Is(err, pgstore.ErrInvalidURL) {
			return nil, &Error{Kind: KindInvalidArgument, Msg: "database location " + pgstore.Redact(location), Err: err}
		}
		if err != nil {
			// The URL may carry a password: name the store by its redacted form.
			return nil, storageErr("open "+pgstore.Redact(location), err)
		}
	} else {
		b, err = sqlitestore.Open(location, sqlitestore.Options{BusyTimeout: opts.BusyTimeout, Synchronous: opts.Synchronous}, a.now)
		if err != nil {
			return nil, storageErr("open "+location, err)
		}
	}
	a.b = b
	a.clock, _ = b.(store.Clock)
	a.waits = newWaitroom(b)
	return a, nil
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

// sampleOutside samples the authority clock outside any transaction, for
// what decides nothing (when a waiting claim looks again): the server's clock
// for a store that owns one, else now(); the seam replaces either.
func (a *Authority) sampleOutside(ctx context.Context) (int64, error) {
	if a.clock == nil {
		return a.now(), nil
	}
	v, err := a.clock.Now(ctx)
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
	// An edit left open would keep its transaction, and with PostgreSQL its
	// row locks, until the process ends: roll each back (it then reports
	// closed, and commits nothing).
	a.mu.Lock()
	open := make([]*Edit, 0, len(a.edits))
	for e := range a.edits {
		open = append(open, e)
	}
	a.mu.Unlock()
	for _, e := range open {
		e.Abort()
	}
	if err := a.b.Close(); err != nil {
		return storageErr("close", err)
	}
	return nil
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

// storageErr maps backend errors to kinds. Messages come from SQLite and our
// own text; the backend never sees a secret, so none can appear.
func storageErr(op string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrAbandoned):
		return &Error{Kind: KindBusy, Msg: op + ": abandoned before commit; nothing was written", Err: err}
	case errors.Is(err, store.ErrBusy):
		return &Error{Kind: KindBusy, Msg: op + ": the writer lock was not obtained within the busy timeout", Err: err}
	case errors.Is(err, store.ErrRetry), errors.Is(err, store.ErrConflict):
		return &Error{Kind: KindBusy, Msg: op + ": a concurrent transaction conflicted with this one; nothing was written", Err: err}
	case errors.Is(err, store.ErrConstraint):
		return &Error{Kind: KindStorage, Msg: op + ": the store refused the write (nothing was written)", Err: err}
	case errors.Is(err, store.ErrSchemaTooNew):
		return &Error{Kind: KindSchemaTooNew, Msg: op, Err: err}
	default:
		return &Error{Kind: KindStorage, Msg: op, Err: err}
	}
}

// ---- productions and jobs -------------------------------------------------

// CreateProduction creates a production, or returns the existing one of that
// name (creating is idempotent).
func (a *Authority) CreateProduction(name string) (Production, error) {
	return a.createProduction(context.Background(), name)
}

func (a *Authority) createProduction(ctx context.Context, name string) (Production, error) {
	if err := a.usable(); err != nil {
		return Production{}, err
	}
	if err := checkText("production name", name, MaxNameLen, false); err != nil {
		return Production{}, err
	}
	var out Production
	err := a.write(ctx, func(tx store.Tx, now int64, _ *wakes) error {
		p, err := tx.ProductionByName(ctx, name)
		if err == nil {
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
		p = store.Production{ID: id, Name: name, CreatedAt: now}
		if err := tx.InsertProduction(ctx, p); err != nil {
			return storageErr("create production", err)
		}
		if err := tx.InsertEvent(ctx, store.Event{At: now, ProductionID: id, Kind: "production_created"}); err != nil {
			return storageErr("create production", err)
		}
		out = toProduction(p)
		return nil
	})
	return out, err
}

// Productions lists every production by name. Listings are never nil, so an
// empty one marshals as [].
func (a *Authority) Productions() ([]Production, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	ps, err := a.b.Productions(context.Background())
	if err != nil {
		return nil, storageErr("list productions", err)
	}
	out := make([]Production, len(ps))
	for i, p := range ps {
		out[i] = toProduction(p)
	}
	return out, nil
}

func toProduction(p store.Production) Production {
	return Production{ID: p.ID, Name: p.Name, CreatedAt: time.UnixMicro(p.CreatedAt).UTC()}
}

// RequestJob adds a job to a production and returns its id. With a key the
// request is idempotent: the same key and payload return the same job; the
// same key with another payload is a WrongState error. key "" means no key.
func (a *Authority) RequestJob(production, key string, payload []byte) (string, error) {
	return a.request(context.Background(), production, key, payload)
}

func (a *Authority) request(ctx context.Context, production, key string, payload []byte) (string, error) {
	if err := a.usable(); err != nil {
		return "", err
	}
	if err := checkRequest(production, key, payload); err != nil {
		return "", err
	}
	var id string
	err := a.write(ctx, func(tx store.Tx, now int64, w *wakes) error {
		var err error
		id, err = requestIn(ctx, tx, w, now, production, key, payload)
		return err
	})
	return id, err
}

func checkRequest(production, key string, payload []byte) error {
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return err
	}
	if err := checkText("job key", key, MaxNameLen, true); err != nil {
		return err
	}
	if len(payload) > MaxPayloadLen {
		return errf(KindInvalidArgument, "payload is %d bytes, the limit is %d", len(payload), MaxPayloadLen)
	}
	return nil
}

func requestIn(ctx context.Context, tx store.Tx, w *wakes, now int64, production, key string, payload []byte) (string, error) {
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
		State: store.StateRequested, RequestedAt: now, UpdatedAt: now}
	if err := tx.InsertJob(ctx, j); err != nil {
		return "", storageErr("request job", err)
	}
	if err := tx.InsertEvent(ctx, store.Event{At: now, ProductionID: p.ID, JobID: id, Kind: "requested"}); err != nil {
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
		return p, errf(KindNotFound, "production %q does not exist", name)
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
	if err := a.usable(); err != nil {
		return err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return err
	}
	if err := checkID("job id", jobID); err != nil {
		return err
	}
	return aboutJob(a.write(ctx, func(tx store.Tx, now int64, _ *wakes) error {
		p, err := productionByName(ctx, tx, production)
		if err != nil {
			return err
		}
		j, err := jobIn(ctx, tx, p, jobID)
		if err != nil {
			return err
		}
		switch j.State {
		case store.StateCancelled:
			return nil
		case store.StateCompleted, store.StateFailed:
			return errf(KindWrongState, "job %s is already %s", jobID, j.State)
		}
		worker := ""
		if j.State == store.StateClaimed {
			worker = j.Worker
		}
		j.State, j.UpdatedAt = store.StateCancelled, now
		if err := tx.UpdateJob(ctx, j); err != nil {
			return storageErr("cancel", err)
		}
		return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, JobID: j.ID, Kind: "cancelled", Worker: worker})
	}), jobID)
}

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
// over a concurrent conflict is run again (retrying).
func (a *Authority) write(ctx context.Context, fn func(tx store.Tx, now int64, w *wakes) error) error {
	return a.retrying(ctx, func() error {
		tx, err := a.b.BeginWrite(ctx)
		if err != nil {
			return storageErr("begin", err)
		}
		var w wakes
		now, err := a.sampleIn(ctx, tx)
		if err == nil {
			err = fn(tx, now, &w)
		}
		if err != nil {
			tx.Rollback()
			return err
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

// ---- observations ----------------------------------------------------------

// Jobs lists the jobs of a production in request order. No secret appears.
func (a *Authority) Jobs(production string) ([]Job, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return nil, err
	}
	ctx := context.Background()
	p, err := productionByName(ctx, a.b, production)
	if err != nil {
		return nil, err
	}
	js, err := a.b.Jobs(ctx, p.ID)
	if err != nil {
		return nil, storageErr("list jobs", err)
	}
	out := make([]Job, len(js))
	for i, j := range js {
		out[i] = toJob(p.Name, j)
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
	out := Job{ID: j.ID, Production: production, Key: j.Key, State: j.State, Attempts: j.Attempts, Reason: j.Reason}
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
// every production. No secret appears.
func (a *Authority) Events(production string, after int64) ([]Event, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	if err := checkText("production name", production, MaxNameLen, true); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, errf(KindInvalidArgument, "after must not be negative")
	}
	ctx := context.Background()
	ps, err := a.b.Productions(ctx)
	if err != nil {
		return nil, storageErr("list events", err)
	}
	names := map[string]string{}
	pid := ""
	for _, p := range ps {
		names[p.ID] = p.Name
		if p.Name == production {
			pid = p.ID
		}
	}
	if production != "" && pid == "" {
		return nil, errf(KindNotFound, "production %q does not exist", production)
	}
	es, err := a.b.Events(ctx, pid, after, 0)
	if err != nil {
		return nil, storageErr("list events", err)
	}
	out := make([]Event, len(es))
	for i, e := range es {
		out[i] = Event{Seq: e.Seq, At: time.UnixMicro(e.At).UTC(), Production: names[e.ProductionID], JobID: e.JobID,
			Kind: e.Kind, Worker: e.Worker, Detail: e.Detail}
		if e.Expiry != 0 {
			out[i].Expiry = time.UnixMicro(e.Expiry).UTC()
		}
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
	fs, err := a.b.Facts(ctx, jobID)
	if err != nil {
		return Facts{}, storageErr("read facts", err)
	}
	var f Facts
	for _, x := range fs {
		m := &f.Metadata
		if x.Kind == "provenance" {
			m = &f.Provenance
		}
		if *m == nil {
			*m = map[string]json.RawMessage{}
		}
		(*m)[x.Key] = json.RawMessage(x.Value)
	}
	outs, err := a.b.Outputs(ctx, jobID)
	if err != nil {
		return Facts{}, storageErr("read outputs", err)
	}
	for _, o := range outs {
		f.Outputs = append(f.Outputs, Output{Path: o.Path, Size: o.Size, SHA256: o.SHA256, Nonce: o.Nonce})
	}
	return f, nil
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
