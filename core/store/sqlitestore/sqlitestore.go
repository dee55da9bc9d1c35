// Package sqlitestore is the SQLite backend of the lease authority: one
// database file in WAL mode, synchronous=FULL, BEGIN IMMEDIATE for every write.
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
	busy    time.Duration
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
	db, err := sql.Open("sqlite", dsn(abs, busy, syncMode))
	if err != nil {
		file.close()
		return nil, classify(err)
	}
	s := &DB{db: db, path: abs, wal: newWALKeeper(abs, syncMode), file: file, writers: queueFor(file.opened),
		writer: &writerConn{db: db}, busy: busy}
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
	return s, nil
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
		"journal_size_limit", "wal_autocheckpoint":
	default:
		return "", fmt.Errorf("pragma %q is not readable here", name)
	}
	var v string
	err := s.db.QueryRow("PRAGMA " + name).Scan(&v)
	return v, classify(err)
}

// Close closes every connection. A file found gone only now has its WAL
// emptied first (fileIdentity.release).
func (s *DB) Close() error {
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
	case version >= 2 && version <= 5:
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
// database/sql ties a transaction to the context given to BeginTx: once it
// ends, the transaction is rolled back, and the driver (modernc.org/sqlite)
// interrupts a COMMIT in progress. A commit that has started must run to
// its end (else a committed change could be reported as failed), so the
// transaction gets a context of its own, which ends with ctx (or at the
// busy timeout) only while BEGIN waits for the lock: the driver's busy
// handler gives that wait up as soon as it ends. Every statement after
// BEGIN runs on ctx itself (the driver interrupts it when ctx ends), and
// Commit looks at ctx once, before it sends COMMIT.
func (s *DB) BeginWrite(ctx context.Context) (store.Tx, error) {
	if ctx.Err() != nil {
		return nil, abandoned(ctx)
	}
	deadline := time.Now().Add(s.busy)
	if !s.writers.acquire(ctx, deadline) {
		if ctx.Err() != nil {
			return nil, abandoned(ctx)
		}
		return nil, s.timedOut()
	}
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(time.Until(deadline), cancel)
	tx, conn, err := s.writer.begin(txCtx)
	inTime := timer.Stop()
	if !stop() || !inTime { // ctx ended, or the busy timeout passed, while BEGIN ran
		if err == nil {
			tx.Rollback()
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
		tx.Rollback()
		cancel()
		s.writers.release()
		s.file.release()
		return nil, err
	}
	return &Tx{tx: tx, ctx: ctx, end: cancel, writers: s.writers, writer: s.writer, conn: conn, wal: s.wal,
		file: s.file, queries: queries{st: s.st, tx: tx}}, nil
}

// timedOut is the busy error of a writer whose busy timeout passed before
// it held the writer lock.
func (s *DB) timedOut() error {
	return fmt.Errorf("%w: the writer lock was not free within the busy timeout (%s), held by writers of this "+
		"process ahead of this one or by another process", store.ErrBusy, s.busy)
}

func abandoned(ctx context.Context) error {
	return fmt.Errorf("%w: %w", store.ErrAbandoned, context.Cause(ctx))
}

// Tx is one write transaction.
type Tx struct {
	tx       *sql.Tx
	ctx      context.Context // BeginWrite's
	end      context.CancelFunc
	writers  *writerQueue
	released atomic.Bool // the turn passed on (Commit and Rollback may both run)
	writer   *writerConn
	conn     *sql.Conn // the writer connection tx runs on
	failed   bool      // COMMIT or ROLLBACK failed: conn may be left mid-transaction
	wal      *walKeeper
	file     *fileIdentity
	queries
}

// finish ends the transaction's context and passes this process's turn at
// the writer lock to the next writer, once. A connection whose COMMIT or
// ROLLBACK failed may still be inside the transaction (SQLite keeps it open
// after some failed COMMITs), holding the file's writer lock: it is closed,
// which rolls that back, before the next writer comes in.
func (t *Tx) finish() {
	t.end()
	if !t.released.Swap(true) {
		if t.failed {
			t.writer.discard(t.conn)
		}
		t.writers.release()
	}
}

// Commit commits, unless ctx has ended: then it rolls back (ErrAbandoned).
// Once COMMIT is sent nothing interrupts it; an error then means the
// outcome is unknown. A committed writer then lets a WAL that readers held
// back start over (walKeeper).
func (t *Tx) Commit() error {
	// The turn passes on after the WAL keeper's checkpoint too: that takes
	// the writer lock on a connection of its own, and the next writer had
	// better wait for it in the queue than in SQLite's busy handler.
	defer t.finish()
	if t.ctx.Err() != nil {
		t.failed = t.tx.Rollback() != nil
		return abandoned(t.ctx)
	}
	if err := t.tx.Commit(); err != nil {
		t.failed = true
		return t.file.explain(classify(err))
	}
	// Committed, but into the file the path names? If it was removed or
	// replaced meanwhile, the caller must not read this as done (core
	// reports the outcome unknown).
	if err := t.file.check(); err != nil {
		t.file.release()
		return err
	}
	t.wal.yield()
	return nil
}

// Rollback rolls back; rolling back a finished transaction is a no-op.
func (t *Tx) Rollback() error {
	defer t.finish()
	err := t.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	t.failed = t.failed || err != nil
	return classify(err)
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
