//go:build leasestest

package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/libleases/libleases/core/store"
)

// CommitFault is what a hook of InjectCommitFaultsForTest decides for one
// commit of a write transaction.
type CommitFault int

const (
	// CommitNormally lets the commit run.
	CommitNormally CommitFault = iota
	// CommitRefused rolls the transaction back instead and reports that the
	// store refused it before it committed: nothing was written.
	CommitRefused
	// CommitAckLost commits and then reports a failure, as a connection
	// lost after the commit reached the disk (or the server) does: the
	// write is durable, the caller cannot know it.
	CommitAckLost
	// CommitGroupLost loses the whole transaction the commit is part of, as
	// a statement failure that makes SQLite roll back a group commit's
	// transaction (an I/O error, an interrupted write) does: nothing of any
	// member is written. The member that meets it is told its commit was
	// refused; the members that released into the group before it are told
	// they were lost with another's failure (and their operations run
	// again). On a store whose transactions are not shared it is
	// CommitRefused.
	CommitGroupLost
)

// ErrInjectedFault is what the failures InjectCommitFaultsForTest injects
// wrap.
var ErrInjectedFault = errors.New("injected store fault")

// InjectCommitFaultsForTest makes decide choose, for every later commit of
// a's write transactions, whether it runs, is refused, commits and loses
// its acknowledgement, or loses its whole group. decide is told whether the
// transaction is shared: it holds the writes of other members of a SQLite
// group commit, which released into it before this one (only then can a
// group loss lose more than this commit). Unlike FailCommitsForTest it decides commit by commit,
// so a test can inject faults into a live authority shared by goroutines
// (decide is called concurrently). Call it once, before a is used. The
// store's optional abilities (its clock, watcher, look, notices, pragmas)
// stay as they were. Test builds only.
func InjectCommitFaultsForTest(a *Authority, decide func(shared bool) CommitFault) error {
	fb := faultBackend{Backend: a.b, decide: decide}
	w, isWatcher := a.b.(store.Watcher)
	c, isClock := a.b.(store.Clock)
	l, isLooker := a.b.(store.Looker)
	p, hasPragmas := a.b.(pragmas)
	switch {
	case isWatcher && hasPragmas && !isClock && !isLooker: // SQLite
		a.b = faultLocalBackend{faultBackend: fb, Watcher: w, pragmas: p}
	case isWatcher && isClock && isLooker && !hasPragmas: // a server store
		a.b = faultServerBackend{faultBackend: fb, Watcher: w, Clock: c, Looker: l}
	default:
		return errf(KindInvalidArgument, "cannot inject commit faults into a %T store", a.b)
	}
	return nil
}

type pragmas interface {
	Pragma(string) (string, error)
}

type faultBackend struct {
	store.Backend
	decide func(shared bool) CommitFault
}

func (b faultBackend) BeginWrite(ctx context.Context) (store.Tx, error) {
	tx, err := b.Backend.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	ft := faultTx{Tx: tx, decide: b.decide}
	c, isClock := tx.(store.Clock)
	n, isNotifier := tx.(store.Notifier)
	switch {
	case !isClock && !isNotifier:
		return ft, nil
	case !isClock && isNotifier: // SQLite, which rings its productions' doorbells
		return faultNotifierTx{faultTx: ft, Notifier: n}, nil
	case isClock && isNotifier:
		return faultServerTx{faultTx: ft, Clock: c, Notifier: n}, nil
	}
	tx.Rollback()
	return nil, fmt.Errorf("%w: cannot inject commit faults into a %T transaction", store.ErrNotCommitted, tx)
}

type faultLocalBackend struct {
	faultBackend
	store.Watcher
	pragmas
}

type faultServerBackend struct {
	faultBackend
	store.Watcher
	store.Clock
	store.Looker
}

type faultTx struct {
	store.Tx
	decide func(shared bool) CommitFault
}

// groupLoser is a store transaction that can lose the whole transaction
// it shares with others (sqlitestore's group member).
type groupLoser interface {
	SharedForTest() bool
	LoseGroupForTest() (released int, err error)
}

// groupMembersLost counts the members that CommitGroupLost faults lost
// with the member that met them, in this process.
var groupMembersLost atomic.Int64

// GroupMembersLostForTest is how many members, besides the one that met
// it, the CommitGroupLost faults of this process lost with their group.
func GroupMembersLostForTest() int64 { return groupMembersLost.Load() }

func (t faultTx) Commit() error {
	g, isGroup := t.Tx.(groupLoser)
	f := t.decide(isGroup && g.SharedForTest())
	if f == CommitGroupLost {
		if !isGroup {
			f = CommitRefused // no shared transaction: it is refused
		} else {
			released, err := g.LoseGroupForTest()
			if err != nil {
				return fmt.Errorf("%w: %w: the group's transaction could not be lost (%v)", store.ErrNotCommitted, ErrInjectedFault, err)
			}
			groupMembersLost.Add(int64(released))
			return fmt.Errorf("%w: %w: the whole transaction was lost, with the writes of %d other members", store.ErrNotCommitted,
				ErrInjectedFault, released)
		}
	}
	switch f {
	case CommitRefused:
		t.Tx.Rollback()
		return fmt.Errorf("%w: %w: the commit was refused", store.ErrNotCommitted, ErrInjectedFault)
	case CommitAckLost:
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		return fmt.Errorf("%w: the connection was lost after the commit", ErrInjectedFault)
	}
	return t.Tx.Commit()
}

type faultServerTx struct {
	faultTx
	store.Clock
	store.Notifier
}

type faultNotifierTx struct {
	faultTx
	store.Notifier
}
