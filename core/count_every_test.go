package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every production's counts, read together in one read, are each the
// counts that production's own Counts reads at the same moment: by state
// (dead included), its expired claims and its oldest waiting job. A
// production without jobs is not among them.
func TestCountsOfEveryProductionReadTogetherAreEachProductionsOwnCounts(t *testing.T) {
	f := newFixture(t)
	all, err := f.a.CountsByProduction(ctx)
	require.NoError(t, err)
	require.Empty(t, all, "no production has jobs yet")

	// p: every state but dead, a claim that expires and one that does not.
	f.request(2)
	f.clk.advance(time.Second)
	later := f.request(5)
	short := f.claim("w", time.Minute)
	f.claim("w", time.Hour)
	l := f.claim("w", time.Hour)
	require.NoError(t, l.Complete(Facts{}))
	l = f.claim("w", time.Hour)
	require.NoError(t, l.Fail("x"))
	require.NoError(t, f.a.Cancel("p", later[4]))
	// q: a dead job and a waiting one, requested later than p's.
	_, err = f.a.CreateProductionWithPolicy("q", RetryPolicy{MaxAttempts: 1, BackoffCap: time.Hour})
	require.NoError(t, err)
	f.clk.advance(time.Second)
	for i := 0; i < 2; i++ {
		_, err := f.a.RequestJob("q", "", nil)
		require.NoError(t, err)
	}
	l, err = f.a.Claim("q", "w", time.Hour)
	require.NoError(t, err)
	require.NoError(t, l.FailRetry("flaky", 0))
	// r: one job, completed (none waits); e: none.
	_, err = f.a.CreateProduction("r")
	require.NoError(t, err)
	_, err = f.a.RequestJob("r", "", nil)
	require.NoError(t, err)
	l, err = f.a.Claim("r", "w", time.Hour)
	require.NoError(t, err)
	require.NoError(t, l.Complete(Facts{}))
	_, err = f.a.CreateProduction("e")
	require.NoError(t, err)

	f.clk.set(short.ExpiryUnixUS()) // the short claim has just expired
	all, err = f.a.CountsByProduction(ctx)
	require.NoError(t, err)
	page, err := f.a.ListProductions(ctx, ProductionQuery{})
	require.NoError(t, err)
	require.Len(t, page.Productions, 4)
	for _, p := range page.Productions {
		own, err := f.a.Counts(ctx, p.Name)
		require.NoError(t, err)
		got, ok := all[p.ID]
		if p.Name == "e" {
			require.False(t, ok, "a production without jobs is not counted")
			require.Zero(t, own.Total())
			continue
		}
		require.True(t, ok, p.Name)
		require.Equal(t, own, got, p.Name)
	}
	require.Len(t, all, 3)
	byName := map[string]JobCounts{}
	for _, p := range page.Productions {
		byName[p.Name] = all[p.ID]
	}
	at := time.UnixMicro(short.ExpiryUnixUS()).UTC()
	require.Equal(t, JobCounts{Requested: 2, Claimed: 2, Completed: 1, Failed: 1, Cancelled: 1, Expired: 1,
		OldestRequested: time.UnixMicro(t0 + time.Second.Microseconds()).UTC(), At: at}, byName["p"])
	require.Equal(t, JobCounts{Requested: 1, Dead: 1,
		OldestRequested: time.UnixMicro(t0 + 2*time.Second.Microseconds()).UTC(), At: at}, byName["q"])
	require.Equal(t, JobCounts{Completed: 1, At: at}, byName["r"])
}
