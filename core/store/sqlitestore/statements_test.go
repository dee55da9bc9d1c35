// Which statements a commit runs (queries.go): the claim's usual look and
// the attempt history's trim. A statement never run is never prepared, so
// the store's statement cache tells which ran.
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// newStore opens a new file with production pid in it.
func newStore(t *testing.T) *DB {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "new.db"), Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	})
	return s
}

// write runs fn in one committed write transaction.
func write(t *testing.T, s *DB, fn func(tx store.Tx)) {
	t.Helper()
	tx, err := s.BeginWrite(context.Background())
	require.NoError(t, err)
	defer tx.Rollback()
	fn(tx)
	require.NoError(t, tx.Commit())
}

// prepared tells whether the statement text ever ran on s: in a read on
// the pool, or in a write transaction on the writer connection.
func prepared(s *DB, text string) bool {
	s.st.mu.Lock()
	_, ok := s.st.m[text]
	s.st.mu.Unlock()
	s.writer.mu.Lock()
	_, inTx := s.writer.stmts[text]
	s.writer.mu.Unlock()
	return ok || inTx
}

// requested is a requested job of pid, due or delayed until ready.
func requested(id string, due bool, ready int64) store.Job {
	return store.Job{ID: id, ProductionID: "pid", Payload: []byte{}, State: store.StateRequested,
		RequestedAt: 1, UpdatedAt: 1, ClaimableAt: 1, ReadyAt: ready, Due: due}
}

// The trim of a job's history runs only once the history is longer than
// the kept entries.
func TestACompletionWithinTheKeptHistoryRunsNoTrim(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	write(t, s, func(tx store.Tx) { require.NoError(t, tx.InsertJob(ctx, requested("j1", true, 1))) })
	const keep = 3
	// Numbers that start over (a redrive) do not fool it: the history's
	// length decides.
	for i, number := range []int64{1, 2, 3, 1, 2} {
		write(t, s, func(tx store.Tx) {
			require.NoError(t, tx.InsertAttempt(ctx, store.Attempt{JobID: "j1", Number: number, Worker: "w",
				ClaimedAt: int64(i), EndedAt: int64(i), Ending: store.EndReleased}, keep))
		})
		h, err := s.Attempts(ctx, "j1")
		require.NoError(t, err)
		require.Len(t, h, min(i+1, keep))
		require.Equal(t, i >= keep, prepared(s, trimAttemptsSQL), "after %d attempts", i+1)
		require.EqualValues(t, i, h[len(h)-1].EndedAt, "the newest stays")
	}
}

// A claim with a due job and neither a lapsed claim nor a delayed job whose
// time has come looks with one statement; otherwise it runs the three looks.
func TestTheUsualClaimLooksWithOneStatementAndTheOthersRunOnlyWhenNeeded(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	scan := func(add ...store.Job) (sc store.ClaimScan) {
		write(t, s, func(tx store.Tx) {
			for _, j := range add {
				require.NoError(t, tx.InsertJob(ctx, j))
			}
			var err error
			sc, err = tx.ClaimScan(ctx, "pid", 10, 64, 1000)
			require.NoError(t, err)
		})
		return sc
	}

	// A due job, a delayed one whose time has not come: one statement.
	sc := scan(requested("due", true, 1), requested("later", false, 100))
	require.True(t, sc.Found)
	require.Equal(t, "due", sc.Next.ID)
	require.True(t, prepared(s, nextWithLooksSQL))
	for _, text := range []string{lapsedClaimsSQL, promoteDueSQL, nextClaimableSQL} {
		require.False(t, prepared(s, text), text)
	}

	// A delayed job whose time has come: promoted, and the first due job
	// read again.
	sc = scan(requested("now", false, 5))
	require.EqualValues(t, 1, sc.Promoted)
	require.True(t, sc.Found)
	for _, text := range []string{lapsedClaimsSQL, promoteDueSQL, nextClaimableSQL} {
		require.True(t, prepared(s, text), text)
	}
}

// A write transaction answers a production it read again without a
// statement (an edit's claims read it once), but never as it was before
// the transaction's own change of it.
func TestAProductionReadAgainInAWriteTransactionShowsTheTransactionsOwnChanges(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		p, err := tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		before := s.WriteStatements()
		again, err := tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, p, again)
		require.Equal(t, before, s.WriteStatements(), "read again without a statement")

		pol := store.Policy{MaxAttempts: 7, BackoffBaseUS: 2, BackoffCapUS: 3, JitterPercent: 4}
		require.NoError(t, tx.UpdatePolicy(ctx, "pid", pol))
		p, err = tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, pol, p.Policy)

		ret := store.Retention{CompletedUS: 5, EventsUS: 6}
		require.NoError(t, tx.UpdateRetention(ctx, "pid", ret))
		p, err = tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, ret, p.Retention)

		require.NoError(t, tx.DeleteProduction(ctx, "pid"))
		_, err = tx.ProductionByName(ctx, "p")
		require.ErrorIs(t, err, store.ErrNoRow)

		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "pid2", Name: "p", CreatedAt: 9}))
		p, err = tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, "pid2", p.ID)
	})
}

// The mark a production's read takes with it (a claim's first statement)
// answers the HWM that follows only when no statement came between: then
// it is the mark, under the writer lock.
func TestTheMarkReadWithAProductionIsTheMarkOnlyUntilTheNextStatement(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	write(t, s, func(tx store.Tx) { require.NoError(t, tx.SetHWM(ctx, 100)) })
	write(t, s, func(tx store.Tx) {
		_, err := tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		before := s.WriteStatements()
		hwm, err := tx.HWM(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 100, hwm)
		require.Equal(t, before, s.WriteStatements(), "the mark came with the production")
		require.NoError(t, tx.SetHWM(ctx, 200))
		hwm, err = tx.HWM(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 200, hwm)
	})
	write(t, s, func(tx store.Tx) {
		_, err := tx.ProductionByName(ctx, "p")
		require.NoError(t, err)
		require.NoError(t, tx.SetHWM(ctx, 300)) // a statement between
		hwm, err := tx.HWM(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 300, hwm)
	})
}
