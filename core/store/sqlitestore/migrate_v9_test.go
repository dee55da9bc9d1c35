// The migration from schema 7 (one index of claims).
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// claimRowsV7 are claims of a schema-7 fixture beside j2 (worker w, expiry
// and ready time 500): j4 of worker x expired at 50 and backs off until 80,
// j5 of worker x is claimed until 2000.
var claimRowsV7 = `INSERT INTO jobs (id, production_id, key, payload, seq, state, requested_unix_us, updated_unix_us,
		worker, claimed_unix_us, expiry_unix_us, attempts, claimable_unix_us, ready_unix_us, due)
	VALUES ('j4', 'pid', NULL, x'', 4, 'claimed', 14, 15, 'x', 15, 50, 1, 14, 80, 0),
		('j5', 'pid', NULL, x'', 5, 'claimed', 15, 16, 'x', 16, 2000, 1, 15, 2000, 0)`

func TestASchema7FileIsMigratedTo9WithOneIndexOfClaimsThatStillCountsThem(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v7.db")
	// The schema-7 fixture: exactly what version 7 wrote.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV6,
		migrateV6toV7, []string{workerEventRows, claimRowsV7})
	require.Contains(t, schemaOf(t, old), "jobs_claimed_expiry")

	s := openMigrated(t, old)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, storetest.CheckV4Fixture(ctx, s))
	require.NotContains(t, schemaOf(t, old), "jobs_claimed_expiry")

	// At 60 j4 has expired though its backoff has not passed (its ready
	// time is no bound of its expiry); j2 and j5 are held.
	c, err := s.CountJobs(ctx, "pid", 60)
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Expired)
	require.Equal(t, int64(3), c.ByState["claimed"])
	ws, err := s.Workers(ctx, "pid", 0, 60, 10)
	require.NoError(t, err)
	holding := map[string]int64{}
	for _, w := range ws {
		holding[w.Worker] = w.Holding
	}
	require.Equal(t, map[string]int64{"a": 0, "b": 0, "w": 1, "x": 1}, holding)
	// The claim path still reads lapsed claims by ready time only.
	lapsed, err := s.LapsedClaims(ctx, "pid", 60, 10)
	require.NoError(t, err)
	require.Empty(t, lapsed, "j4 backs off until 80")
	lapsed, err = s.LapsedClaims(ctx, "pid", 80, 10)
	require.NoError(t, err)
	require.Len(t, lapsed, 1)
	require.Equal(t, "j4", lapsed[0].ID)
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	require.Equal(t, freshSchema(t, dir), schemaOf(t, old))
}
