// The attempt history's trim (queries.go InsertAttempt).
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// The trim of a job's history runs only once the history is longer than
// the kept entries: a statement never run is never prepared, so the
// statement cache tells whether the DELETE ran.
func TestACompletionWithinTheKeptHistoryRunsNoTrim(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "trim.db"), Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	write := func(fn func(tx store.Tx)) {
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		fn(tx)
		require.NoError(t, tx.Commit())
	}
	write(func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
		require.NoError(t, tx.InsertJob(ctx, store.Job{ID: "j1", ProductionID: "pid", Payload: []byte{},
			State: store.StateRequested, RequestedAt: 1, UpdatedAt: 1}))
	})
	const keep = 3
	trimmed := func() bool {
		s.st.mu.Lock()
		defer s.st.mu.Unlock()
		_, ok := s.st.m[trimAttemptsSQL]
		return ok
	}
	// Numbers that start over (a redrive) do not fool it: the history's
	// length decides.
	for i, number := range []int64{1, 2, 3, 1, 2} {
		write(func(tx store.Tx) {
			require.NoError(t, tx.InsertAttempt(ctx, store.Attempt{JobID: "j1", Number: number, Worker: "w",
				ClaimedAt: int64(i), EndedAt: int64(i), Ending: store.EndReleased}, keep))
		})
		h, err := s.Attempts(ctx, "j1")
		require.NoError(t, err)
		require.Len(t, h, min(i+1, keep))
		require.Equal(t, i >= keep, trimmed(), "after %d attempts", i+1)
		require.EqualValues(t, i, h[len(h)-1].EndedAt, "the newest stays")
	}
}
