package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// syncLevel is the synchronous level the transaction tx commits at: 1
// NORMAL, 2 FULL.
func syncLevel(t *testing.T, tx store.Tx) int {
	t.Helper()
	var n int
	require.NoError(t, tx.(*Tx).g.conn.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&n))
	return n
}

// A redoable write (the background pruner's batch without an archive)
// commits at synchronous=NORMAL, without the WAL's fsync, and alone: a
// writer queued behind it never joins its transaction (whose COMMIT would
// not be durable) but begins its own at the authority's level (FULL), and
// a redoable writer queued behind a group never joins that group either.
func TestOnlyARedoableWriteCommitsWithoutTheFsyncAndNoOtherWriteSharesItsCommit(t *testing.T) {
	groupsStayOpen(t)
	s, err := Open(filepath.Join(t.TempDir(), "redo.db"), Options{BusyTimeout: time.Minute}, func() int64 { return 0 })
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	insert := func(tx store.Tx, name string) {
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: name, CreatedAt: 1}))
	}

	// A redoable write, with a plain one queued behind it.
	redo, err := s.BeginWrite(store.Redoable(ctx))
	require.NoError(t, err)
	first := redo
	t.Cleanup(func() { first.Rollback() }) // before Close, should an assertion fail
	require.Equal(t, 1, syncLevel(t, redo), "a redoable write commits at NORMAL")
	insert(redo, "pruned")
	next := queuedBegin(t, s, ctx)
	untilQueued(t, s.writers, 1)
	before := walCommits(t, s)
	require.NoError(t, redo.Commit())
	plain := <-next
	require.NotNil(t, plain)
	require.True(t, plain.(*Tx).first, "the writer behind a redoable write begins its own transaction")
	require.Equal(t, 1, walCommits(t, s)-before, "the redoable write committed on its own")
	require.Equal(t, 2, syncLevel(t, plain), "the writer behind a redoable write commits at FULL")

	// A redoable writer queued behind a plain group begins its own.
	insert(plain, "plain")
	nextRedo := queuedBegin(t, s, store.Redoable(ctx))
	untilQueued(t, s.writers, 1)
	require.NoError(t, plain.Commit())
	redo = <-nextRedo
	require.NotNil(t, redo)
	require.True(t, redo.(*Tx).first, "a redoable writer never joins another writer's group")
	require.Equal(t, 1, syncLevel(t, redo))
	require.NoError(t, redo.Rollback())

	// Rolled back or committed, the level is the authority's again.
	tx := mustBegin(t, s, ctx)
	require.Equal(t, 2, syncLevel(t, tx), "after a redoable write rolled back, writes commit at FULL")
	require.NoError(t, tx.Rollback())
	require.Equal(t, map[string]bool{"plain": true, "pruned": true}, productionNames(t, s))
}

// A handle opened at NORMAL runs a redoable write at NORMAL and sets
// nothing else; at EXTRA the level comes back to EXTRA.
func TestARedoableWriteComesBackToTheAuthoritysSynchronousLevel(t *testing.T) {
	for level, want := range map[string]int{"NORMAL": 1, "EXTRA": 3, "FULL": 2} {
		s, err := Open(filepath.Join(t.TempDir(), "level.db"), Options{Synchronous: level, BusyTimeout: time.Minute},
			func() int64 { return 0 })
		require.NoError(t, err)
		ctx := context.Background()
		redo, err := s.BeginWrite(store.Redoable(ctx))
		require.NoError(t, err)
		require.Equal(t, 1, syncLevel(t, redo), level)
		require.NoError(t, redo.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "p", CreatedAt: 1}))
		require.NoError(t, redo.Commit())
		tx := mustBegin(t, s, ctx)
		require.Equal(t, want, syncLevel(t, tx), level)
		require.NoError(t, tx.Rollback())
		require.NoError(t, s.Close())
	}
}

// A redoable write whose context ends while its BEGIN runs begins nothing,
// and leaves the writer connection at the authority's level: the next
// write commits with its flush.
func TestARedoableWriteAbandonedAtItsBeginLeavesTheConnectionAtTheAuthoritysLevel(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "abandoned.db"), Options{BusyTimeout: time.Minute}, func() int64 { return 0 })
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	old := beginReturned
	t.Cleanup(func() { beginReturned = old })
	beginReturned = cancel
	_, err = s.BeginWrite(store.Redoable(ctx))
	require.Error(t, err, "the redoable write's context ended while its BEGIN ran")
	beginReturned = old
	tx := mustBegin(t, s, context.Background())
	t.Cleanup(func() { tx.Rollback() }) // before Close, should the assertion fail
	require.Equal(t, 2, syncLevel(t, tx), "the next write commits at FULL")
}

func mustBegin(t *testing.T, s *DB, ctx context.Context) store.Tx {
	t.Helper()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	return tx
}
