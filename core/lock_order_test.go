// No lock-order inversion between a lease's operations (its keep-alive's
// renewals among them) and a writer: an operation on a lease holds the
// lease's lock while it waits for the writer (on SQLite the file's writer
// lock, in this process's queue), so a writer that holds the writer never
// waits for a lease's lock. An edit holds the writer from Begin to Commit.
package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// lockOrderBusyTimeout is far longer than the bound the tests hold an
// edit's completion to: an edit stalled behind a lock-order inversion
// waits the whole busy timeout.
const (
	lockOrderBusyTimeout = 2 * time.Minute
	promptly             = 30 * time.Second
)

// lockOrderFixture is a fixture on the real clock whose authority waits
// lockOrderBusyTimeout for a lock.
func lockOrderFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, path: newLocation(t, "leases.db"), clk: &fakeClock{now: t0}}
	a, err := OpenWith(f.path, Options{BusyTimeout: lockOrderBusyTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	f.a = a
	_, err = f.a.CreateProductionWithPolicy("p", noBackoff)
	require.NoError(t, err)
	return f
}

// waitingWriters is how many writers of this process queue behind the
// one holding SQLite's writer lock; ok false on PostgreSQL, which has none.
func waitingWriters(a *Authority) (n int, ok bool) {
	q, ok := a.b.(interface{ WaitingWriters() int })
	if !ok {
		return 0, false
	}
	return q.WaitingWriters(), true
}

// completeInEdit begins an edit, lets wait start an operation that queues
// for the writer the edit holds (on SQLite, until it is queued), then reads
// the lease and completes it in the edit, and commits: all within promptly.
// It returns the edit's completion error (nil: the edit committed it).
func completeInEdit(t *testing.T, f *fixture, l *Lease, wait func()) error {
	t.Helper()
	e, err := f.a.Begin()
	require.NoError(t, err)
	wait()
	if _, sqlite := waitingWriters(f.a); sqlite {
		testwait.Eventually(t, func() bool { n, _ := waitingWriters(f.a); return n >= 1 })
	} else {
		time.Sleep(20 * time.Millisecond) // PostgreSQL: row locks, no writer to queue for
	}
	start := time.Now()
	// What the edit's caller may do with the lease without writing, then
	// its completion.
	_ = l.State()
	_ = l.Expiry()
	_, _ = l.Payload()
	_, _ = l.MarshalJSON()
	_, _ = l.Export()
	_ = l.Check(context.Background())
	if x, err := l.BeginExecution(t.TempDir()); err == nil {
		x.Abandon()
	}
	cerr := e.Complete(l, Facts{})
	if cerr == nil {
		require.NoError(t, e.Commit())
	} else {
		e.Abort()
	}
	took := time.Since(start)
	require.Less(t, took, promptly,
		"the edit waited %s for the lease (busy timeout %s): a lock-order inversion", took, lockOrderBusyTimeout)
	return cerr
}

// An edit completes a lease promptly while the lease's keep-alive waits
// for the writer the edit holds: the renewer holds the lease's lock while
// it queues, so the edit must not wait for that lock.
func TestAnEditCompletesALeasePromptlyWhileItsKeepAliveWaitsForTheWriter(t *testing.T) {
	f := lockOrderFixture(t)
	id := f.request(1)[0]
	l := f.claim("w", time.Minute)
	// A renewal every millisecond: the renewer queues for the writer at
	// once.
	require.NoError(t, l.KeepAlive(time.Minute, KeepAliveInterval(time.Millisecond)))
	testwait.Eventually(t, func() bool { return f.renewals(id) >= 1 })
	err := completeInEdit(t, f, l, func() {})
	require.NoError(t, err)
	require.Equal(t, StateCompleted, f.job(id).State)
	testwait.Receive(t, l.Done(), testwait.EventuallyBound, "the lease's Done")
	require.Equal(t, LeaseClosed, l.State())
}

// The same for every operation on a lease that holds its lock while it
// waits for the writer: whichever comes first, the edit never stalls, and
// neither does the operation (it ends without busy).
func TestAnEditCompletesALeasePromptlyWhileAnOperationOnItWaitsForTheWriter(t *testing.T) {
	ops := map[string]func(l *Lease) error{
		"renew":      func(l *Lease) error { return l.Renew(2 * time.Minute) },
		"release":    func(l *Lease) error { return l.Release() },
		"fail":       func(l *Lease) error { return l.Fail("no") },
		"fail_retry": func(l *Lease) error { return l.FailRetry("again", 0) },
		"complete":   func(l *Lease) error { return l.Complete(Facts{}) },
		"complete and claim next": func(l *Lease) error {
			_, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
			return err
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			f := lockOrderFixture(t)
			id := f.request(2)[0]
			l := f.claim("w", time.Minute)
			opErr := make(chan error, 1)
			start := time.Now()
			err := completeInEdit(t, f, l, func() { go func() { opErr <- op(l) }() })
			var got error
			select {
			case got = <-opErr:
			case <-time.After(promptly - time.Since(start)):
				t.Fatalf("the %s did not end within %s", name, promptly)
			}
			require.False(t, errors.Is(got, ErrBusy), "the %s: %v", name, got)
			if _, sqlite := waitingWriters(f.a); sqlite {
				// The operation queued behind the edit: the edit completed
				// first, and the operation found the claim finished.
				require.NoError(t, err)
				requireKind(t, got, KindWrongState)
				require.Equal(t, StateCompleted, f.job(id).State)
			} else if err == nil {
				require.Equal(t, StateCompleted, f.job(id).State)
			}
		})
	}
}
