package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// schemaOf is every table and index of the file, as SQLite stores their
// definitions, sorted by name.
func schemaOf(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_schema ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// oldFile writes a file as an older library left it: each part's
// statements in order (its schema's, then rows).
func oldFile(t *testing.T, path string, parts ...[]string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for _, part := range parts {
		for _, st := range part {
			_, err := db.Exec(st)
			require.NoError(t, err, st)
		}
	}
	require.NoError(t, db.Close())
}

// openMigrated opens an older file, which migrates it, and checks it is at
// the current schema and intact.
func openMigrated(t *testing.T, path string) *DB {
	t.Helper()
	s, err := Open(path, Options{}, func() int64 { return 99 })
	require.NoError(t, err)
	v, err := s.Pragma("user_version")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(SchemaVersion), v)
	ok, err := s.Pragma("integrity_check")
	require.NoError(t, err)
	require.Equal(t, "ok", ok)
	return s
}

// freshSchema is the schema of a file created now, beside the migrated one:
// a migrated file must have exactly this one.
func freshSchema(t *testing.T, dir string) string {
	t.Helper()
	fresh := filepath.Join(dir, "fresh.db")
	s, err := Open(fresh, Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return schemaOf(t, fresh)
}

// Schema 2 migrates through 3 (the listing indexes) to 4 (retries): the
// rows are the schema-3 fixture's, so storetest.CheckV4Fixture applies.
func TestASchema2FileIsMigratedToTheCurrentSchemaWithTheListingIndexesAndKeepsEveryRow(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v2.db")
	oldFile(t, old, schemaV2, migrationFixtureRows, []string{
		`INSERT INTO events (at_unix_us, production_id, job_id, kind) VALUES (10, 'pid', 'j1', 'requested'),
			(11, 'pid', 'j2', 'requested'), (13, 'pid', 'j3', 'requested'), (14, 'pid', 'j3', 'failed')`})
	require.NotContains(t, schemaOf(t, old), "events_by_kind")

	s := openMigrated(t, old)
	ctx := context.Background()
	js, err := s.ListJobs(ctx, store.JobFilter{ProductionID: "pid", Limit: 10})
	require.NoError(t, err)
	require.Len(t, js, 3)
	require.Equal(t, "k", js[0].Key)
	require.EqualValues(t, 2, js[0].PayloadSize)
	es, err := s.ListEvents(ctx, store.EventFilter{ProductionID: "pid", Kind: "failed", Before: 1 << 62, Limit: 10})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "j3", es[0].JobID)
	require.NoError(t, storetest.CheckV4Fixture(ctx, s))
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	fresh := freshSchema(t, dir)
	require.Equal(t, fresh, schemaOf(t, old))
	for _, idx := range []string{"events_by_job", "events_by_kind", "events_by_kind_late"} {
		require.Contains(t, fresh, "index "+idx+":")
	}
}

func TestEveryConnectionSetsTheWALSizeLimitAndCheckpointThreshold(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "wal.db"), Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	defer s.Close()
	for pragma, want := range map[string]string{"journal_size_limit": "16777216", "wal_autocheckpoint": "1000"} {
		v, err := s.Pragma(pragma)
		require.NoError(t, err)
		require.Equal(t, want, v, pragma)
	}
}
