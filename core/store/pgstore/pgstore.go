// Package pgstore is the PostgreSQL backend of the lease authority, for
// workers spread across hosts. It holds all SQL for PostgreSQL and none of
// the lease rules: those stay in package core, shared with SQLite.
//
// Locking (docs/postgres.md): every write is a READ COMMITTED transaction
// that locks only the rows it touches. Claiming the next job takes the first
// claimable row with FOR UPDATE SKIP LOCKED, so concurrent claimers each take
// a different job instead of queueing on one; every holder transition reads
// its job row FOR UPDATE. The clock high-water mark is spread over
// hwmShards rows, each commit advancing one it can lock without waiting, so
// no row is hot. A whole-database advisory lock is taken only to create or
// migrate the schema. Waits end after the busy timeout (lock_timeout).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/libleases/libleases/core/store"
)

// Options tune Open.
type Options struct {
	// BusyTimeout bounds every wait for a row lock or a connection.
	BusyTimeout time.Duration
	// MustExist refuses to create the schema's tables (store.ErrNotExist).
	MustExist bool
}

// DefaultBusyTimeout is how long a writer waits for a lock before Busy.
const DefaultBusyTimeout = 10 * time.Second

// defaultConnectTimeout bounds connecting unless the URL sets connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// defaultMaxConns is the pool size unless the URL sets pool_max_conns: enough
// for many goroutines of one process to hold transactions at once.
const defaultMaxConns = 32

// ErrInvalidURL: the location is a postgres:// URL the driver cannot parse.
var ErrInvalidURL = fmt.Errorf("%w: invalid PostgreSQL URL", store.ErrInvalid)

// IsURL reports whether location names a PostgreSQL database.
func IsURL(location string) bool {
	l := strings.ToLower(location)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// Redact returns location with any password removed, for messages.
func Redact(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// DB is an opened PostgreSQL authority store.
type DB struct {
	pool      *pgxpool.Pool
	busy      time.Duration
	connect   time.Duration
	bound     time.Duration   // every statement's deadline (session.go)
	listenCfg *pgx.ConnConfig // the pool's, for a watcher's own connection (notify.go)
	queries
}

var _ store.Backend = (*DB)(nil)

// Open connects to the database at url, creating or migrating the schema in
// the connection's current schema (set search_path in the URL to choose one).
func Open(location string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(location)
	if err != nil {
		// pgconn redacts the password from its own message.
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	if !strings.Contains(location, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["lock_timeout"] = strconv.FormatInt(busy.Milliseconds(), 10)
	if rp["application_name"] == "" {
		rp["application_name"] = "libleases"
	}
	rp["timezone"] = "UTC"
	_, bound := statementTimeout(rp, busy)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if !strings.HasPrefix(cfg.ConnConfig.Host, "/") { // a Unix socket has no keepalive
		cfg.ConnConfig.DialFunc = dialer(cfg.ConnConfig.ConnectTimeout)
	}
	// Connecting is bounded by the connect timeout, the migration's lock wait
	// by lock_timeout: no deadline beyond those.
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err)
	}
	db := &DB{pool: pool, busy: busy, connect: cfg.ConnConfig.ConnectTimeout, bound: bound,
		listenCfg: cfg.ConnConfig.Copy()}
	db.queries = queries{q: poolQ{db}}
	if err := db.migrate(ctx, opts.MustExist); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the pool, after waiting for write transactions still running
// (the authority rolls back its open edits before it closes the store).
// Closing twice is harmless; BeginWrite after Close fails (the pool is closed).
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// BeginWrite starts a READ COMMITTED transaction on its own connection.
func (db *DB) BeginWrite(ctx context.Context) (store.Tx, error) {
	// Waiting for a free connection is waiting for the writer: bound it by
	// the busy timeout, plus the connect timeout for opening a new one.
	actx, cancel := context.WithTimeout(ctx, db.busy+db.connect)
	defer cancel()
	conn, err := db.pool.Acquire(actx)
	if err == nil {
		tc := &txConn{c: conn, db: db}
		return &Tx{db: db, ctx: ctx, conn: tc, queries: queries{q: tc, inTx: true}}, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrAbandoned, context.Cause(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w: no database connection became free within %s", store.ErrBusy, db.busy+db.connect)
	}
	return nil, classify(err)
}

// txConn runs a transaction's statements on its connection. BEGIN is not a
// round trip of its own: it is sent in one batch with the transaction's
// first statement.
type txConn struct {
	c      *pgxpool.Conn
	db     *DB
	begun  bool
	broken bool // a session failure or a deadline: close, do not pool (session.go)
}

const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

// first sends BEGIN and sql in one batch; the caller reads sql's result.
func (t *txConn) first(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	t.begun = true
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	b.Queue(sql, args...)
	br := t.c.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, t.saw(err)
	}
	return br, nil
}

// Every statement runs under the statement deadline (session.go), and its
// failure is seen by saw.
func (t *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := t.db.bounded(ctx)
	defer cancel()
	if t.begun {
		tag, err := t.c.Exec(ctx, sql, args...)
		return tag, t.saw(err)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, t.saw(err)
}

func (t *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	ctx, cancel := t.db.bounded(ctx)
	if t.begun {
		return sawRow{row: t.c.QueryRow(ctx, sql, args...), t: t, end: cancel}
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		cancel()
		return errRow{err}
	}
	return sawRow{row: batchRow{row: br.QueryRow(), br: br}, t: t, end: cancel}
}

func (t *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, cancel := t.db.bounded(ctx)
	if !t.begun {
		t.begun = true
		if _, err := t.c.Exec(ctx, beginSQL); err != nil {
			cancel()
			return nil, t.saw(err)
		}
	}
	rows, err := t.c.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, t.saw(err)
	}
	return &sawRows{Rows: rows, t: t, end: cancel}, nil
}

// batchRow is the first statement's row; scanning it ends the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Tx is one write transaction.
type Tx struct {
	db   *DB
	ctx  context.Context // BeginWrite's: every statement runs on it, COMMIT never does
	conn *txConn
	done bool
	queries

	registered bool     // registered as a writer of events (queries.go)
	notices    []string // productions to notify of at commit (notify.go)

	// The clock sample read with the high-water mark, for the operation's
	// first sample: the two then come from one statement.
	startUS  int64
	startAt  time.Time
	hasStart bool
}

var _ store.Clock = (*Tx)(nil)

// startFresh bounds how long after the mark was read its clock sample still
// serves as a first sample (an edit's first operation may come later).
const startFresh = 5 * time.Millisecond

const clockSQL = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// HWM reads the durable mark, and the server's clock in the same statement.
func (t *Tx) HWM(ctx context.Context) (int64, error) {
	var v int64
	err := t.conn.QueryRow(ctx, `SELECT COALESCE(max(v), 0), `+clockSQL+` FROM leases_hwm`).Scan(&v, &t.startUS)
	if err == nil {
		t.startAt, t.hasStart = time.Now(), true
	}
	return v, classify(err)
}

// Now samples the server's clock (clock_timestamp(), which advances within a
// transaction, unlike now()). The first sample after the mark was read is
// the one read with it, if that was just now.
func (t *Tx) Now(ctx context.Context) (int64, error) {
	if t.hasStart {
		t.hasStart = false
		if time.Since(t.startAt) < startFresh {
			return t.startUS, nil
		}
	}
	var v int64
	err := t.conn.QueryRow(ctx, `SELECT `+clockSQL).Scan(&v)
	return v, classify(err)
}

// Commit commits, unless the transaction's context has ended: then it rolls
// back (ErrAbandoned). COMMIT itself runs on no caller's context, so that no
// caller interrupts it once sent, but under the statement deadline, so that
// a stalled server cannot hold it forever; an error then means the outcome
// is unknown, unless it is ErrRetry (the server aborted the transaction) or
// ErrReconnect (COMMIT never left this process: classifyCommit).
func (t *Tx) Commit() error {
	if t.done {
		return errors.New("transaction already finished")
	}
	if !t.conn.begun { // nothing was sent: nothing to commit
		t.finish()
		return nil
	}
	if t.ctx.Err() != nil {
		t.Rollback()
		return fmt.Errorf("%w: %w", store.ErrAbandoned, context.Cause(t.ctx))
	}
	ctx, cancel := t.db.bounded(context.Background())
	defer cancel()
	var tag pgconn.CommandTag
	var err error
	if len(t.notices) == 0 {
		tag, err = t.conn.c.Exec(ctx, "COMMIT")
	} else {
		tag, err = t.commitNotifying(ctx)
	}
	if err != nil {
		t.conn.saw(err)
	}
	t.finish()
	if err == nil && tag.String() == "ROLLBACK" {
		return fmt.Errorf("%w: the server rolled the transaction back", store.ErrRetry)
	}
	return classifyCommit(err)
}

// Rollback rolls back; rolling back a finished transaction is a no-op.
func (t *Tx) Rollback() error {
	if t.done {
		return nil
	}
	if !t.conn.begun || t.conn.broken { // a broken session is closed, which rolls back
		t.finish()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.db.busy)
	defer cancel()
	_, err := t.conn.c.Exec(ctx, "ROLLBACK")
	t.finish()
	return classify(err)
}

func (t *Tx) finish() {
	t.done = true
	if t.conn.broken {
		// Returned to the pool it would fail the next transaction too (a
		// read-only session stays read-only): a closed connection is
		// destroyed on release.
		ctx, cancel := context.WithTimeout(context.Background(), answerGrace)
		t.conn.c.Conn().Close(ctx)
		cancel()
	}
	t.conn.c.Release() // a connection left inside a transaction is discarded
}

// creatorRaces are the unique constraints that two concurrent creators can
// both pass the "does it exist?" read for (READ COMMITTED shows neither the
// other's uncommitted row): one production name, one job key. Refused by
// one of them, the transaction is run again and finds the other's row. Any
// other refusal (a fact or output already there) would fail again.
var creatorRaces = map[string]bool{
	"leases_productions_name_key":       true,
	"leases_jobs_production_id_key_key": true,
}

// classify maps PostgreSQL errors onto the store's error values, keeping the
// server's message for diagnostics.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNoRow
	}
	// The driver's error stays in the chain: a caller may look for the
	// network error or SQLSTATE in it (the CLI's follow mode does).
	if sessionFailed(err) {
		return fmt.Errorf("%w: %w", store.ErrReconnect, err)
	}
	if stalled(err) {
		return fmt.Errorf("%w (%w)", errStalled, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01": // serialization_failure, deadlock_detected
			return fmt.Errorf("%w: %v", store.ErrRetry, err)
		case pe.Code == "55P03" || pe.Code == "57014" || pe.Code == "53300": // lock_not_available, query_canceled, too_many_connections
			return fmt.Errorf("%w: %v", store.ErrBusy, err)
		case pe.Code == "23505" && creatorRaces[pe.ConstraintName]: // unique_violation
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		case strings.HasPrefix(pe.Code, "23"): // any other integrity_constraint_violation
			return fmt.Errorf("%w: %v", store.ErrConstraint, err)
		case pe.Code == "25006": // read_only_sql_transaction
			return fmt.Errorf("%w: %v", store.ErrReadOnly, err)
		case pe.Code == "53100": // disk_full
			return fmt.Errorf("%w: %v", store.ErrFull, err)
		case pe.Code == "XX001" || pe.Code == "XX002": // data_corrupted, index_corrupted
			return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
	}
	return err
}
