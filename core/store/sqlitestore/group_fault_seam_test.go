//go:build leasestest

// The commit-fault seam (core.InjectCommitFaultsForTest, test builds only)
// over a handle whose writers share group transactions.
package sqlitestore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/stretchr/testify/require"
)

// The first member of a group writes a production; a request queued behind
// it releases its writes into the group; the request behind that meets an
// injected group loss. Nothing of any of the three is written: the first
// member is told so (lost with another's failure), the member that met the
// fault is told it was refused, and the request that had released runs
// again in a transaction of its own, so its job exists exactly once.
func TestAnInjectedGroupLossWritesNothingOfAnyMemberAndTheReleasedOnesRunAgain(t *testing.T) {
	a, s := groupAuthority(t)
	ctx := context.Background()
	_, err := a.CreateProduction("p")
	require.NoError(t, err)
	var commits atomic.Int32
	var shared []bool
	require.NoError(t, core.InjectCommitFaultsForTest(a, func(sh bool) core.CommitFault {
		shared = append(shared, sh)
		if commits.Add(1) == 2 {
			return core.CommitGroupLost
		}
		return core.CommitNormally
	}))

	lostBefore := core.GroupMembersLostForTest()
	first, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, first.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "first", CreatedAt: 1}))
	released := async(func() error {
		_, err := a.RequestJob("p", "released", nil)
		return err
	})
	sqlitestore.UntilQueuedForTest(t, s, 1)
	losing := async(func() error {
		_, err := a.RequestJob("p", "losing", nil)
		return err
	})
	sqlitestore.UntilQueuedForTest(t, s, 2)
	firstDone := async(first.Commit)

	err = <-firstDone
	require.ErrorIs(t, err, store.ErrNotCommitted, "the first member's write was lost with the group")
	require.ErrorIs(t, err, store.ErrLostWithOthers)
	err = <-losing
	require.ErrorIs(t, err, core.ErrInjectedFault)
	require.Equal(t, core.KindStorage, core.KindOf(err), "%v", err)
	require.NoError(t, <-released, "the member that had released runs again")
	require.EqualValues(t, 2, core.GroupMembersLostForTest()-lostBefore, "the fault lost the two members before it")
	require.Equal(t, []bool{true, true, false}, shared,
		"the released member committed in the group, then alone; the member that lost the group was in it")

	ps, err := a.Productions()
	require.NoError(t, err)
	for _, p := range ps {
		require.NotEqual(t, "first", p.Name, "the first member's production was written")
	}
	js, err := a.Jobs("p")
	require.NoError(t, err)
	keys := map[string]int{}
	for _, j := range js {
		keys[j.Key]++
	}
	require.Equal(t, map[string]int{"released": 1}, keys, "only the request that ran again wrote, once")
}
