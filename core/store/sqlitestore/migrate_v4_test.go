// The migration from schema 3 (retries, run-at and priorities arrive).
package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

func TestASchema3FileIsMigratedTo4KeepingEveryJobsStateAndOrder(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v3.db")
	db, err := sql.Open("sqlite", "file:"+old)
	require.NoError(t, err)
	// The schema-3 fixture: exactly what version 3 wrote.
	for _, st := range append(append([]string{}, schemaV2...), migrateV2toV3...) {
		_, err := db.Exec(st)
		require.NoError(t, err, st)
	}
	for _, st := range []string{
		`INSERT INTO productions VALUES ('pid', 'p', 1)`,
		`INSERT INTO jobs (id, production_id, key, payload, seq, state, requested_unix_us, updated_unix_us,
				worker, claimed_unix_us, expiry_unix_us, attempts)
			VALUES ('j1', 'pid', 'k', x'0102', 1, 'requested', 10, 10, '', 0, 0, 0),
				('j2', 'pid', NULL, x'', 2, 'claimed', 11, 12, 'w', 12, 500, 3),
				('j3', 'pid', NULL, x'', 3, 'failed', 13, 14, 'w', 13, 20, 1)`,
	} {
		_, err := db.Exec(st)
		require.NoError(t, err, st)
	}
	require.NoError(t, db.Close())

	s, err := Open(old, Options{}, func() int64 { return 99 })
	require.NoError(t, err)
	v, err := s.Pragma("user_version")
	require.NoError(t, err)
	require.Equal(t, "4", v)
	ok, err := s.Pragma("integrity_check")
	require.NoError(t, err)
	require.Equal(t, "ok", ok)
	ctx := context.Background()
	p, err := s.ProductionByID(ctx, "pid")
	require.NoError(t, err)
	require.Equal(t, store.Policy{MaxAttempts: 25, BackoffBaseUS: 1_000_000, BackoffCapUS: 3_600_000_000, JitterPercent: 20}, p.Policy,
		"an existing production gets the default policy")
	want := map[string]store.Job{
		"j1": {State: "requested", Attempts: 0, ClaimableAt: 10, ReadyAt: 10, Due: true},
		"j2": {State: "claimed", Attempts: 3, ClaimableAt: 11, ReadyAt: 500},
		"j3": {State: "failed", Attempts: 1, ClaimableAt: 13, ReadyAt: 13},
	}
	for id, w := range want {
		j, err := s.JobByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, w, store.Job{State: j.State, Attempts: j.Attempts, ClaimableAt: j.ClaimableAt, ReadyAt: j.ReadyAt, Due: j.Due}, id)
	}
	j, err := s.NextClaimable(ctx, "pid", 0)
	require.NoError(t, err)
	require.Equal(t, "j1", j.ID)
	// The state check now admits dead, and still refuses what is not a state.
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	j, err = tx.JobByID(ctx, "j3")
	require.NoError(t, err)
	j.State = store.StateDead
	require.NoError(t, tx.UpdateJob(ctx, j))
	j.State = "zombie"
	require.Error(t, tx.UpdateJob(ctx, j))
	require.NoError(t, tx.InsertAttempt(ctx, store.Attempt{JobID: "j3", Number: 1, Worker: "w", Ending: "retry"}, 20))
	require.NoError(t, tx.Commit())
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	fresh := filepath.Join(dir, "v4.db")
	s, err = Open(fresh, Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, schemaOf(t, fresh), schemaOf(t, old))
	require.Contains(t, schemaOf(t, fresh), `'cancelled','dead')`)
}
