// The migration from schema 11 (the event log's indexes as a trailing
// projection, schema 13).
package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// manyEventsV11 are 20,000 events of a schema-11 file beside the fixture's.
var manyEventsV11 = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
	INSERT INTO events (at_unix_us, production_id, job_id, kind, worker)
	SELECT 1000 + i, 'pid', 'm' || (i % 50), CASE i % 3 WHEN 0 THEN 'claimed' WHEN 1 THEN 'completed' ELSE 'requested' END,
		'w' || (i % 4) FROM n`

func TestASchema11FileIsMigratedTo13WithEveryEventProjectedAndEveryListingExact(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v11.db")
	// The schema-11 fixture: exactly what version 11 wrote, and many events.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV6,
		migrateV6toV7, migrateV7toV9, migrateV9toV10, migrateV10toV11, []string{workerEventRows, manyEventsV11})
	before := refEventsOf(t, old)
	require.Greater(t, len(before), 20000)

	s := openMigrated(t, old)
	defer s.Close()
	s.proj.held.Store(true)
	ctx := context.Background()
	require.NoError(t, storetest.CheckV4Fixture(ctx, s))
	// Every event of before is projected, without a rewrite: the mark is the
	// newest event, the indexes hold them all.
	all := refEvents(t, s)
	mark, err := s.ProjectionMark(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, mark, before[len(before)-1].Seq)
	var unprojected int
	require.NoError(t, s.db.QueryRow(`SELECT count(*) FROM events WHERE projected = 0`).Scan(&unprojected))
	require.LessOrEqual(t, unprojected, len(all)-len(before), "only events written since the migration are unprojected")
	var indexed int
	require.NoError(t, s.db.QueryRow(`SELECT count(*) FROM events INDEXED BY events_by_production
		WHERE production_id = 'pid' AND projected = 1`).Scan(&indexed))
	require.Equal(t, len(before), indexed)
	page, err := s.ListEvents(ctx, store.EventFilter{ProductionID: "pid", Kind: "claimed", Before: 1 << 62, Limit: 1 << 20})
	require.NoError(t, err)
	require.Equal(t, refPage(all, store.EventFilter{ProductionID: "pid", Kind: "claimed", Before: 1 << 62, Limit: 1 << 20}), page)

	// A new event is recorded unprojected, listed from the tail, then projected.
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertEvent(ctx, store.Event{At: 99_000, ProductionID: "pid", JobID: "m7", Kind: "claimed", Worker: "w9"}))
	})
	all = refEvents(t, s)
	newest := all[len(all)-1]
	require.Greater(t, newest.Seq, mark)
	job, err := s.ListEvents(ctx, store.EventFilter{JobID: "m7", Before: 1 << 62, Limit: 1 << 20})
	require.NoError(t, err)
	require.Equal(t, newest, job[len(job)-1])
	require.NoError(t, s.ProjectTo(ctx, newest.Seq))
	require.NoError(t, s.db.QueryRow(`SELECT count(*) FROM events WHERE projected = 0`).Scan(&unprojected))
	require.Zero(t, unprojected)
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	require.Equal(t, freshSchema(t, dir), schemaOf(t, old))
}

// refEventsOf reads every event of a file of any schema by its primary key.
func refEventsOf(t *testing.T, path string) []store.Event {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT ` + eventColumns + ` FROM events ORDER BY seq`)
	require.NoError(t, err)
	es, err := scanEvents(rows)
	require.NoError(t, err)
	return es
}

// Schemas 8 and 12 are PostgreSQL's alone: a SQLite file that says it has
// one was never written by this library.
func TestASQLiteFileOfASchemaOnlyPostgreSQLHasIsRefused(t *testing.T) {
	for _, v := range []int{8, 12} {
		path := filepath.Join(t.TempDir(), "x.db")
		s, err := Open(path, Options{}, func() int64 { return 1 })
		require.NoError(t, err)
		require.NoError(t, s.Close())
		db, err := sql.Open("sqlite", "file:"+path)
		require.NoError(t, err)
		_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v))
		require.NoError(t, err)
		require.NoError(t, db.Close())
		_, err = Open(path, Options{}, func() int64 { return 1 })
		require.ErrorIs(t, err, store.ErrNotLeases, "version %d", v)
	}
}
