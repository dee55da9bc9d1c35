// Connections that heal and statements that end: which failures discard a
// connection (and every idle one with it), which are run again on a fresh
// one, and the deadline of every statement (docs/postgres.md, "Faults").
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/libleases/libleases/core/store"
)

// StatementAllowance is how long a statement may run beyond the busy
// timeout (which bounds its wait for a lock): the server's
// statement_timeout is their sum, unless the URL sets statement_timeout.
const StatementAllowance = 2 * time.Second

// answerGrace is how long past statement_timeout the client still waits
// for the server's answer, so that a healthy server reports its own cancel
// (busy) before the client gives up on it (a stalled server: storage).
const answerGrace = time.Second

// keepAlive probes an idle connection after 15 s and declares the peer
// dead after 3 unanswered probes 5 s apart: a pooled connection to a host
// that vanished (a partition, a crash without a reset) is found out within
// 30 s, not the kernel default of two hours.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// errStalled: the server did not answer a statement within its bound. The
// connection is closed (the server may be stopped or unreachable), so the
// transaction was not committed; a COMMIT cut off so is outcome-unknown.
var errStalled = errors.New("the PostgreSQL server did not answer within the statement bound (busy timeout + statement allowance + 1 s; docs/postgres.md); the connection was discarded")

// sessionFailed reports whether err ended the connection's usefulness, not
// just one statement: the connection broke or the server ended the session
// (any FATAL or PANIC, class 08 connection exceptions, 57P01..57P03 shutdown
// and restart), nothing reached the server (pgconn.SafeToRetry), or the
// session cannot write (25006: default_transaction_read_only, or a server
// that became a standby). The connection is discarded, and with it every
// idle one, opened in the same conditions. A timeout is not one of them: a
// stalled server is not retried (errStalled).
func sessionFailed(err error) bool {
	if err == nil || stalled(err) || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity == "FATAL" || pe.Severity == "PANIC" || strings.HasPrefix(pe.Code, "08") ||
			pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "25006"
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

// stalled reports whether err is a statement cut off by its own deadline.
func stalled(err error) bool {
	var ne net.Error
	return err != nil && (pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errStalled) ||
		(errors.As(err, &ne) && ne.Timeout()))
}

// heal discards every idle connection, and every busy one when it is
// released: after a session failure the others were likely opened in the
// same conditions (all terminated by a restart, all read-only).
func (db *DB) heal() { db.pool.Reset() }

// statementTimeout is the server's statement_timeout, from the URL or the
// busy timeout plus StatementAllowance; bound is the client's deadline.
func statementTimeout(rp map[string]string, busy time.Duration) (server, bound time.Duration) {
	server = busy + StatementAllowance
	if ms, err := parseMillis(rp["statement_timeout"]); err == nil && ms > 0 {
		server = ms
	}
	rp["statement_timeout"] = fmt.Sprint(server.Milliseconds())
	return server, server + answerGrace
}

func parseMillis(s string) (time.Duration, error) {
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, err
	}
	return time.Duration(n) * time.Millisecond, nil
}

// dialer is pgx's connect-timeout dialer with keepAlive.
func dialer(connect time.Duration) pgconn.DialFunc {
	d := &net.Dialer{Timeout: connect, KeepAliveConfig: keepAlive}
	return d.DialContext
}

// bounded is ctx with the statement deadline.
func (db *DB) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, db.bound)
}

// rerunKey marks the context of a read that poolQ runs again on a fresh
// connection when its own connection turns out dead (a session failure):
// such a read needs no ping of the connection first.
type rerunKey struct{}

// rerun is the context of a statement poolQ runs again after a session
// failure.
func rerun(ctx context.Context) context.Context { return context.WithValue(ctx, rerunKey{}, true) }

// shouldPing is the pool's check before it hands out a connection: pgx's
// default (a connection idle for more than a second is pinged first, one
// round trip), except for a statement that is run again on a fresh
// connection when its own is dead anyway. An idle waiter's look every
// second would otherwise cost two round trips, the ping and the look.
func shouldPing(ctx context.Context, p pgxpool.ShouldPingParams) bool {
	if ctx.Value(rerunKey{}) != nil {
		return false
	}
	return p.IdleDuration > time.Second
}

// ---- statements of a write transaction --------------------------------------

// saw notes a failed statement of the transaction: after a session failure
// its connection is closed rather than returned to the pool, and the pool
// heals.
func (t *txConn) saw(err error) error {
	if sessionFailed(err) || stalled(err) {
		t.broken = true
		t.db.heal()
	}
	return err
}

type sawRow struct {
	row pgx.Row
	t   *txConn
	end context.CancelFunc
}

func (r sawRow) Scan(dest ...any) error {
	defer r.end()
	return r.t.saw(r.row.Scan(dest...))
}

type sawRows struct {
	pgx.Rows
	t   *txConn
	end context.CancelFunc
}

func (r *sawRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.t.saw(r.Rows.Err())
	r.end()
	return false
}

func (r *sawRows) Close() {
	r.Rows.Close()
	r.t.saw(r.Rows.Err())
	r.end()
}

// ---- reads on the pool ------------------------------------------------------

// poolQ runs the reads outside write transactions, each under the statement
// deadline. A read whose connection turns out dead or stale (a backend
// terminated between two calls, which the pool cannot see until it is
// used) is run once more on a fresh connection, after the pool heals:
// reads change nothing, so running one again is always safe.
type poolQ struct{ db *DB }

func (p poolQ) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	for attempt := 0; ; attempt++ {
		bctx, cancel := p.db.bounded(rerun(ctx))
		tag, err := p.db.pool.Exec(bctx, sql, args...)
		cancel()
		if attempt == 0 && p.retry(err) {
			continue
		}
		return tag, p.after(err)
	}
}

func (p poolQ) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return poolRow{p: p, ctx: ctx, sql: sql, args: args}
}

type poolRow struct {
	p    poolQ
	ctx  context.Context
	sql  string
	args []any
}

func (r poolRow) Scan(dest ...any) error {
	for attempt := 0; ; attempt++ {
		bctx, cancel := r.p.db.bounded(rerun(r.ctx))
		err := r.p.db.pool.QueryRow(bctx, r.sql, r.args...).Scan(dest...)
		cancel()
		if attempt == 0 && r.p.retry(err) {
			continue
		}
		return r.p.after(err)
	}
}

// Query reads the first row before it hands the rows over, so that a dead
// connection is found (and the read run again) before any row is seen.
func (p poolQ) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	for attempt := 0; ; attempt++ {
		bctx, cancel := p.db.bounded(rerun(ctx))
		rows, err := p.db.pool.Query(bctx, sql, args...)
		if err == nil {
			if rows.Next() {
				return &peekedRows{Rows: rows, end: cancel, peeked: true}, nil
			}
			rows.Close()
			err = rows.Err()
			if err == nil {
				return &peekedRows{Rows: rows, end: cancel}, nil
			}
		}
		cancel()
		if attempt == 0 && p.retry(err) {
			continue
		}
		return nil, p.after(err)
	}
}

// retry heals the pool after a session failure and says whether to run the
// read again.
func (p poolQ) retry(err error) bool {
	if sessionFailed(err) {
		p.db.heal()
		return true
	}
	return false
}

// after heals the pool after a read cut off by its deadline (its
// connection is closed; the idle ones may lead to the same stalled server).
func (p poolQ) after(err error) error {
	if stalled(err) {
		p.db.heal()
	}
	return err
}

// horizonConn is a connection for a page of events, with the page's
// horizon read on it; a connection found dead by that first read is
// replaced once, as poolQ does.
func (db *DB) horizonConn(ctx context.Context) (*pgxpool.Conn, int64, error) {
	for attempt := 0; ; attempt++ {
		c, err := db.pool.Acquire(ctx)
		if err != nil {
			return nil, 0, poolQ{db}.after(classify(err))
		}
		h, err := eventHorizon(ctx, c)
		if err == nil {
			return c, h, nil
		}
		c.Release()
		if attempt == 0 && errors.Is(err, store.ErrReconnect) {
			db.heal()
			continue
		}
		return nil, 0, poolQ{db}.after(err)
	}
}

// peekedRows hands back the row Query read ahead, then the rest.
type peekedRows struct {
	pgx.Rows
	end    context.CancelFunc
	peeked bool
}

func (r *peekedRows) Next() bool {
	if r.peeked {
		r.peeked = false
		return true
	}
	if r.Rows.Next() {
		return true
	}
	r.end()
	return false
}

func (r *peekedRows) Close() {
	r.Rows.Close()
	r.end()
}

// classifyCommit maps the error of COMMIT. Only a COMMIT that never left
// this process may be run again; any other failure of it, a session failure
// or its deadline included, leaves the outcome unknown: it must not be
// reported as store.ErrReconnect.
func classifyCommit(err error) error {
	if err == nil {
		return nil
	}
	if pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: COMMIT was not sent: %w", store.ErrReconnect, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
		return fmt.Errorf("%w: %v", store.ErrRetry, err)
	}
	if stalled(err) {
		return fmt.Errorf("COMMIT: %w (%w)", errStalled, err)
	}
	return fmt.Errorf("COMMIT: %w", err)
}
