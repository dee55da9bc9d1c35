// The migration from schema 4 (the index of workers seen arrives).
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// workerEventRows are events of a schema-4 fixture: worker a claimed and
// completed, b claimed and its claim lapsed later (claim_expired names b,
// but is no sighting of it), and a request, which no worker makes.
var workerEventRows = `INSERT INTO events (at_unix_us, production_id, job_id, kind, worker) VALUES
	(5, 'pid', 'j1', 'requested', ''), (10, 'pid', 'j1', 'claimed', 'a'), (15, 'pid', 'j2', 'claimed', 'b'),
	(20, 'pid', 'j1', 'completed', 'a'), (30, 'pid', 'j2', 'claim_expired', 'b')`

func TestASchema4FileIsMigratedTo5WithTheIndexOfWorkersSeen(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v4.db")
	// The schema-4 fixture: exactly what version 4 wrote.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, []string{workerEventRows})
	require.NotContains(t, schemaOf(t, old), "events_by_worker")

	s := openMigrated(t, old)
	// The events written before the index exist in it.
	ws, err := s.Workers(context.Background(), "pid", 0, 1000, 10)
	require.NoError(t, err)
	require.Equal(t, []store.WorkerSeen{{Worker: "a", LastSeen: 20}, {Worker: "b", LastSeen: 15}}, ws)
	require.Contains(t, queryPlan(t, s, workersSeenSQL, []any{"pid", 0, 10}), "events_by_worker")
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	require.Equal(t, freshSchema(t, dir), schemaOf(t, old))
}
