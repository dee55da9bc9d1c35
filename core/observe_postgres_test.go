package core

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Paging events on PostgreSQL keeps the follower-safe horizon
// (docs/postgres.md). Like postgres_test.go, these need LEASES_TEST_PG_URL
// and run in both passes.

func TestEventPagesNeverSkipAnEventThatCommitsLate(t *testing.T) {
	a, _ := pgAuthority(t)
	first, err := a.ListEvents(ctx, EventQuery{Production: "p"})
	require.NoError(t, err)
	after := first.Next
	// A host's edit writes an event first but commits last.
	slow, err := a.Begin()
	require.NoError(t, err)
	defer slow.Abort()
	slowJob, err := slow.RequestJob("p", "slow", nil)
	require.NoError(t, err)
	// The store sends a transaction's event with its next round trip: the
	// next request's look for its key sends this one's (and draws its seq).
	slowNext, err := slow.RequestJob("p", "slow-next", nil)
	require.NoError(t, err)
	var fast []string
	for i := 0; i < 3; i++ {
		id, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
		fast = append(fast, id)
	}
	// No page, of any filter, lists past the running writer: a follower
	// keeping Next would otherwise step over its event for good.
	for _, q := range []EventQuery{
		{Production: "p", After: after, Limit: 1},
		{Production: "p", Kinds: []string{"requested", "claimed"}, After: after, Limit: 1},
		{After: after, Limit: 1},
		{JobID: fast[0], After: after},
	} {
		page, err := a.ListEvents(ctx, q)
		require.NoError(t, err)
		require.Empty(t, page.Events, "%+v", q)
		require.False(t, page.More)
		require.Equal(t, after, page.Next, "the follower keeps its place")
	}
	next, err := a.EachEvent(ctx, EventQuery{Production: "p", After: after}, func(Event) error {
		t.Fatal("nothing can be listed yet")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, after, next)
	require.NoError(t, slow.Commit())
	// Now a page at a time, with a kind filter: the slow event first.
	var got []string
	q := EventQuery{Production: "p", Kinds: []string{"requested", "claimed"}, After: after, Limit: 1}
	for {
		page, err := a.ListEvents(ctx, q)
		require.NoError(t, err)
		for _, e := range page.Events {
			got = append(got, e.JobID)
		}
		if !page.More {
			break
		}
		q.After = page.Next
	}
	require.Equal(t, append(append([]string{slowJob}, fast...), slowNext), got)
}
