// The bounded observations on PostgreSQL (store.Observer): each is one or a
// few statements on the pool, each its own snapshot, none holding a row lock.
package pgstore

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/store"
)

var (
	_ store.Observer = (*DB)(nil)
	_ store.Clock    = (*DB)(nil)
)

// Now samples the server's clock outside any transaction, for observations
// that compare with the authority's time (expired claims).
func (db *DB) Now(ctx context.Context) (int64, error) {
	var v int64
	err := poolQ{db}.QueryRow(ctx, `SELECT `+clockSQL).Scan(&v)
	return v, classify(err)
}

// Observations run as unnamed statements (pgx.QueryExecModeExec), so the
// server plans each one for its arguments. A cached statement would switch
// to a generic plan after five runs, and a generic plan guesses the share of
// a seq range (0.5%): it would page a production's events along the
// primary key, filtering every other production's (observe_test.go).
func (db *DB) query(ctx context.Context, text string, args ...any) (pgx.Rows, error) {
	return poolQ{db}.Query(ctx, text, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (db *DB) queryRow(ctx context.Context, text string, args ...any) pgx.Row {
	return poolQ{db}.QueryRow(ctx, text, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// conds builds a WHERE clause of numbered parameters.
type conds struct {
	where []string
	args  []any
}

func (c *conds) add(expr string, v any) {
	c.args = append(c.args, v)
	c.where = append(c.where, strings.ReplaceAll(expr, "$?", "$"+strconv.Itoa(len(c.args))))
}

// page ends a page statement: the conditions, an order, a limit.
func (c *conds) page(head, order string, limit int) (string, []any) {
	c.args = append(c.args, limit)
	return head + ` WHERE ` + strings.Join(c.where, ` AND `) + ` ORDER BY ` + order + ` LIMIT $` + strconv.Itoa(len(c.args)), c.args
}

const jobRowColumns = `id, production_id, key, seq, state, worker, claimed_unix_us, expiry_unix_us,
	attempts, reason, requested_unix_us, updated_unix_us, octet_length(payload), priority, claimable_unix_us,
	ready_unix_us, due`

// jobPageSQL is one page of jobs, one index range for each filter
// (observe_test.go): each state's range of leases_jobs_by_state merged
// without a filter (byStatesPage), its range with a state, the unique index
// of keys in byte order (leases_jobs_by_key) with a key, the primary key
// with an id.
func jobPageSQL(f store.JobFilter) (string, []any) {
	if f.KeyFrom != "" {
		return keyPageSQL(f)
	}
	var c conds
	c.add(`production_id = $?`, f.ProductionID)
	if f.State != "" {
		c.add(`state = $?`, f.State)
	}
	if f.Key != "" {
		c.add(`key COLLATE "C" = $?`, f.Key)
	}
	if f.ID != "" {
		c.add(`id = $?`, f.ID)
	}
	if !f.Backward || f.AfterSeq != 0 {
		c.add(`seq > $?`, f.AfterSeq)
	}
	if f.BeforeSeq != 0 {
		c.add(`seq < $?`, f.BeforeSeq)
	}
	order := `seq`
	if f.Backward {
		order = `seq DESC`
	}
	if f.State == "" && f.Key == "" && f.ID == "" {
		return byStatesPage(c, order, f.Limit)
	}
	return c.page(`SELECT `+jobRowColumns+` FROM leases_jobs`, order, f.Limit)
}

// byStatesPage ends a page of a production's jobs in seq order, whatever
// their state: there is no index of a production's jobs in request order
// (schema 12), so the page is each state's range of leases_jobs_by_state,
// merged in seq order (a Merge Append pulls from each range only what the
// page takes: about the page's rows, one more per state). The states are a
// closed set (the table's CHECK, store.JobStates), so the merge is every
// job of the production.
func byStatesPage(c conds, order string, limit int) (string, []any) {
	c.args = append(c.args, limit)
	lim := `$` + strconv.Itoa(len(c.args))
	where := strings.Join(c.where, ` AND `)
	parts := make([]string, len(store.JobStates))
	for i, st := range store.JobStates {
		parts[i] = `(SELECT ` + jobRowColumns + ` FROM leases_jobs WHERE ` + where + ` AND state = '` + st +
			`' ORDER BY ` + order + ` LIMIT ` + lim + `)`
	}
	return `SELECT * FROM (` + strings.Join(parts, ` UNION ALL `) + `) AS j ORDER BY ` + order + ` LIMIT ` + lim, c.args
}

// jobRowColumnsJ are jobRowColumns of leases_jobs named j.
const jobRowColumnsJ = `j.id, j.production_id, j.key, j.seq, j.state, j.worker, j.claimed_unix_us, j.expiry_unix_us,
	j.attempts, j.reason, j.requested_unix_us, j.updated_unix_us, octet_length(j.payload), j.priority,
	j.claimable_unix_us, j.ready_unix_us, j.due`

// workerJobsSQL is one page of a worker's jobs: a walk down the worker's
// entries of leases_events_by_worker (newest first), one probe of the
// job's primary key per claimed event (observe_test.go).
func workerJobsSQL(f store.WorkerJobFilter) (string, []any) {
	var c conds
	c.add(`e.production_id = $?`, f.ProductionID)
	c.add(`e.worker = $?`, f.Worker)
	c.where = append(c.where, `e.`+workerKindsSQL, `e.kind = 'claimed'`, `j.worker = e.worker`,
		`j.claimed_unix_us = e.at_unix_us`, `j.state <> 'requested'`)
	order := `e.at_unix_us DESC, j.id COLLATE "C" DESC`
	cursor := func(at int64, id, cmp string) {
		c.add(`e.at_unix_us `+cmp+`= $?`, at)
		c.args = append(c.args, at, id)
		n := len(c.args)
		c.where = append(c.where, `(e.at_unix_us `+cmp+` $`+strconv.Itoa(n-1)+` OR j.id COLLATE "C" `+cmp+` $`+strconv.Itoa(n)+`)`)
	}
	switch {
	case f.Newer:
		cursor(f.AfterAt, f.AfterID, ">")
		order = `e.at_unix_us, j.id COLLATE "C"`
	case f.BeforeAt != 0:
		cursor(f.BeforeAt, f.BeforeID, "<")
	}
	if len(f.States) > 0 {
		c.add(`j.state = ANY($?::text[])`, f.States)
	}
	if f.Key != "" {
		c.add(`j.key COLLATE "C" = $?`, f.Key)
	}
	if f.ID != "" {
		c.add(`j.id = $?`, f.ID)
	}
	return c.page(`SELECT `+jobRowColumnsJ+` FROM leases_events e JOIN leases_jobs j ON j.id = e.job_id`,
		order, f.Limit)
}

// ListWorkerJobs reads one page of a worker's jobs.
func (db *DB) ListWorkerJobs(ctx context.Context, f store.WorkerJobFilter) ([]store.JobRow, error) {
	text, args := workerJobsSQL(f)
	rows, err := db.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanJobRowPG)
}

// jobTimesSQL reads the times of a page of jobs in one statement: for each
// id of $2, one probe of leases_jobs_pkey, one of leases_events_by_job to
// the job's first claimed event (its first few events), one of
// the attempts' primary key (job_id, id) to its newest attempt
// (observe_test.go).
const jobTimesSQL = `SELECT j.id, j.requested_unix_us,
	coalesce((SELECT e.at_unix_us FROM leases_events e WHERE e.job_id = j.id AND e.kind = 'claimed'
		ORDER BY e.seq LIMIT 1), 0),
	coalesce(a.number, 0), coalesce(a.worker, ''), coalesce(a.claimed_unix_us, 0), coalesce(a.ended_unix_us, 0),
	coalesce(a.ending, ''), coalesce(a.reason, '')
	FROM unnest($2::text[]) AS ids(id) JOIN leases_jobs j ON j.id = ids.id
	LEFT JOIN LATERAL (SELECT x.number, x.worker, x.claimed_unix_us, x.ended_unix_us, x.ending, x.reason
		FROM leases_attempts x WHERE x.job_id = j.id ORDER BY x.id DESC LIMIT 1) a ON true
	WHERE j.production_id = $1`

// JobTimes reads the times of a page of jobs.
func (db *DB) JobTimes(ctx context.Context, productionID string, ids []string) ([]store.JobTimesRow, error) {
	rows, err := db.query(ctx, jobTimesSQL, productionID, ids)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r pgx.CollectableRow) (store.JobTimesRow, error) {
		var t store.JobTimesRow
		err := r.Scan(&t.ID, &t.RequestedAt, &t.FirstClaimedAt, &t.Last.Number, &t.Last.Worker, &t.Last.ClaimedAt,
			&t.Last.EndedAt, &t.Last.Ending, &t.Last.Reason)
		t.Last.JobID = t.ID
		return t, err
	})
}

// ListJobs reads one page of jobs.
func (db *DB) ListJobs(ctx context.Context, f store.JobFilter) ([]store.JobRow, error) {
	text, args := jobPageSQL(f)
	rows, err := db.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanJobRowPG)
}

func scanJobRowPG(r pgx.CollectableRow) (store.JobRow, error) {
	var j store.JobRow
	var key *string
	err := r.Scan(&j.ID, &j.ProductionID, &key, &j.Seq, &j.State, &j.Worker, &j.ClaimedAt, &j.Expiry,
		&j.Attempts, &j.Reason, &j.RequestedAt, &j.UpdatedAt, &j.PayloadSize, &j.Priority, &j.ClaimableAt,
		&j.ReadyAt, &j.Due)
	if key != nil {
		j.Key, j.HasKey = *key, true
	}
	return j, err
}

// jobIDsSQL is one range of leases_jobs_pkey, the production a filter on it.
func jobIDsSQL(f store.JobIDFilter) (string, []any) {
	var c conds
	c.add(`id >= $?`, f.From)
	if f.To != "" {
		c.add(`id < $?`, f.To)
	}
	if f.ProductionID != "" {
		c.add(`production_id = $?`, f.ProductionID)
	}
	return c.page(`SELECT id, production_id FROM leases_jobs`, `id`, f.Limit)
}

// JobIDs reads job ids in a range of the primary key.
func (db *DB) JobIDs(ctx context.Context, f store.JobIDFilter) ([]store.JobIDRow, error) {
	text, args := jobIDsSQL(f)
	rows, err := db.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r pgx.CollectableRow) (store.JobIDRow, error) {
		var j store.JobIDRow
		return j, r.Scan(&j.ID, &j.ProductionID)
	})
}

// collect reads every row with scan and closes rows; the result is never
// nil, so an empty listing marshals as [].
func collect[T any](rows pgx.Rows, scan pgx.RowToFunc[T]) ([]T, error) {
	out, err := pgx.CollectRows(rows, scan)
	if out == nil {
		out = []T{}
	}
	return out, classify(err)
}

// ListProductions reads productions in byte order of their names, from
// leases_productions_by_name.
func (db *DB) ListProductions(ctx context.Context, after string, limit int) ([]store.Production, error) {
	rows, err := db.query(ctx, `SELECT `+productionColumns+` FROM leases_productions
		WHERE name COLLATE "C" > $1 ORDER BY name COLLATE "C" LIMIT $2`, after, limit)
	if err != nil {
		return nil, classify(err)
	}
	return collectProductions(rows)
}

func collectProductions(rows pgx.Rows) ([]store.Production, error) {
	return collect(rows, func(r pgx.CollectableRow) (store.Production, error) { return scanProduction(r) })
}

// Count statements: one index-only count per state, each its own
// subquery with the state written in it, so each is planned for that
// state's share of the production's jobs (observe_test.go). A count
// correlated with a list of states is planned once for all of them, for an
// average state: while a busy production's pages are not all-visible that
// plan is a scan of the whole table, run once per state. Each count asks
// for its range in the index's order (seq), which only leases_jobs_by_state
// (or the partial index of requested jobs) gives without a sort: without
// it, the state holding most jobs is planned as a scan of the table even
// when its pages are all-visible and its index alone would answer. While
// they are not, the largest states are each at worst one scan and a sort.
// Grouping the production's rows by state instead is planned as a parallel
// scan of the whole table once a production holds most jobs: three
// processes reading every row, beside the workers. Then the partial index
// of claims by expiry, and the first requested job from the claim path's
// partial index.
var (
	countByStateSQL = countByState()
	countExpiredSQL = `SELECT count(*) FROM leases_jobs
		WHERE production_id = $1 AND state = 'claimed' AND expiry_unix_us <= $2`
	oldestRequestedSQL = `SELECT requested_unix_us FROM leases_jobs
		WHERE production_id = $1 AND state = 'requested' ORDER BY seq LIMIT 1`
)

// countByState is countByStateSQL: a row of state and count per state.
func countByState() string {
	parts := make([]string, len(store.JobStates))
	for i, st := range store.JobStates {
		parts[i] = `SELECT '` + st + `', (SELECT count(*) FROM (SELECT FROM leases_jobs
			WHERE production_id = $1 AND state = '` + st + `' ORDER BY seq) AS j)`
	}
	return strings.Join(parts, ` UNION ALL `)
}

// CountJobs counts a production's jobs by state, its expired claims and its
// oldest requested job.
func (db *DB) CountJobs(ctx context.Context, productionID string, now int64) (store.JobCounts, error) {
	c := store.JobCounts{ByState: map[string]int64{}}
	rows, err := db.query(ctx, countByStateSQL, productionID)
	if err != nil {
		return c, classify(err)
	}
	var state string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		c.ByState[state] = n
		return nil
	}); err != nil {
		return c, classify(err)
	}
	if err := db.queryRow(ctx, countExpiredSQL, productionID, now).Scan(&c.Expired); err != nil {
		return c, classify(err)
	}
	err = classify(db.queryRow(ctx, oldestRequestedSQL, productionID).Scan(&c.OldestRequested))
	if err != nil && err != store.ErrNoRow {
		return c, err
	}
	return c, nil
}

// Every production's counts are two statements. The first finds the
// productions that have jobs by a walk over leases_jobs_by_state, one entry
// a step (the first production, then the first after it, ...), so a
// production without jobs costs nothing. The second counts each of them as
// CountJobs counts one: each state by a plan of its own, as
// countByStateSQL's, then its expired claims and its first requested job.
// Apart, because the planner costs a set found by a walk as 100 rows,
// whatever it holds: with one busy production, whose states' counts are
// scans of the table once workers have touched its pages, that estimate
// crossed the JIT's thresholds, and compiling took 500 ms of a 600 ms count.
// The second statement is planned for the ids it is given. Grouping the
// whole table by production and state instead is an index-only scan while
// the visibility map is fresh, and a scan of the whole table and a sort of
// every job once workers have touched its pages.
const productionsWithJobsSQL = `WITH RECURSIVE ps(id) AS (
		SELECT (SELECT production_id FROM leases_jobs ORDER BY production_id LIMIT 1)
		UNION ALL
		SELECT (SELECT production_id FROM leases_jobs WHERE production_id > ps.id ORDER BY production_id LIMIT 1)
		FROM ps WHERE ps.id IS NOT NULL)
	SELECT id FROM ps WHERE id IS NOT NULL`

var countEverySQL = countEvery()

func countEvery() string {
	cols := make([]string, len(store.JobStates))
	for i, st := range store.JobStates {
		cols[i] = `(SELECT count(*) FROM (SELECT FROM leases_jobs
			WHERE production_id = ps.id AND state = '` + st + `' ORDER BY seq) AS j)`
	}
	return `SELECT ps.id, ` + strings.Join(cols, `, `) + `,
			(SELECT count(*) FROM leases_jobs
				WHERE production_id = ps.id AND state = 'claimed' AND expiry_unix_us <= $1),
			COALESCE((SELECT requested_unix_us FROM leases_jobs
				WHERE production_id = ps.id AND state = 'requested' ORDER BY seq LIMIT 1), 0)
		FROM unnest($2::text[]) AS ps(id)`
}

// CountEveryProduction counts the jobs of every production that has any:
// the productions found, then their counts.
func (db *DB) CountEveryProduction(ctx context.Context, now int64) (map[string]store.JobCounts, error) {
	rows, err := db.query(ctx, productionsWithJobsSQL)
	if err != nil {
		return nil, classify(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err)
	}
	out := map[string]store.JobCounts{}
	if len(ids) == 0 {
		return out, nil
	}
	if rows, err = db.query(ctx, countEverySQL, now, ids); err != nil {
		return nil, classify(err)
	}
	var id string
	ns := make([]int64, len(store.JobStates))
	var expired, oldest int64
	dest := []any{&id}
	for i := range ns {
		dest = append(dest, &ns[i])
	}
	dest = append(dest, &expired, &oldest)
	if _, err := pgx.ForEachRow(rows, dest, func() error {
		c := store.JobCounts{ByState: make(map[string]int64, len(ns)), Expired: expired, OldestRequested: oldest}
		for i, st := range store.JobStates {
			c.ByState[st] = ns[i]
		}
		out[id] = c
		return nil
	}); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// EventHorizon is the follower-safe horizon (eventHorizon, queries.go).
func (db *DB) EventHorizon(ctx context.Context) (int64, error) { return eventHorizon(ctx, poolQ{db}) }

const eventColumns = `seq, at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail`

// eventPageSQL is one page of events, one index range for each filter
// (observe_test.go): the primary key, leases_events_by_production,
// leases_events_by_kind, or leases_events_by_job (a job's few events,
// filtered by kind). The range is written on the index's own columns, as
// row comparisons, and ordered by them: with "production_id = $1 AND
// seq > $2 ORDER BY seq" the planner, costing a LIMIT as if the production's
// events were spread evenly, walks the primary key and filters out every
// other production's events first.
func eventPageSQL(f store.EventFilter) (string, []any) {
	var key []string
	var c conds
	switch {
	case f.JobID != "":
		key, c.args = []string{`job_id`}, []any{f.JobID}
		if f.Kind != "" {
			c.add(`kind = $?`, f.Kind)
		}
	case f.ProductionID != "":
		key, c.args = []string{`production_id`}, []any{f.ProductionID}
		if f.Kind != "" {
			key, c.args = append(key, `kind`), append(c.args, f.Kind)
		}
	}
	same := ""
	for i := range key {
		same += "$" + strconv.Itoa(i+1) + ", "
	}
	cols := strings.Join(append(key, `seq`), `, `)
	c.add(`(`+cols+`) > (`+same+`$?)`, f.AfterSeq)
	c.add(`(`+cols+`) < (`+same+`$?)`, f.Before)
	order := cols
	if f.Newest {
		order = strings.Join(append(key, `seq`), ` DESC, `) + ` DESC`
	}
	return c.page(`SELECT `+eventColumns+` FROM leases_events`, order, f.Limit)
}

// ListEvents reads one page of events below f.Before.
func (db *DB) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	text, args := eventPageSQL(f)
	rows, err := db.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collectEvents(rows)
}

func collectEvents(rows pgx.Rows) ([]store.Event, error) {
	return collect(rows, func(r pgx.CollectableRow) (store.Event, error) {
		var e store.Event
		err := r.Scan(&e.Seq, &e.At, &e.ProductionID, &e.JobID, &e.Kind, &e.Worker, &e.Expiry, &e.Detail)
		return e, err
	})
}

// countEventsSQL counts each bucket from since to the kind's last event as
// one index-only range of leases_events_by_kind_time. Grouping the whole
// range by bucket instead sorts the window's events (an hour of a busy
// production's completions) before counting them. A bucket costs one seek
// even when empty: core asks for minutes of at most a day. Materialized,
// each bucket is counted once, not again for the filter. Each range asks
// for time order, which only that index gives without a sort: before the
// tables have statistics (a fresh or just filled store), the planner
// otherwise takes leases_events_by_kind, as cheap by its estimate, and
// reads every event of the kind once per bucket.
const countEventsSQL = `WITH c(b, n) AS MATERIALIZED (
		SELECT b, (SELECT count(*) FROM (SELECT FROM leases_events
			WHERE production_id = $2 AND kind = $3 AND at_unix_us >= greatest(b * $1, $4) AND at_unix_us < (b + 1) * $1
			ORDER BY at_unix_us) AS e)
		FROM generate_series($4::bigint / $1::bigint, (SELECT at_unix_us FROM leases_events
			WHERE production_id = $2 AND kind = $3 ORDER BY at_unix_us DESC LIMIT 1) / $1::bigint) AS b)
	SELECT b, n FROM c WHERE n > 0 ORDER BY b`

// CountEvents counts a production's events of one kind per bucket.
func (db *DB) CountEvents(ctx context.Context, productionID, kind string, since, width int64) ([]store.Bucket, error) {
	rows, err := db.query(ctx, countEventsSQL, width, productionID, kind, since)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r pgx.CollectableRow) (store.Bucket, error) {
		var b store.Bucket
		err := r.Scan(&b.Start, &b.Count)
		b.Start *= width
		return b, err
	})
}

// workersSeenSQL walks leases_events_by_worker from one worker to the next
// (each step the first entry past the last worker: a loose index scan) and
// reads each worker's last entry, so it costs a few index steps per worker
// the production has seen, however many events the window holds. It keeps
// the workers last seen at or after the time. Each step is the first entry
// in the index's order (ORDER BY ... LIMIT 1), not min() or max(): before
// the tables have statistics the planner aggregates a min() over the whole
// range. holdersSQL reads the production's entries of the partial index of
// claims (leases_jobs_claimed_ready), which hold each claim's expiry and
// worker: every claim of the production, one entry each, never the table.
var (
	workerKindsSQL = `kind IN ('` + strings.Join(store.WorkerKinds, `', '`) + `')`
	workersSeenSQL = `WITH RECURSIVE w(worker) AS (
			SELECT (SELECT worker FROM leases_events WHERE production_id = $1 AND ` + workerKindsSQL + `
				ORDER BY worker LIMIT 1)
			UNION ALL
			SELECT (SELECT worker FROM leases_events
				WHERE production_id = $1 AND ` + workerKindsSQL + ` AND worker > w.worker ORDER BY worker LIMIT 1)
			FROM w WHERE w.worker IS NOT NULL),
		seen(worker, at) AS (
			SELECT worker, (SELECT at_unix_us FROM leases_events
				WHERE production_id = $1 AND ` + workerKindsSQL + ` AND worker = w.worker ORDER BY at_unix_us DESC LIMIT 1)
			FROM w WHERE w.worker IS NOT NULL)
		SELECT worker, at FROM seen WHERE at >= $2 ORDER BY at DESC, worker COLLATE "C" LIMIT $3`
	holdersSQL = `SELECT worker, count(*) FROM leases_jobs
		WHERE production_id = $1 AND state = 'claimed' AND expiry_unix_us > $2 GROUP BY worker`
)

// Workers lists the workers seen since a time and those holding claims.
func (db *DB) Workers(ctx context.Context, productionID string, since, now int64, limit int) ([]store.WorkerSeen, error) {
	var ws store.WorkerSet
	merge := func(text string, set func(*store.WorkerSeen, int64), args ...any) error {
		rows, err := db.query(ctx, text, args...)
		if err != nil {
			return classify(err)
		}
		var name string
		var v int64
		_, err = pgx.ForEachRow(rows, []any{&name, &v}, func() error {
			set(ws.Get(name), v)
			return nil
		})
		return classify(err)
	}
	if err := merge(workersSeenSQL, func(w *store.WorkerSeen, v int64) { w.LastSeen = v }, productionID, since, limit); err != nil {
		return nil, err
	}
	if err := merge(holdersSQL, func(w *store.WorkerSeen, v int64) { w.Holding = v }, productionID, now); err != nil {
		return nil, err
	}
	return ws.List, nil
}

// keyPageSQL is one page of jobs in byte order of their keys, one range of
// leases_jobs_by_key (observe_test.go): the index is in the "C" collation
// (byte order, whatever the database's collation), and every comparison and
// the order name it, so the range's bounds are plain comparisons, never a
// pattern.
func keyPageSQL(f store.JobFilter) (string, []any) {
	var c conds
	c.add(`production_id = $?`, f.ProductionID)
	c.add(`key COLLATE "C" >= $?`, f.KeyFrom)
	if f.State != "" {
		c.add(`state = $?`, f.State)
	}
	if f.KeyAfter != "" {
		c.add(`key COLLATE "C" > $?`, f.KeyAfter)
	}
	if f.KeyBelow != "" {
		c.add(`key COLLATE "C" < $?`, f.KeyBelow)
	}
	order := `key COLLATE "C"`
	if f.Backward {
		order = `key COLLATE "C" DESC`
	}
	return c.page(`SELECT `+jobRowColumns+` FROM leases_jobs`, order, f.Limit)
}
