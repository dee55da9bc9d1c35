package pgstore

import (
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

func synchronousCommit(t *testing.T, tx *Tx) string {
	t.Helper()
	var v string
	require.NoError(t, tx.conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v))
	return v
}

// A redoable write (the background pruner's batch without an archive)
// commits without waiting for the WAL flush, and only it: the setting is
// its transaction's (SET LOCAL), and the writes after it commit
// durably.
func TestOnlyARedoableWriteCommitsWithoutWaitingForTheWALFlush(t *testing.T) {
	db, _ := open(t, 0)
	tx, err := db.BeginWrite(store.Redoable(ctx))
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback() })
	require.Equal(t, "off", synchronousCommit(t, tx.(*Tx)), "a redoable write commits without the flush")
	require.NoError(t, tx.Commit())
	for range 3 {
		plain := begin(t, db)
		require.Equal(t, "on", synchronousCommit(t, plain), "every other write commits durably")
		require.NoError(t, plain.Commit())
	}
	tx, err = db.BeginWrite(store.Redoable(ctx))
	require.NoError(t, err)
	require.Equal(t, "off", synchronousCommit(t, tx.(*Tx)))
	require.NoError(t, tx.Rollback())
	plain := begin(t, db)
	require.Equal(t, "on", synchronousCommit(t, plain), "after a redoable write rolled back too")
}
