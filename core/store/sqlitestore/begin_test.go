// A write transaction's BEGIN, COMMIT and ROLLBACK, which run on the
// writer connection itself.
package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// otherProcess is a connection of the file's own, outside the handle and
// its process's queue of writers: to SQLite it is another process. Its
// busy timeout is zero: asked for the writer lock, it answers at once.
func otherProcess(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, 0, "FULL"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// writerLockFree tells whether another process could take the file's
// writer lock now; it takes none.
func writerLockFree(t *testing.T, c *sql.Conn) bool {
	t.Helper()
	if _, err := c.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		return false
	}
	_, err := c.ExecContext(context.Background(), "ROLLBACK")
	require.NoError(t, err)
	return true
}

func TestACancelledContextEndsAWriteWaitingForAnotherProcesssLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	const busy = 20 * time.Second
	s := openWriters(t, path, busy)
	// The writer connection is open and its BEGIN prepared already.
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "p1", Name: "first"}))
	})
	other := otherProcess(t, path)
	_, err := other.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = s.BeginWrite(ctx)
	require.ErrorIs(t, err, store.ErrAbandoned)
	require.ErrorIs(t, err, context.Canceled)
	// Seconds to spare for a stalled host, and still a quarter of the busy timeout.
	require.Less(t, time.Since(start), busy/4, "the wait in SQLite's busy handler ended with the context")

	_, err = other.ExecContext(context.Background(), "ROLLBACK")
	require.NoError(t, err)
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "p2", Name: "second"}))
	})
	require.True(t, writerLockFree(t, other), "the handle holds no transaction once its write ended")
	_, err = s.ProductionByName(context.Background(), "second")
	require.NoError(t, err, "the handle writes again after the abandoned wait")
}
