// Package store is the storage contract the lease rules in package core are
// written against. It knows rows and transactions, never rules: every decision
// about who may do what lives in core, so a second SQL engine can sit behind
// the same rules by implementing these interfaces.
package store

import (
	"context"
	"errors"
	"time"
)

// Job states as stored.
const (
	StateRequested = "requested"
	StateClaimed   = "claimed"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StateDead      = "dead" // attempts used up (docs/CONCEPTS.md)
)

// How an attempt ended, as the attempt history records it.
const (
	EndCompleted = "completed"
	EndFailed    = "failed"
	EndRetry     = "retry"
	EndReleased  = "released"
	EndExpired   = "expired"
	EndCancelled = "cancelled"
)

// Errors a backend reports; core maps them onto its public kinds.
var (
	// ErrBusy: the writer lock was not obtained within the busy timeout.
	ErrBusy = errors.New("database is busy")
	// ErrNoRow: the looked-up row does not exist.
	ErrNoRow = errors.New("no such row")
	// ErrConflict: a concurrent transaction created the same production name
	// or job key first, so the unique index refused this one's insert. Only
	// a server store, where creators do not share a writer lock, reports it.
	// Nothing was written; running the transaction again finds that row.
	ErrConflict = errors.New("a concurrent transaction created the same row first")
	// ErrConstraint: a constraint refused the write and no concurrent writer
	// explains it (the row was already there, or a reference is missing).
	// Running the transaction again would fail the same way.
	ErrConstraint = errors.New("a constraint of the store refused the write")
	// ErrSchemaTooNew: the file was written by a newer library.
	ErrSchemaTooNew = errors.New("database schema is newer than this library")
	// ErrNotLeases: the file is a database, but not one of ours.
	ErrNotLeases = errors.New("database is not a libleases authority")
	// ErrNotExist: there is no authority at the location, and the store was
	// opened not to create one (MustExist).
	ErrNotExist = errors.New("no libleases authority exists there")
	// ErrInvalid: the location, or an option given with it, cannot be used
	// (an unparsable URL, an option of another store).
	ErrInvalid = errors.New("invalid location or option")
	// ErrReadOnly: the file cannot be written.
	ErrReadOnly = errors.New("database is read-only")
	// ErrCorrupt: the file is damaged or not a database.
	ErrCorrupt = errors.New("database file is corrupt or not a database")
	// ErrFull: the disk or database is full.
	ErrFull = errors.New("database or disk is full")
	// ErrRetry: the engine aborted the transaction to resolve a conflict with
	// a concurrent one (a serialization failure or a deadlock). Nothing was
	// written; running the whole transaction again may succeed.
	ErrRetry = errors.New("transaction aborted by a conflict with a concurrent transaction")
	// ErrReconnect: the transaction's connection failed, or its session
	// could not write (a server that restarted or ended the session, a
	// session left read-only), before anything was sent for commit. The
	// store has discarded the connection; nothing was written, and running
	// the whole transaction again, on a fresh connection, may succeed.
	ErrReconnect = errors.New("the connection failed before the transaction committed")
	// ErrAbandoned: the context of BeginWrite ended before the transaction
	// began, or before its COMMIT was sent. Nothing was written. It wraps
	// the context's cause.
	ErrAbandoned = errors.New("transaction abandoned before it committed")
	// ErrNotCommitted: Commit failed before COMMIT ran (a server store
	// sends writes whose results nothing waited for with its COMMIT, and
	// the server refused one of them). Nothing was written. It wraps the
	// refusal, classified as a statement's error is (ErrRetry, ErrBusy, ...).
	ErrNotCommitted = errors.New("the transaction was refused before it committed")
	// ErrLostWithOthers: Commit handed this transaction's writes to a commit
	// it shared with other writers (SQLite group commit), and that commit
	// was lost through a failure that was not this transaction's. Nothing
	// was written; it always comes with ErrNotCommitted. Unlike a refusal
	// of one of its own writes, this transaction's statements and checks
	// had all succeeded and its commit had begun: core stores the clock
	// sample it observed as the mark (docs/CLOCK.md, rule 3).
	ErrLostWithOthers = errors.New("the commit this transaction shared with other writers was lost")
	// ErrReadUncommitted: Rollback of a transaction that may have read
	// writes which were not durable yet (another writer's, sharing its
	// transaction: SQLite group commit) and which then did not commit, or
	// whose commit did not end within the busy timeout. Nothing the
	// transaction read may be reported: a refusal it led to may rest on a
	// write that never happened. It wraps ErrRetry (running the transaction
	// again reads what is durable) or, after the busy timeout, ErrBusy.
	ErrReadUncommitted = errors.New("the transaction read writes of others that did not commit")
)

// Clock is implemented by a Tx whose store owns the authority clock: a
// database server that every host shares. Now samples that clock from inside
// the transaction, in unix µs. A Tx that is not a Clock leaves the sample to
// the authority's own host (the embedded SQLite store). Such a store's
// Backend is a Clock too, for samples outside a transaction (a waiting
// claim's look, which decides nothing).
type Clock interface {
	Now(ctx context.Context) (int64, error)
}

// ReadAhead is implemented by a Tx that can send a read the operation will
// need with the statement before it. ProductionAhead says that the
// transaction's next read of a job by id (JobByID) is followed, usually
// with nothing else the server must answer in between, by a read of the
// production named name (ProductionByName): the store may read the
// production in the same round trip as the job, and answer
// ProductionByName from that read (with its clock sample, as it answers
// its own reads' samples) if nothing was sent between.
type ReadAhead interface {
	ProductionAhead(name string)
}

// Watcher is implemented by a Backend that can tell that a change was
// committed by another connection, process or host, without writing and
// without taking any writer lock. Watch starts watching and returns a
// function that stops it (and returns once it has stopped). changed is called
// from the watcher's own goroutine with the id of a production whose jobs may
// have become claimable, or "" when the change names no production (or may
// concern any). Once the watcher sees every later change it reports "" (a
// change made while it was starting is found by the look that follows).
// False alarms are allowed. MissesChanges reports whether changes can still
// go unreported (a server's notifications are lost with their connection):
// core then looks more often whatever happens.
type Watcher interface {
	Watch(changed func(productionID string)) (stop func())
	MissesChanges() bool
}

// Looker is implemented by a Backend whose clock is a server's: it answers
// a waiting claim's whole look in one round trip — a sample of its clock,
// the mark as it stood before that sample, HasClaimable at that time, and
// NextWakeAt.
type Looker interface {
	Look(ctx context.Context, productionID string) (now, mark int64, claimable bool, wakeAt int64, hasWake bool, err error)
}

// LookerAt is implemented by a Backend whose clock is read on this host
// (the embedded SQLite store): after the mark and the clock sample, it
// answers the rest of a waiting claim's look in one read — HasClaimable at
// now, and NextWakeAt.
type LookerAt interface {
	LookAt(ctx context.Context, productionID string, now int64) (claimable bool, wakeAt int64, hasWake bool, err error)
}

// Run runs fn on a goroutine of its own until the returned stop is called;
// stop ends fn's context and returns once fn has returned. It is a watcher's
// Watch made of its loop.
func Run(fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Notifier is implemented by a Tx whose commits other hosts learn about
// only if told (PostgreSQL). Claimable records that the production may have
// a claimable job once this transaction commits; the notice is sent with the
// commit, and never if it does not commit.
type Notifier interface {
	Claimable(ctx context.Context, productionID string) error
}

// Production is one named batch of jobs, with its retry and retention
// policies.
type Production struct {
	ID        string
	Name      string
	CreatedAt int64 // unix µs
	Policy    Policy
	Retention Retention
}

// Retention is a production's retention policy as stored (core checks it):
// how long, in µs, a finished job of each state is kept after its last
// change, and an event after it was recorded. 0 keeps them for good.
type Retention struct {
	CompletedUS int64
	FailedUS    int64
	DeadUS      int64
	CancelledUS int64
	EventsUS    int64
}

// Policy is a production's retry policy as stored (core checks it).
type Policy struct {
	MaxAttempts   int64
	BackoffBaseUS int64
	BackoffCapUS  int64
	JitterPercent int64
}

// Job is one stored job row. ClaimHash is the hash of the most recent claim's
// secret; it is kept after the claim finishes so the rules can tell "this claim
// already finished" from "another claim owns the job".
type Job struct {
	ID           string
	ProductionID string
	Key          string
	HasKey       bool
	Payload      []byte
	Seq          int64
	State        string
	ClaimHash    []byte
	Worker       string
	ClaimedAt    int64 // unix µs, 0 when never claimed
	Expiry       int64 // unix µs, 0 when never claimed
	Attempts     int64
	Reason       string
	RequestedAt  int64
	UpdatedAt    int64
	// Priority orders claim-next (higher first).
	Priority int64
	// ClaimableAt orders claim-next after the priority: when the job last
	// became claimable (its request, run-at or the end of a retry's
	// backoff). Release and an expired claim keep it.
	ClaimableAt int64
	// ReadyAt is the earliest time the job may be claimed: a requested job's
	// run-at or backoff end; a claimed job's expiry plus the backoff its
	// lapse would cost (when that claim counts as expired).
	ReadyAt int64
	// Due: a requested job whose ReadyAt has passed and that sits in the
	// claim order's index (core promotes delayed jobs).
	Due bool
}

// Attempt is one ended claim of the attempt history. It never holds a
// secret: attribution, times, how it ended and the reason given.
type Attempt struct {
	JobID     string
	Number    int64 // the job's attempt count when it was claimed
	Worker    string
	ClaimedAt int64
	EndedAt   int64
	Ending    string // End*
	Reason    string
}

// Event is one row of the append-only event log. It never carries a secret.
type Event struct {
	Seq          int64
	At           int64
	ProductionID string
	JobID        string
	Kind         string
	Worker       string
	Expiry       int64
	Detail       string
}

// Fact is one published metadata or provenance entry (Value is JSON).
type Fact struct {
	JobID string
	Kind  string // "metadata" or "provenance"
	Key   string
	Value string
}

// Output is one registered output file of a completed execution.
type Output struct {
	JobID  string
	Path   string
	Size   int64
	SHA256 string
	Nonce  string
}

// Reader is what both a plain connection and a write transaction can answer.
type Reader interface {
	HWM(ctx context.Context) (int64, error)
	ProductionByName(ctx context.Context, name string) (Production, error)
	ProductionByID(ctx context.Context, id string) (Production, error)
	Productions(ctx context.Context) ([]Production, error)
	JobByID(ctx context.Context, id string) (Job, error)
	// JobByKey never locks the row: a job's key and payload never change.
	JobByKey(ctx context.Context, productionID, key string) (Job, error)
	Jobs(ctx context.Context, productionID string) ([]Job, error)
	// NextClaimable returns the first due requested job in claim order:
	// priority descending, then ClaimableAt, then seq. now is not consulted
	// (promotion decides what is due); a server store skips locked rows.
	NextClaimable(ctx context.Context, productionID string, now int64) (Job, error)
	// HasClaimable reports whether NextClaimable would find a job, without
	// reading it (a waiting claim's look). Its condition is NextClaimable's,
	// or that the production no longer exists (deleted while a claim waited
	// on it, by its id): the claim that follows then answers not_found.
	HasClaimable(ctx context.Context, productionID string, now int64) (bool, error)
	// NextWakeAt is the earliest instant (unix µs, on the authority's
	// clock) at which a job of the production can become claimable without
	// any write: the earliest ReadyAt of its delayed requested jobs (run-at,
	// a retry's backoff) and of its claims (an expiry plus the backoff its
	// lapse costs). ok is false when there is none. A waiting claim sleeps
	// until then. It is the one place that answers "when to look again".
	NextWakeAt(ctx context.Context, productionID string) (unixUS int64, ok bool, err error)
	// Events lists events with seq > after; productionID "" means all.
	Events(ctx context.Context, productionID string, after int64, limit int) ([]Event, error)
	Facts(ctx context.Context, jobID string) ([]Fact, error)
	// FactsOf and OutputsOf read the facts and outputs of several jobs in
	// one query each (a page of a listing), ordered by job id, then as
	// Facts and Outputs order them.
	FactsOf(ctx context.Context, jobIDs []string) ([]Fact, error)
	OutputsOf(ctx context.Context, jobIDs []string) ([]Output, error)
	Outputs(ctx context.Context, jobID string) ([]Output, error)
	// Attempts lists a job's recorded attempts, oldest first.
	Attempts(ctx context.Context, jobID string) ([]Attempt, error)
	// NewestJobSeq is the largest seq of the production's jobs (0: none).
	// A store that numbers a production's jobs from its largest seq would
	// number the next one again if that job were deleted: pruning keeps it.
	NewestJobSeq(ctx context.Context, productionID string) (int64, error)
	// NewestEvent is the seq and job id of the newest event of the whole
	// store (seq 0: none). A store that numbers events from the largest
	// seq would number the next one again if it were deleted: pruning
	// keeps it, and the job it names.
	NewestEvent(ctx context.Context) (seq int64, jobID string, err error)
	// JobsInState returns at most limit jobs of the production in state,
	// in request order; in a write transaction, locked (a server store
	// skips locked rows).
	JobsInState(ctx context.Context, productionID, state string, limit int) ([]Job, error)
	// CountJobEvents counts the events of the jobs ids (a range of the job
	// timeline's index per job).
	CountJobEvents(ctx context.Context, ids []string) (int64, error)
}

// ClaimScan is what Tx.ClaimScan found: the lapsed claims, how many delayed
// jobs it marked due, and the next claimable job (Found false: none).
type ClaimScan struct {
	Lapsed   []Job
	Promoted int64
	Next     Job
	Found    bool
}

// Tx is one write transaction holding the writer lock.
type Tx interface {
	Reader
	SetHWM(ctx context.Context, unixUS int64) error
	InsertProduction(ctx context.Context, p Production) error
	InsertJob(ctx context.Context, j Job) error // assigns Seq
	UpdateJob(ctx context.Context, j Job) error
	InsertEvent(ctx context.Context, e Event) error // assigns Seq
	InsertFacts(ctx context.Context, facts []Fact) error
	InsertOutputs(ctx context.Context, outs []Output) error
	// UpdatePolicy stores a production's retry policy.
	UpdatePolicy(ctx context.Context, productionID string, p Policy) error
	// UpdateRetention stores a production's retention policy.
	UpdateRetention(ctx context.Context, productionID string, r Retention) error
	// DeleteJobEvents deletes at most limit events of the job, oldest
	// first, and returns how many it deleted.
	DeleteJobEvents(ctx context.Context, jobID string, limit int) (int64, error)
	// DeleteJobs deletes the jobs ids with all their events, facts,
	// outputs and attempts, a few statements for them all, and returns how
	// many jobs and events it deleted.
	DeleteJobs(ctx context.Context, ids []string) (jobs, events int64, err error)
	// DeleteFinishedJobs is DeleteJobs for those of the jobs ids that are
	// still in state, last changed at or before updatedBy, and not the job
	// of the store's newest event, all decided inside this transaction (a
	// server store skips rows others hold): pruning plans a batch with
	// reads outside any write, and a job that changed since then stays.
	DeleteFinishedJobs(ctx context.Context, ids []string, state string, updatedBy int64) (jobs, events int64, err error)
	// DeleteJob deletes a job that has no events left: its facts, outputs,
	// attempts and row. It returns ErrNoRow when the job is gone.
	DeleteJob(ctx context.Context, jobID string) error
	// DeleteProduction deletes a production's row; the caller has deleted
	// its jobs. It returns ErrNoRow when the production is gone.
	DeleteProduction(ctx context.Context, productionID string) error
	// DeleteEvents deletes those of seqs that are events of the production
	// (the caller read them: at most a batch) and returns how many. Only
	// the events named go: one committed meanwhile with a smaller seq (a
	// server store numbers events before they commit) stays.
	DeleteEvents(ctx context.Context, productionID string, seqs []int64) (int64, error)
	// PromoteDue marks due at most limit requested, not yet due jobs of the
	// production whose ReadyAt <= now, earliest first (one index range over
	// delayed jobs only); it returns how many.
	PromoteDue(ctx context.Context, productionID string, now int64, limit int) (int64, error)
	// LapsedClaims returns at most limit claimed jobs with ReadyAt <= now,
	// earliest first (a range over claimed jobs only), locked for this
	// transaction; a server store skips locked rows.
	LapsedClaims(ctx context.Context, productionID string, now int64, limit int) ([]Job, error)
	// ClaimScan is claim-next's look inside its transaction: LapsedClaims,
	// then PromoteDue, then NextClaimable (each as above, at now), as one
	// call so that a server store sends the three in one round trip. The
	// claim ends the lapsed claims after it, and then looks for the next
	// job again (a lapse may have made a job claimable).
	ClaimScan(ctx context.Context, productionID string, now int64, lapseLimit, promoteLimit int) (ClaimScan, error)
	// InsertAttempt records an ended attempt and keeps only the newest keep
	// of the job's attempts.
	InsertAttempt(ctx context.Context, a Attempt, keep int) error
	// Commit commits. If the context given to BeginWrite has ended by then,
	// it rolls back instead and returns ErrAbandoned; once COMMIT is sent,
	// nothing interrupts it, so an error after that is a commit whose
	// outcome is unknown (unless it is ErrRetry).
	Commit() error
	Rollback() error
}

// SpaceReclaimer is implemented by a Tx whose store keeps the pages that
// deletes free until it is told to give them back (SQLite's incremental
// auto-vacuum). ReclaimSpace gives back at most pages of them and returns
// how many it gave back (fewer than pages: it has given back all it can). A store without it reuses freed space by
// itself (PostgreSQL, once a vacuum has passed: DeadSpaceReuser).
type SpaceReclaimer interface {
	ReclaimSpace(ctx context.Context, pages int) (int64, error)
}

// DeadSpaceReuser is implemented by a store whose deleted rows' space
// becomes reusable only once a vacuum has passed over their table
// (PostgreSQL), and whose server's own vacuum may wake less often than the
// pruner deletes. ReuseDeadSpace is told, after each prune that deleted
// something, how many jobs and events it deleted; once enough have gone
// since its last vacuum of a table, it vacuums that table, without blocking
// any read or write of rows. vacuumed is how many tables it vacuumed. note,
// when not "", says why it could not (the role may not vacuum the tables)
// and that the server's own vacuum brings the space back instead. err is a
// failed vacuum. Neither fails the prune: its deletes are committed.
type DeadSpaceReuser interface {
	ReuseDeadSpace(ctx context.Context, jobs, events int64) (vacuumed int, note string, err error)
}

// SpaceModeUpgrader is implemented by a store whose file may be in a mode
// that never gives freed pages back to the file system (a SQLite file
// created before incremental auto-vacuum). UpgradeSpaceMode rewrites such a
// file, once, into the mode that does (store.SpaceReclaimer), when it holds
// enough free pages to be worth a rewrite; a file already in that mode, or
// with few free pages, costs a few reads. The rewrite holds the writer for
// as long as it takes (a copy of the whole file) and needs free disk for
// that copy. rewrote reports that it ran; held is how long it held the
// writer (the wait for it excluded). A failure changes nothing: the file
// stays as it was, usable, and its error says why and what the rewrite
// needs.
type SpaceModeUpgrader interface {
	UpgradeSpaceMode(ctx context.Context) (rewrote bool, held time.Duration, err error)
}

// SerialWriter is a store whose write transactions take turns (SQLite: one
// writer per file): a writer that begins while another's transaction is
// open waits for it, so a worker's claim waits for a pruning batch in
// progress. The background pruner's batches are smaller on it.
type SerialWriter interface {
	// WaitingWriters is how many of this handle's writers wait for their
	// turn now.
	WaitingWriters() int
}

// Backend is one opened authority store.
type Backend interface {
	Reader
	Observer
	// BeginWrite starts a write transaction. SQLite takes its one writer lock
	// here; a server store takes row locks as the transaction touches rows.
	// Either waits at most the busy timeout for a lock, and gives up once ctx
	// ends (ErrAbandoned). Every statement of the transaction gets ctx too.
	BeginWrite(ctx context.Context) (Tx, error)
	Close() error
}

type holdsCallerKey struct{}

// HoldsCaller marks the context of a BeginWrite whose transaction runs the
// caller's code between its statements (an edit) and so may stay open for
// as long as that code takes. A store whose writers share a commit
// (SQLite's group commit) never makes another writer's commit wait on such
// a transaction: it begins one of its own, and nobody joins it before it
// has committed its own writes.
func HoldsCaller(ctx context.Context) context.Context {
	return context.WithValue(ctx, holdsCallerKey{}, true)
}

// IsHoldingCaller reports whether ctx was marked by HoldsCaller.
func IsHoldingCaller(ctx context.Context) bool {
	v, _ := ctx.Value(holdsCallerKey{}).(bool)
	return v
}

type redoableKey struct{}

// Redoable marks the context of a BeginWrite whose transaction may be lost
// at a power cut, because running it again does the same and nothing waits
// on it: a batch of the background pruner without an archive (its rows are
// simply pruned again). A store may commit such a transaction without
// waiting for its flush to stable storage (SQLite: synchronous=NORMAL for
// that transaction; PostgreSQL: synchronous_commit off), which takes the
// flush out of the time it holds the writer. No other write's commit may
// ever run at that lower durability: a store whose writers share a commit
// (SQLite's group commit) runs a redoable transaction alone, as it does an
// edit (HoldsCaller), and nobody joins it. A later durable commit makes it
// durable too on both stores (a log flushed to a point is flushed up to
// it), so nothing durable can rest on a redoable write that was lost.
func Redoable(ctx context.Context) context.Context {
	return context.WithValue(ctx, redoableKey{}, true)
}

// IsRedoable reports whether ctx was marked by Redoable.
func IsRedoable(ctx context.Context) bool {
	v, _ := ctx.Value(redoableKey{}).(bool)
	return v
}
