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
	dead      deadRows        // what prunes deleted since the last vacuum (space.go)
	queries
}

var (
	_ store.Backend         = (*DB)(nil)
	_ store.DeadSpaceReuser = (*DB)(nil)
)

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
	// Every statement is short, but an estimate over a large table can pass
	// jit_above_cost, and compiling the plan then costs far more than
	// running it: no JIT unless the URL asks for it.
	if _, set := rp["jit"]; !set {
		rp["jit"] = "off"
	}
	_, bound := statementTimeout(rp, busy)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	cfg.ShouldPing = shouldPing
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

// BeginWrite starts a READ COMMITTED transaction on its own connection. A
// redoable one (store.Redoable) commits with synchronous_commit off, for
// that transaction only (SET LOCAL, sent with BEGIN): its COMMIT does not
// wait for the WAL flush, and the next durable commit flushes it with its
// own.
func (db *DB) BeginWrite(ctx context.Context) (store.Tx, error) {
	// Waiting for a free connection is waiting for the writer: bound it by
	// the busy timeout, plus the connect timeout for opening a new one.
	actx, cancel := context.WithTimeout(ctx, db.busy+db.connect)
	defer cancel()
	conn, err := db.pool.Acquire(actx)
	if err == nil {
		tc := &txConn{c: conn, db: db}
		if store.IsRedoable(ctx) {
			tc.hold(nil, "SET LOCAL synchronous_commit = off")
		}
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

// txConn runs a transaction's statements on its connection, in as few
// round trips as their results allow (docs/postgres.md, "Round trips"):
// BEGIN is sent in one pipeline with the transaction's first statement, and
// a write whose result nothing waits for (a job's update, an event, an
// attempt, the mark) is held back and sent in one pipeline with the next
// statement whose answer is needed, or with COMMIT. Its failure is then
// that statement's; it never reads as that statement's own answer (a held
// write that changed no row is an error of its own, never ErrNoRow).
type txConn struct {
	c       *pgxpool.Conn
	db      *DB
	begun   bool
	broken  bool // a session failure or a deadline: close, do not pool (session.go)
	pending []heldWrite
	sent    int // statements sent or held so far: a stashed sample is only as fresh as this count
	trips   int // round trips sent so far
}

// heldWrite is a write sent with the next statement; check judges its tag.
// rows: how many rows it writes exactly (or check fails it), so that a
// RETURNING clause on it returns as many (Tx.Now); 0: not known. kind
// says which writes of one flush may become one statement (held.go);
// mayWait: no read sent ahead of it (queryRowAhead) can see what it
// writes.
type heldWrite struct {
	sql     string
	args    []any
	check   func(pgconn.CommandTag) error
	rows    int
	kind    heldKind
	mayWait bool
}

const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

// hold queues a write for the next round trip.
func (t *txConn) hold(check func(pgconn.CommandTag) error, sql string, args ...any) {
	t.holdWrite(heldWrite{sql: sql, args: args, check: check})
}

// holdWrite queues w for the next round trip.
func (t *txConn) holdWrite(w heldWrite) {
	t.sent++
	t.pending = append(t.pending, w)
}

// sampleInLast sends the held writes, the last of them (one whose rows are
// known) with the server's clock in its RETURNING clause, and returns that
// clock (the latest, if it wrote several rows): the sample is taken when
// that write runs, once its rows are written, after every statement of the
// transaction before it, and the statement that sent it alone would have
// come right after it with nothing between. A failure of the write is a
// held write's (heldErr), as it would have been.
func (t *txConn) sampleInLast(ctx context.Context) (int64, error) {
	ctx, cancel := t.db.bounded(ctx)
	defer cancel()
	t.sent++
	t.pending = coalesce(t.pending)
	last := t.pending[len(t.pending)-1]
	t.pending = t.pending[:len(t.pending)-1]
	br, err := t.pipeline(ctx, queued{last.sql + ` RETURNING ` + clockSQL, last.args})
	if err != nil {
		return 0, err
	}
	var now int64
	n := 0
	err = func() error {
		defer br.Close()
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return err
			}
			now = max(now, v)
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if last.check != nil {
			if err := last.check(rows.CommandTag()); err != nil {
				return err
			}
		}
		if n != last.rows {
			return fmt.Errorf("a write of this transaction returned %d rows, not %d", n, last.rows)
		}
		return br.Close()
	}()
	if err != nil {
		return 0, t.saw(heldErr(err))
	}
	return now, nil
}

// lastReturns reports whether the last held write, as it will be sent
// (merged: coalesce), has its rows known; the held writes are merged here,
// so that the write sampleInLast sends with the sample is the one judged.
func (t *txConn) lastReturns() bool {
	t.pending = coalesce(t.pending)
	return len(t.pending) > 0 && t.pending[len(t.pending)-1].rows > 0
}

// queryRowAhead is QueryRow for a read that no held write whose mayWait is
// set can change: when every held write may wait, it is sent alone, ahead
// of them, and they wait for the next statement, where they may become
// fewer statements (coalesce). Otherwise it is QueryRow.
func (t *txConn) queryRowAhead(ctx context.Context, sql string, args ...any) pgx.Row {
	if !t.begun || len(t.pending) == 0 {
		return t.QueryRow(ctx, sql, args...)
	}
	for _, w := range t.pending {
		if !w.mayWait {
			return t.QueryRow(ctx, sql, args...)
		}
	}
	ctx, cancel := t.db.bounded(ctx)
	t.sent++
	t.trips++
	return sawRow{row: t.c.QueryRow(ctx, sql, args...), t: t, end: cancel}
}

// mayWaitAll reports whether every held write may wait (heldWrite.mayWait).
func (t *txConn) mayWaitAll() bool {
	for _, w := range t.pending {
		if !w.mayWait {
			return false
		}
	}
	return true
}

// oneRow is the check of a write that must change exactly one row.
func oneRow(what string) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%s changed %d rows, not 1", what, tag.RowsAffected())
		}
		return nil
	}
}

// oneRowOf is oneRow for what+id, built only when the check fails.
func oneRowOf(what, id string) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%s%s changed %d rows, not 1", what, id, tag.RowsAffected())
		}
		return nil
	}
}

// direct reports whether sql can go alone: begun, nothing held.
func (t *txConn) direct() bool {
	t.sent++
	t.trips++
	return t.begun && len(t.pending) == 0
}

// pipeline sends BEGIN (unless begun), the held writes and then sqls in one
// batch, and reads the results up to the first of sqls, which the caller
// reads. An error of a held write ends the batch.
func (t *txConn) pipeline(ctx context.Context, sqls ...queued) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(beginSQL)
	}
	held := coalesce(t.pending)
	t.begun, t.pending = true, nil
	t.trips++
	for _, w := range held {
		b.Queue(w.sql, w.args...)
	}
	for _, q := range sqls {
		b.Queue(q.sql, q.args...)
	}
	br := t.c.SendBatch(ctx, b)
	if b.Len() > len(held)+len(sqls) {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, t.saw(err)
		}
	}
	for _, w := range held {
		tag, err := br.Exec()
		if err == nil && w.check != nil {
			err = w.check(tag)
		}
		if err != nil {
			br.Close()
			return nil, t.saw(heldErr(err))
		}
	}
	return br, nil
}

type queued struct {
	sql  string
	args []any
}

// heldFailure is a held write's failure: classified, and never ErrNoRow.
// refused: the server refused the write, so it skipped every statement
// after it up to the batch's end (a COMMIT among them never ran).
type heldFailure struct {
	err     error
	refused bool
}

func (e *heldFailure) Error() string { return e.err.Error() }
func (e *heldFailure) Unwrap() error { return e.err }

func heldErr(err error) error {
	var pe *pgconn.PgError
	refused := errors.As(err, &pe)
	c := classify(err)
	if errors.Is(c, store.ErrNoRow) {
		c = fmt.Errorf("a write of this transaction failed: %v", err)
	}
	return &heldFailure{err: c, refused: refused}
}

// Every statement runs under the statement deadline (session.go), and its
// failure is seen by saw.
func (t *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := t.db.bounded(ctx)
	defer cancel()
	if t.direct() {
		tag, err := t.c.Exec(ctx, sql, args...)
		return tag, t.saw(err)
	}
	br, err := t.pipeline(ctx, queued{sql, args})
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
	if t.direct() {
		return sawRow{row: t.c.QueryRow(ctx, sql, args...), t: t, end: cancel}
	}
	br, err := t.pipeline(ctx, queued{sql, args})
	if err != nil {
		cancel()
		return errRow{err}
	}
	return sawRow{row: batchRow{row: br.QueryRow(), br: br}, t: t, end: cancel}
}

func (t *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, cancel := t.db.bounded(ctx)
	if t.direct() {
		rows, err := t.c.Query(ctx, sql, args...)
		if err != nil {
			cancel()
			return nil, t.saw(err)
		}
		return &sawRows{Rows: rows, t: t, end: cancel}, nil
	}
	br, err := t.pipeline(ctx, queued{sql, args})
	if err != nil {
		cancel()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		cancel()
		return nil, t.saw(err)
	}
	return &batchRows{Rows: rows, br: br, t: t, end: cancel}, nil
}

// batchRows are a pipelined statement's rows: the batch ends with them,
// before their deadline's context is released.
type batchRows struct {
	pgx.Rows
	br   pgx.BatchResults
	t    *txConn
	end  context.CancelFunc
	done bool
	err  error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	r.err = r.Rows.Err()
	if cerr := r.br.Close(); r.err == nil {
		r.err = cerr
	}
	r.t.saw(r.err)
	r.end()
}

func (r *batchRows) Err() error {
	if r.done {
		return r.err
	}
	return r.Rows.Err()
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
	// The clock sample a locking read took once it held its row, for the
	// sample the rules take then (core's guard.locked), or the one a
	// production's read took (a claim's first sample): it serves only the
	// next Now, only if no statement came between (lockedAt is the
	// connection's count of statements when it was read), and only within
	// startFresh of it.
	lockedUS   int64
	lockedAt   int
	lockedTime time.Time
	hasLocked  bool
	// The mark a production's read took with it, for the next HWM, under
	// the same condition (no statement came between); markRead: the
	// transaction read the mark already, so a read need not take it.
	stashedMark int64
	markAt      int
	hasMark     bool
	markRead    bool
	// Whether the production a read took (ProductionByName) had, at the
	// clock it sampled, a delayed job whose time had come or a claim whose
	// expiry and backoff had passed, for the ClaimScan that comes next,
	// under the same condition (no statement came between).
	due dueHint
	// The production a job's read is to read in its round trip
	// (ProductionAhead), and what it read (aheadRead).
	aheadName string
	ahead     aheadRead
	// The production's newest job and the store's newest event a read of
	// a state's jobs took with them (JobsInState), for the NewestJobSeq and
	// NewestEvent that come next, under the same condition.
	newest newestStash
}

// newestStash is what JobsInState read besides the jobs: the newest job
// of production, and the newest event (its seq and job), as read with
// statement number at of the connection.
type newestStash struct {
	production string
	jobSeq     int64
	eventSeq   int64
	eventJob   string
	at         int
	has        bool
}

// aheadRead is a production's read sent with a job's (ProductionAhead):
// the row, the clock it sampled and its dueSQL, as read in round trip
// trips of the connection.
type aheadRead struct {
	p     store.Production
	now   int64
	due   bool
	at    time.Time
	trips int
	has   bool
}

// dueHint is what a production's read found of the work a claim's scan
// does besides its look: none is true when no delayed job of production
// was ready and no claim had lapsed at now, in the read's snapshot, taken
// with statement number at of the connection.
type dueHint struct {
	production string
	now        int64
	at         int
	none       bool
	has        bool
}

// dueSQL is true when the production p has, at c.now, a delayed job whose
// time has come (the promotion's work) or a claim whose expiry and backoff
// have passed (the lapsed claims' look): the first entry of each of their
// partial indexes, leases_jobs_delayed and leases_jobs_claimed_ready.
const dueSQL = `(EXISTS (SELECT 1 FROM leases_jobs WHERE production_id = p.id AND state = 'requested' AND NOT due
		AND ready_unix_us <= c.now)
	OR EXISTS (SELECT 1 FROM leases_jobs WHERE production_id = p.id AND state = 'claimed' AND ready_unix_us <= c.now))`

var _ store.Clock = (*Tx)(nil)

// startFresh bounds how long after the mark was read its clock sample still
// serves as a first sample (an edit's first operation may come later).
const startFresh = 5 * time.Millisecond

const clockSQL = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// HWM reads the durable mark, and the server's clock in the same statement;
// right after a production's read that took the mark (ProductionByName),
// it is that statement's.
func (t *Tx) HWM(ctx context.Context) (int64, error) {
	t.markRead = true
	if t.hasMark {
		t.hasMark = false
		if t.markAt == t.conn.sent {
			return t.stashedMark, nil
		}
	}
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
	if t.hasLocked {
		t.hasLocked = false
		if t.lockedAt == t.conn.sent && time.Since(t.lockedTime) < startFresh {
			t.hasStart = false
			return t.lockedUS, nil
		}
	}
	if t.hasStart {
		t.hasStart = false
		if time.Since(t.startAt) < startFresh {
			return t.startUS, nil
		}
	}
	if t.conn.lastReturns() {
		// The pre-commit sample, and any sample taken after a write: the
		// statement before it takes it, one statement fewer. A sample is
		// ordered by when its statement runs, and nothing of this
		// transaction runs between that write and the sample either way
		// (docs/CLOCK.md keeps its order).
		return t.conn.sampleInLast(ctx)
	}
	var v int64
	err := t.conn.QueryRow(ctx, `SELECT `+clockSQL).Scan(&v)
	return v, classify(err)
}

// lockedRead runs a read that locks the rows it returns (sql, FOR UPDATE
// included) and samples the server's clock in the same statement, after
// the lock is held: the outer query's clock is evaluated for each row the
// locking subquery returns, and a row whose newer version had to be waited
// for is fetched again (and its clock evaluated again) before it is
// returned. No row: ErrNoRow, and no sample.
func (t *Tx) lockedRead(ctx context.Context, sql string, args ...any) (store.Job, error) {
	return t.lockedReadOn(t.conn.QueryRow, ctx, sql, args...)
}

// lockedReadOn is lockedRead sent by query (QueryRow, or queryRowAhead).
func (t *Tx) lockedReadOn(query func(context.Context, string, ...any) pgx.Row, ctx context.Context,
	sql string, args ...any) (store.Job, error) {
	var now int64
	j, err := scanJobAnd(query(ctx, `SELECT j.*, `+clockSQL+` FROM (`+sql+`) j`, args...), &now)
	if err == nil {
		t.lockedUS, t.lockedAt, t.lockedTime, t.hasLocked = now, t.conn.sent, time.Now(), true
	}
	return j, err
}

// ProductionByName reads the production with the server's clock in the
// same statement, for the sample the next Now takes (as lockedRead's: only
// if no statement came between, and only within startFresh): a claim reads
// its production first and takes its first sample from that read, so that
// a claim following a completion in one transaction sends the read with
// the completion's held writes and needs no round trip for the sample.
//
// Until the transaction has read the durable mark, the same statement reads
// it too (before the clock, as HWM does), for the HWM that comes next: a
// lone claim's first statement is then its production's read.
//
// The same statement reads, at that clock, whether the production has a
// delayed job whose time has come or a lapsed claim (dueSQL), for the
// ClaimScan that may come next: with neither, it sends only its look.
func (t *Tx) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	t.due.has = false
	if r := t.ahead; r.has && t.markRead && r.p.Name == name && r.trips == t.conn.trips && t.conn.mayWaitAll() &&
		time.Since(r.at) < startFresh {
		// Read with the job before it, and nothing reached the server
		// since: its sample is the last the server took (the held writes
		// in between wait for a later round trip, and change nothing it
		// read).
		t.ahead.has = false
		t.lockedUS, t.lockedAt, t.lockedTime, t.hasLocked = r.now, t.conn.sent, r.at, true
		t.due = dueHint{production: r.p.ID, now: r.now, at: t.conn.sent, none: !r.due, has: true}
		return r.p, nil
	}
	t.ahead.has = false
	var p store.Production
	var now, mark int64
	var due bool
	dest := append(productionDest(&p), &now, &due)
	withMark := !t.markRead
	if withMark {
		dest = append(dest[:len(dest)-2], &mark, &now, &due)
	}
	// No held write of a completion or a failure changes what it reads
	// (UpdateJob): it may go ahead of them.
	if err := t.conn.queryRowAhead(ctx, productionSQL(withMark), name).Scan(dest...); err != nil {
		return store.Production{}, classify(err)
	}
	t.lockedUS, t.lockedAt, t.lockedTime, t.hasLocked = now, t.conn.sent, time.Now(), true
	if withMark {
		t.stashedMark, t.markAt, t.hasMark = mark, t.conn.sent, true
	}
	t.due = dueHint{production: p.ID, now: now, at: t.conn.sent, none: !due, has: true}
	return p, nil
}

// productionSQL is ProductionByName's read ($1 the name): the production,
// the mark (withMark), the clock and dueSQL at that clock.
func productionSQL(withMark bool) string {
	if withMark {
		return productionWithMarkText
	}
	return productionText
}

// The production's reads, built once.
var productionText, productionWithMarkText = buildProductionSQL(false), buildProductionSQL(true)

func buildProductionSQL(withMark bool) string {
	cols := `p.` + strings.ReplaceAll(productionColumns, `, `, `, p.`)
	mark := ``
	if withMark {
		mark = `(SELECT COALESCE(max(v), 0) FROM leases_hwm), `
	}
	return `SELECT ` + cols + `, ` + mark + `c.now, ` + dueSQL + `
		FROM (SELECT ` + clockSQL + ` AS now) c, leases_productions p WHERE p.name = $1`
}

// ProductionAhead: the next JobByID reads the production named name in its
// round trip, after the job (store.ReadAhead).
func (t *Tx) ProductionAhead(name string) { t.aheadName = name }

const jobByIDSQL = `SELECT j.*, ` + clockSQL + ` FROM (SELECT ` + jobColumns + ` FROM leases_jobs WHERE id = $1 FOR UPDATE) j`

// JobByID reads the job's row locked, with the clock once it is held; and
// after it, in the same round trip, the production ProductionAhead named,
// with its own clock sample (taken after the job's), for the
// ProductionByName that follows.
func (t *Tx) JobByID(ctx context.Context, id string) (store.Job, error) {
	name := t.aheadName
	t.aheadName, t.ahead.has = "", false
	if name == "" || !t.markRead {
		return t.lockedRead(ctx, `SELECT `+jobColumns+` FROM leases_jobs WHERE id = $1 FOR UPDATE`, id)
	}
	ctx, cancel := t.db.bounded(ctx)
	defer cancel()
	t.conn.sent += 2
	br, err := t.conn.pipeline(ctx, queued{jobByIDSQL, []any{id}}, queued{productionSQL(false), []any{name}})
	if err != nil {
		return store.Job{}, err
	}
	var j store.Job
	var r aheadRead
	err = func() error {
		defer br.Close()
		var now int64
		j, err = scanJobAnd(br.QueryRow(), &now)
		if err != nil {
			return err
		}
		t.lockedUS, t.lockedAt, t.lockedTime, t.hasLocked = now, t.conn.sent, time.Now(), true
		err = br.QueryRow().Scan(append(productionDest(&r.p), &r.now, &r.due)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // ProductionByName reads again, and answers
		}
		if err != nil {
			return classify(err)
		}
		r.at, r.trips, r.has = time.Now(), t.conn.trips, true
		return nil
	}()
	if err != nil {
		t.hasLocked = false
		return store.Job{}, t.conn.saw(err)
	}
	t.ahead = r
	return j, nil
}

// NextClaimable takes the first due job in claim order that no other
// transaction holds, locked, with the clock once it is held.
func (t *Tx) NextClaimable(ctx context.Context, productionID string, now int64) (store.Job, error) {
	return t.lockedRead(ctx, nextClaimableSQL+` FOR UPDATE SKIP LOCKED`, productionID)
}

// JobsInState reads a page of one state in request order, locked
// (skipping rows others hold), and in the same round trip the production's
// newest job and the store's newest event, which a prune's batch reads
// next (core's planJobs): NewestJobSeq and NewestEvent then answer from
// them if no statement came between. Reading them with the page instead of
// after it is reading them a moment earlier, which any commit's timing
// could have made them anyway.
func (t *Tx) JobsInState(ctx context.Context, productionID, state string, limit int) ([]store.Job, error) {
	ctx, cancel := t.db.bounded(ctx)
	defer cancel()
	t.newest.has = false
	t.conn.sent++
	br, err := t.conn.pipeline(ctx,
		queued{`SELECT ` + jobColumns + ` FROM leases_jobs
		WHERE production_id = $1 AND state = $2 ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED`, []any{productionID, state, limit}},
		queued{newestJobSeqSQL, []any{productionID}},
		queued{newestEventSQL, nil})
	if err != nil {
		return nil, err
	}
	var jobs []store.Job
	n := newestStash{production: productionID}
	err = func() error {
		defer br.Close()
		rows, err := br.Query()
		if err != nil {
			return classify(err)
		}
		if jobs, err = collect(rows, func(r pgx.CollectableRow) (store.Job, error) { return scanJob(r) }); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&n.jobSeq); err != nil {
			return classify(err)
		}
		err = br.QueryRow().Scan(&n.eventSeq, &n.eventJob)
		if errors.Is(err, pgx.ErrNoRows) {
			n.eventSeq, n.eventJob, err = 0, "", nil
		}
		return classify(err)
	}()
	if err != nil {
		return nil, t.conn.saw(err)
	}
	n.at, n.has = t.conn.sent, true
	t.newest = n
	return jobs, nil
}

// NewestJobSeq is the one JobsInState read with its page, if no statement
// came between, or a read of its own.
func (t *Tx) NewestJobSeq(ctx context.Context, productionID string) (int64, error) {
	if n := t.newest; n.has && n.at == t.conn.sent && n.production == productionID {
		return n.jobSeq, nil
	}
	return t.queries.NewestJobSeq(ctx, productionID)
}

// NewestEvent is the one JobsInState read with its page, if no statement
// came between, or a read of its own.
func (t *Tx) NewestEvent(ctx context.Context) (int64, string, error) {
	if n := t.newest; n.has && n.at == t.conn.sent {
		return n.eventSeq, n.eventJob, nil
	}
	return t.queries.NewestEvent(ctx)
}

// DeleteFinishedJobs sends, with the delete, a setting for the rest of its
// transaction (which only deletes): read no table whole. The tables a
// steady state keeps are small, so the planner reads them whole, and then
// compares every row with every id of the batch (an array known only when
// the statement runs cannot be hashed): 2,000 events by 64 ids is most of
// a batch's time on the server. By the index by job, a batch reads each
// job's own rows (docs/PERFORMANCE.md, section 12).
func (t *Tx) DeleteFinishedJobs(ctx context.Context, ids []string, state string, updatedBy int64) (int64, int64, error) {
	t.conn.hold(nil, "SET LOCAL enable_seqscan = off")
	return t.queries.DeleteFinishedJobs(ctx, ids, state, updatedBy)
}

// ClaimScan sends the claim's three looks in one round trip: the lapsed
// claims (locked), the promotion of due delayed jobs, and the next
// claimable job (locked, with the clock once it is held, as NextClaimable).
// The server runs them in order, so the look sees what the promotion made due.
//
// When the production's read just before it (no statement between) found,
// at the same clock as now, no delayed job whose time had come and no
// lapsed claim, it sends only the look: the promotion and the lapsed
// claims' look would find nothing to do at now. Only a transaction that
// commits between that read and the look could give them work (a job
// delayed by a sample taken before now, a claim shorter than the time
// between): one that commits after the look would give none either, and
// the next claim finds it, as it would have then.
func (t *Tx) ClaimScan(ctx context.Context, productionID string, now int64, lapseLimit, promoteLimit int) (store.ClaimScan, error) {
	var sc store.ClaimScan
	h := t.due
	t.due.has = false
	if h.has && h.none && h.at == t.conn.sent && h.production == productionID && h.now == now {
		// No held write of a completion or a failure changes which job is
		// due (UpdateJob): the look may go ahead of them.
		j, err := t.lockedReadOn(t.conn.queryRowAhead, ctx, nextClaimableSQL+` FOR UPDATE SKIP LOCKED`, productionID)
		if errors.Is(err, store.ErrNoRow) {
			return sc, nil
		}
		if err != nil {
			return sc, err
		}
		sc.Next, sc.Found = j, true
		return sc, nil
	}
	ctx, cancel := t.db.bounded(ctx)
	defer cancel()
	t.conn.sent++
	br, err := t.conn.pipeline(ctx,
		queued{lapsedClaimsSQL + ` FOR UPDATE SKIP LOCKED`, []any{productionID, now, lapseLimit}},
		queued{promoteDueSQL, []any{productionID, now, promoteLimit}},
		queued{`SELECT j.*, ` + clockSQL + ` FROM (` + nextClaimableSQL + ` FOR UPDATE SKIP LOCKED) j`, []any{productionID}})
	if err != nil {
		return sc, err
	}
	err = func() error {
		defer br.Close()
		rows, err := br.Query()
		if err != nil {
			return classify(err)
		}
		if sc.Lapsed, err = collect(rows, func(r pgx.CollectableRow) (store.Job, error) { return scanJob(r) }); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err != nil {
			return classify(err)
		}
		sc.Promoted = tag.RowsAffected()
		var clock int64
		sc.Next, err = scanJobAnd(br.QueryRow(), &clock)
		switch {
		case errors.Is(err, store.ErrNoRow):
			return nil
		case err != nil:
			return err
		}
		sc.Found = true
		t.lockedUS, t.lockedAt, t.lockedTime, t.hasLocked = clock, t.conn.sent, time.Now(), true
		return nil
	}()
	return sc, t.conn.saw(err)
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
	if !t.conn.begun && len(t.conn.pending) == 0 { // nothing was sent or held: nothing to commit
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
	if len(t.notices) == 0 && t.conn.direct() {
		tag, err = t.conn.c.Exec(ctx, "COMMIT")
	} else {
		tag, err = t.commitPipelined(ctx)
	}
	var held *heldFailure
	if errors.As(err, &held) && held.refused {
		// The server refused a held write, and so skipped the COMMIT after
		// it: nothing was written (releasing the connection inside its
		// aborted transaction discards it).
		t.finish()
		return fmt.Errorf("%w: %w", store.ErrNotCommitted, err)
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
	t.conn.pending = nil                // held writes are never sent
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
	"leases_jobs_production_id_key_key": true, // the key's unique index before schema 12
	"leases_jobs_by_key":                true,
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
