//go:build leasestest

package core

import (
	"context"
	"time"

	"github.com/libleases/libleases/core/internal/wake"
	"github.com/libleases/libleases/core/store"
)

// SetClockForTest replaces the authority's clock. It exists only in builds
// with the leasestest tag (the test build of libleases); release builds have
// no way to choose the authority's time.
func SetClockForTest(a *Authority, nowUnixUS func() int64) { a.setClock(nowUnixUS) }

// PragmaForTest reads a SQLite pragma of a's store (on its connections,
// which all open alike), so tests of other packages see what the open
// options set. A store without pragmas (PostgreSQL) is invalid_argument.
// Test builds only.
func PragmaForTest(a *Authority, name string) (string, error) {
	sq, ok := a.b.(interface{ Pragma(string) (string, error) })
	if !ok {
		return "", errf(KindInvalidArgument, "the %T store has no pragmas", a.b)
	}
	v, err := sq.Pragma(name)
	if err != nil {
		return "", storageErr("read pragma "+name, err)
	}
	return v, nil
}

// SetSafetyPollForTest sets how often a's waiters look though nothing woke
// them (d > 0), in place of the store's default: tests of other packages
// make it an hour, so that a waiter woken within seconds was woken by the
// change under test, however slow the host, never by the poll. Call it
// before anyone waits on a. Test builds only.
func SetSafetyPollForTest(a *Authority, d time.Duration) {
	a.waits.hub = wake.New(d)
}

// TestSeamPresent marks a test build.
const TestSeamPresent = true

// FailCommitsForTest makes every later commit of a's transactions persist
// and then report err, as a commit whose acknowledgement was lost does (an
// fsync that failed after the write, a connection dropped after the server
// committed). It is how tests of other packages (the CLI) reach an
// outcome_unknown that did commit. Test builds only.
func FailCommitsForTest(a *Authority, err error) {
	a.b = lostAcks{Backend: a.b, err: err}
}

type lostAcks struct {
	store.Backend
	err error
}

func (b lostAcks) BeginWrite(ctx context.Context) (store.Tx, error) {
	tx, err := b.Backend.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return lostAck{Tx: tx, err: b.err}, nil
}

type lostAck struct {
	store.Tx
	err error
}

func (t lostAck) Commit() error {
	if err := t.Tx.Commit(); err != nil {
		return err
	}
	return t.err
}
