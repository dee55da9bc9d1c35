// The bounded observations on SQLite (store.Observer).
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/libleases/libleases/core/store"
)

// Every observation runs on the pool, outside any write transaction: each
// statement is its own read transaction, ended when its rows are closed.
var _ store.Observer = (*DB)(nil)

const jobRowColumns = `id, production_id, key, seq, state, worker, claimed_unix_us, expiry_unix_us,
	attempts, reason, requested_unix_us, updated_unix_us, length(payload), priority, claimable_unix_us, ready_unix_us, due`

// jobRowColumnsJ are jobRowColumns of the jobs table named j.
const jobRowColumnsJ = `j.id, j.production_id, j.key, j.seq, j.state, j.worker, j.claimed_unix_us, j.expiry_unix_us,
	j.attempts, j.reason, j.requested_unix_us, j.updated_unix_us, length(j.payload), j.priority, j.claimable_unix_us,
	j.ready_unix_us, j.due`

// collect reads every row with scan and closes rows; the result is never
// nil, so an empty listing marshals as [].
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, classify(err)
		}
		out = append(out, v)
	}
	return out, classify(rows.Err())
}

func scanJobRow(r scanner) (store.JobRow, error) {
	var j store.JobRow
	var key sql.NullString
	err := r.Scan(&j.ID, &j.ProductionID, &key, &j.Seq, &j.State, &j.Worker, &j.ClaimedAt, &j.Expiry,
		&j.Attempts, &j.Reason, &j.RequestedAt, &j.UpdatedAt, &j.PayloadSize, &j.Priority, &j.ClaimableAt, &j.ReadyAt, &j.Due)
	j.Key, j.HasKey = key.String, key.Valid
	return j, err
}

// jobPageSQL is one page of jobs, one index range for each filter
// (observe_plan_test.go): jobs_by_order, jobs_claimable with a state, the
// (production_id, key) unique index with a key, the primary key with an id.
func jobPageSQL(f store.JobFilter) (string, []any) {
	if f.KeyFrom != "" {
		return keyPageSQL(f)
	}
	where, args := []string{`production_id = ?`}, []any{f.ProductionID}
	if f.State != "" {
		where, args = append(where, `state = ?`), append(args, f.State)
	}
	if f.Key != "" {
		where, args = append(where, `key = ?`), append(args, f.Key)
	}
	if f.ID != "" {
		where, args = append(where, `id = ?`), append(args, f.ID)
	}
	if !f.Backward || f.AfterSeq != 0 {
		where, args = append(where, `seq > ?`), append(args, f.AfterSeq)
	}
	if f.BeforeSeq != 0 {
		where, args = append(where, `seq < ?`), append(args, f.BeforeSeq)
	}
	order := `seq`
	if f.Backward {
		order = `seq DESC`
	}
	return `SELECT ` + jobRowColumns + ` FROM jobs WHERE ` + strings.Join(where, ` AND `) +
		` ORDER BY ` + order + ` LIMIT ?`, append(args, f.Limit)
}

// workerJobsSQL is one page of a worker's jobs: a walk down the worker's
// entries of events_by_worker (newest first), one primary-key seek of the
// job per claimed event (observe_plan_test.go), merged with the worker's
// claimed events in the tail after the projection's mark (projector.go).
// Each row carries its event's time (k) last, which orders the page, so
// the index's order serves the projected part.
func workerJobsSQL(f store.WorkerJobFilter) (string, []any) {
	where := []string{`e.production_id = ?`, `e.worker = ?`, `e.` + workerKindsSQL, `e.kind = 'claimed'`,
		`j.worker = e.worker`, `j.claimed_unix_us = e.at_unix_us`, `j.state <> 'requested'`}
	args := []any{f.ProductionID, f.Worker}
	order := `k DESC, id DESC`
	switch {
	case f.Newer:
		where = append(where, `e.at_unix_us >= ?`, `(e.at_unix_us > ? OR j.id > ?)`)
		args = append(args, f.AfterAt, f.AfterAt, f.AfterID)
		order = `k, id`
	case f.BeforeAt != 0:
		where = append(where, `e.at_unix_us <= ?`, `(e.at_unix_us < ? OR j.id < ?)`)
		args = append(args, f.BeforeAt, f.BeforeAt, f.BeforeID)
	}
	if len(f.States) > 0 {
		where = append(where, `j.state IN (?`+strings.Repeat(`, ?`, len(f.States)-1)+`)`)
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	if f.Key != "" {
		where, args = append(where, `j.key = ?`), append(args, f.Key)
	}
	if f.ID != "" {
		where, args = append(where, `j.id = ?`), append(args, f.ID)
	}
	filter := strings.Join(where, ` AND `)
	return `SELECT ` + jobRowColumnsJ + `, e.at_unix_us AS k FROM events e INDEXED BY events_by_worker
		CROSS JOIN jobs j ON j.id = e.job_id WHERE e.projected = 1 AND ` + filter + `
		UNION ALL SELECT ` + jobRowColumnsJ + `, e.at_unix_us FROM events e CROSS JOIN jobs j ON j.id = e.job_id
		WHERE e.seq > ` + projectedMarkSQL + ` AND e.projected = 0 AND ` + filter + `
		ORDER BY ` + order + ` LIMIT ?`, append(append(args, args...), f.Limit)
}

// ListWorkerJobs reads one page of a worker's jobs.
func (s *DB) ListWorkerJobs(ctx context.Context, f store.WorkerJobFilter) ([]store.JobRow, error) {
	s.wal.pace()
	text, args := workerJobsSQL(f)
	rows, err := s.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r scanner) (store.JobRow, error) {
		var j store.JobRow
		var key sql.NullString
		var k int64 // the order's key, the claimed event's time
		err := r.Scan(&j.ID, &j.ProductionID, &key, &j.Seq, &j.State, &j.Worker, &j.ClaimedAt, &j.Expiry, &j.Attempts,
			&j.Reason, &j.RequestedAt, &j.UpdatedAt, &j.PayloadSize, &j.Priority, &j.ClaimableAt, &j.ReadyAt, &j.Due, &k)
		j.Key, j.HasKey = key.String, key.Valid
		return j, err
	})
}

// jobTimesSQL reads the times of a page of jobs in one statement: for each
// id of the JSON array ?2, one seek of the primary key, one of
// events_by_job to the job's first claimed event (its first few events),
// one of the attempts' primary key to its newest attempt (observe_plan_test.go).
// A job none of whose projected events is claimed has its first claimed
// event in the tail after the projection's mark, if anywhere (projector.go).
// CROSS JOIN keeps the ids outside; the unary + keeps the planner off the
// production's indexes, which would visit every job of the production.
const jobTimesSQL = `SELECT j.id, j.requested_unix_us,
	coalesce((SELECT e.at_unix_us FROM events e WHERE e.job_id = j.id AND e.projected = 1 AND e.kind = 'claimed'
			ORDER BY e.seq LIMIT 1),
		(SELECT t.at_unix_us FROM events t WHERE t.seq > ` + projectedMarkSQL + ` AND t.projected = 0
			AND t.job_id = j.id AND t.kind = 'claimed' ORDER BY t.seq LIMIT 1), 0),
	coalesce(a.number, 0), coalesce(a.worker, ''), coalesce(a.claimed_unix_us, 0), coalesce(a.ended_unix_us, 0),
	coalesce(a.ending, ''), coalesce(a.reason, '')
	FROM json_each(?2) AS ids CROSS JOIN jobs j ON j.id = ids.value
	LEFT JOIN attempts a ON a.job_id = j.id AND a.id = (SELECT max(x.id) FROM attempts x WHERE x.job_id = j.id)
	WHERE +j.production_id = ?1`

// JobTimes reads the times of a page of jobs.
func (s *DB) JobTimes(ctx context.Context, productionID string, ids []string) ([]store.JobTimesRow, error) {
	s.wal.pace()
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, jobTimesSQL, productionID, string(list))
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r scanner) (store.JobTimesRow, error) {
		var t store.JobTimesRow
		err := r.Scan(&t.ID, &t.RequestedAt, &t.FirstClaimedAt, &t.Last.Number, &t.Last.Worker, &t.Last.ClaimedAt,
			&t.Last.EndedAt, &t.Last.Ending, &t.Last.Reason)
		t.Last.JobID = t.ID
		return t, err
	})
}

// ListJobs reads one page of jobs.
func (s *DB) ListJobs(ctx context.Context, f store.JobFilter) ([]store.JobRow, error) {
	s.wal.pace()
	text, args := jobPageSQL(f)
	rows, err := s.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanJobRow)
}

// jobIDsSQL is one range of the primary key (sqlite_autoindex_jobs_1); the
// production is a filter on that range (the unary + keeps the planner off
// the production's indexes, which would visit every job of the production).
func jobIDsSQL(f store.JobIDFilter) (string, []any) {
	where, args := []string{`id >= ?`}, []any{f.From}
	if f.To != "" {
		where, args = append(where, `id < ?`), append(args, f.To)
	}
	if f.ProductionID != "" {
		where, args = append(where, `+production_id = ?`), append(args, f.ProductionID)
	}
	return `SELECT id, production_id FROM jobs WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY id LIMIT ?`,
		append(args, f.Limit)
}

// JobIDs reads job ids in a range of the primary key.
func (s *DB) JobIDs(ctx context.Context, f store.JobIDFilter) ([]store.JobIDRow, error) {
	s.wal.pace()
	text, args := jobIDsSQL(f)
	rows, err := s.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r scanner) (store.JobIDRow, error) {
		var j store.JobIDRow
		return j, r.Scan(&j.ID, &j.ProductionID)
	})
}

// ListProductions reads productions by name, from the unique index on name.
func (s *DB) ListProductions(ctx context.Context, after string, limit int) ([]store.Production, error) {
	rows, err := s.query(ctx, `SELECT `+productionColumns+` FROM productions WHERE name > ? ORDER BY name LIMIT ?`,
		after, limit)
	if err != nil {
		return nil, classify(err)
	}
	return scanProductions(rows)
}

func scanProductions(rows *sql.Rows) ([]store.Production, error) {
	return collect(rows, scanProduction)
}

// Count statements: one covering range of jobs_claimable per state (a
// bare count of index entries: half the work of grouping the production's
// whole range by state, which decodes and compares every entry's state),
// the production's claims in the partial index of claims (which holds each
// one's expiry: one entry per claim, never the table), and the first
// requested job in request order.
var (
	countByStateSQL = `WITH s(state) AS (VALUES ('` + strings.Join(store.JobStates, `'), ('`) + `'))
		SELECT state, (SELECT count(*) FROM jobs INDEXED BY jobs_claimable
			WHERE production_id = ?1 AND jobs.state = s.state) FROM s`
	countExpiredSQL = `SELECT count(*) FROM jobs INDEXED BY jobs_claimed_ready
		WHERE production_id = ? AND state = 'claimed' AND expiry_unix_us <= ?`
	oldestRequestedSQL = `SELECT requested_unix_us FROM jobs INDEXED BY jobs_claimable
		WHERE production_id = ? AND state = 'requested' ORDER BY seq LIMIT 1`
)

// CountJobs counts a production's jobs by state, its expired claims and its
// oldest requested job.
func (s *DB) CountJobs(ctx context.Context, productionID string, now int64) (store.JobCounts, error) {
	c := store.JobCounts{ByState: map[string]int64{}}
	rows, err := s.query(ctx, countByStateSQL, productionID)
	if err != nil {
		return c, classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return c, classify(err)
		}
		c.ByState[state] = n
	}
	if err := rows.Err(); err != nil {
		return c, classify(err)
	}
	rows.Close()
	if err := s.queryRow(ctx, countExpiredSQL, productionID, now).Scan(&c.Expired); err != nil {
		return c, classify(err)
	}
	err = s.queryRow(ctx, oldestRequestedSQL, productionID).Scan(&c.OldestRequested)
	if err = classify(err); err != nil && err != store.ErrNoRow {
		return c, err
	}
	return c, nil
}

// countEverySQL counts every production's jobs in one statement: one pass
// over the covering index jobs_claimable, in its order (production, state,
// seq), so the grouping needs no sort and no row is read; for a
// production's claimed jobs its expired claims from the partial index of
// claims, and for its requested jobs the first one in request order (one
// entry of jobs_claimable and its row). A production without jobs has no
// entry: it costs nothing. The expiry's unary + keeps the claims' count a
// seek of its production: after ANALYZE, SQLite planned the bound on
// expiry as a skip-scan of every production's claims instead.
const countEverySQL = `SELECT g.production_id, g.state, g.n,
		CASE g.state WHEN 'claimed' THEN (SELECT count(*) FROM jobs INDEXED BY jobs_claimed_ready
			WHERE production_id = g.production_id AND state = 'claimed' AND +expiry_unix_us <= ?1) ELSE 0 END,
		CASE g.state WHEN 'requested' THEN (SELECT requested_unix_us FROM jobs INDEXED BY jobs_claimable
			WHERE production_id = g.production_id AND state = 'requested' ORDER BY seq LIMIT 1) ELSE 0 END
	FROM (SELECT production_id, state, count(*) AS n FROM jobs INDEXED BY jobs_claimable
		GROUP BY production_id, state) AS g`

// CountEveryProduction counts the jobs of every production that has any,
// in one statement.
func (s *DB) CountEveryProduction(ctx context.Context, now int64) (map[string]store.JobCounts, error) {
	rows, err := s.query(ctx, countEverySQL, now)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	out := map[string]store.JobCounts{}
	for rows.Next() {
		var id, state string
		var n, expired, oldest int64
		if err := rows.Scan(&id, &state, &n, &expired, &oldest); err != nil {
			return nil, classify(err)
		}
		c, ok := out[id]
		if !ok {
			c.ByState = map[string]int64{}
		}
		c.ByState[state] = n
		switch state {
		case store.StateClaimed:
			c.Expired = expired
		case store.StateRequested:
			c.OldestRequested = oldest
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// EventHorizon: SQLite numbers events under its one writer lock, so event
// numbers are committed in order and every committed event is final.
func (s *DB) EventHorizon(context.Context) (int64, error) { return 1<<63 - 1, nil }

const eventColumns = `seq, at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail`

// eventPageSQL is one page of events, one index range for each filter
// (observe_plan_test.go): the primary key, events_by_production,
// events_by_kind, or events_by_job (a job's few events, filtered by kind),
// each for the projected events, merged in seq order with the same filter
// over the tail after the projection's mark, a range of the primary key
// (projector.go). Without statistics SQLite would read a production's kind
// through events_by_production, every kind's rows: the kind index is
// named. It holds a kind's in-order and late events apart (CountEvents),
// so a page of a kind merges the two ranges and the tail in seq order,
// each read in its order.
func eventPageSQL(f store.EventFilter) (string, []any) {
	order := `seq`
	if f.Newest {
		order = `seq DESC`
	}
	tail := `SELECT ` + eventColumns + ` FROM events WHERE ` + tailSQL(`?`) + ` AND seq < ?`
	if f.JobID == "" && f.ProductionID != "" && f.Kind != "" {
		part := `SELECT ` + eventColumns + ` FROM events INDEXED BY events_by_kind
			WHERE production_id = ? AND kind = ? AND late = %d AND projected = 1 AND seq > ? AND seq < ?`
		args := []any{f.ProductionID, f.Kind, f.AfterSeq, f.Before, f.ProductionID, f.Kind, f.AfterSeq, f.Before,
			f.AfterSeq, f.Before, f.ProductionID, f.Kind, f.Limit}
		return fmt.Sprintf(part, 0) + ` UNION ALL ` + fmt.Sprintf(part, 1) + ` UNION ALL ` + tail +
			` AND production_id = ? AND kind = ? ORDER BY ` + order + ` LIMIT ?`, args
	}
	var where []string
	var args []any
	switch {
	case f.JobID != "":
		where, args = append(where, `job_id = ?`), append(args, f.JobID)
	case f.ProductionID != "":
		where, args = append(where, `production_id = ?`), append(args, f.ProductionID)
	}
	if f.Kind != "" {
		where, args = append(where, `kind = ?`), append(args, f.Kind)
	}
	if len(where) == 0 { // the primary key: every event, projected or not
		return `SELECT ` + eventColumns + ` FROM events WHERE seq > ? AND seq < ? ORDER BY ` + order + ` LIMIT ?`,
			[]any{f.AfterSeq, f.Before, f.Limit}
	}
	filter := ` AND ` + strings.Join(where, ` AND `)
	all := append(append([]any{f.AfterSeq, f.Before}, args...), f.AfterSeq, f.Before)
	all = append(append(all, args...), f.Limit)
	return `SELECT ` + eventColumns + ` FROM events WHERE projected = 1 AND seq > ? AND seq < ?` + filter +
		` UNION ALL ` + tail + filter + ` ORDER BY ` + order + ` LIMIT ?`, all
}

// ListEvents reads one page of events.
func (s *DB) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	s.wal.pace()
	text, args := eventPageSQL(f)
	rows, err := s.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return scanEvents(rows)
}

func scanEvents(rows *sql.Rows) ([]store.Event, error) {
	return collect(rows, func(r scanner) (store.Event, error) {
		var e store.Event
		err := r.Scan(&e.Seq, &e.At, &e.ProductionID, &e.JobID, &e.Kind, &e.Worker, &e.Expiry, &e.Detail)
		return e, err
	})
}

// Per-minute counts read events_by_kind (production_id, kind, late, seq).
// An event is late when its time is earlier than that of an event of its
// production and kind with a smaller seq (a clock that ran ahead and came
// back: unguarded writes record their own time, docs/CLOCK.md); every other
// event is in order, so along seq the in-order events' times never
// decrease, and the in-order events of one bucket of time are one range of
// seq. Each bucket is found by a binary search of seq (firstInOrderSQL,
// one seek of the index per step) and counted as a bare count of that
// range; late events, few unless a clock misbehaved, have their own partial
// index by time (events_by_kind_late) and are counted from it. The index
// by kind holds projected events only: the in-order events of the tail
// after the projection's mark (projector.go) are counted by bucket from a
// scan of the tail. The searches and counts run in one read transaction,
// so they see one snapshot.
const (
	firstInOrderSQL = `SELECT seq, at_unix_us FROM events INDEXED BY events_by_kind
		WHERE production_id = ?1 AND kind = ?2 AND late = 0 AND projected = 1 AND seq >= ?3 ORDER BY seq LIMIT 1`
	countInOrderSQL = `SELECT count(*) FROM events INDEXED BY events_by_kind
		WHERE production_id = ?1 AND kind = ?2 AND late = 0 AND projected = 1 AND seq >= ?3 AND seq < ?4`
	lastSeqSQL     = `SELECT coalesce(max(seq), 0) FROM events`
	lastInOrderSQL = `SELECT seq, at_unix_us FROM events INDEXED BY events_by_kind
		WHERE production_id = ?1 AND kind = ?2 AND late = 0 AND projected = 1 ORDER BY seq DESC LIMIT 1`
	countTailSQL = `SELECT at_unix_us / ?3, count(*) FROM events WHERE ` + inTail + `
		AND production_id = ?1 AND kind = ?2 AND late = 0 AND at_unix_us >= ?4 GROUP BY 1`
	countLateSQL = `SELECT at_unix_us / ?3, count(*) FROM events INDEXED BY events_by_kind_late
		WHERE production_id = ?1 AND kind = ?2 AND late = 1 AND at_unix_us >= ?4 GROUP BY 1`
)

// CountEvents counts a production's events of one kind per bucket.
func (s *DB) CountEvents(ctx context.Context, productionID, kind string, since, width int64) ([]store.Bucket, error) {
	if err := s.queries.file.check(); err != nil {
		s.queries.file.release()
		return nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, classify(err)
	}
	defer conn.Close()
	// A deferred BEGIN: a read transaction, which never takes the writer lock.
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		return nil, classify(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`) //nolint:errcheck
	prepare := func(text string) (*sql.Stmt, error) {
		st, err := conn.PrepareContext(ctx, text)
		return st, classify(err)
	}
	first, err := prepare(firstInOrderSQL)
	if err != nil {
		return nil, err
	}
	defer first.Close()
	count, err := prepare(countInOrderSQL)
	if err != nil {
		return nil, err
	}
	defer count.Close()
	var end int64 // past the last event's seq
	if err := conn.QueryRowContext(ctx, lastSeqSQL).Scan(&end); err != nil {
		return nil, classify(err)
	}
	end++
	type ev struct {
		seq, at int64
		ok      bool
	}
	probe := func(from int64) (ev, error) {
		var e ev
		err := first.QueryRowContext(ctx, productionID, kind, from).Scan(&e.seq, &e.at)
		if err == sql.ErrNoRows {
			return e, nil
		}
		e.ok = err == nil
		return e, classify(err)
	}
	var last ev // the newest in-order event of the kind
	err = conn.QueryRowContext(ctx, lastInOrderSQL, productionID, kind).Scan(&last.seq, &last.at)
	last.ok = err == nil
	if err != nil && err != sql.ErrNoRows {
		return nil, classify(err)
	}
	// search is the first in-order event with seq >= lo and time >= t:
	// the least seq from which the first in-order event is at or after t,
	// a property that holds from some seq on. Times grow about evenly with
	// seq, so every other step guesses the seq by interpolation between the
	// bounds' times; the steps between halve the range, so the search never
	// takes more than twice a binary search's steps.
	search := func(t, lo int64) (ev, error) {
		e, err := probe(lo)
		if err != nil || !e.ok || e.at >= t {
			return e, err
		}
		if !last.ok || last.at < t {
			return ev{}, nil
		}
		lo, loAt := e.seq+1, e.at
		hi, hiAt := last.seq, last.at
		for step := 0; lo < hi; step++ {
			mid := lo + (hi-lo)/2
			if step%2 == 0 && hiAt > loAt {
				g := lo + int64(float64(t-loAt)/float64(hiAt-loAt)*float64(hi-lo))
				mid = min(max(g, lo), hi-1)
			}
			e, err := probe(mid)
			if err != nil {
				return e, err
			}
			if !e.ok || e.at >= t {
				hi, hiAt = mid, e.at
			} else {
				lo, loAt = e.seq+1, e.at
			}
		}
		return probe(lo)
	}
	counts := map[int64]int64{}
	e, err := search(since, 0)
	for err == nil && e.ok {
		b := e.at / width
		var next ev
		if next, err = search((b+1)*width, e.seq+1); err != nil {
			break
		}
		upTo := end
		if next.ok {
			upTo = next.seq
		}
		var n int64
		if err = count.QueryRowContext(ctx, productionID, kind, e.seq, upTo).Scan(&n); err != nil {
			err = classify(err)
			break
		}
		counts[b] += n
		e = next
	}
	if err != nil {
		return nil, err
	}
	for _, text := range []string{countLateSQL, countTailSQL} {
		rows, err := conn.QueryContext(ctx, text, productionID, kind, width, since)
		if err != nil {
			return nil, classify(err)
		}
		more, err := collect(rows, func(r scanner) (store.Bucket, error) {
			var b store.Bucket
			err := r.Scan(&b.Start, &b.Count)
			return b, err
		})
		if err != nil {
			return nil, err
		}
		for _, b := range more {
			counts[b.Start] += b.Count
		}
	}
	out := make([]store.Bucket, 0, len(counts))
	for b, n := range counts {
		out = append(out, store.Bucket{Start: b * width, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, nil
}

// workersSeenSQL walks events_by_worker from one worker to the next (each
// step the first entry past the last worker: a loose index scan) and reads
// each worker's last entry, so it costs a few index steps per worker the
// production has seen, however many events the window holds. The index
// holds projected events only: the workers' events in the tail after the
// projection's mark (projector.go) are grouped by worker from a scan of
// the tail, and each worker's last time is the later of the two. It keeps
// the workers last seen at or after the time. holdersSQL reads the
// production's claims in the partial index of claims, which holds each
// one's expiry and worker.
var (
	workerKindsSQL = `kind IN ('` + strings.Join(store.WorkerKinds, `', '`) + `')`
	workersSeenSQL = `WITH RECURSIVE w(worker) AS (
			SELECT (SELECT min(worker) FROM events INDEXED BY events_by_worker
				WHERE production_id = ?1 AND ` + workerKindsSQL + ` AND projected = 1)
			UNION ALL
			SELECT (SELECT min(worker) FROM events INDEXED BY events_by_worker
				WHERE production_id = ?1 AND ` + workerKindsSQL + ` AND projected = 1 AND worker > w.worker)
			FROM w WHERE w.worker IS NOT NULL),
		seen(worker, at) AS (
			SELECT worker, (SELECT max(at_unix_us) FROM events INDEXED BY events_by_worker
				WHERE production_id = ?1 AND ` + workerKindsSQL + ` AND projected = 1 AND worker = w.worker)
			FROM w WHERE w.worker IS NOT NULL
			UNION ALL
			SELECT worker, max(at_unix_us) FROM events WHERE ` + inTail + `
				AND production_id = ?1 AND ` + workerKindsSQL + ` GROUP BY worker)
		SELECT worker, max(at) AS last FROM seen GROUP BY worker HAVING last >= ?2 ORDER BY last DESC, worker LIMIT ?3`
	holdersSQL = `SELECT worker, count(*) FROM jobs INDEXED BY jobs_claimed_ready
		WHERE production_id = ? AND state = 'claimed' AND expiry_unix_us > ? GROUP BY worker`
)

// Workers lists the workers seen since a time and those holding claims.
func (s *DB) Workers(ctx context.Context, productionID string, since, now int64, limit int) ([]store.WorkerSeen, error) {
	var ws store.WorkerSet
	merge := func(text string, set func(*store.WorkerSeen, int64), args ...any) error {
		rows, err := s.query(ctx, text, args...)
		if err != nil {
			return classify(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				return classify(err)
			}
			set(ws.Get(name), v)
		}
		return classify(rows.Err())
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
// the (production_id, key) unique index (observe_plan_test.go): the column's
// BINARY collation is byte order, so the range's bounds are plain
// comparisons, never a pattern.
func keyPageSQL(f store.JobFilter) (string, []any) {
	where, args := []string{`production_id = ?`, `key >= ?`}, []any{f.ProductionID, f.KeyFrom}
	if f.State != "" {
		where, args = append(where, `state = ?`), append(args, f.State)
	}
	if f.KeyAfter != "" {
		where, args = append(where, `key > ?`), append(args, f.KeyAfter)
	}
	if f.KeyBelow != "" {
		where, args = append(where, `key < ?`), append(args, f.KeyBelow)
	}
	order := `key`
	if f.Backward {
		order = `key DESC`
	}
	return `SELECT ` + jobRowColumns + ` FROM jobs WHERE ` + strings.Join(where, ` AND `) +
		` ORDER BY ` + order + ` LIMIT ?`, append(args, f.Limit)
}
