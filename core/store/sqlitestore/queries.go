package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/libleases/libleases/core/store"
)

// stmtCache prepares each statement of the pool's reads once per database
// handle; database/sql then keeps it prepared on every connection that runs
// it, so SQLite parses and plans each statement once per connection instead
// of once per call. A write transaction's statements are prepared on the
// writer connection instead (writerConn.stmt).
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

func (c *stmtCache) get(ctx context.Context, text string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[text]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, text)
	if err != nil {
		return nil, classify(err)
	}
	c.m[text] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// queries holds every statement; it runs on the pool, or on tx, the writer
// connection, inside the transaction of g.
type queries struct {
	st   *stmtCache
	tx   *sql.Conn
	g    *group        // tx's group, told of failed statements (group.note)
	file *fileIdentity // checked before each read on the pool (BeginWrite checks a tx's)
	proj *projector    // counts the events a tx records (projector.go)
	// ran counts the statements a tx runs (DB.WriteStatements); BEGIN,
	// SAVEPOINT, RELEASE and COMMIT are not counted.
	ran *atomic.Int64
}

func (q queries) stmt(ctx context.Context, text string) (*sql.Stmt, error) {
	if q.tx == nil && q.file != nil {
		if err := q.file.check(); err != nil {
			q.file.release()
			return nil, err
		}
	}
	if q.tx == nil {
		return q.st.get(ctx, text)
	}
	if q.ran != nil {
		q.ran.Add(1)
	}
	// On the writer connection, which is in the group's transaction
	// (writerConn.stmt); never once the group has ended, when the
	// connection is in none.
	if q.g.ended() {
		return nil, sql.ErrTxDone
	}
	st, err := q.g.s.writer.stmt(ctx, q.g.conn, text)
	return st, classify(err)
}

func (q queries) exec(ctx context.Context, text string, args ...any) (sql.Result, error) {
	st, err := q.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(ctx, args...)
	q.note(err)
	return res, err
}

func (q queries) note(err error) {
	if q.g != nil {
		q.g.note(err)
	}
}

func (q queries) query(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	st, err := q.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	q.note(err)
	return rows, err
}

// row is a *sql.Row that can also carry a preparation error.
type row struct {
	r   *sql.Row
	err error
	q   queries
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	err := r.r.Scan(dest...)
	r.q.note(err)
	return err
}

func (q queries) queryRow(ctx context.Context, text string, args ...any) row {
	st, err := q.stmt(ctx, text)
	if err != nil {
		return row{err: err}
	}
	return row{r: st.QueryRowContext(ctx, args...), q: q}
}

const jobColumns = `id, production_id, key, payload, seq, state, claim_hash, worker,
	claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us,
	priority, claimable_unix_us, ready_unix_us, due`

type scanner interface{ Scan(dest ...any) error }

func scanJob(r scanner) (store.Job, error) {
	var j store.Job
	var key sql.NullString
	err := r.Scan(&j.ID, &j.ProductionID, &key, &j.Payload, &j.Seq, &j.State, &j.ClaimHash, &j.Worker,
		&j.ClaimedAt, &j.Expiry, &j.Attempts, &j.Reason, &j.RequestedAt, &j.UpdatedAt,
		&j.Priority, &j.ClaimableAt, &j.ReadyAt, &j.Due)
	if err != nil {
		return store.Job{}, classify(err)
	}
	j.Key, j.HasKey = key.String, key.Valid
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	return j, nil
}

func (q queries) HWM(ctx context.Context) (int64, error) {
	var v int64
	err := q.queryRow(ctx, `SELECT v FROM meta WHERE k = 'hwm_unix_us'`).Scan(&v)
	return v, classify(err)
}

func (q queries) SetHWM(ctx context.Context, unixUS int64) error {
	_, err := q.exec(ctx, `UPDATE meta SET v = max(v, ?) WHERE k = 'hwm_unix_us'`, unixUS)
	return classify(err)
}

// productionColumns are read by scanProduction.
const productionColumns = `id, name, created_unix_us, max_attempts, backoff_base_us, backoff_cap_us, jitter_percent,
	keep_completed_us, keep_failed_us, keep_dead_us, keep_cancelled_us, keep_events_us`

func scanProduction(r scanner) (store.Production, error) {
	var p store.Production
	err := r.Scan(&p.ID, &p.Name, &p.CreatedAt, &p.Policy.MaxAttempts, &p.Policy.BackoffBaseUS,
		&p.Policy.BackoffCapUS, &p.Policy.JitterPercent, &p.Retention.CompletedUS, &p.Retention.FailedUS,
		&p.Retention.DeadUS, &p.Retention.CancelledUS, &p.Retention.EventsUS)
	return p, err
}

func (q queries) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	p, err := scanProduction(q.queryRow(ctx, `SELECT `+productionColumns+` FROM productions WHERE name = ?`, name))
	return p, classify(err)
}

func (q queries) ProductionByID(ctx context.Context, id string) (store.Production, error) {
	p, err := scanProduction(q.queryRow(ctx, `SELECT `+productionColumns+` FROM productions WHERE id = ?`, id))
	return p, classify(err)
}

func (q queries) Productions(ctx context.Context) ([]store.Production, error) {
	rows, err := q.query(ctx, `SELECT `+productionColumns+` FROM productions ORDER BY name`)
	if err != nil {
		return nil, classify(err)
	}
	return scanProductions(rows)
}

func (q queries) JobByID(ctx context.Context, id string) (store.Job, error) {
	return scanJob(q.queryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
}

func (q queries) JobByKey(ctx context.Context, productionID, key string) (store.Job, error) {
	return scanJob(q.queryRow(ctx,
		`SELECT `+jobColumns+` FROM jobs WHERE production_id = ? AND key = ?`, productionID, key))
}

func (q queries) Jobs(ctx context.Context, productionID string) ([]store.Job, error) {
	rows, err := q.query(ctx,
		`SELECT `+jobColumns+` FROM jobs WHERE production_id = ? ORDER BY seq`, productionID)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	out := []store.Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, classify(rows.Err())
}

// NextClaimable takes the first due job in claim order: the first entry of
// the partial index jobs_due, whatever else the production holds (delayed
// jobs, claims and finished jobs are not in it).
func (q queries) NextClaimable(ctx context.Context, productionID string, now int64) (store.Job, error) {
	return scanJob(q.queryRow(ctx, nextClaimableSQL, productionID))
}

// The claim path's statements (plan_test.go pins their plans).
const (
	nextClaimableSQL = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_due
		WHERE production_id = ? AND state = 'requested' AND due = 1
		ORDER BY priority DESC, claimable_unix_us, seq LIMIT 1`
	promoteDueSQL = `UPDATE jobs SET due = 1 WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_delayed
		WHERE production_id = ? AND state = 'requested' AND due = 0 AND ready_unix_us <= ?
		ORDER BY ready_unix_us LIMIT ?)`
	lapsedClaimsSQL = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_claimed_ready
		WHERE production_id = ? AND state = 'claimed' AND ready_unix_us <= ? ORDER BY ready_unix_us LIMIT ?`
	// nextWithLooksSQL is nextClaimableSQL with two more columns: whether a
	// claim has lapsed, and whether a delayed job's time has come (the
	// first entry of each range, as hasClaimableSQL probes them).
	nextWithLooksSQL = `SELECT ` + jobColumns + `,
			EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_claimed_ready
				WHERE production_id = ?1 AND state = 'claimed' AND ready_unix_us <= ?2),
			EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_delayed
				WHERE production_id = ?1 AND state = 'requested' AND due = 0 AND ready_unix_us <= ?2)
		FROM jobs INDEXED BY jobs_due
		WHERE production_id = ?1 AND state = 'requested' AND due = 1
		ORDER BY priority DESC, claimable_unix_us, seq LIMIT 1`
)

// PromoteDue marks due the delayed jobs whose time has come: a range of
// jobs_delayed, which holds delayed jobs only.
func (q queries) PromoteDue(ctx context.Context, productionID string, now int64, limit int) (int64, error) {
	res, err := q.exec(ctx, promoteDueSQL, productionID, now, limit)
	if err != nil {
		return 0, classify(err)
	}
	n, err := res.RowsAffected()
	return n, classify(err)
}

// ClaimScan first reads the first due job together with whether any claim
// has lapsed or any delayed job's time has come (nextWithLooksSQL): usually
// neither, and the claim's look is that one statement. Otherwise, or with no
// due job, it runs the three looks in turn (in process, a round trip costs
// nothing): lapsed claims, promotion, then the first due job again, which
// a promoted job may now precede.
func (q queries) ClaimScan(ctx context.Context, productionID string, now int64, lapseLimit, promoteLimit int) (store.ClaimScan, error) {
	var sc store.ClaimScan
	var lapsed, ready bool
	next, err := scanJob(withExtra{q.queryRow(ctx, nextWithLooksSQL, productionID, now), []any{&lapsed, &ready}})
	if err == nil && !lapsed && !ready {
		sc.Next, sc.Found = next, true
		return sc, nil
	}
	if err != nil && !errors.Is(err, store.ErrNoRow) {
		return sc, err
	}
	if sc.Lapsed, err = q.LapsedClaims(ctx, productionID, now, lapseLimit); err != nil {
		return sc, err
	}
	if sc.Promoted, err = q.PromoteDue(ctx, productionID, now, promoteLimit); err != nil {
		return sc, err
	}
	sc.Next, err = q.NextClaimable(ctx, productionID, now)
	if errors.Is(err, store.ErrNoRow) {
		return sc, nil
	}
	sc.Found = err == nil
	return sc, err
}

// withExtra scans a row's first columns as its caller asks and the rest
// into extra.
type withExtra struct {
	r     scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.r.Scan(append(dest, w.extra...)...) }

// LapsedClaims reads claims whose expiry and backoff have passed: a range of
// jobs_claimed_ready, so unexpired claims are never scanned.
func (q queries) LapsedClaims(ctx context.Context, productionID string, now int64, limit int) ([]store.Job, error) {
	return q.jobs(ctx, lapsedClaimsSQL, productionID, now, limit)
}

// JobsInState reads a page of one state in request order (jobs_claimable).
func (q queries) JobsInState(ctx context.Context, productionID, state string, limit int) ([]store.Job, error) {
	return q.jobs(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_claimable
		WHERE production_id = ? AND state = ? ORDER BY seq LIMIT ?`, productionID, state, limit)
}

func (q queries) jobs(ctx context.Context, text string, args ...any) ([]store.Job, error) {
	rows, err := q.query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanJob)
}

func (q queries) UpdatePolicy(ctx context.Context, productionID string, p store.Policy) error {
	res, err := q.exec(ctx, `UPDATE productions SET max_attempts = ?, backoff_base_us = ?, backoff_cap_us = ?,
		jitter_percent = ? WHERE id = ?`, p.MaxAttempts, p.BackoffBaseUS, p.BackoffCapUS, p.JitterPercent, productionID)
	if err != nil {
		return classify(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrNoRow
	}
	return nil
}

func (q queries) UpdateRetention(ctx context.Context, productionID string, r store.Retention) error {
	res, err := q.exec(ctx, `UPDATE productions SET keep_completed_us = ?, keep_failed_us = ?, keep_dead_us = ?,
		keep_cancelled_us = ?, keep_events_us = ? WHERE id = ?`, r.CompletedUS, r.FailedUS, r.DeadUS, r.CancelledUS,
		r.EventsUS, productionID)
	if err != nil {
		return classify(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrNoRow
	}
	return nil
}

// NewestJobSeq reads the last entry of jobs_by_order's range.
func (q queries) NewestJobSeq(ctx context.Context, productionID string) (int64, error) {
	var seq int64
	err := q.queryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM jobs WHERE production_id = ?`, productionID).Scan(&seq)
	return seq, classify(err)
}

// NewestEvent reads the last row of events: SQLite numbers the next event
// from it, so pruning must never delete it.
func (q queries) NewestEvent(ctx context.Context) (int64, string, error) {
	var seq int64
	var job string
	err := q.queryRow(ctx, `SELECT seq, job_id FROM events ORDER BY seq DESC LIMIT 1`).Scan(&seq, &job)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return seq, job, classify(err)
}

// DeleteJobEvents deletes the oldest of a job's events: a range of
// events_by_job (its projected events), then the tail after the
// projection's mark (projector.go).
func (q queries) DeleteJobEvents(ctx context.Context, jobID string, limit int) (int64, error) {
	res, err := q.exec(ctx, `DELETE FROM events WHERE seq IN
		(SELECT seq FROM events WHERE job_id = ?1 AND projected = 1
			UNION ALL SELECT seq FROM events WHERE `+inTail+` AND job_id = ?1 ORDER BY 1 LIMIT ?2)`, jobID, limit)
	if err != nil {
		return 0, classify(err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (q queries) CountJobEvents(ctx context.Context, ids []string) (int64, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	var n int64
	err = q.queryRow(ctx, countJobEventsSQL, string(list)).Scan(&n)
	return n, classify(err)
}

func (q queries) DeleteJobs(ctx context.Context, ids []string) (int64, int64, error) {
	b, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, err
	}
	list := string(b)
	var n [2]int64
	for i, st := range []string{
		// A job's projected events by events_by_job, the others in the tail
		// after the projection's mark (projector.go).
		`DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE job_id IN (SELECT value FROM json_each(?1))
			AND projected = 1 UNION ALL SELECT seq FROM events WHERE ` + inTail + `
			AND job_id IN (SELECT value FROM json_each(?1)))`,
		`DELETE FROM facts WHERE job_id IN (SELECT value FROM json_each(?))`,
		`DELETE FROM outputs WHERE job_id IN (SELECT value FROM json_each(?))`,
		`DELETE FROM attempts WHERE job_id IN (SELECT value FROM json_each(?))`,
		`DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))`} {
		res, err := q.exec(ctx, st, list)
		if err != nil {
			return 0, 0, classify(err)
		}
		if i == 0 || i == 4 {
			n[i/4], _ = res.RowsAffected()
		}
	}
	return n[1], n[0], nil
}

// DeleteFinishedJobs reads which of ids still qualify (their keys, one
// statement), then deletes those as DeleteJobs does: the writer is this
// transaction's alone, so nothing changes between the two.
func (q queries) DeleteFinishedJobs(ctx context.Context, ids []string, state string, updatedBy int64) (int64, int64, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, 0, err
	}
	rows, err := q.query(ctx, `SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?1))
		AND state = ?2 AND updated_unix_us <= ?3
		AND id IS NOT (SELECT job_id FROM events ORDER BY seq DESC LIMIT 1)`, string(list), state, updatedBy)
	if err != nil {
		return 0, 0, classify(err)
	}
	kept, err := collect(rows, func(r scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
	if err != nil {
		return 0, 0, err
	}
	if len(kept) == 0 {
		return 0, 0, nil
	}
	return q.DeleteJobs(ctx, kept)
}

func (q queries) DeleteJob(ctx context.Context, jobID string) error {
	for _, st := range []string{`DELETE FROM facts WHERE job_id = ?`, `DELETE FROM outputs WHERE job_id = ?`,
		`DELETE FROM attempts WHERE job_id = ?`} {
		if _, err := q.exec(ctx, st, jobID); err != nil {
			return classify(err)
		}
	}
	res, err := q.exec(ctx, `DELETE FROM jobs WHERE id = ?`, jobID)
	if err != nil {
		return classify(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrNoRow
	}
	return nil
}

func (q queries) DeleteProduction(ctx context.Context, productionID string) error {
	res, err := q.exec(ctx, `DELETE FROM productions WHERE id = ?`, productionID)
	if err != nil {
		return classify(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrNoRow
	}
	return nil
}

// DeleteEvents deletes events by their primary key.
func (q queries) DeleteEvents(ctx context.Context, productionID string, seqs []int64) (int64, error) {
	list, err := json.Marshal(seqs)
	if err != nil {
		return 0, err
	}
	res, err := q.exec(ctx, `DELETE FROM events WHERE seq IN (SELECT value FROM json_each(?)) AND production_id = ?`,
		string(list), productionID)
	if err != nil {
		return 0, classify(err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

const attemptColumns = `job_id, number, worker, claimed_unix_us, ended_unix_us, ending, reason`

func scanAttempt(r scanner) (store.Attempt, error) {
	var a store.Attempt
	err := r.Scan(&a.JobID, &a.Number, &a.Worker, &a.ClaimedAt, &a.EndedAt, &a.Ending, &a.Reason)
	return a, err
}

func (q queries) Attempts(ctx context.Context, jobID string) ([]store.Attempt, error) {
	rows, err := q.query(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE job_id = ? ORDER BY id`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanAttempt)
}

// InsertAttempt appends to the history and drops what is older than the
// newest keep entries of the job (the table's range of the job). The insert returns the
// job's history length (its own row included), so the trim runs only when
// there is something to drop: most jobs end within keep attempts, and their
// completions run no DELETE. The attempt's number cannot tell: a redrive
// starts the numbers over while the older entries stay.
func (q queries) InsertAttempt(ctx context.Context, a store.Attempt, keep int) error {
	var n int
	if err := q.queryRow(ctx, insertAttemptSQL, a.JobID, a.Number, a.Worker, a.ClaimedAt, a.EndedAt, a.Ending,
		a.Reason).Scan(&n); err != nil {
		return classify(err)
	}
	if n <= keep {
		return nil
	}
	_, err := q.exec(ctx, trimAttemptsSQL, a.JobID, keep)
	return classify(err)
}

// insertAttemptSQL numbers the attempt after the job's newest and its
// RETURNING counts the job's entries after the insert (plan_test.go: each
// a range of the job's entries of the table, at most keep+1).
const insertAttemptSQL = `INSERT INTO attempts (id, ` + attemptColumns + `)
	VALUES (coalesce((SELECT max(id) FROM attempts WHERE job_id = ?1), 0) + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)
	RETURNING (SELECT count(*) FROM attempts WHERE job_id = ?1)`

const trimAttemptsSQL = `DELETE FROM attempts WHERE job_id = ?1 AND id <= (SELECT id FROM attempts
	WHERE job_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`

// HasClaimable is claim-next's condition at now, read from the claim
// path's partial indexes without a row: a due job, a delayed job whose time
// has come (promotion makes it due), or a claim whose expiry and backoff have
// passed (it may also be a last attempt, which the claim ends dead: a look
// may wake for nothing, never sleep through a job). A production that no
// longer exists answers true too: the claim that follows says not_found.
func (q queries) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	var has bool
	err := q.queryRow(ctx, hasClaimableSQL, productionID, now).Scan(&has)
	return has, classify(err)
}

// NextWakeAt is the earliest ready time of a delayed job or of a claim (its
// expiry plus the backoff its lapse costs): the first entry of jobs_delayed
// and of jobs_claimed_ready (plan_test.go pins the plans).
func (q queries) NextWakeAt(ctx context.Context, productionID string) (int64, bool, error) {
	var v sql.NullInt64
	err := q.queryRow(ctx, nextWakeAtSQL, productionID).Scan(&v)
	return v.Int64, v.Valid, classify(err)
}

// LookAt is HasClaimable at now and NextWakeAt in one statement: a waiting
// claim's look after its sample of the clock (store.LookerAt).
func (q queries) LookAt(ctx context.Context, productionID string, now int64) (bool, int64, bool, error) {
	var has bool
	var v sql.NullInt64
	err := q.queryRow(ctx, lookAtSQL, productionID, now).Scan(&has, &v)
	return has, v.Int64, v.Valid, classify(err)
}

// The waiting claim's statements.
const (
	hasClaimableSQL = `SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_due
			WHERE production_id = ?1 AND state = 'requested' AND due = 1)
		OR EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_delayed
			WHERE production_id = ?1 AND state = 'requested' AND due = 0 AND ready_unix_us <= ?2)
		OR EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_claimed_ready
			WHERE production_id = ?1 AND state = 'claimed' AND ready_unix_us <= ?2)
		OR NOT EXISTS (SELECT 1 FROM productions WHERE id = ?1)`
	nextWakeAtSQL = `SELECT min(r) FROM (
		SELECT (SELECT ready_unix_us FROM jobs INDEXED BY jobs_delayed
			WHERE production_id = ?1 AND state = 'requested' AND due = 0 ORDER BY ready_unix_us LIMIT 1) AS r
		UNION ALL
		SELECT (SELECT ready_unix_us FROM jobs INDEXED BY jobs_claimed_ready
			WHERE production_id = ?1 AND state = 'claimed' ORDER BY ready_unix_us LIMIT 1))`
	lookAtSQL = `SELECT (` + hasClaimableSQL + `), (` + nextWakeAtSQL + `)`
)

// pruneEventsSQL is a production's events after a seq: the projected ones
// by events_by_production, then the tail after the projection's mark
// (projector.go). countJobEventsSQL counts the events of a list of jobs
// the same way, by events_by_job and the tail.
var (
	pruneEventsSQL = `SELECT ` + eventColumns + ` FROM events WHERE production_id = ?1 AND projected = 1 AND seq > ?2
		UNION ALL SELECT ` + eventColumns + ` FROM events WHERE ` + tailSQL(`?2`) + ` AND production_id = ?1
		ORDER BY seq LIMIT ?3`
	countJobEventsSQL = `SELECT (SELECT count(*) FROM events WHERE job_id IN (SELECT value FROM json_each(?1))
			AND projected = 1)
		+ (SELECT count(*) FROM events WHERE ` + inTail + ` AND job_id IN (SELECT value FROM json_each(?1)))`
)

func (q queries) Events(ctx context.Context, productionID string, after int64, limit int) ([]store.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	var rows *sql.Rows
	var err error
	if productionID == "" {
		rows, err = q.query(ctx, `SELECT `+eventColumns+` FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	} else {
		rows, err = q.query(ctx, pruneEventsSQL, productionID, after, limit)
	}
	if err != nil {
		return nil, classify(err)
	}
	return scanEvents(rows)
}

func scanFact(r scanner) (store.Fact, error) {
	var f store.Fact
	err := r.Scan(&f.JobID, &f.Kind, &f.Key, &f.Value)
	return f, err
}

func scanOutput(r scanner) (store.Output, error) {
	var o store.Output
	err := r.Scan(&o.JobID, &o.Path, &o.Size, &o.SHA256, &o.Nonce)
	return o, err
}

func (q queries) Facts(ctx context.Context, jobID string) ([]store.Fact, error) {
	rows, err := q.query(ctx,
		`SELECT job_id, kind, key, value_json FROM facts WHERE job_id = ? ORDER BY kind, key`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanFact)
}

// idList is a set of job ids as one parameter, a JSON array read by
// json_each: one statement text whatever the number of ids.
func idList(ids []string) (string, error) {
	b, err := json.Marshal(ids)
	return string(b), err
}

func (q queries) FactsOf(ctx context.Context, jobIDs []string) ([]store.Fact, error) {
	ids, err := idList(jobIDs)
	if err != nil {
		return nil, err
	}
	rows, err := q.query(ctx, `SELECT job_id, kind, key, value_json FROM facts
		WHERE job_id IN (SELECT value FROM json_each(?)) ORDER BY job_id, kind, key`, ids)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanFact)
}

func (q queries) OutputsOf(ctx context.Context, jobIDs []string) ([]store.Output, error) {
	ids, err := idList(jobIDs)
	if err != nil {
		return nil, err
	}
	rows, err := q.query(ctx, `SELECT job_id, path, size, sha256, nonce FROM outputs
		WHERE job_id IN (SELECT value FROM json_each(?)) ORDER BY job_id, path`, ids)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanOutput)
}

func (q queries) Outputs(ctx context.Context, jobID string) ([]store.Output, error) {
	rows, err := q.query(ctx,
		`SELECT job_id, path, size, sha256, nonce FROM outputs WHERE job_id = ? ORDER BY path`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanOutput)
}

func (q queries) InsertProduction(ctx context.Context, p store.Production) error {
	_, err := q.exec(ctx, `INSERT INTO productions (`+productionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Name, p.CreatedAt, p.Policy.MaxAttempts, p.Policy.BackoffBaseUS, p.Policy.BackoffCapUS,
		p.Policy.JitterPercent, p.Retention.CompletedUS, p.Retention.FailedUS, p.Retention.DeadUS,
		p.Retention.CancelledUS, p.Retention.EventsUS)
	return classify(err)
}

func (q queries) InsertJob(ctx context.Context, j store.Job) error {
	var key any
	if j.HasKey {
		key = j.Key
	}
	_, err := q.exec(ctx, `INSERT INTO jobs (id, production_id, key, payload, seq, state, claim_hash,
			worker, claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us,
			priority, claimable_unix_us, ready_unix_us, due)
		VALUES (?, ?, ?, ?, (SELECT COALESCE(max(seq), 0) + 1 FROM jobs WHERE production_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?,
			?, ?, ?, ?)`,
		j.ID, j.ProductionID, key, j.Payload, j.ProductionID, j.State, j.ClaimHash, j.Worker,
		j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.RequestedAt, j.UpdatedAt,
		j.Priority, j.ClaimableAt, j.ReadyAt, j.Due)
	return classify(err)
}

func (q queries) UpdateJob(ctx context.Context, j store.Job) error {
	res, err := q.exec(ctx, `UPDATE jobs SET state = ?, claim_hash = ?, worker = ?, claimed_unix_us = ?,
			expiry_unix_us = ?, attempts = ?, reason = ?, updated_unix_us = ?,
			claimable_unix_us = ?, ready_unix_us = ?, due = ? WHERE id = ?`,
		j.State, j.ClaimHash, j.Worker, j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.UpdatedAt,
		j.ClaimableAt, j.ReadyAt, j.Due, j.ID)
	if err != nil {
		return classify(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrNoRow
	}
	return nil
}

// insertEventSQL records an event, unprojected (projector.go), late when
// its time is earlier than that of the newest in-order event of its
// production and kind: the newest in the tail after the mark (a backward
// walk of the primary key over the tail), else the newest projected one
// (one seek to the end of that range of events_by_kind). The in-order
// events' times then never decrease along seq (CountEvents).
const insertEventSQL = `INSERT INTO events (at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail, late, projected)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(
		(SELECT ?1 < at_unix_us FROM events WHERE ` + inTail + `
			AND production_id = ?2 AND kind = ?4 AND late = 0 ORDER BY seq DESC LIMIT 1),
		(SELECT ?1 < at_unix_us FROM events INDEXED BY events_by_kind
			WHERE production_id = ?2 AND kind = ?4 AND late = 0 AND projected = 1 ORDER BY seq DESC LIMIT 1), 0), 0)`

func (q queries) InsertEvent(ctx context.Context, e store.Event) error {
	_, err := q.exec(ctx, insertEventSQL, e.At, e.ProductionID, e.JobID, e.Kind, e.Worker, e.Expiry, e.Detail)
	if err == nil {
		q.proj.recorded()
	}
	return classify(err)
}

func (q queries) InsertFacts(ctx context.Context, facts []store.Fact) error {
	for _, f := range facts {
		if _, err := q.exec(ctx, `INSERT INTO facts (job_id, kind, key, value_json) VALUES (?, ?, ?, ?)`,
			f.JobID, f.Kind, f.Key, f.Value); err != nil {
			return classify(err)
		}
	}
	return nil
}

func (q queries) InsertOutputs(ctx context.Context, outs []store.Output) error {
	for _, o := range outs {
		if _, err := q.exec(ctx, `INSERT INTO outputs (job_id, path, size, sha256, nonce) VALUES (?, ?, ?, ?, ?)`,
			o.JobID, o.Path, o.Size, o.SHA256, o.Nonce); err != nil {
			return classify(err)
		}
	}
	return nil
}

// ReclaimSpace gives free pages back to the file system (PRAGMA
// incremental_vacuum), at most pages of them, inside the write transaction,
// and returns how many it gave back. A file keeps an eighth of its pages
// free for the rows that come next: in steady state pruning frees about
// what new rows take, and giving that back only to grow the file again
// would write every page twice. A file without incremental auto-vacuum
// (created before schema 7, until a prune asked for rewrites it:
// UpgradeSpaceMode) gives none back and keeps its free pages, which SQLite
// reuses for new rows: it stops growing all the same, at its largest size.
func (q queries) ReclaimSpace(ctx context.Context, pages int) (int64, error) {
	var total, before, after int64
	if err := q.queryRow(ctx, `PRAGMA page_count`).Scan(&total); err != nil {
		return 0, classify(err)
	}
	if err := q.queryRow(ctx, `PRAGMA freelist_count`).Scan(&before); err != nil {
		return 0, classify(err)
	}
	give := min(before-total/8, int64(pages))
	if give <= 0 {
		return 0, nil
	}
	rows, err := q.query(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, give))
	if err != nil {
		return 0, classify(err)
	}
	for rows.Next() {
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, classify(err)
	}
	if err := q.queryRow(ctx, `PRAGMA freelist_count`).Scan(&after); err != nil {
		return 0, classify(err)
	}
	return before - after, nil
}
