package pgstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// schemaOf is every leases_ table's columns and every index definition of
// the schema at location, sorted.
func schemaOf(t *testing.T, location string) string {
	t.Helper()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
			FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL
		SELECT replace(indexdef, current_schema() || '.', '') FROM pg_indexes WHERE schemaname = current_schema()
		ORDER BY 1`)
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(defs, "\n")
}

// oldSchema is a fresh schema in the schema-2 layout, with stmts run after
// it (the rest of a migration, fixture rows): a store written by an older
// library.
func oldSchema(t *testing.T, stmts ...string) string {
	old := pgtest.FreshSchema(t, false)
	c, err := pgx.Connect(ctx, old)
	require.NoError(t, err)
	all := append([]string{
		`CREATE TABLE leases_meta (k text PRIMARY KEY, v bigint NOT NULL)`,
		`INSERT INTO leases_meta (k, v) VALUES ('schema_version', 2)`,
	}, schemaV2Tables...)
	for _, st := range append(all, stmts...) {
		_, err := c.Exec(ctx, st)
		require.NoError(t, err, st)
	}
	require.NoError(t, c.Close(ctx))
	return old
}

// Schema 2 migrates through 3 (the listing indexes) to 4 (retries): the
// rows are the schema-3 fixture's, so storetest.CheckV4Fixture applies.
func TestASchema2DatabaseIsMigratedToTheCurrentSchemaWithTheListingIndexesAndKeepsEveryRow(t *testing.T) {
	old := oldSchema(t, append(migrationFixtureRows,
		`INSERT INTO leases_events (at_unix_us, production_id, job_id, kind) VALUES (10, 'pid', 'j1', 'requested'),
			(11, 'pid', 'j2', 'requested'), (13, 'pid', 'j3', 'requested'), (14, 'pid', 'j3', 'failed')`)...)
	require.NotContains(t, schemaOf(t, old), "leases_events_by_kind")

	db, err := Open(old, Options{})
	require.NoError(t, err)
	v, err := version(ctx, db.pool)
	require.NoError(t, err)
	require.EqualValues(t, SchemaVersion, v)
	js, err := db.ListJobs(ctx, store.JobFilter{ProductionID: "pid", Limit: 10})
	require.NoError(t, err)
	require.Len(t, js, 3)
	require.Equal(t, "k", js[0].Key)
	require.EqualValues(t, 2, js[0].PayloadSize)
	h, err := db.EventHorizon(ctx)
	require.NoError(t, err)
	es, err := db.ListEvents(ctx, store.EventFilter{ProductionID: "pid", Kind: "failed", Before: h, Limit: 10})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "j3", es[0].JobID)
	require.NoError(t, storetest.CheckV4Fixture(ctx, db))
	db.Close()

	// A migrated schema is exactly a new one.
	require.Equal(t, schemaOf(t, freshURL(t)), schemaOf(t, old))
}

// connect is a plain connection to u, closed when the test ends.
func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// freshURL is a schema created at the current version, for a plain
// connection (pool_max_conns is the pool's).
func freshURL(t *testing.T) string {
	_, u := open(t, 0)
	return strings.TrimSuffix(u, "&pool_max_conns=80")
}

// observedStatements is every statement of the bounded observations, with
// the index each must read, for a production of the fill.
func observedStatements(pid string) map[string]storetest.Statement {
	out := map[string]storetest.Statement{}
	index := map[string]string{
		"jobs":                   "leases_jobs_by_state", // each state's range, merged
		"jobs key":               "leases_jobs_by_key",
		"jobs key+state":         "leases_jobs_by_key",
		"jobs id":                "leases_jobs_pkey",
		"jobs id+state":          "leases_jobs_pkey",
		"jobs backward":          "leases_jobs_by_state",
		"events":                 "leases_events_pkey",
		"events production":      "leases_events_by_production",
		"events production+kind": "leases_events_by_kind",
		"events job":             "leases_events_by_job",
		"events job+kind":        "leases_events_by_job",
	}
	for name, f := range storetest.JobPages(pid) {
		want, ok := index[name]
		if !ok {
			want = "leases_jobs_by_state" // one state
		}
		text, args := jobPageSQL(f)
		out[name] = storetest.Statement{SQL: text, Args: args, Want: want}
	}
	for name, f := range storetest.EventPages(pid) {
		text, args := eventPageSQL(f)
		out[name] = storetest.Statement{SQL: text, Args: args, Want: index[strings.TrimSuffix(name, " newest")]}
	}
	// Productions are few: a table of one page is read whole, rightly.
	out["productions"] = storetest.Statement{SQL: `SELECT id, name, created_unix_us FROM leases_productions
		WHERE name COLLATE "C" > $1 ORDER BY name COLLATE "C" LIMIT $2`, Args: []any{"a", 10}, Want: ""}
	out["job by key"] = storetest.Statement{SQL: jobByKeySQL, Args: []any{pid, "k17"}, Want: "leases_jobs_by_key"}
	out["count by state"] = storetest.Statement{SQL: countByStateSQL, Args: []any{pid}, Want: "leases_jobs_by_state"}
	out["count expired"] = storetest.Statement{SQL: countExpiredSQL, Args: []any{pid, int64(5)}, Want: "leases_jobs_claimed_ready"}
	out["oldest requested"] = storetest.Statement{SQL: oldestRequestedSQL, Args: []any{pid}, Want: "leases_jobs_by_state"}
	out["count events"] = storetest.Statement{SQL: countEventsSQL, Args: []any{int64(60), pid, "completed", int64(3900)}, Want: "leases_events_by_kind_time"}
	out["workers seen"] = storetest.Statement{SQL: workersSeenSQL, Args: []any{pid, int64(3900), 10}, Want: "leases_events_by_worker"}
	out["holders"] = storetest.Statement{SQL: holdersSQL, Args: []any{pid, int64(3900)}, Want: "leases_jobs_claimed_ready"}
	// A worker's jobs: its entries of the worker index from the top down,
	// one probe of the job each.
	for name, f := range map[string]store.WorkerJobFilter{
		"worker jobs":        {ProductionID: pid, Worker: "w3", Limit: 51},
		"worker jobs cursor": {ProductionID: pid, Worker: "w3", BeforeAt: 900, BeforeID: "m", Limit: 51},
		"worker jobs newer":  {ProductionID: pid, Worker: "w3", Newer: true, AfterAt: 900, AfterID: "m", Limit: 51},
	} {
		text, args := workerJobsSQL(f)
		out[name] = storetest.Statement{SQL: text, Args: args, Want: "leases_events_by_worker",
			Also: []string{"leases_jobs_pkey"}}
	}
	// A page's times: per id, a probe of the primary key, of the job's
	// events and of its attempts (Also: each must be there).
	out["job times"] = storetest.Statement{SQL: jobTimesSQL, Args: []any{pid, "{a,b,c}"}, Want: "leases_jobs_pkey",
		Also: []string{"leases_events_by_job", "leases_attempts_pkey"}}
	// A key prefix is one range of leases_jobs_by_key, in byte order ("C"),
	// read in its order: never the collation's unique index, never a sort.
	for name, f := range map[string]store.JobFilter{
		"jobs key prefix":          {KeyFrom: "k1", KeyBelow: "k2"},
		"jobs key prefix after":    {KeyFrom: "k1", KeyAfter: "k15", KeyBelow: "k2"},
		"jobs key prefix backward": {KeyFrom: "k1", KeyBelow: "k15", Backward: true},
		"jobs key prefix state":    {KeyFrom: "k1", KeyBelow: "k2", State: "completed"},
		"jobs key prefix open":     {KeyFrom: "k4999"},
	} {
		f.ProductionID, f.Limit = pid, 101
		text, args := jobPageSQL(f)
		out[name] = storetest.Statement{SQL: text, Args: args, Want: "leases_jobs_by_key"}
	}
	// A job id prefix is one range of the primary key, in a production or in all.
	for name, f := range map[string]store.JobIDFilter{
		"job ids":            {From: "0a1b2c3d", To: "0a1b2c3e", Limit: 6},
		"job ids production": {ProductionID: pid, From: "0a1b2c3d", To: "0a1b2c3e", Limit: 6},
	} {
		text, args := jobIDsSQL(f)
		out[name] = storetest.Statement{SQL: text, Args: args, Want: "leases_jobs_pkey"}
	}
	return out
}

// literal spells a statement argument as SQL, for EXECUTE.
func literal(v any) string {
	if s, ok := v.(string); ok {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return fmt.Sprint(v)
}

// plan explains a statement as it runs: unnamed, so planned for its
// arguments (a custom plan).
func plan(t *testing.T, c *pgx.Conn, name, text string, args []any) string {
	t.Helper()
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = literal(a)
	}
	_, err := c.Exec(ctx, `SET plan_cache_mode = force_custom_plan`)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `PREPARE s AS `+text)
	require.NoError(t, err, name)
	defer c.Exec(ctx, `DEALLOCATE s`)
	rows, err := c.Query(ctx, `EXPLAIN EXECUTE s(`+strings.Join(lits, ", ")+`)`)
	require.NoError(t, err, name)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, name)
	return strings.Join(lines, "\n")
}

// TestEveryObservationReadsAnIndexNeverTheWholeTable pins the plans of the
// listings, counts and rates on a realistic schema (50,000 jobs in ten
// productions, one after the other, 150,000 events, vacuumed and analyzed):
// each reads the index made for it (the newest-first pages walk it
// backwards), never the whole jobs or events.
func TestEveryObservationReadsAnIndexNeverTheWholeTable(t *testing.T) {
	u := freshURL(t)
	pid := fillRealistic(t, u, 10, 5000)
	c := connect(t, u)
	for name, st := range observedStatements(pid) {
		p := plan(t, c, name, st.SQL, st.Args)
		require.NotRegexp(t, "Seq Scan on leases_(jobs|events)", p, name)
		if strings.HasPrefix(name, "jobs key prefix") {
			require.NotContains(t, p, "Sort", "%s: read in the index's order:\n%s", name, p)
		}
		if st.Want != "" {
			require.Regexp(t, "Index (Only )?Scan (Backward )?(using|on) ("+st.Want+")\\b", p, "%s:\n%s", name, p)
		}
		for _, also := range st.Also {
			require.Regexp(t, "Index (Only )?Scan (Backward )?(using|on) ("+also+")\\b", p, "%s:\n%s", name, p)
		}
	}
}

// TestPerMinuteCountsAndWorkersSeenReadTheirIndexesBeforeTheTablesHaveStatistics:
// on a store just filled (no ANALYZE yet), both event indexes of a kind
// look as cheap to the planner; each minute's count must still be a range
// of the time index, not the kind's every event once per minute, and the
// walk over the workers one entry per step.
func TestPerMinuteCountsAndWorkersSeenReadTheirIndexesBeforeTheTablesHaveStatistics(t *testing.T) {
	u := freshURL(t)
	fillRows(t, u, 1, 3000)
	c := connect(t, u)
	// Minutes of 60 µs over the 3000 µs the fill's events span: 50 counts.
	p := plan(t, c, "count events", countEventsSQL, []any{int64(60), "p1", "completed", int64(0)})
	require.NotContains(t, p, "leases_events_by_kind ", p)
	require.NotRegexp(t, "using leases_events_by_kind\\b|Seq Scan", p)
	require.Regexp(t, "Index Only Scan (Backward )?using leases_events_by_kind_time", p)
	// The workers seen: every step one entry of their index, the first
	// worker's too (a min() was planned as an aggregate of the whole range).
	p = plan(t, c, "workers seen", workersSeenSQL, []any{"p1", int64(0), 1000})
	require.NotContains(t, p, "Aggregate", p)
	require.Regexp(t, "Limit[^\\n]*\\n *->  Index Only Scan using leases_events_by_worker", p)
}

// TestAProductionHoldingEveryJobIsCountedFromItsIndexNotByScanningTheTable:
// with one production, a filter on it selects every row, and grouping its
// jobs by state was planned as a parallel scan of the whole table (three
// processes beside the workers). The counts are index-only per state, the
// workers seen a walk over the workers.
func TestAProductionHoldingEveryJobIsCountedFromItsIndexNotByScanningTheTable(t *testing.T) {
	u := freshURL(t)
	fillRealistic(t, u, 1, 30000)
	c := connect(t, u)
	for _, name := range []string{"count by state", "count events", "workers seen"} {
		st := observedStatements("p1")[name]
		p := plan(t, c, name, st.SQL, st.Args)
		require.NotRegexp(t, "Seq Scan on leases_(jobs|events)|Parallel", p, "%s:\n%s", name, p)
		require.Regexp(t, "Index (Only )?Scan (Backward )?(using|on) ("+st.Want+")\\b", p, "%s:\n%s", name, p)
	}
	st := observedStatements("p1")["count by state"]
	require.Regexp(t, "Index Only Scan using leases_jobs_by_state", plan(t, c, "count by state", st.SQL, st.Args))
	// Per-minute counts count each minute's range; they never sort the
	// window's events by minute.
	st = observedStatements("p1")["count events"]
	require.NotContains(t, plan(t, c, "count events", st.SQL, st.Args), "Sort Key: ((leases_events.at_unix_us")
	require.NotContains(t, plan(t, c, "count events", st.SQL, st.Args), "Sort Key: ((at_unix_us")
}

// TestObservationsArePlannedForTheirArgumentsEveryTime: they run unnamed,
// never as a cached statement whose generic plan would take over.
func TestObservationsArePlannedForTheirArgumentsEveryTime(t *testing.T) {
	db, _ := open(t, 0)
	pid, _ := seed(t, db, 3)
	for i := 0; i < 8; i++ {
		_, err := db.ListEvents(ctx, store.EventFilter{ProductionID: pid, Kind: "requested", Before: 1 << 62, Limit: 10})
		require.NoError(t, err)
		_, err = db.ListJobs(ctx, store.JobFilter{ProductionID: pid, State: "requested", Limit: 10})
		require.NoError(t, err)
		_, err = db.CountJobs(ctx, pid, 5)
		require.NoError(t, err)
	}
	conns := db.pool.AcquireAllIdle(ctx)
	require.NotEmpty(t, conns)
	for _, c := range conns {
		var n int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
			WHERE (statement LIKE '%FROM leases_events WHERE%kind%' OR statement LIKE '%octet_length%'
				OR statement LIKE '%UNION ALL%') AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&n))
		c.Release()
		require.Zero(t, n, "an observation was prepared and cached")
	}
}

// fillRealistic adds productions of n jobs each (in every state, each with
// three events, each finished one with its attempt) in SQL, one production after the other as they are used,
// then vacuums and analyzes; it returns the id of one in the middle.
func fillRealistic(t *testing.T, u string, productions, n int) string {
	t.Helper()
	pid := fillRows(t, u, productions, n)
	for _, table := range []string{"leases_productions", "leases_jobs", "leases_events", "leases_attempts"} {
		pgtest.VacuumAnalyze(t, u, table)
	}
	return pid
}

// fillRows writes fillRealistic's rows, leaving the tables as a fresh or
// just filled store has them: without statistics.
func fillRows(t *testing.T, u string, productions, n int) string {
	t.Helper()
	for _, st := range []string{
		fmt.Sprintf(`INSERT INTO leases_productions SELECT 'p' || g, 'production ' || g, 1 FROM generate_series(1, %d) g`, productions),
		fmt.Sprintf(`INSERT INTO leases_jobs (id, production_id, key, payload, state, worker, claimed_unix_us, expiry_unix_us,
				requested_unix_us, updated_unix_us)
			SELECT gen_random_uuid()::text, 'p' || p, 'k' || g, '\x00', (ARRAY['requested','claimed','completed','completed',
				'completed','failed','cancelled'])[1 + g %% 7], 'w' || (g %% 20), g, g + 100, g, g
			FROM generate_series(1, %d) p, generate_series(1, %d) g ORDER BY p, g`, productions, n),
		`INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker)
			SELECT j.requested_unix_us, j.production_id, j.id, k, j.worker
			FROM leases_jobs j, unnest(ARRAY['requested', 'claimed', 'completed']) k ORDER BY j.seq, k`,
		// Each finished job's ended claim, as its attempt history holds it.
		`INSERT INTO leases_attempts (job_id, number, worker, claimed_unix_us, ended_unix_us, ending)
			SELECT id, 1, worker, claimed_unix_us, claimed_unix_us + 50, state FROM leases_jobs
			WHERE state IN ('completed', 'failed') ORDER BY seq`,
	} {
		pgtest.Exec(t, u, st)
	}
	return "p3"
}

// TestEachStateOfABusyProductionIsCountedByAPlanForThatState: a busy
// production's pages are not all-visible (its jobs change faster than
// autovacuum marks them), which makes an index-only count cost a heap visit
// per job. A count correlated with the list of states is planned once, for
// an average state, as a scan of the whole table, and run once per state:
// six reads of every page. Each state's count is its own plan, so the
// counts read the table's pages at most twice (the two states holding most
// jobs: under three times its pages in all), the other states a range of
// their index.
func TestEachStateOfABusyProductionIsCountedByAPlanForThatState(t *testing.T) {
	u := freshURL(t)
	fillBusy(t, u)
	pgtest.VacuumAnalyze(t, u, "leases_jobs")
	// Workers touch every page after the vacuum: none is all-visible any
	// more. Statistics are refreshed (ANALYZE alone, no VACUUM, so the
	// visibility map stays as workers left it) and autovacuum is kept off
	// this table for the test, as it has not yet come round.
	pgtest.Exec(t, u, `ALTER TABLE leases_jobs SET (autovacuum_enabled = false)`)
	pgtest.Exec(t, u, `UPDATE leases_jobs SET updated_unix_us = updated_unix_us + 1`)
	pgtest.Exec(t, u, `ANALYZE leases_jobs`)
	c := connect(t, u)
	var pages int64
	require.NoError(t, c.QueryRow(ctx, `SELECT relpages FROM pg_class WHERE oid = 'leases_jobs'::regclass`).Scan(&pages))
	rows, err := c.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+strings.ReplaceAll(countByStateSQL, "$1", "'"+busyPID+"'"))
	require.NoError(t, err)
	plans, err := pgx.CollectRows(rows, pgx.RowTo[[]map[string]any])
	require.NoError(t, err)
	top := plans[0][0]["Plan"].(map[string]any)
	read := int64(top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64))
	p := plan(t, c, "count by state", countByStateSQL, []any{busyPID})
	require.Less(t, read, 3*pages, "the counts read %d pages of a table of %d:\n%s", read, pages, p)
	require.NotContains(t, p, "SubPlan", "one plan run once per state:\n%s", p)
}

// busyPID is fillBusy's production: an id as long as the ids the library
// gives (the width of every entry of the jobs' indexes).
const busyPID = "6df00859-d46c-44f3-a111-1f2aa0c0cbfb"

// fillBusy writes one production of 100,000 jobs as a busy one holds them:
// the oldest completed, a few failed, the claimed ones, then the waiting
// ones (most of the table is one state).
func fillBusy(t *testing.T, u string) {
	t.Helper()
	pgtest.Exec(t, u, `INSERT INTO leases_productions VALUES ($1, 'production 1', 1)`, busyPID)
	pgtest.Exec(t, u, `INSERT INTO leases_jobs (id, production_id, key, payload, state, worker, claimed_unix_us,
			expiry_unix_us, requested_unix_us, updated_unix_us)
		SELECT gen_random_uuid()::text, $1, 'k' || g, '\x00', 'requested', '', 0, 0, g, g
		FROM generate_series(1, 100000) g ORDER BY g`, busyPID)
	// Requested, then claimed, then ended, each a change of state as the
	// workers make it (each leaves an entry of the state index behind).
	pgtest.Exec(t, u, `UPDATE leases_jobs SET state = 'claimed', worker = 'w' || (requested_unix_us % 4),
		claimed_unix_us = requested_unix_us, expiry_unix_us = requested_unix_us + 100 WHERE requested_unix_us <= 60700`)
	pgtest.Exec(t, u, `UPDATE leases_jobs SET state = CASE WHEN requested_unix_us <= 60000 THEN 'completed' ELSE 'failed' END
		WHERE requested_unix_us <= 60500`)
}

// TestAStateHoldingMostJobsIsCountedFromItsIndexWhileThePagesAreAllVisible:
// once vacuum has marked the pages, an index-only count of the state that
// holds most jobs reads its index alone; planned for that state's share
// without an order, it was a scan of the whole table (about twice the
// time). Each count reads its state's range in index order, which only the
// index gives without a sort.
func TestAStateHoldingMostJobsIsCountedFromItsIndexWhileThePagesAreAllVisible(t *testing.T) {
	u := freshURL(t)
	fillBusy(t, u)
	pgtest.VacuumAnalyze(t, u, "leases_jobs")
	c := connect(t, u)
	p := plan(t, c, "count by state", countByStateSQL, []any{busyPID})
	require.NotRegexp(t, "Seq Scan on leases_jobs|Sort", p)
	require.Regexp(t, "Index Only Scan using leases_jobs_by_state on leases_jobs[^\n]*rows=[1-9][0-9]{4}", p)
}
