// The indexes of leases_jobs a claim and a completion write (schema 12):
// each serves a reader no other index serves, and a database of schema 8
// is migrated to them with every reader still exact.
package pgstore

import (
	"sort"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// jobIndexes is the name of every index of leases_jobs at location, sorted.
func jobIndexes(t *testing.T, location string) []string { return indexesOf(t, location, "leases_jobs") }

// indexesOf is the name of every index of table at location, sorted.
func indexesOf(t *testing.T, location, table string) []string {
	t.Helper()
	rows, err := connect(t, location).Query(ctx, `SELECT indexname FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = $1`, table)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	sort.Strings(names)
	return names
}

// TestAJobUpdateWritesNoIndexALaterSchemaMadeRedundant: a claim and a
// completion are never HOT updates (they change the state), so each writes
// an entry into every index of leases_jobs whose predicate its new row
// meets. Each index serves a reader no other serves: the claims' expiries
// and workers are in the index of claims by ready time, requested jobs in
// request order are a range of the index by state, and the keys are unique
// in the index in byte order that the listing by key prefix reads.
func TestAJobUpdateWritesNoIndexALaterSchemaMadeRedundant(t *testing.T) {
	require.Equal(t, []string{
		"leases_jobs_by_key",        // keys: unique, in byte order (a key, a key prefix)
		"leases_jobs_by_order",      // a production's jobs in request order
		"leases_jobs_by_state",      // one state's jobs in request order, counts by state
		"leases_jobs_claimed_ready", // claims: lapsed ones, the next wake, expired ones, holders
		"leases_jobs_delayed",       // delayed jobs by ready time: promotion, the next wake
		"leases_jobs_due",           // the next claimable job
		"leases_jobs_pkey",          // a job by its id
	}, jobIndexes(t, freshURL(t)))
}

// TestAnAttemptIsWrittenIntoOneIndexThatEveryReaderOfTheHistoryReads: every
// reader of the attempt history reads one job's entries in order (the
// history, a page's newest attempt, the trim to the newest entries, the
// deletes of pruning and of a job), so the history's key is (job_id, id):
// a completion writes its attempt into one index, not a key by id and an
// index by job beside it.
func TestAnAttemptIsWrittenIntoOneIndexThatEveryReaderOfTheHistoryReads(t *testing.T) {
	u := freshURL(t)
	require.Equal(t, []string{"leases_attempts_pkey"}, indexesOf(t, u, "leases_attempts"))
	var def string
	require.NoError(t, connect(t, u).QueryRow(ctx, `SELECT indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND indexname = 'leases_attempts_pkey'`).Scan(&def))
	require.Contains(t, def, "(job_id, id)")

	// Each reader is one range of it, on a history of realistic size.
	pid := fillRealistic(t, u, 3, 5000)
	c := connect(t, u)
	var job string
	require.NoError(t, c.QueryRow(ctx, `SELECT job_id FROM leases_attempts a JOIN leases_jobs j ON j.id = a.job_id
		WHERE j.production_id = $1 LIMIT 1`, pid).Scan(&job))
	for name, st := range map[string]struct {
		sql  string
		args []any
	}{
		"history": {attemptsSQL, []any{job}},
		"trim":    {trimAttemptsSQL, []any{job, 20}},
	} {
		p := plan(t, c, name, st.sql, st.args)
		require.NotRegexp(t, "Seq Scan on leases_attempts|Sort", p, "%s:\n%s", name, p)
		require.Regexp(t, "Index (Only )?Scan (Backward )?using leases_attempts_pkey", p, "%s:\n%s", name, p)
	}
}

// TestASchema8DatabaseIsMigratedTo12AndEveryReaderOfItsClaimsAndKeysStaysExact:
// the claims of before (one expired and backing off, one held) are counted
// and listed by their worker from the index of claims, the keys of before
// stay unique and found in byte order, the oldest requested job is found.
func TestASchema8DatabaseIsMigratedTo12AndEveryReaderOfItsClaimsAndKeysStaysExact(t *testing.T) {
	var stmts []string
	for _, part := range [][]string{migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV7, migrateV7toV8} {
		stmts = append(stmts, part...)
	}
	old := oldSchema(t, append(stmts,
		// j2 (the fixture's) is claimed by w until 500; j4 by w until 400,
		// lapsed and backing off until 900; j5 by x until 2000.
		`INSERT INTO leases_jobs (id, production_id, key, payload, state, requested_unix_us, updated_unix_us,
			worker, claimed_unix_us, expiry_unix_us, attempts, ready_unix_us) VALUES
			('j4', 'pid', 'kB', '', 'claimed', 15, 15, 'w', 15, 400, 1, 900),
			('j5', 'pid', 'ka', '', 'claimed', 16, 16, 'x', 16, 2000, 1, 2000),
			('j6', 'pid', 'k_', '', 'requested', 17, 17, '', 0, 0, 0, 17)`,
		// j6's history: numbered out of id order (a redrive starts the
		// numbers over), so only id orders it.
		`INSERT INTO leases_attempts (job_id, number, worker, claimed_unix_us, ended_unix_us, ending) VALUES
			('j6', 2, 'w', 5, 6, 'retry'), ('j6', 1, 'w', 7, 8, 'retry'), ('j6', 1, 'w', 13, 14, 'failed')`)...)
	require.Contains(t, jobIndexes(t, old), "leases_jobs_claimed_expiry")
	v, err := version(ctx, connect(t, old))
	require.NoError(t, err)
	require.EqualValues(t, 8, v)

	db, err := Open(old, Options{})
	require.NoError(t, err)
	defer db.Close()
	v, err = version(ctx, db.pool)
	require.NoError(t, err)
	require.EqualValues(t, SchemaVersion, v)
	require.EqualValues(t, 12, SchemaVersion)
	require.NoError(t, storetest.CheckV4Fixture(ctx, db))

	// At 450: j4's claim has expired (its backoff has not passed), j2's and
	// j5's have not.
	c, err := db.CountJobs(ctx, "pid", 450)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Expired)
	require.EqualValues(t, 10, c.OldestRequested, "j1, requested at 10")
	ws, err := db.Workers(ctx, "pid", 0, 450, 10)
	require.NoError(t, err)
	holding := map[string]int64{}
	for _, w := range ws {
		holding[w.Worker] = w.Holding
	}
	require.Equal(t, map[string]int64{"w": 1, "x": 1}, holding)

	// The keys of before: found, listed in byte order, and still unique.
	j, err := db.JobByKey(ctx, "pid", "ka")
	require.NoError(t, err)
	require.Equal(t, "j5", j.ID)
	rows, err := db.ListJobs(ctx, store.JobFilter{ProductionID: "pid", KeyFrom: "k", KeyBelow: "l", Limit: 10})
	require.NoError(t, err)
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.Key)
	}
	require.Equal(t, []string{"k", "kB", "k_", "ka"}, keys)
	_, err = connect(t, old).Exec(ctx, `INSERT INTO leases_jobs (id, production_id, key, payload, state,
		requested_unix_us, updated_unix_us) VALUES ('j7', 'pid', 'ka', '', 'requested', 18, 18)`)
	require.Error(t, err, "a key is unique in its production")
	require.ErrorIs(t, classify(err), store.ErrConflict, "two requests of one key race as before")

	// The history of before keeps its order, and is trimmed to the newest.
	hist, err := db.Attempts(ctx, "j6")
	require.NoError(t, err)
	require.Len(t, hist, 3)
	require.Equal(t, []int64{5, 7, 13}, []int64{hist[0].ClaimedAt, hist[1].ClaimedAt, hist[2].ClaimedAt})
	tx, err := db.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertAttempt(ctx, store.Attempt{JobID: "j6", Number: 2, Worker: "w", ClaimedAt: 20,
		EndedAt: 21, Ending: "failed"}, 2))
	require.NoError(t, tx.Commit())
	hist, err = db.Attempts(ctx, "j6")
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, []int64{13, 20}, []int64{hist[0].ClaimedAt, hist[1].ClaimedAt})

	// A migrated schema is exactly a new one.
	require.Equal(t, schemaOf(t, freshURL(t)), schemaOf(t, old))
}
