// Package sqlitestore is the SQLite backend of the lease authority: one
// database file in WAL mode, synchronous=FULL, BEGIN IMMEDIATE for every write
// transaction (writers of one handle queued behind each other share one: group.go).
// It holds all SQL for SQLite and none of the lease rules.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Options tune how a file is opened.
type Options struct {
	// BusyTimeout is how long a writer waits for the writer lock.
	BusyTimeout time.Duration
	// Synchronous is the SQLite synchronous level; "" means FULL.
	Synchronous string
	// MustExist refuses to create the file, or the schema in an empty one
	// (store.ErrNotExist); nothing is created.
	MustExist bool
}

// DefaultBusyTimeout is how long a writer waits for the lock before Busy.
const DefaultBusyTimeout = 10 * time.Second

// DB is an opened SQLite authority store.
type DB struct {
	db      *sql.DB
	path    string // absolute
	wal     *walKeeper
	file    *fileIdentity
	writers *writerQueue // this process's writers of the file, in order (writers.go)
	writer  *writerConn  // the connection this handle's writes run on (writers.go)
	closing atomic.Bool  // Close has begun: no writer joins an open group any more
	busy    time.Duration
	sync    string       // the synchronous level every commit runs at, but a redoable one's (store.Redoable)
	proj    *projector   // projects the event log's indexes in the background (projector.go)
	ran     atomic.Int64 // statements run in write transactions (WriteStatements)
	queries
}

// Open opens (creating or migrating) the database at path. now is the
// migration time in unix µs, used only when an old schema is migrated.
func Open(path string, opts Options, now func() int64) (*DB, error) {
	if path == "" {
		return nil, errors.New("database path is empty")
	}
	if strings.ContainsRune(path, 0) {
		return nil, errors.New("database path contains a NUL byte")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("database path: %w", err)
	}
	fi, err := os.Lstat(abs)
	if opts.MustExist && errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", store.ErrNotExist, path)
	}
	if err == nil {
		switch {
		case fi.IsDir():
			return nil, fmt.Errorf("database path %q is a directory", path)
		case fi.Mode()&os.ModeSymlink != 0:
			// SQLite would follow it, but the -wal and -shm files of two
			// spellings of one database must never diverge: name the file itself.
			return nil, fmt.Errorf("database path %q is a symbolic link; open the file it points to", path)
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("database path %q is not a regular file", path)
		case opts.MustExist && fi.Size() == 0:
			// Opening would write a header into it: refuse before that.
			return nil, fmt.Errorf("%w: %s is empty", store.ErrNotExist, path)
		}
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	syncMode := strings.ToUpper(opts.Synchronous)
	if syncMode == "" {
		syncMode = "FULL"
	}
	switch syncMode {
	case "FULL", "NORMAL", "EXTRA":
	default:
		return nil, fmt.Errorf("unsupported synchronous level %q", opts.Synchronous)
	}
	// SQLite refuses some lock upgrades at once instead of calling the busy
	// handler (it would deadlock): the switch of a new file to WAL, made by
	// the first connection of each opener, is one. Openers racing to create
	// one file would then get busy within microseconds of starting; such a
	// refusal is retried, within the busy timeout, like any other wait.
	deadline := time.Now().Add(busy)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		s, err := openOnce(abs, path, busy, syncMode, opts.MustExist, now)
		if err == nil || !errors.Is(err, store.ErrBusy) || time.Now().Add(pause).After(deadline) {
			return s, err
		}
		time.Sleep(pause)
	}
}

// openOnce opens the file and its connections, and migrates it.
func openOnce(abs, path string, busy time.Duration, syncMode string, mustExist bool, now func() int64) (*DB, error) {
	file, err := openFile(abs, path, mustExist)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err == nil && fi.Size() == 0 {
		primeIncrementalVacuum(abs, busy)
	}
	db, err := sql.Open("sqlite", dsn(abs, busy, syncMode))
	if err != nil {
		file.close()
		return nil, classify(err)
	}
	s := &DB{db: db, path: abs, wal: newWALKeeper(abs, syncMode, file), file: file, writers: queueFor(file.opened),
		writer: &writerConn{db: db}, busy: busy, sync: syncMode}
	s.queries = queries{st: newStmtCache(db), file: file}
	err = s.migrate(now, mustExist, path)
	if err == nil {
		err = file.pinConn(db)
	}
	if err == nil {
		err = file.check() // replaced while it was being opened
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.proj = newProjector(s)
	s.queries.proj = s.proj
	// A file with a long tail (written by handles that closed before
	// their projector caught up) is projected from the start.
	var tail int64
	if s.queryRow(context.Background(), `SELECT (SELECT coalesce(max(seq), 0) FROM events) - `+projectedMarkSQL).
		Scan(&tail) == nil && tail > ProjectAfter {
		s.proj.poke()
	}
	return s, nil
}

// primeIncrementalVacuum makes a new (empty) file one that gives back the
// pages pruning frees (ReclaimSpace): SQLite records the auto-vacuum mode
// when it writes the file's first page, which the switch to WAL does, so
// one connection sets the mode and then WAL. Only for an empty file: on
// every connection the pragma could wait for the writer lock. Best effort:
// a file whose first page another opener wrote first keeps that one's mode
// (SQLite reuses its free pages all the same; docs/schema.md, "Space comes
// back").
func primeIncrementalVacuum(abs string, busy time.Duration) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", (busy+time.Millisecond-1)/time.Millisecond))
	q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("mode", "rw")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String())
	if err != nil {
		return
	}
	_ = db.Ping()
	_ = db.Close()
}

// dsn is the URI every connection opens: its pragmas are set on each.
func dsn(abs string, busy time.Duration, syncMode string) string {
	q := url.Values{}
	// SQLite counts whole milliseconds: a bound is rounded up, so a
	// sub-millisecond one still waits rather than refusing at once.
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", (busy+time.Millisecond-1)/time.Millisecond))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", JournalSizeLimit))
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", WALAutoCheckpoint))
	q.Set("_txlock", "immediate")
	// The file exists before SQLite opens it (openFile): a connection opened
	// after it was deleted must fail, not create an empty authority.
	q.Set("mode", "rw")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
}

var _ store.Backend = (*DB)(nil)

// Pragma reads one pragma's value, for diagnostics and tests.
func (s *DB) Pragma(name string) (string, error) {
	switch name {
	case "journal_mode", "synchronous", "busy_timeout", "user_version", "integrity_check",
		"journal_size_limit", "wal_autocheckpoint", "auto_vacuum", "freelist_count", "page_count":
	default:
		return "", fmt.Errorf("pragma %q is not readable here", name)
	}
	ctx := context.Background()
	c, err := s.db.Conn(ctx)
	if err != nil {
		return "", classify(err)
	}
	defer c.Close()
	if name == "auto_vacuum" {
		// The mode is read from the file's header by the connection's last
		// transaction: one first, so another connection's VACUUM is seen.
		if _, err := c.ExecContext(ctx, "PRAGMA page_count"); err != nil {
			return "", classify(err)
		}
	}
	var v string
	err = c.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, classify(err)
}

// Close closes every connection. A file found gone only now has its WAL
// emptied first (fileIdentity.release).
func (s *DB) Close() error {
	s.closing.Store(true)
	s.proj.stop()
	if s.file.check() != nil {
		s.file.release()
	}
	s.st.close()
	s.writer.close()
	s.wal.close()
	if s.file.pin != nil {
		s.file.pin.Close()
	}
	err := s.db.Close()
	s.file.close()
	dropQueue(s.writers)
	return err
}

func (s *DB) migrate(now func() int64, mustExist bool, path string) error {
	ctx := context.Background()
	// The common case, an up-to-date file, needs no writer lock: opening must
	// not wait behind another process's edit.
	var current int
	if err := s.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
		return classify(err)
	}
	if current == SchemaVersion {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil) // IMMEDIATE through _txlock
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return classify(err)
	}
	switch {
	case version == SchemaVersion:
		return nil
	case version > SchemaVersion:
		return fmt.Errorf("%w: file has schema %d, this library knows %d", store.ErrSchemaTooNew, version, SchemaVersion)
	case version == 0:
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
			return classify(err)
		}
		if n != 0 {
			return store.ErrNotLeases
		}
		if mustExist {
			return fmt.Errorf("%w: %s is empty", store.ErrNotExist, path)
		}
		if err := execAll(ctx, tx, schemaV2); err != nil {
			return err
		}
	case version == 1:
		if err := execAll(ctx, tx, migrateV1toV2); err != nil {
			return err
		}
		if err := execAll(ctx, tx, schemaV2); err != nil {
			return err
		}
		if err := execAll(ctx, tx, migrateV1toV2Copy, now()); err != nil {
			return err
		}
	case version >= 2 && version <= 7, version >= 9 && version <= 11:
	default:
		return store.ErrNotLeases
	}
	if version < 3 {
		if err := execAll(ctx, tx, migrateV2toV3); err != nil {
			return err
		}
	}
	if version < 4 {
		if err := execAll(ctx, tx, migrateV3toV4); err != nil {
			return err
		}
	}
	if version < 5 {
		if err := execAll(ctx, tx, migrateV4toV5); err != nil {
			return err
		}
	}
	if version < 6 {
		if err := execAll(ctx, tx, migrateV5toV6); err != nil {
			return err
		}
		// migrateV5toV6 edited table definitions: a new schema_version makes
		// every connection reload them (a plain edit would not).
		var cookie int64
		if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&cookie); err != nil {
			return classify(err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA schema_version = %d`, cookie+1)); err != nil {
			return fmt.Errorf("migration: %w", classify(err))
		}
	}
	if version < 7 {
		if err := execAll(ctx, tx, migrateV6toV7); err != nil {
			return err
		}
	}
	if version < 9 {
		if err := execAll(ctx, tx, migrateV7toV9); err != nil {
			return err
		}
	}
	if version < 10 {
		if err := execAll(ctx, tx, migrateV9toV10); err != nil {
			return err
		}
	}
	if version < 11 {
		if err := execAll(ctx, tx, migrateV10toV11); err != nil {
			return err
		}
	}
	if err := execAll(ctx, tx, migrateV11toV13); err != nil {
		return err
	}
	return classify(tx.Commit())
}

func execAll(ctx context.Context, tx *sql.Tx, stmts []string, args ...any) error {
	for _, st := range stmts {
		var a []any
		if strings.Contains(st, "?1") {
			a = args
		}
		if _, err := tx.ExecContext(ctx, st, a...); err != nil {
			return fmt.Errorf("migration: %w", classify(err))
		}
	}
	return nil
}

// BeginWrite takes the writer lock with BEGIN IMMEDIATE, waiting at most
// the busy timeout, and no longer than ctx lasts.
//
// The writers of this process wait their turn in writerQueue first, in the
// order they asked; only the writer at the head sends BEGIN, so SQLite's
// busy handler only ever waits for other processes. It sends it on the
// handle's one writer connection (writerConn), not on the pool's. The busy timeout bounds
// both waits together: a writer still queued at its end, or still waiting
// in BEGIN, gets ErrBusy and nothing is written.
//
// A writer handed the turn by a writer of its own handle joins that
// writer's open transaction instead (group.go): it opens a savepoint, and
// its Commit waits for the group's COMMIT.
//
// The transaction's BEGIN, COMMIT and ROLLBACK are statements prepared once
// on the writer connection (writerConn.run), not database/sql's Tx, which
// prepares BEGIN and COMMIT anew each time and watches its context with a
// goroutine of its own. A commit that has started must run to its end
// (else a committed change could be reported as failed), so COMMIT runs on
// no context that can end; and a group outlives the writer that began it,
// so the transaction gets a context of its own, which ends with ctx (or at
// the busy timeout) only while BEGIN waits for the lock: the driver's busy
// handler gives that wait up as soon as it ends. Every statement of a member runs on its ctx (the
// driver interrupts it when ctx ends), and Commit looks at ctx once, before
// it releases its savepoint.
func (s *DB) BeginWrite(ctx context.Context) (store.Tx, error) {
	if ctx.Err() != nil {
		return nil, abandoned(ctx)
	}
	deadline := time.Now().Add(s.busy)
	g, ok := s.writers.acquire(ctx, deadline, s.writer)
	if !ok {
		if g != nil {
			g.pass() // handed the open group as the wait ended: never strand it
		}
		if ctx.Err() != nil {
			return nil, abandoned(ctx)
		}
		return nil, s.timedOut()
	}
	if g == nil {
		g, err := s.begin(ctx, deadline)
		if err != nil {
			return nil, err
		}
		return s.member(ctx, g, true), nil
	}
	if ctx.Err() != nil {
		g.pass()
		return nil, abandoned(ctx)
	}
	if err := s.file.check(); err != nil {
		// The path no longer names the group's file: the group goes on (its
		// COMMIT's own check tells its members), without this writer.
		g.pass()
		s.file.release()
		return nil, err
	}
	if err := g.join(); err != nil {
		g.pass()
		return nil, err
	}
	return s.member(ctx, g, false), nil
}

func (s *DB) member(ctx context.Context, g *group, first bool) *Tx {
	return &Tx{g: g, ctx: ctx, first: first, path: s.path,
		queries: queries{st: s.st, tx: g.conn, g: g, proj: s.proj, ran: &s.ran}}
}

// WriteStatements is how many statements the handle's write transactions
// have run since it was opened (the projector's included), besides BEGIN,
// the group's savepoints and COMMIT: a count for diagnostics, the tests
// and the benchmarks (statements per commit).
func (s *DB) WriteStatements() int64 { return s.ran.Load() }

// begin sends BEGIN IMMEDIATE for a writer holding the turn alone, and
// opens the group that writers of the handle queued behind it may join.
func (s *DB) begin(ctx context.Context, deadline time.Time) (*group, error) {
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(time.Until(deadline), cancel)
	// A redoable transaction (store.Redoable) commits without the WAL's
	// fsync: synchronous=NORMAL on the writer connection for it alone. It
	// runs alone (the queue never hands its group on), and the group's end
	// sets the authority's level back before the turn passes on, so no
	// other writer's commit ever runs at NORMAL.
	lowered := store.IsRedoable(ctx) && s.sync != "NORMAL"
	conn, err := s.writer.begin(txCtx, lowered, s.sync)
	beginReturned()
	// undo rolls back a transaction that begun but opens no group, and
	// sets a lowered connection's level back (or discards it), as a
	// group's end does.
	undo := func() {
		if s.writer.run(context.Background(), conn, "ROLLBACK") != nil {
			s.writer.txEnded()
			s.writer.discard(conn)
			return
		}
		s.writer.txEnded()
		if lowered && !s.writer.setLevel(conn, s.sync) {
			s.writer.discard(conn)
		}
	}
	inTime := timer.Stop()
	if !stop() || !inTime { // ctx ended, or the busy timeout passed, while BEGIN ran
		if err == nil {
			undo()
		}
		cancel()
		s.writers.release()
		if !inTime && ctx.Err() == nil {
			return nil, s.timedOut()
		}
		return nil, abandoned(ctx)
	}
	if err != nil {
		cancel()
		s.writers.release()
		return nil, s.file.explain(classify(err))
	}
	// Holding the writer lock, before anything is written: is the path
	// still the file this handle writes to?
	if err := s.file.check(); err != nil {
		undo()
		cancel()
		s.writers.release()
		s.file.release()
		return nil, err
	}
	g := &group{s: s, conn: conn, ctx: txCtx, stop: cancel, begun: time.Now(), done: make(chan struct{})}
	if lowered {
		g.restore = s.sync
	}
	return g, nil
}

// beginReturned runs as soon as a writer's BEGIN returned (a test's hook:
// it may end the writer's context there).
var beginReturned = func() {}

// timedOut is the busy error of a writer whose busy timeout passed before
// it held the writer lock.
func (s *DB) timedOut() error {
	return fmt.Errorf("%w: the writer lock was not free within the busy timeout (%s), held by writers of this "+
		"process ahead of this one or by another process", store.ErrBusy, s.busy)
}

func abandoned(ctx context.Context) error {
	return fmt.Errorf("%w: %w", store.ErrAbandoned, context.Cause(ctx))
}

// Tx is one write transaction: one member of a group (group.go).
type Tx struct {
	g     *group
	ctx   context.Context // BeginWrite's
	ended bool            // Commit or Rollback ran
	// first began the group. It needs no savepoint: nobody joins before it
	// ends its part, so rolling its writes back is rolling back the
	// transaction, and a writer alone runs BEGIN, its writes, COMMIT.
	first bool
	path  string   // the database's, for its doorbells (bells.go)
	rings []string // productions whose doorbells ring once it committed
	read  txReads  // what it read that it may answer again (reads.go)
	queries
}

// Commit commits, unless ctx has ended: then it rolls back (ErrAbandoned).
// It releases the member's savepoint, passes the open transaction on, and
// returns once the group's COMMIT has returned: nothing is reported done
// before it is durable, nor later than the busy timeout after Commit began
// (ErrBusy then: the outcome is unknown). Once the savepoint is released nothing interrupts
// the commit; an error then means the outcome is unknown, unless it is
// ErrNotCommitted (SQLite rolled the whole transaction back). The member
// that commits the group then lets a WAL that readers held back start over
// (walKeeper), before the turn passes on.
func (t *Tx) Commit() error {
	if t.ended {
		return sql.ErrTxDone
	}
	t.ended = true
	since := time.Now()
	g := t.g
	if t.ctx.Err() != nil {
		t.undo(time.Time{}) // abandoned says nothing of what it read: no wait
		return abandoned(t.ctx)
	}
	if t.first {
		g.released++
	} else if err := g.release(); err != nil {
		// The transaction is gone (or in an unknown state): the group ends,
		// nothing of the members before was written. This member's own
		// outcome is unknown: a statement of its own that ran after SQLite
		// had dropped the transaction ran, and committed, on its own.
		g.pass()
		t.ringUnlessRolledBack(err)
		return err
	}
	g.pass()
	err := g.outcome(since)
	t.ringUnlessRolledBack(err)
	if err == nil {
		t.proj.committed()
	}
	return err
}

// ringUnlessRolledBack rings the transaction's doorbells after a commit, or
// after one whose outcome is unknown (a waiter that looks and finds nothing
// waits again), never after SQLite rolled it back.
func (t *Tx) ringUnlessRolledBack(err error) {
	if len(t.rings) > 0 && !errors.Is(err, store.ErrNotCommitted) {
		ring(t.path, t.rings)
	}
}

// Rollback rolls back the member's own writes; the group goes on. Rolling
// back a finished transaction is a no-op.
//
// A member after the first read the writes the members before it released,
// which are not durable before the group's COMMIT: whatever its caller is
// told (a rule's refusal, most often) may rest on them. So its Rollback, like
// a Commit, returns only once the group has ended: nil if the group
// committed, else store.ErrReadUncommitted (with store.ErrRetry: running the
// transaction again reads what is durable; with store.ErrBusy if the group
// did not end within the busy timeout). The first member read only what
// was durable before its BEGIN, and returns at once.
func (t *Tx) Rollback() error {
	if t.ended {
		return nil
	}
	t.ended = true
	return t.undo(time.Now())
}

// undo rolls back the member's writes and ends its part: the first member
// rolls back the transaction, which ends the group (no other member has
// joined it yet); any other rolls back to its savepoint and passes the
// group on, then, unless since is zero, waits for the group's outcome
// (Rollback, begun at since).
func (t *Tx) undo(since time.Time) error {
	g := t.g
	if t.first {
		g.end()
		return classify(g.err)
	}
	err := g.undo()
	g.pass()
	if since.IsZero() {
		return err
	}
	if gerr := g.outcome(since); gerr != nil {
		return readUncommitted(gerr, g.ended())
	}
	return err
}

// readUncommitted is a later member's Rollback once its group did not
// commit (outcome, the group's error for its released members), or did not
// end (ended false: the wait ran out): what the member read may never have
// been written.
func readUncommitted(outcome error, ended bool) error {
	next := store.ErrRetry
	if !ended {
		next = store.ErrBusy // running again would queue behind the group
	}
	return fmt.Errorf("%w: %w: the writes of other writers of the handle that this transaction shared and "+
		"may have read did not commit (%v)", store.ErrReadUncommitted, next, outcome)
}

// classify maps SQLite errors onto the store's error values, keeping the
// driver message for diagnostics.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %v", store.ErrBusy, err)
		case sqlite3.SQLITE_CONSTRAINT:
			// Every writer holds the one writer lock from its first read to
			// its commit, so no concurrent creator can explain a refusal.
			return fmt.Errorf("%w: %v", store.ErrConstraint, err)
		case sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%w: %v", store.ErrReadOnly, err)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("%w: %v", store.ErrFull, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return fmt.Errorf("cannot open database: %w", err)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNoRow
	}
	return err
}
