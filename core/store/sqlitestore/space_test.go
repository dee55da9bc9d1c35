// The rewrite of a file of before incremental auto-vacuum into it.
package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// oldSchemaAuthority writes a schema-6 file at path as version 6 left it
// (auto-vacuum none, SQLite's default then), opens it, which migrates it,
// and adds a production "big" with n completed jobs of 4 KiB finished long
// ago, kept for good (a production of before) until its policy is set. It
// returns an authority over the handle, whose background pruner is off.
func oldSchemaAuthority(t *testing.T, path string, n int) (*core.Authority, *DB) {
	t.Helper()
	oldFile(t, path, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV6,
		[]string{workerEventRows})
	s := openMigrated(t, path)
	mode, err := s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "0", mode, "the file of before, after its migration at open: none")
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "bigid", Name: "big", CreatedAt: 1}))
	})
	for b := 0; b < n; b += 100 {
		write(t, s, func(tx store.Tx) {
			for i := b; i < min(b+100, n); i++ {
				require.NoError(t, tx.InsertJob(ctx, store.Job{ID: fmt.Sprint("big", i), ProductionID: "bigid",
					Payload: bytes.Repeat([]byte{byte(i)}, 4096), State: store.StateCompleted, RequestedAt: 1, UpdatedAt: 1}))
			}
		})
	}
	a, err := core.OpenStore(path, "SQLite", func() (store.Backend, error) { return s, nil })
	require.NoError(t, err)
	a.SetPruneInterval(0)
	t.Cleanup(func() { a.Close() })
	return a, s
}

func completedJobs(t *testing.T, a *core.Authority) int64 {
	t.Helper()
	c, err := a.Counts(context.Background(), "big")
	require.NoError(t, err)
	return c.Completed
}

func TestOnlyAPruneAskedForRewritesAFileOfBeforeIntoIncrementalAutoVacuumAndItsSizeComesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	a, s := oldSchemaAuthority(t, path, 2000)
	full := fileSize(t, s, path)

	// The background pruner deletes by the policy, and rewrites nothing:
	// the file keeps its size (its free pages wait for new rows).
	require.NoError(t, a.SetRetentionPolicy("big", core.RetentionPolicy{Completed: time.Hour}))
	a.SetPruneInterval(20 * time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); completedJobs(t, a) > 1; time.Sleep(5 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the background pruner never pruned the jobs")
	}
	a.SetPruneInterval(0)
	mode, err := s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "0", mode, "the background pruner never rewrites the file")
	require.Greater(t, fileSize(t, s, path), full*9/10)

	// A prune asked for (leases prune), though it finds nothing left to
	// delete, rewrites it: incremental, and the freed pages are gone.
	r, err := a.Prune(context.Background(), core.PruneOptions{})
	require.NoError(t, err)
	require.Zero(t, r.Jobs)
	mode, err = s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "2", mode, "a prune asked for rewrote the file into incremental auto-vacuum")
	small := fileSize(t, s, path)
	require.Less(t, small, full/4, "the pages pruning freed went back to the file system")
	ok, err := s.Pragma("integrity_check")
	require.NoError(t, err)
	require.Equal(t, "ok", ok)
	js, err := s.ListJobs(context.Background(), store.JobFilter{ProductionID: "pid", Limit: 10})
	require.NoError(t, err)
	require.Len(t, js, 3, "the file's content is intact")

	// From then on pruning gives pages back by itself, a batch at a time:
	// jobs flowing through a short window leave the file at its size.
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		write(t, s, func(tx store.Tx) {
			for i := 0; i < 300; i++ {
				require.NoError(t, tx.InsertJob(ctx, store.Job{ID: fmt.Sprint("round", round, "-", i), ProductionID: "bigid",
					Payload: make([]byte, 4096), State: store.StateCompleted, RequestedAt: 2, UpdatedAt: 2}))
			}
		})
		grown := fileSize(t, s, path)
		require.Greater(t, grown, small+int64(200*4096), "the new rows took new pages")
		r, err := a.Prune(ctx, core.PruneOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 300, r.Jobs)
		require.Less(t, fileSize(t, s, path), small+grown/8+int64(64*4096), "round %d: the file gave them back", round)
	}
}

func TestARewriteIntoIncrementalAutoVacuumThatFindsTheWriterLockHeldLeavesTheFileUsableAndSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	a, s := oldSchemaAuthority(t, path, 300)
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		for i := 0; i < 250; i++ {
			require.NoError(t, tx.DeleteJob(ctx, fmt.Sprint("big", i)))
		}
	})
	require.NoError(t, a.Close())
	s, err := Open(path, Options{BusyTimeout: 50 * time.Millisecond}, func() int64 { return 1 })
	require.NoError(t, err)
	a, err = core.OpenStore(path, "SQLite", func() (store.Backend, error) { return s, nil })
	require.NoError(t, err)
	defer a.Close()
	a.SetPruneInterval(0)
	// Another process's writer holds the lock for longer than that.
	other, err := sql.Open("sqlite", dsn(path, time.Second, "FULL"))
	require.NoError(t, err)
	defer other.Close()
	holder, err := other.Begin() // BEGIN IMMEDIATE (the DSN's _txlock)
	require.NoError(t, err)
	_, err = a.Prune(ctx, core.PruneOptions{})
	require.NoError(t, holder.Rollback())
	require.Error(t, err)
	require.Equal(t, core.KindBusy, core.KindOf(err), "%v", err)
	require.Contains(t, err.Error(), "the file is unchanged and usable")
	require.Contains(t, err.Error(), "held the writer lock for longer than the busy timeout")
	require.NotContains(t, err.Error(), "free beside the file", "disk space is not what it lacked")

	mode, err := s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "0", mode)
	require.EqualValues(t, 50, completedJobs(t, a))
	_, err = a.Prune(ctx, core.PruneOptions{})
	require.NoError(t, err, "with the lock free again, the rewrite runs")
	mode, err = s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "2", mode)
}
