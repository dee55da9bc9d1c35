package pgstore

// Which failures discard a connection and run the transaction again, which
// are a stall, and how COMMIT's failures are told (session.go); and the
// session settings that bound every statement.

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestOnlySessionFailuresBeforeCommitAreRunAgainOnAFreshConnection(t *testing.T) {
	pg := func(severity, code string) error {
		return &pgconn.PgError{Severity: severity, Code: code, Message: code}
	}
	reconnect := map[string]error{
		"admin shutdown":     pg("FATAL", "57P01"),
		"crash shutdown":     pg("FATAL", "57P02"),
		"cannot connect now": pg("FATAL", "57P03"),
		"read-only session":  pg("ERROR", "25006"),
		"connection failure": pg("ERROR", "08006"),
		"any FATAL":          pg("FATAL", "XX000"),
		"peer closed":        fmt.Errorf("read: %w", io.ErrUnexpectedEOF),
		"closed socket":      &net.OpError{Op: "write", Err: net.ErrClosed},
	}
	for why, err := range reconnect {
		require.ErrorIs(t, classify(err), store.ErrReconnect, why)
		require.ErrorIs(t, classify(err), err, "%s: the driver's error stays in the chain", why)
	}
	for why, err := range map[string]error{
		"lock timeout":     pg("ERROR", "55P03"),
		"deadlock":         pg("ERROR", "40P01"),
		"unique violation": pg("ERROR", "23505"),
		"statement cancel": pg("ERROR", "57014"),
		"no rows":          fmt.Errorf("x: %w", store.ErrNoRow),
	} {
		require.NotErrorIs(t, classify(err), store.ErrReconnect, why)
	}
	for why, err := range map[string]error{
		"deadline":    fmt.Errorf("read: %w", context.DeadlineExceeded),
		"net timeout": &net.OpError{Op: "read", Err: timeoutErr{}},
	} {
		require.NotErrorIs(t, classify(err), store.ErrReconnect, why)
		require.ErrorIs(t, classify(err), errStalled, why)
	}
	// A COMMIT that was sent is never run again, whatever cut it off.
	for _, err := range []error{pg("FATAL", "57P01"), fmt.Errorf("read: %w", io.ErrUnexpectedEOF), context.DeadlineExceeded} {
		require.NotErrorIs(t, classifyCommit(err), store.ErrReconnect, "%v", err)
		require.NotErrorIs(t, classifyCommit(err), store.ErrRetry, "%v", err)
	}
	require.ErrorIs(t, classifyCommit(pg("ERROR", "40001")), store.ErrRetry)
}

func TestEverySessionHasAStatementTimeoutPastTheBusyTimeout(t *testing.T) {
	rp := map[string]string{}
	server, bound := statementTimeout(rp, 10*time.Second)
	require.Equal(t, 12*time.Second, server)
	require.Equal(t, "12000", rp["statement_timeout"])
	require.Equal(t, 13*time.Second, bound, "the client waits a second longer than the server")
	rp = map[string]string{"statement_timeout": "500"}
	server, bound = statementTimeout(rp, 10*time.Second)
	require.Equal(t, 500*time.Millisecond, server, "the URL's statement_timeout wins")
	require.Equal(t, 1500*time.Millisecond, bound)

	db, _ := open(t, 300*time.Millisecond)
	var v string
	require.NoError(t, db.pool.QueryRow(ctx, `SHOW statement_timeout`).Scan(&v))
	require.Equal(t, "2300ms", v)
}

// The store's statements are short and touch few rows, but the planner's
// estimate of one over a large or freshly touched table can pass
// jit_above_cost, and compiling it then costs hundreds of milliseconds: a
// session runs without JIT unless the URL asks for it.
func TestEverySessionRunsWithoutJITUnlessTheURLTurnsItOn(t *testing.T) {
	_, u := open(t, time.Second)
	for url, want := range map[string]string{u: "off", u + "&jit=on": "on"} {
		db, err := Open(url, Options{BusyTimeout: time.Second})
		require.NoError(t, err)
		var v string
		require.NoError(t, db.pool.QueryRow(ctx, `SHOW jit`).Scan(&v))
		db.Close()
		require.Equal(t, want, v, "jit of a session")
	}
}
