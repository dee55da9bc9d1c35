// The migration from schema 3 (retries, run-at and priorities arrive).
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// migrationFixtureRows are the rows storetest.CheckV4Fixture expects, in
// the columns schemas 2 and 3 have.
var migrationFixtureRows = []string{
	`INSERT INTO productions VALUES ('pid', 'p', 1)`,
	`INSERT INTO jobs (id, production_id, key, payload, seq, state, requested_unix_us, updated_unix_us,
			worker, claimed_unix_us, expiry_unix_us, attempts)
		VALUES ('j1', 'pid', 'k', x'0102', 1, 'requested', 10, 10, '', 0, 0, 0),
			('j2', 'pid', NULL, x'', 2, 'claimed', 11, 12, 'w', 12, 500, 3),
			('j3', 'pid', NULL, x'', 3, 'failed', 13, 14, 'w', 13, 20, 1)`,
}

func TestASchema3FileIsMigratedTo4KeepingEveryJobsStateAndOrder(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v3.db")
	// The schema-3 fixture: exactly what version 3 wrote.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows)

	s := openMigrated(t, old)
	require.NoError(t, storetest.CheckV4Fixture(context.Background(), s))
	// The state check still refuses what is not a state.
	_, err := s.db.Exec(`UPDATE jobs SET state = 'zombie' WHERE id = 'j1'`)
	require.Error(t, err)
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	fresh := freshSchema(t, dir)
	require.Equal(t, fresh, schemaOf(t, old))
	require.Contains(t, fresh, `'cancelled','dead')`)
}
