// The lease rules over a handle whose writers share group transactions:
// what a caller is answered never rests on a write that did not commit.
package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/stretchr/testify/require"
)

// groupAuthority opens an authority over a handle whose groups stay open,
// returning the handle too: the test holds a group's first and last
// members on it, and the operations under test queue between them.
func groupAuthority(t *testing.T) (*core.Authority, *sqlitestore.DB) {
	t.Helper()
	sqlitestore.GroupsStayOpenForTest(t)
	path := filepath.Join(t.TempDir(), "group.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{Synchronous: "NORMAL", BusyTimeout: time.Minute},
		func() int64 { return 0 })
	require.NoError(t, err)
	a, err := core.OpenStore(path, "SQLite", func() (store.Backend, error) { return s, nil })
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a, s
}

func async(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// queuedWrite begins a write on s in a goroutine (it queues); the channel
// gets the transaction once it is this writer's turn.
func queuedWrite(t *testing.T, s *sqlitestore.DB, ctx context.Context) <-chan store.Tx {
	got := make(chan store.Tx, 1)
	go func() {
		tx, err := s.BeginWrite(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- tx
	}()
	return got
}

// cancelIn cancels the job in tx as the coordinator's cancel does, without
// committing.
func cancelIn(t *testing.T, tx store.Tx, jobID string) {
	ctx := context.Background()
	j, err := tx.JobByID(ctx, jobID)
	require.NoError(t, err)
	j.State, j.Due = store.StateCancelled, false
	require.NoError(t, tx.UpdateJob(ctx, j))
}

// The first member of a group cancels two jobs: one a lease holds, the one
// job of another production. Behind it, the lease's renewal finds its job
// cancelled and a claim of that production's next job finds nothing; both
// refuse and roll back. The group is then lost: the cancels never happened.
// Neither caller may have been told cancelled or nothing_to_claim: the
// renewal succeeds, the lease's Done stays open and its claim completes; the
// claim takes the job.
func TestNoCallerIsAnsweredFromAGroupMembersWriteThatNeverCommitted(t *testing.T) {
	a, s := groupAuthority(t)
	ctx := context.Background()
	for _, p := range []string{"held", "next"} {
		_, err := a.CreateProduction(p)
		require.NoError(t, err)
	}
	heldJob, err := a.RequestJob("held", "", nil)
	require.NoError(t, err)
	nextJob, err := a.RequestJob("next", "", nil)
	require.NoError(t, err)
	l, err := a.ClaimJob("held", heldJob, "worker", time.Minute)
	require.NoError(t, err)

	first, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	cancelIn(t, first, heldJob)
	cancelIn(t, first, nextJob)
	renewed := async(func() error { return l.Renew(time.Minute) })
	sqlitestore.UntilQueuedForTest(t, s, 1)
	claimed := make(chan *core.Lease, 1)
	claim := async(func() error {
		next, err := a.Claim("next", "other", time.Minute)
		claimed <- next
		return err
	})
	sqlitestore.UntilQueuedForTest(t, s, 2)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	last := queuedWrite(t, s, lctx)
	sqlitestore.UntilQueuedForTest(t, s, 3)
	firstDone := async(first.Commit)
	sqlitestore.LoseGroupForTest(t, <-last, lctx, cancel, false)
	require.ErrorIs(t, <-firstDone, store.ErrNotCommitted, "the cancels were lost with the group")

	require.NoError(t, <-renewed, "the renewal was answered from a cancel that never committed")
	select {
	case <-l.Done():
		t.Fatalf("the lease's Done closed (%v) though its claim is held", l.Err())
	default:
	}
	require.NoError(t, <-claim, "the claim was answered from a cancel that never committed")
	next := <-claimed
	require.Equal(t, nextJob, next.JobID())
	require.NoError(t, l.Complete(core.Facts{}), "the claim is held")
	require.NoError(t, next.Complete(core.Facts{}))
	for p, id := range map[string]string{"held": heldJob, "next": nextJob} {
		j, err := a.Job(p, id)
		require.NoError(t, err)
		require.Equal(t, store.StateCompleted, j.State)
	}
}

// A member's guarded operation observed a clock sample and passed its
// checks; the group it released into is then lost through another member's
// failure (a full file, so the operation is not run again). The sample it
// observed is still stored as the mark, as after any failed guarded commit.
func TestAFailedGroupStillRecordsTheMarkItsMembersObserved(t *testing.T) {
	a, s := groupAuthority(t)
	ctx := context.Background()
	_, err := a.CreateProduction("p")
	require.NoError(t, err)
	id, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	first, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, first.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "first", CreatedAt: 1}))
	before := time.Now().UnixMicro()
	claim := async(func() error {
		_, err := a.ClaimJob("p", id, "worker", time.Minute)
		return err
	})
	sqlitestore.UntilQueuedForTest(t, s, 1)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	last := queuedWrite(t, s, lctx)
	sqlitestore.UntilQueuedForTest(t, s, 2)
	firstDone := async(first.Commit)
	sqlitestore.LoseGroupForTest(t, <-last, lctx, cancel, true)
	require.ErrorIs(t, <-firstDone, store.ErrNotCommitted)
	err = <-claim
	require.Equal(t, core.KindStorage, core.KindOf(err), "%v", err)
	require.ErrorIs(t, err, store.ErrFull)

	mark, err := a.HighWaterMark()
	require.NoError(t, err)
	require.GreaterOrEqual(t, mark.UnixMicro(), before, "the claim's observed sample was not stored as the mark")
	j, err := a.Job("p", id)
	require.NoError(t, err)
	require.Equal(t, store.StateRequested, j.State, "nothing of the lost group was written")
}
