// The bounded observations on SQLite (store.Observer).
package sqlitestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/libleases/libleases/core/store"
)

// Every observation runs on the pool, outside any write transaction: each
// statement is its own read transaction, ended when its rows are closed.
var _ store.Observer = (*DB)(nil)

const jobRowColumns = `id, production_id, key, seq, state, worker, claimed_unix_us, expiry_unix_us,
	attempts, reason, requested_unix_us, updated_unix_us, length(payload), priority, claimable_unix_us, ready_unix_us, due`

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
	where, args = append(where, `seq > ?`), append(args, f.AfterSeq, f.Limit)
	return `SELECT ` + jobRowColumns + ` FROM jobs WHERE ` + strings.Join(where, ` AND `) +
		` ORDER BY seq LIMIT ?`, args
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

// Count statements: a covering range of jobs_claimable (the production's
// entries, not its rows), the partial index of claims by expiry, and the
// first requested job in request order.
const (
	countByStateSQL = `SELECT state, count(*) FROM jobs WHERE production_id = ? GROUP BY state`
	countExpiredSQL = `SELECT count(*) FROM jobs INDEXED BY jobs_claimed_expiry
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

// EventHorizon: SQLite numbers events under its one writer lock, so event
// numbers are committed in order and every committed event is final.
func (s *DB) EventHorizon(context.Context) (int64, error) { return 1<<63 - 1, nil }

const eventColumns = `seq, at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail`

// eventPageSQL is one page of events, one index range for each filter
// (observe_plan_test.go): the primary key, events_by_production,
// events_by_kind, or events_by_job (a job's few events, filtered by kind).
// Without statistics SQLite would read a production's kind through
// events_by_production, every kind's rows: the kind index is named.
func eventPageSQL(f store.EventFilter) (string, []any) {
	var where []string
	var args []any
	from := `events`
	switch {
	case f.JobID != "":
		where, args = append(where, `job_id = ?`), append(args, f.JobID)
	case f.ProductionID != "":
		where, args = append(where, `production_id = ?`), append(args, f.ProductionID)
		if f.Kind != "" {
			from = `events INDEXED BY events_by_kind`
		}
	}
	if f.Kind != "" {
		where, args = append(where, `kind = ?`), append(args, f.Kind)
	}
	where, args = append(where, `seq > ?`, `seq < ?`), append(args, f.AfterSeq, f.Before, f.Limit)
	order := `seq`
	if f.Newest {
		order = `seq DESC`
	}
	return `SELECT ` + eventColumns + ` FROM ` + from + ` WHERE ` + strings.Join(where, ` AND `) +
		` ORDER BY ` + order + ` LIMIT ?`, args
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

// countEventsSQL reads only events_by_kind_time: the range of one kind since
// a time, grouped into buckets.
const countEventsSQL = `SELECT at_unix_us / ? AS b, count(*) FROM events
	WHERE production_id = ? AND kind = ? AND at_unix_us >= ? GROUP BY b ORDER BY b`

// CountEvents counts a production's events of one kind per bucket.
func (s *DB) CountEvents(ctx context.Context, productionID, kind string, since, width int64) ([]store.Bucket, error) {
	rows, err := s.query(ctx, countEventsSQL, width, productionID, kind, since)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r scanner) (store.Bucket, error) {
		var b store.Bucket
		err := r.Scan(&b.Start, &b.Count)
		b.Start *= width
		return b, err
	})
}

// workersSeenSQL reads the ranges of events_by_kind_time since a time, one
// per kind a worker causes; holdersSQL the unexpired part of the partial
// index of claims by expiry.
var (
	workersSeenSQL = `SELECT worker, max(at_unix_us) FROM events
		WHERE production_id = ? AND kind IN ('` + strings.Join(store.WorkerKinds, `', '`) + `') AND at_unix_us >= ?
		GROUP BY worker ORDER BY max(at_unix_us) DESC, worker LIMIT ?`
	holdersSQL = `SELECT worker, count(*) FROM jobs INDEXED BY jobs_claimed_expiry
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
