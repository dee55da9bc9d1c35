// The migration from schema 6 (retention policies).
package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestASchema6FileIsMigratedTo7AndItsProductionsKeepEverything(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v6.db")
	// The schema-6 fixture: exactly what version 6 wrote, with events.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV6,
		[]string{workerEventRows})
	require.NotContains(t, schemaOf(t, old), "keep_completed_us")

	s := openMigrated(t, old)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, storetest.CheckV4Fixture(ctx, s))
	p, err := s.ProductionByID(ctx, "pid")
	require.NoError(t, err)
	require.Equal(t, store.Retention{}, p.Retention, "a production of before keeps everything until a policy is set")
	evs, err := s.Events(ctx, "pid", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 5)

	// The policy is stored and read back.
	r := store.Retention{CompletedUS: 1, FailedUS: 2, DeadUS: 3, CancelledUS: 4, EventsUS: 5}
	write(t, s, func(tx store.Tx) { require.NoError(t, tx.UpdateRetention(ctx, "pid", r)) })
	p, err = s.ProductionByID(ctx, "pid")
	require.NoError(t, err)
	require.Equal(t, r, p.Retention)
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	fresh := filepath.Join(dir, "new.db")
	n, err := Open(fresh, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	require.NoError(t, n.Close())
	require.Equal(t, schemaOf(t, fresh), schemaOf(t, old))
}

// fileSize is the size of the file at path once its WAL has been copied
// into it whole and cut to nothing.
func fileSize(t *testing.T, s *DB, path string) int64 {
	t.Helper()
	checkpointAll(t, s)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// checkpointAll copies the whole WAL into the file and cuts the WAL to
// nothing, waiting out the handle's own checkpointer: a TRUNCATE checkpoint
// that finds another checkpoint running reports it as busy instead of
// waiting, and that one goes on growing the file meanwhile (it copies pages
// that lie past the file's end), which a test of free disk space must not
// race with.
func checkpointAll(t *testing.T, s *DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var busy, log, copied int64
		require.NoError(t, s.db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &copied))
		if busy == 0 && log <= 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the WAL is still not copied whole: busy %d, %d frames, %d copied",
			busy, log, copied)
		time.Sleep(10 * time.Millisecond)
	}
}

func TestANewFileGivesThePagesPruningFreedBackToTheFileSystem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "space.db")
	s, err := Open(path, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	})
	for b := 0; b < 20; b++ {
		write(t, s, func(tx store.Tx) {
			for i := b * 100; i < (b+1)*100; i++ {
				require.NoError(t, tx.InsertJob(ctx, store.Job{ID: fmt.Sprint("j", i), ProductionID: "pid",
					Payload: make([]byte, 4096), State: store.StateCompleted, RequestedAt: 1, UpdatedAt: 1}))
			}
		})
	}
	full := fileSize(t, s, path)
	for b := 0; b < 20; b++ {
		write(t, s, func(tx store.Tx) {
			for i := b * 100; i < (b+1)*100; i++ {
				require.NoError(t, tx.DeleteJob(ctx, fmt.Sprint("j", i)))
			}
		})
	}
	require.Greater(t, fileSize(t, s, path), full*9/10, "deleting alone frees pages, and keeps them")
	for {
		var given int64
		write(t, s, func(tx store.Tx) {
			given, err = tx.(store.SpaceReclaimer).ReclaimSpace(ctx, 512)
			require.NoError(t, err)
		})
		if given < 512 {
			break
		}
	}
	require.Less(t, fileSize(t, s, path), full/4, "the freed pages went back")
	mode, err := s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "2", mode, "incremental")
	ok, err := s.Pragma("integrity_check")
	require.NoError(t, err)
	require.Equal(t, "ok", ok)
}
