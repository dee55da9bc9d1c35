// The migration from schema 10 (the attempt history ordered by job).
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// attemptRowsV10 are the history of a schema-10 fixture: j2's and j3's
// entries interleaved, numbered across the table as schema 10 did.
var attemptRowsV10 = `INSERT INTO attempts (id, job_id, number, worker, claimed_unix_us, ended_unix_us, ending, reason)
	VALUES (1, 'j2', 1, 'w', 1, 2, 'released', ''), (2, 'j3', 1, 'w', 13, 14, 'failed', 'boom'),
		(3, 'j2', 2, 'v', 3, 4, 'expired', ''), (7, 'j2', 3, 'u', 5, 6, 'retry', 'again')`

func TestASchema10FileIsMigratedTo11AndEachJobsHistoryKeepsItsOrder(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v10.db")
	// The schema-10 fixture: exactly what version 10 wrote.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV6,
		migrateV6toV7, migrateV7toV9, migrateV9toV10, []string{workerEventRows, attemptRowsV10})
	require.Contains(t, schemaOf(t, old), "attempts_by_job")

	s := openMigrated(t, old)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, storetest.CheckV4Fixture(ctx, s))
	require.NotContains(t, schemaOf(t, old), "attempts_by_job")
	workers := func(job string) []string {
		as, err := s.Attempts(ctx, job)
		require.NoError(t, err)
		var out []string
		for _, a := range as {
			out = append(out, a.Worker+" "+a.Ending)
		}
		return out
	}
	require.Equal(t, []string{"w released", "v expired", "u retry"}, workers("j2"))
	// j3's, then the one CheckV4Fixture wrote after the migration.
	j3 := []string{"w failed", "w retry"}
	require.Equal(t, j3, workers("j3"))

	// A new entry comes after the job's newest; the trim keeps the newest.
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertAttempt(ctx, store.Attempt{JobID: "j2", Number: 4, Worker: "t",
			ClaimedAt: 7, EndedAt: 8, Ending: store.EndCompleted}, 3))
	})
	require.Equal(t, []string{"v expired", "u retry", "t completed"}, workers("j2"))
	require.Equal(t, j3, workers("j3"))
	ts, err := s.JobTimes(ctx, "pid", []string{"j2"})
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, "t", ts[0].Last.Worker, "a page's times read the job's newest attempt")
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	require.Equal(t, freshSchema(t, dir), schemaOf(t, old))
}
