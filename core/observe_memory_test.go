package core

import (
	"runtime"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// bulkRequest adds n requested jobs to production in one store transaction,
// without events: a fast way to a realistic size for tests that only read.
func bulkRequest(t testing.TB, a *Authority, production string, n int) {
	t.Helper()
	p, err := a.b.ProductionByName(ctx, production)
	require.NoError(t, err)
	tx, err := a.b.BeginWrite(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	for i := 0; i < n; i++ {
		require.NoError(t, tx.InsertJob(ctx, store.Job{ID: uuid.NewString(), ProductionID: p.ID, Payload: []byte{byte(i)},
			State: store.StateRequested, RequestedAt: t0, UpdatedAt: t0}))
	}
	require.NoError(t, tx.Commit())
}

// liveHeap is the heap still reachable: garbage is collected first, so the
// figure does not depend on when the collector last ran.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestPagingAndStreamingEveryJobKeepMemoryBounded(t *testing.T) {
	// Holding every listed job takes ≈ 240 bytes of heap each (48 MB for
	// 200,000: what Jobs does); a page of 1000 a quarter of a megabyte. The
	// bound is a quarter of holding them all, so keeping every job fails
	// and one page at a time passes forty times over. PostgreSQL inserts
	// one row per round trip, so it lists fewer jobs through the same code,
	// under the same bound per job.
	n := 200_000
	if testingPostgres() {
		n = 50_000
	}
	bound := uint64(n) * 60
	f := newFixture(t)
	bulkRequest(t, f.a, "p", n)
	base := liveHeap()
	var peak uint64
	sample := func() { peak = max(peak, liveHeap()) }

	listed := 0
	q := JobQuery{Limit: MaxPageSize}
	for {
		page, err := f.a.ListJobs(ctx, "p", q)
		require.NoError(t, err)
		listed += len(page.Jobs)
		if listed%(20*MaxPageSize) == 0 {
			sample()
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	require.Equal(t, n, listed)

	streamed := 0
	require.NoError(t, f.a.EachJob(ctx, "p", JobQuery{States: []string{StateRequested, StateClaimed}}, func(Job) error {
		if streamed++; streamed%(n/10) == 0 {
			sample()
		}
		return nil
	}))
	require.Equal(t, n, streamed)
	growth := int64(peak) - int64(base)
	t.Logf("%d jobs: live heap %d KiB before, at most %d KiB while paging and streaming", n, base>>10, peak>>10)
	require.Less(t, growth, int64(bound), "paging and streaming hold one page at a time")
}
