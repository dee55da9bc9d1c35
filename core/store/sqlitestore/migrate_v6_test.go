// The migration from schema 5 (events and attempts numbered without
// AUTOINCREMENT, so no commit rewrites sqlite_sequence).
package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// sequenceRows counts sqlite_sequence's rows: every insert into an
// AUTOINCREMENT table writes one.
func sequenceRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_sequence`).Scan(&n))
	return n
}

// writeEventAndAttempt writes one event and one attempt of job j1 in one
// transaction and returns the event's number.
func writeEventAndAttempt(t *testing.T, s *DB) int64 {
	t.Helper()
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertEvent(ctx, store.Event{At: 100, ProductionID: "pid", JobID: "j1", Kind: "released", Worker: "a"}))
		require.NoError(t, tx.InsertAttempt(ctx, store.Attempt{JobID: "j1", Number: 1, Worker: "a", ClaimedAt: 90,
			EndedAt: 100, Ending: store.EndReleased}, 20))
	})
	var seq int64
	require.NoError(t, s.db.QueryRow(`SELECT max(seq) FROM events`).Scan(&seq))
	return seq
}

func TestASchema5FileIsMigratedTo6AndNoCommitRewritesSqliteSequence(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v5.db")
	// The schema-5 fixture: exactly what version 5 wrote, with an attempt.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, []string{workerEventRows,
		`INSERT INTO attempts (job_id, number, worker, claimed_unix_us, ended_unix_us, ending)
			VALUES ('j2', 1, 'w', 1, 2, 'released')`})
	require.Contains(t, schemaOf(t, old), "AUTOINCREMENT")

	// A connection that read schema 5 before the migration (another
	// process's, say) sees the new definitions once the migration commits.
	other, err := sql.Open("sqlite", "file:"+old)
	require.NoError(t, err)
	defer other.Close()
	other.SetMaxOpenConns(1)
	require.Equal(t, 2, sequenceRows(t, other))

	s := openMigrated(t, old)
	require.NoError(t, storetest.CheckV4Fixture(context.Background(), s))
	require.Equal(t, 0, sequenceRows(t, s.db))
	ws, err := s.Workers(context.Background(), "pid", 0, 1000, 10)
	require.NoError(t, err)
	require.Equal(t, []store.WorkerSeen{{Worker: "a", LastSeen: 20}, {Worker: "b", LastSeen: 15}}, ws)

	// Numbering goes on after the old events, as AUTOINCREMENT's did.
	require.EqualValues(t, 6, writeEventAndAttempt(t, s))
	require.Equal(t, 0, sequenceRows(t, s.db))
	_, err = other.Exec(`INSERT INTO events (at_unix_us, production_id, kind) VALUES (101, 'pid', 'requested')`)
	require.NoError(t, err)
	require.Equal(t, 0, sequenceRows(t, other), "the other connection reloaded the schema")
	var seqs []int64
	rows, err := s.db.Query(`SELECT seq FROM events ORDER BY seq`)
	require.NoError(t, err)
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		seqs = append(seqs, v)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7}, seqs)
	hist, err := s.Attempts(context.Background(), "j1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	fresh := freshSchema(t, dir)
	require.Equal(t, fresh, schemaOf(t, old))
	require.NotContains(t, fresh, "AUTOINCREMENT")
}

func TestAnEventOrAttemptCommitOfANewFileWritesNoSqliteSequence(t *testing.T) {
	s := newStore(t)
	write(t, s, func(tx store.Tx) { require.NoError(t, tx.InsertJob(context.Background(), requested("j1", true, 1))) })
	require.EqualValues(t, 1, writeEventAndAttempt(t, s))
	require.EqualValues(t, 2, writeEventAndAttempt(t, s))
	require.Equal(t, 0, sequenceRows(t, s.db))
}
