// The claim's look (queries.go ClaimScan).
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// A claim with a due job and neither a lapsed claim nor a delayed job whose
// time has come looks with one statement; otherwise it runs the three looks.
// A statement never run is never prepared, so the statement cache tells
// which ran.
func TestTheUsualClaimLooksWithOneStatementAndTheOthersRunOnlyWhenNeeded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "scan.db"), Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	prepared := func(text string) bool {
		s.st.mu.Lock()
		defer s.st.mu.Unlock()
		_, ok := s.st.m[text]
		return ok
	}
	job := func(id string, due bool, ready int64) store.Job {
		return store.Job{ID: id, ProductionID: "pid", Payload: []byte{}, State: store.StateRequested,
			RequestedAt: 1, UpdatedAt: 1, ClaimableAt: 1, ReadyAt: ready, Due: due}
	}
	scan := func(add ...store.Job) store.ClaimScan {
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		for _, j := range add {
			require.NoError(t, tx.InsertJob(ctx, j))
		}
		sc, err := tx.ClaimScan(ctx, "pid", 10, 64, 1000)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		return sc
	}
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	require.NoError(t, tx.Commit())

	// A due job, a delayed one whose time has not come: one statement.
	sc := scan(job("due", true, 1), job("later", false, 100))
	require.True(t, sc.Found)
	require.Equal(t, "due", sc.Next.ID)
	require.True(t, prepared(nextWithLooksSQL))
	for _, text := range []string{lapsedClaimsSQL, promoteDueSQL, nextClaimableSQL} {
		require.False(t, prepared(text), text)
	}

	// A delayed job whose time has come: promoted, and the first due job
	// read again.
	sc = scan(job("now", false, 5))
	require.EqualValues(t, 1, sc.Promoted)
	require.True(t, sc.Found)
	for _, text := range []string{lapsedClaimsSQL, promoteDueSQL, nextClaimableSQL} {
		require.True(t, prepared(text), text)
	}
}
