// A pruning batch's delete on PostgreSQL (schema 14): it deletes a job's
// facts, outputs and attempts itself, in the statement that deletes the
// job, so no foreign key checks each deleted job again.
package pgstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// foreignKeysOntoJobs names every foreign key at location whose referenced
// table is leases_jobs.
func foreignKeysOntoJobs(t *testing.T, location string) []string {
	t.Helper()
	var names []string
	require.NoError(t, connect(t, location).QueryRow(ctx, `SELECT COALESCE(array_agg(conname::text ORDER BY conname), '{}')
		FROM pg_constraint WHERE contype = 'f' AND confrelid = to_regclass('leases_jobs')`).Scan(&names))
	return names
}

// TestAPruningBatchRunsNoForeignKeyCheckPerDeletedJob: the batch deletes
// its jobs' facts, outputs and attempts in the statement that deletes the
// jobs (as the single job's delete does), and nothing else deletes a job,
// so no foreign key onto leases_jobs is left to check each deleted job
// against each referencing table: those checks were 192 a batch of 64 jobs,
// most of the delete's time on the server, and the workers' claims shared
// the CPU with them.
func TestAPruningBatchRunsNoForeignKeyCheckPerDeletedJob(t *testing.T) {
	u := freshURL(t)
	require.Empty(t, foreignKeysOntoJobs(t, u))
	// The job's own foreign key onto its production stays: a production is
	// deleted once, after its jobs.
	var n int
	require.NoError(t, connect(t, u).QueryRow(ctx, `SELECT count(*) FROM pg_constraint
		WHERE contype = 'f' AND conrelid = to_regclass('leases_jobs') AND confrelid = to_regclass('leases_productions')`).Scan(&n))
	require.Equal(t, 1, n)
}

// completedJobs inserts completed jobs j1..jn of production pid, each with
// a fact, an output and an attempt.
func completedJobs(t *testing.T, c *pgx.Conn, n int) {
	t.Helper()
	for _, st := range []string{
		`INSERT INTO leases_jobs (id, production_id, payload, state, requested_unix_us, updated_unix_us)
			SELECT 'j' || g, 'pid', '', 'completed', g, g FROM generate_series(1, $1) g`,
		`INSERT INTO leases_facts (job_id, kind, key, value_json) SELECT 'j' || g, 'metadata', 'k', '1' FROM generate_series(1, $1) g`,
		`INSERT INTO leases_outputs (job_id, path, size, sha256, nonce)
			SELECT 'j' || g, 'out', 1, 'h', 'n' FROM generate_series(1, $1) g`,
		`INSERT INTO leases_attempts (job_id, number, worker, claimed_unix_us, ended_unix_us, ending)
			SELECT 'j' || g, 1, 'w', g, g, 'completed' FROM generate_series(1, $1) g`,
	} {
		_, err := c.Exec(ctx, st, n)
		require.NoError(t, err, st)
	}
}

// TestAPrunedJobLeavesNoFactOutputOrAttemptBehind: with no foreign key to
// refuse it, the deletes themselves must take every row that names a
// pruned job, in the batch's statement and in the single job's.
func TestAPrunedJobLeavesNoFactOutputOrAttemptBehind(t *testing.T) {
	u := freshURL(t)
	c := connect(t, u)
	_, err := c.Exec(ctx, `INSERT INTO leases_productions (id, name, created_unix_us) VALUES ('pid', 'p', 1)`)
	require.NoError(t, err)
	completedJobs(t, c, 4)
	db, err := Open(u, Options{})
	require.NoError(t, err)
	defer db.Close()
	left := func() (n int64) {
		require.NoError(t, c.QueryRow(ctx, `SELECT (SELECT count(*) FROM leases_facts WHERE job_id IN ('j1', 'j2', 'j3'))
			+ (SELECT count(*) FROM leases_outputs WHERE job_id IN ('j1', 'j2', 'j3'))
			+ (SELECT count(*) FROM leases_attempts WHERE job_id IN ('j1', 'j2', 'j3'))`).Scan(&n))
		return n
	}
	require.EqualValues(t, 9, left())
	tx, err := db.BeginWrite(ctx)
	require.NoError(t, err)
	jobs, _, err := tx.DeleteJobs(ctx, []string{"j1", "j2"})
	require.NoError(t, err)
	require.EqualValues(t, 2, jobs)
	require.NoError(t, tx.DeleteJob(ctx, "j3"))
	require.NoError(t, tx.Commit())
	require.Zero(t, left(), "a pruned job's facts, outputs and attempts go with it")
	// And the background pruner's delete, of the jobs still qualifying.
	completedJobs(t, c, 3)
	require.EqualValues(t, 9, left())
	tx, err = db.BeginWrite(ctx)
	require.NoError(t, err)
	jobs, _, err = tx.DeleteFinishedJobs(ctx, []string{"j1", "j2", "j3"}, "completed", 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, jobs)
	require.NoError(t, tx.Commit())
	require.Zero(t, left(), "a pruned job's facts, outputs and attempts go with it")
	var kept int64
	require.NoError(t, c.QueryRow(ctx, `SELECT (SELECT count(*) FROM leases_facts) + (SELECT count(*) FROM leases_outputs)
		+ (SELECT count(*) FROM leases_attempts) + (SELECT count(*) FROM leases_jobs)`).Scan(&kept))
	require.EqualValues(t, 4, kept, "j4 and its rows stay")
}

// TestASchema12DatabaseIsMigratedTo14WithoutTheForeignKeysOntoJobsAndKeepsEveryRow:
// the migration drops the three foreign keys onto leases_jobs and nothing
// else; every job, fact and attempt of before is still there.
func TestASchema12DatabaseIsMigratedTo14WithoutTheForeignKeysOntoJobsAndKeepsEveryRow(t *testing.T) {
	var stmts []string
	for _, part := range [][]string{migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV7,
		migrateV7toV8, migrateV8toV12} {
		stmts = append(stmts, part...)
	}
	old := oldSchema(t, append(stmts,
		`INSERT INTO leases_facts (job_id, kind, key, value_json) VALUES ('j3', 'metadata', 'k', '1')`,
		`INSERT INTO leases_outputs (job_id, path, size, sha256, nonce) VALUES ('j3', 'out', 1, 'h', 'n')`,
		`INSERT INTO leases_attempts (job_id, number, worker, claimed_unix_us, ended_unix_us, ending) VALUES
			('j3', 1, 'w', 13, 14, 'failed')`)...)
	require.Equal(t, []string{"leases_attempts_job_id_fkey", "leases_facts_job_id_fkey", "leases_outputs_job_id_fkey"},
		foreignKeysOntoJobs(t, old))
	rows := func() (n [4]int64) {
		require.NoError(t, connect(t, old).QueryRow(ctx, `SELECT (SELECT count(*) FROM leases_jobs),
			(SELECT count(*) FROM leases_facts), (SELECT count(*) FROM leases_outputs), (SELECT count(*) FROM leases_attempts)`).
			Scan(&n[0], &n[1], &n[2], &n[3]))
		return n
	}
	before := rows()
	require.Equal(t, [4]int64{3, 1, 1}, [4]int64{before[0], before[1], before[2]})
	require.NotZero(t, before[3])
	indexes := map[string][]string{}
	for _, table := range []string{"leases_jobs", "leases_facts", "leases_outputs", "leases_attempts"} {
		indexes[table] = indexesOf(t, old, table)
	}
	db := openMigrated(t, old, 12)
	require.EqualValues(t, 14, SchemaVersion)
	require.Empty(t, foreignKeysOntoJobs(t, old))
	for table, want := range indexes {
		require.Equal(t, want, indexesOf(t, old, table), "the indexes of %s stay", table)
	}
	require.Equal(t, before, rows(), "every job, fact, output and attempt stays")
	require.NoError(t, storetest.CheckV4Fixture(ctx, db))
	js, err := db.ListJobs(ctx, store.JobFilter{ProductionID: "pid", Limit: 10})
	require.NoError(t, err)
	require.Len(t, js, 3)
}

// TestTheStoresVacuumOfPrunedTablesYieldsAsAutovacuumDoes: the vacuum a
// prune runs after it deleted enough rows sleeps as autovacuum's does
// (vacuum_cost_delay 2 ms for every vacuum_cost_limit of cost, a page it
// dirties costing vacuum_cost_page_dirty), instead of a plain VACUUM's run
// without a pause: it reads every index whole, and on a 2-core machine the
// workers' claims that overlapped one waited for the CPU it took at once.
// So the vacuum of a table whose every page it dirties sleeps at least
// 2 ms per 200 / 20 = 10 pages; an unpaused one takes a fraction of that.
func TestTheStoresVacuumOfPrunedTablesYieldsAsAutovacuumDoes(t *testing.T) {
	u := freshURL(t)
	pgtest.Exec(t, u, `INSERT INTO leases_events (at_unix_us, production_id, job_id, kind)
		SELECT g, 'pid', 'j' || g, 'requested' FROM generate_series(1, 100000) g`)
	pgtest.Exec(t, u, `DELETE FROM leases_events`)
	// Written out, so that the vacuum dirties each page it changes (the
	// cost of a page is vacuum_cost_page_dirty only when it was clean).
	pgtest.Exec(t, u, `CHECKPOINT`)
	var pages, limit, dirty int64
	c := connect(t, u)
	require.NoError(t, c.QueryRow(ctx, `SELECT pg_relation_size('leases_events') / current_setting('block_size')::int,
		current_setting('vacuum_cost_limit')::int, current_setting('vacuum_cost_page_dirty')::int`).Scan(&pages, &limit, &dirty))
	require.Greater(t, pages, int64(500))
	db, err := Open(u, Options{})
	require.NoError(t, err)
	defer db.Close()
	start := time.Now()
	require.NoError(t, db.vacuum(ctx, []string{"leases_events"}))
	took := time.Since(start)
	delay := 2.0 // ms, autovacuum's autovacuum_vacuum_cost_delay
	least := time.Duration(float64(pages*dirty) / float64(limit) * delay * float64(time.Millisecond))
	require.GreaterOrEqual(t, took, least, "%d pages dirtied: at least %d pauses of %v ms", pages, pages*dirty/limit, delay)
	t.Logf("vacuum of %d pages took %v (at least %v)", pages, took, least)
}

// TestAPostgreSQLDatabaseOfASchemaOnlySQLiteHasIsRefused: the two stores
// number their schemas apart where a change is one store's alone, so a
// PostgreSQL database saying one of SQLite's own numbers (6, 9, 10, 11,
// 13) was not written by this library: it is refused, never migrated as
// if it were a neighbouring PostgreSQL schema.
func TestAPostgreSQLDatabaseOfASchemaOnlySQLiteHasIsRefused(t *testing.T) {
	for _, v := range []int{6, 9, 10, 11, 13} {
		u := freshURL(t)
		_, err := connect(t, u).Exec(ctx, fmt.Sprintf(`UPDATE leases_meta SET v = %d WHERE k = 'schema_version'`, v))
		require.NoError(t, err)
		_, err = Open(u, Options{})
		require.ErrorIs(t, err, store.ErrNotLeases, "version %d", v)
	}
}

// firstCompleted is the ids of the production's first 64 completed jobs.
func firstCompleted(t *testing.T, c *pgx.Conn, productionID string) []string {
	t.Helper()
	rows, err := c.Query(ctx, `SELECT id FROM leases_jobs WHERE production_id = $1 AND state = 'completed' ORDER BY seq LIMIT 64`, productionID)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, ids, 64)
	return ids
}

// TestTheBackgroundPrunersDeleteReadsEachTablesIndexByJob: the statement
// that deletes a batch chosen outside the write reads the jobs it may
// delete by their key, and every other table by its index by job, never a
// whole table (a join with the locked rows lets the planner hash or loop
// over them: tens of ms a batch instead of a few).
func TestTheBackgroundPrunersDeleteReadsEachTablesIndexByJob(t *testing.T) {
	u := freshURL(t)
	pid := fillRealistic(t, u, 3, 20000)
	c := connect(t, u)
	ids := firstCompleted(t, c, pid)
	p := plan(t, c, "delete finished jobs", deleteFinishedJobsSQL, []any{"{" + strings.Join(ids, ",") + "}", "completed", int64(1) << 62})
	require.NotRegexp(t, "Seq Scan|Hash|Nested Loop", p, p)
	for _, table := range []string{"leases_jobs", "leases_events", "leases_facts", "leases_outputs", "leases_attempts"} {
		require.Regexp(t, "Delete on "+table+"\\b", p, p)
	}
	require.GreaterOrEqual(t, strings.Count(p, "Index"), 6, p)
}

// TestAPruningBatchsDeleteReadsNoTableWholeWhenTheTablesAreSmall: in a
// steady state the tables hold about a retention window's rows, and the
// planner would read them whole, comparing every row with every id of the
// batch; the batch's transaction reads each table by its index by job.
func TestAPruningBatchsDeleteReadsNoTableWholeWhenTheTablesAreSmall(t *testing.T) {
	u := freshURL(t)
	ids := firstCompleted(t, connect(t, u), fillRealistic(t, u, 3, 300))
	db, err := Open(u, Options{})
	require.NoError(t, err)
	defer db.Close()
	for range 8 { // past the custom plans of a prepared statement
		tx, err := db.BeginWrite(ctx)
		require.NoError(t, err)
		jobs, events, err := tx.DeleteFinishedJobs(ctx, ids, "completed", 1<<62)
		require.NoError(t, err)
		require.EqualValues(t, 64, jobs)
		require.NotZero(t, events)
		var whole map[string]int64
		require.NoError(t, tx.(*Tx).conn.c.QueryRow(ctx, `SELECT jsonb_object_agg(relname, seq_scan)
			FROM pg_stat_xact_user_tables WHERE relname IN ('leases_jobs', 'leases_events', 'leases_facts',
			'leases_outputs', 'leases_attempts')`).Scan(&whole))
		require.NoError(t, tx.Rollback())
		require.Len(t, whole, 5)
		for table, n := range whole {
			require.Zero(t, n, "%s read whole", table)
		}
	}
}
