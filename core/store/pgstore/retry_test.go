// The claim path of schema 4 on PostgreSQL: its plans at a realistic size
// (delayed and backed-off jobs are never scanned) and the migration from
// schema 3.
package pgstore

import (
	"context"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// TestClaimingNeverScansDelayedJobsOrClaims pins the claim path's plans with
// 10,000 delayed jobs of the highest priority, 10,000 claims whose backoff
// has not passed, 20,000 finished and 1,000 due jobs in the production (and
// as many in two others), vacuumed and analyzed: each statement reads the
// partial index made for it.
func TestClaimingNeverScansDelayedJobsOrClaims(t *testing.T) {
	u := freshURL(t)
	for _, st := range []string{
		`INSERT INTO leases_productions (id, name, created_unix_us) SELECT 'p' || g, 'production ' || g, 1 FROM generate_series(1, 3) g`,
		// seq g: 1..10000 delayed, ..20000 claimed, ..40000 finished, ..41000 due.
		`INSERT INTO leases_jobs (id, production_id, payload, state, requested_unix_us, updated_unix_us,
				priority, claimable_unix_us, ready_unix_us, due, expiry_unix_us)
			SELECT gen_random_uuid()::text, 'p' || p, '\x00',
				CASE WHEN g <= 10000 THEN 'requested' WHEN g <= 20000 THEN 'claimed' WHEN g <= 40000 THEN 'completed' ELSE 'requested' END,
				g, g,
				CASE WHEN g <= 10000 THEN 1000 ELSE 0 END, g,
				CASE WHEN g <= 20000 THEN 9000000000 ELSE g END,
				g > 40000, CASE WHEN g > 10000 AND g <= 20000 THEN 8000000000 ELSE 0 END
			FROM generate_series(1, 3) p, generate_series(1, 41000) g ORDER BY 2, 5`,
	} {
		pgtest.Exec(t, u, st)
	}
	pgtest.VacuumAnalyze(t, u, "leases_jobs")
	c := connect(t, u)
	now := int64(5_000_000_000)
	for name, st := range map[string]struct {
		sql  string
		args []any
		want string
	}{
		"next claimable": {nextClaimableSQL + " FOR UPDATE SKIP LOCKED", []any{"p2"}, "leases_jobs_due"},
		"promote due":    {promoteDueSQL, []any{"p2", now, 1000}, "leases_jobs_delayed"},
		"lapsed claims":  {lapsedClaimsSQL + " FOR UPDATE SKIP LOCKED", []any{"p2", now, 64}, "leases_jobs_claimed_ready"},
		// A waiting claim's look: the next wake reads the first entry of
		// the delayed and the claimed indexes, HasClaimable probes them.
		"next wake":     {nextWakeAtSQL, []any{"p2"}, "leases_jobs_delayed"},
		"next wake (2)": {nextWakeAtSQL, []any{"p2"}, "leases_jobs_claimed_ready"},
		"has claimable": {`SELECT ` + hasClaimableAt("$2"), []any{"p2", now}, "leases_jobs_due"},
	} {
		p := plan(t, c, name, st.sql, st.args)
		require.NotRegexp(t, "Seq Scan on leases_jobs|Sort", p, "%s:\n%s", name, p)
		require.Regexp(t, "Index (Only )?Scan using "+st.want+"\\b", p, "%s:\n%s", name, p)
	}
	// The next claimable job is a due one, found without reading the
	// delayed jobs of higher priority: one index entry.
	var out string
	require.NoError(t, c.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) `+
		`SELECT id FROM leases_jobs WHERE production_id = 'p2' AND state = 'requested' AND due
		ORDER BY priority DESC, claimable_unix_us, seq LIMIT 1`).Scan(&out))
	require.Contains(t, out, "rows=1 ")
}

// migrationFixtureRows are the rows storetest.CheckV4Fixture expects, in
// the columns schemas 2 and 3 have.
var migrationFixtureRows = []string{
	`INSERT INTO leases_productions VALUES ('pid', 'p', 1)`,
	`INSERT INTO leases_jobs (id, production_id, key, payload, state, requested_unix_us, updated_unix_us,
			worker, claimed_unix_us, expiry_unix_us, attempts)
		VALUES ('j1', 'pid', 'k', '\x0102', 'requested', 10, 10, '', 0, 0, 0),
			('j2', 'pid', NULL, '', 'claimed', 11, 12, 'w', 12, 500, 3),
			('j3', 'pid', NULL, '', 'failed', 13, 14, 'w', 13, 20, 1)`,
}

func TestASchema3DatabaseIsMigratedTo4KeepingEveryJobsStateAndOrder(t *testing.T) {
	// The schema-3 fixture: the schema-2 layout, its migration to 3, rows.
	old := oldSchema(t, append(append([]string{}, migrateV2toV3...), migrationFixtureRows...)...)

	db, err := Open(old, Options{})
	require.NoError(t, err)
	defer db.Close()
	v, err := version(ctx, db.pool)
	require.NoError(t, err)
	require.EqualValues(t, SchemaVersion, v, "through 4 to the current schema")
	require.NoError(t, storetest.CheckV4Fixture(ctx, db))

	// A migrated schema is exactly a new one.
	require.Equal(t, schemaOf(t, freshURL(t)), schemaOf(t, old))
}

func TestASchema4DatabaseIsMigratedTo5WithTheIndexOfWorkersSeen(t *testing.T) {
	// The schema-4 fixture: the schema-2 layout, its migrations to 3 and 4,
	// and events: worker a claimed and completed, b claimed and its claim
	// lapsed later (claim_expired names b, but is no sighting of it), and a
	// request, which no worker makes.
	var stmts []string
	for _, part := range [][]string{migrateV2toV3, migrationFixtureRows, migrateV3toV4} {
		stmts = append(stmts, part...)
	}
	old := oldSchema(t, append(stmts, `INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker) VALUES
		(5, 'pid', 'j1', 'requested', ''), (10, 'pid', 'j1', 'claimed', 'a'), (15, 'pid', 'j2', 'claimed', 'b'),
		(20, 'pid', 'j1', 'completed', 'a'), (30, 'pid', 'j2', 'claim_expired', 'b')`)...)
	require.NotContains(t, schemaOf(t, old), "leases_events_by_worker")

	db, err := Open(old, Options{})
	require.NoError(t, err)
	defer db.Close()
	v, err := version(ctx, db.pool)
	require.NoError(t, err)
	require.EqualValues(t, SchemaVersion, v, "through 5 to the current schema")
	// The events written before the index exist in it.
	ws, err := db.Workers(ctx, "pid", 0, 1000, 10)
	require.NoError(t, err)
	require.Equal(t, []store.WorkerSeen{{Worker: "a", LastSeen: 20}, {Worker: "b", LastSeen: 15}}, ws)

	// A migrated schema is exactly a new one.
	require.Equal(t, schemaOf(t, freshURL(t)), schemaOf(t, old))
}

func TestASchema5DatabaseIsMigratedTo7AndItsProductionsKeepEverything(t *testing.T) {
	// The schema-5 fixture: the schema-2 layout, its migrations to 5, events.
	var stmts []string
	for _, part := range [][]string{migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5} {
		stmts = append(stmts, part...)
	}
	old := oldSchema(t, append(stmts, `INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker) VALUES
		(5, 'pid', 'j1', 'requested', ''), (10, 'pid', 'j1', 'claimed', 'a')`)...)
	require.NotContains(t, schemaOf(t, old), "keep_completed_us")

	db, err := Open(old, Options{})
	require.NoError(t, err)
	defer db.Close()
	v, err := version(ctx, db.pool)
	require.NoError(t, err)
	require.EqualValues(t, SchemaVersion, v, "through 7 to the current schema")
	require.NoError(t, storetest.CheckV4Fixture(ctx, db))
	p, err := db.ProductionByID(ctx, "pid")
	require.NoError(t, err)
	require.Equal(t, store.Retention{}, p.Retention, "a production of before keeps everything until a policy is set")
	evs, err := db.Events(ctx, "pid", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)

	// A migrated schema is exactly a new one.
	require.Equal(t, schemaOf(t, freshURL(t)), schemaOf(t, old))
}

func TestASchema7DatabaseIsMigratedTo8WithItsKeysInByteOrderAndKeepsEveryJob(t *testing.T) {
	// The schema-7 fixture: the schema-2 layout, its migrations to 7, and
	// keys whose byte order is not every collation's order.
	var stmts []string
	for _, part := range [][]string{migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV7} {
		stmts = append(stmts, part...)
	}
	old := oldSchema(t, append(stmts, `INSERT INTO leases_jobs (id, production_id, key, payload, state, requested_unix_us,
			updated_unix_us) VALUES ('j4', 'pid', 'kB', '', 'requested', 15, 15), ('j5', 'pid', 'ka', '', 'requested', 16, 16),
			('j6', 'pid', 'k_', '', 'requested', 17, 17), ('j7', 'pid', 'l', '', 'requested', 18, 18)`)...)
	require.NotContains(t, schemaOf(t, old), "leases_jobs_by_key")
	db := openMigrated(t, old, 7)
	require.Contains(t, schemaOf(t, old), `leases_jobs_by_key ON leases_jobs USING btree (production_id, key COLLATE "C")`)
	require.NoError(t, storetest.CheckV4Fixture(ctx, db))
	// Every job of before is in the index, in byte order.
	requireKeysInByteOrder(t, db)

	// A migrated schema is exactly a new one.
	require.Equal(t, schemaOf(t, freshURL(t)), schemaOf(t, old))
}

// openMigrated checks that the database at old has schema version from,
// opens it (migrating it to the current schema, through every version
// between) and checks its version; it is closed when the test ends.
func openMigrated(t *testing.T, old string, from int64) *DB {
	t.Helper()
	ctx := context.Background()
	v, err := version(ctx, connect(t, old))
	require.NoError(t, err)
	require.EqualValues(t, from, v)
	db, err := Open(old, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	v, err = version(ctx, db.pool)
	require.NoError(t, err)
	require.EqualValues(t, SchemaVersion, v, "migrated to the current schema")
	return db
}

// requireKeysInByteOrder checks that the migration fixture's jobs of
// production pid with keys from k below l are listed in byte order.
func requireKeysInByteOrder(t *testing.T, db *DB) {
	t.Helper()
	rows, err := db.ListJobs(context.Background(), store.JobFilter{ProductionID: "pid", KeyFrom: "k", KeyBelow: "l", Limit: 10})
	require.NoError(t, err)
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.Key)
	}
	require.Equal(t, []string{"k", "kB", "k_", "ka"}, keys)
}
