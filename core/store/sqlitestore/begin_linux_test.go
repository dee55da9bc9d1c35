package sqlitestore

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

func TestAFailedCommitLeavesNoTransactionOpenAndLosesNothing(t *testing.T) {
	mnt := mountSmall(t, 2<<20, "")
	path := filepath.Join(mnt, "a.db")
	s := openWriters(t, path, 2*time.Second)
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		_, err := tx.(*Tx).tx.ExecContext(ctx, `CREATE TABLE fill (x BLOB)`)
		require.NoError(t, err)
	})
	// Each write fits SQLite's page cache, so its pages reach the WAL only
	// in its COMMIT: the disk fills up there.
	acked := 0
	var failed error
	for i := 0; i < 1000 && failed == nil; i++ {
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		_, err = tx.(*Tx).tx.ExecContext(ctx, `INSERT INTO fill VALUES (randomblob(64 * 1024))`)
		require.NoError(t, err, "the write itself fits the page cache")
		if failed = tx.Commit(); failed == nil {
			acked++
		}
	}
	require.ErrorIs(t, failed, store.ErrFull, "the disk filled up in a COMMIT")
	require.Positive(t, acked)

	other := otherProcess(t, path)
	require.True(t, writerLockFree(t, other), "the failed COMMIT left no transaction holding the writer lock")
	out, err := exec.Command("mount", "-o", "remount,size=16m", mnt).CombinedOutput()
	require.NoError(t, err, "%s", out)
	write(t, s, func(tx store.Tx) {
		_, err := tx.(*Tx).tx.ExecContext(ctx, `INSERT INTO fill VALUES (randomblob(64 * 1024))`)
		require.NoError(t, err)
	})
	var n int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT count(*) FROM fill`).Scan(&n))
	require.Equal(t, acked+1, n, "every acknowledged write is kept, the failed one is not, and the handle writes again")
}
