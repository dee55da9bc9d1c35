// The indexes of leases_jobs a claim and a completion write (schema 12):
// each serves a reader no other index serves, and a database of schema 8
// is migrated to them with every reader still exact.
package pgstore

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/libleases/libleases/internal/pgtest"
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
// in the index in byte order that the listing by key prefix reads. A
// production's jobs in request order are its states' ranges of the index
// by state merged (the states are a closed set, a CHECK of the table).
func TestAJobUpdateWritesNoIndexALaterSchemaMadeRedundant(t *testing.T) {
	require.Equal(t, []string{
		"leases_jobs_by_key",        // keys: unique, in byte order (a key, a key prefix)
		"leases_jobs_by_state",      // each state's jobs in request order (merged: all jobs), counts by state
		"leases_jobs_claimed_ready", // claims: lapsed ones, the next wake, expired ones, holders
		"leases_jobs_delayed",       // delayed jobs by ready time: promotion, the next wake
		"leases_jobs_due",           // the next claimable job
		"leases_jobs_pkey",          // a job by its id
	}, jobIndexes(t, freshURL(t)))
}

// TestAJobWithoutAKeyWritesNoEntryIntoTheIndexOfKeys: the index of keys
// serves only readers of a key (a job by its key, the listing by key
// prefix: each comparison of a key is false for none), so a job without a
// key is not in it, and its claim and completion write no entry there.
func TestAJobWithoutAKeyWritesNoEntryIntoTheIndexOfKeys(t *testing.T) {
	u := freshURL(t)
	pid := fillRealistic(t, u, 3, 5000) // every job has a key
	pgtest.Exec(t, u, `INSERT INTO leases_jobs (id, production_id, payload, state, requested_unix_us, updated_unix_us)
		SELECT gen_random_uuid()::text, $1, '\x00', 'requested', g, g FROM generate_series(1, 5000) g`, pid)
	pgtest.Exec(t, u, `UPDATE leases_jobs SET state = 'claimed' WHERE key IS NULL`)
	pgtest.VacuumAnalyze(t, u, "leases_jobs")
	c := connect(t, u)
	var entries float64
	require.NoError(t, c.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'leases_jobs_by_key'::regclass`).Scan(&entries))
	require.Equal(t, float64(15000), entries, "the keyed jobs only")
	// Its readers still read it: a job by its key, a key prefix.
	for name, st := range map[string]struct {
		sql  string
		args []any
	}{
		"job by key": {jobByKeySQL, []any{pid, "k17"}},
	} {
		p := plan(t, c, name, st.sql, st.args)
		require.Regexp(t, "Index (Only )?Scan using leases_jobs_by_key", p, "%s:\n%s", name, p)
	}
	for name, st := range observedStatements(pid) {
		if strings.HasPrefix(name, "jobs key") {
			p := plan(t, c, name, st.SQL, st.Args)
			require.Regexp(t, "Index (Only )?Scan (Backward )?using leases_jobs_by_key", p, "%s:\n%s", name, p)
		}
	}
	j, err := func() (store.Job, error) {
		db, err := Open(u, Options{})
		require.NoError(t, err)
		defer db.Close()
		return db.JobByKey(ctx, pid, "k17")
	}()
	require.NoError(t, err)
	require.Equal(t, "k17", j.Key)
}

// TestAProductionsJobsInRequestOrderAreItsStatesRangesMergedReadingAboutAPageOfRows:
// with no index of a production's jobs in request order, a page of them is
// each state's range of the index by state, merged in seq order: it reads
// about the page's rows (one more per state at most), never every job of
// the production, and never sorts them; the newest job's number is the
// greatest of each state's last entry.
func TestAProductionsJobsInRequestOrderAreItsStatesRangesMergedReadingAboutAPageOfRows(t *testing.T) {
	u := freshURL(t)
	pid := fillRealistic(t, u, 3, 20000)
	c := connect(t, u)
	var low, high int64
	require.NoError(t, c.QueryRow(ctx, `SELECT min(seq), max(seq) FROM leases_jobs WHERE production_id = $1`, pid).Scan(&low, &high))
	for name, f := range map[string]store.JobFilter{
		"first page":    {ProductionID: pid, Limit: 101},
		"next page":     {ProductionID: pid, AfterSeq: low + 5000, Limit: 101},
		"newest page":   {ProductionID: pid, Backward: true, Limit: 101},
		"previous page": {ProductionID: pid, Backward: true, BeforeSeq: high - 5000, Limit: 101},
		"back to after": {ProductionID: pid, Backward: true, AfterSeq: low + 100, BeforeSeq: high - 5000, Limit: 101},
	} {
		text, args := jobPageSQL(f)
		lits := make([]string, len(args))
		for i, a := range args {
			lits[i] = literal(a)
		}
		p := plan(t, c, name, text, args)
		require.NotRegexp(t, "Seq Scan on leases_jobs|Sort  \\(", p, "%s:\n%s", name, p)
		require.Regexp(t, "Index (Only )?Scan (Backward )?using leases_jobs_by_state", p, "%s:\n%s", name, p)
		// Rows read: about the page, not the production's 20,000.
		var out string
		_, err := c.Exec(ctx, `PREPARE r AS `+text)
		require.NoError(t, err)
		require.NoError(t, c.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE r(`+strings.Join(lits, ", ")+`)`).Scan(&out))
		_, err = c.Exec(ctx, `DEALLOCATE r`)
		require.NoError(t, err)
		var plans []map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &plans))
		require.LessOrEqual(t, scanned(plans[0]["Plan"].(map[string]any)), float64(101+len(store.JobStates)), "%s:\n%s", name, out)
		// And they are the production's jobs in request order.
		got, err := connect(t, u).Query(ctx, text, args...)
		require.NoError(t, err)
		var seqs []int64
		for got.Next() {
			vals, err := got.Values()
			require.NoError(t, err)
			seqs = append(seqs, vals[3].(int64))
		}
		require.NoError(t, got.Err())
		wantSQL := `SELECT seq FROM leases_jobs WHERE production_id = $1 AND seq > $2 AND seq < $3 ORDER BY seq LIMIT 101`
		if f.Backward {
			wantSQL = strings.Replace(wantSQL, "ORDER BY seq", "ORDER BY seq DESC", 1)
		}
		before := f.BeforeSeq
		if before == 0 {
			before = 1 << 62
		}
		rows, err := c.Query(ctx, wantSQL, pid, f.AfterSeq, before)
		require.NoError(t, err)
		want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		require.Equal(t, want, seqs, name)
	}
	p := plan(t, c, "newest job", newestJobSeqSQL, []any{pid})
	require.NotRegexp(t, "Seq Scan on leases_jobs|Sort|Aggregate", p, p)
	var newest int64
	require.NoError(t, c.QueryRow(ctx, newestJobSeqSQL, pid).Scan(&newest))
	require.Equal(t, high, newest)
}

// scanned is the rows every scan node of an EXPLAIN ANALYZE plan returned.
func scanned(node map[string]any) float64 {
	n := 0.0
	if strings.Contains(node["Node Type"].(string), "Scan") {
		n += node["Actual Rows"].(float64) * node["Actual Loops"].(float64)
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			n += scanned(k.(map[string]any))
		}
	}
	return n
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
		"history":         {attemptsSQL, []any{job}},
		"trim":            {trimAttemptsSQL, []any{job, 20}},
		"append and trim": {insertAttemptSQL, []any{job, 9, "w", 1, 2, "completed", "", 19}},
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
	db := openMigrated(t, old, 8)
	require.EqualValues(t, 14, SchemaVersion, "through 12 (these indexes) to 14")
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
	requireKeysInByteOrder(t, db)
	_, err = connect(t, old).Exec(ctx, `INSERT INTO leases_jobs (id, production_id, key, payload, state,
		requested_unix_us, updated_unix_us) VALUES ('j7', 'pid', 'ka', '', 'requested', 18, 18)`)
	require.Error(t, err, "a key is unique in its production")
	require.ErrorIs(t, classify(err), store.ErrConflict, "two requests of one key race as before")

	// The production's jobs in request order, whatever their state, and
	// the newest of them.
	all, err := db.ListJobs(ctx, store.JobFilter{ProductionID: "pid", Limit: 10})
	require.NoError(t, err)
	var ids []string
	for _, r := range all {
		ids = append(ids, r.ID)
	}
	require.Equal(t, []string{"j1", "j2", "j3", "j4", "j5", "j6"}, ids)
	newest, err := db.NewestJobSeq(ctx, "pid")
	require.NoError(t, err)
	require.Equal(t, all[5].Seq, newest)

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
