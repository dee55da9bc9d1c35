package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/libleases/libleases/core/store"
)

// querier is what both the pool and a transaction run statements on. pgx
// prepares and caches each statement per connection.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queries holds every statement. Inside a write transaction (inTx) reads of
// a job row by id lock it, so the rules decide on the row's latest committed state
// and no other transaction can change it before this one ends.
type queries struct {
	q    querier
	inTx bool
}

// Event order. An event's seq comes from the sequence leases_event_seq when
// it is inserted, while its transaction holds the job's row: so the events
// of one job are in the order their transactions committed. Transactions
// commit in another order than they draw numbers, though, so a follower
// reading "events after seq N" could miss an event with a lower seq that
// commits later. Listings therefore stop at a horizon below which every
// event's transaction has finished:
//
//   - a write transaction registers with its first event, in the same
//     statement, before the event's number is drawn: a shared advisory lock
//     on (writersLockSpace, hash of the schema), then a shared advisory lock
//     on a number R it draws from the sequence, so every event it writes has
//     seq > R;
//   - a listing reads the sequence's last value V, then the registrations
//     (pg_locks), then the events; the horizon is the least R of a registered
//     writer, or V+1. A writer not registered, or not yet holding its R, when
//     the listing looked draws its event numbers after the listing read V.
//
// So only a transaction that has written an event holds listings back, and
// only for events numbered after its own.
const writersLockSpace = int32(0x6c656173) // "leas"

const insertEvent = `INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker,
	expiry_unix_us, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)`

// registerAndInsertEvent is the first event of a transaction: the insert
// reads the row of reg, so both locks are held before its number is drawn.
var registerAndInsertEvent = registerEvents + `
	INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail)
	SELECT $1, $2, $3, $4, $5, $6, $7 FROM reg`

// registerEvents is the registration's CTE, reg.
var registerEvents = `WITH reg AS (SELECT pg_advisory_xact_lock_shared(` +
	strconv.Itoa(int(writersLockSpace)) + `, hashtext(current_schema())) AS w,
		pg_advisory_xact_lock_shared(nextval('leases_event_seq')) AS r)`

// registeredFloor is the least number drawn by a running writer of this
// schema (NULL when none runs). Its bigint advisory locks show as classid
// (high 32 bits), objid (low 32 bits), objsubid 1.
var registeredFloor = `SELECT min((r.classid::bigint << 32) | r.objid::bigint)
	FROM pg_locks w JOIN pg_locks r ON r.pid = w.pid AND r.locktype = 'advisory' AND r.objsubid = 1 AND r.granted
	WHERE w.locktype = 'advisory' AND w.granted AND w.objsubid = 2
		AND w.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND r.database = w.database
		AND w.classid = ` + strconv.Itoa(int(writersLockSpace)) + `
		AND w.objid::bigint = (hashtext(current_schema())::bigint & 4294967295)
		AND w.pid <> pg_backend_pid()`

// hwmShards is how many rows hold the clock high-water mark.
const hwmShards = 64

const jobColumns = `id, production_id, key, payload, seq, state, claim_hash, worker,
	claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us,
	priority, claimable_unix_us, ready_unix_us, due`

func scanJob(r pgx.Row) (store.Job, error) { return scanJobAnd(r) }

// scanJobAnd scans a job's columns, then the row's further columns into more.
func scanJobAnd(r pgx.Row, more ...any) (store.Job, error) {
	var j store.Job
	var key *string
	err := r.Scan(append([]any{&j.ID, &j.ProductionID, &key, &j.Payload, &j.Seq, &j.State, &j.ClaimHash, &j.Worker,
		&j.ClaimedAt, &j.Expiry, &j.Attempts, &j.Reason, &j.RequestedAt, &j.UpdatedAt,
		&j.Priority, &j.ClaimableAt, &j.ReadyAt, &j.Due}, more...)...)
	if err != nil {
		return store.Job{}, classify(err)
	}
	if key != nil {
		j.Key, j.HasKey = *key, true
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	return j, nil
}

// lock is the row-lock clause for a read inside a write transaction.
func (q queries) lock(clause string) string {
	if q.inTx {
		return " " + clause
	}
	return ""
}

// HWM is the durable mark: the greatest of its shards.
func (q queries) HWM(ctx context.Context) (int64, error) {
	var v int64
	err := q.q.QueryRow(ctx, `SELECT COALESCE(max(v), 0) FROM leases_hwm`).Scan(&v)
	return v, classify(err)
}

// SetHWM advances one shard of the mark: one that no concurrent transaction
// holds, so commits never queue on the mark. Only when every shard is held
// does it wait for one (the random shard of the COALESCE). One statement,
// so that a transaction holds it back and sends it with its COMMIT.
func (q queries) SetHWM(ctx context.Context, unixUS int64) error {
	// The shard is the first one from a random shard on, in the primary
	// key's order and round to the start, that no transaction holds: one
	// index probe and one row lock, where a sort of every shard by random()
	// cost a read of all of them. Each scalar subquery runs once (an
	// InitPlan; COALESCE runs the second only when the first found none): a
	// join could rescan it and lock several rows.
	return q.write(ctx, hwmSet, setHWMSQL, unixUS, rand.IntN(hwmShards))
}

const setHWMSQL = `UPDATE leases_hwm SET v = greatest(v, $1)
	WHERE shard = COALESCE(
		(SELECT shard FROM leases_hwm WHERE shard >= $2 ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED),
		(SELECT shard FROM leases_hwm WHERE shard < $2 ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED),
		$2)`

func hwmSet(tag pgconn.CommandTag) error {
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("the high-water mark rows are missing: %w", store.ErrNotLeases)
	}
	return nil
}

// write runs a write whose result nothing waits for: a transaction holds it
// back for its next round trip (txConn.hold); check judges its tag.
func (q queries) write(ctx context.Context, check func(pgconn.CommandTag) error, sql string, args ...any) error {
	if t, ok := q.q.(*txConn); ok {
		t.hold(check, sql, args...)
		return nil
	}
	tag, err := q.q.Exec(ctx, sql, args...)
	if err != nil {
		return classify(err)
	}
	if check != nil {
		return check(tag)
	}
	return nil
}

// writeHeld is write for a write a transaction holds as w (heldWrite: its
// rows, its kind, whether a read may go ahead of it).
func (q queries) writeHeld(ctx context.Context, w heldWrite) error {
	if t, ok := q.q.(*txConn); ok {
		t.holdWrite(w)
		return nil
	}
	return q.write(ctx, w.check, w.sql, w.args...)
}

// productionColumns are read by scanProduction.
const productionColumns = `id, name, created_unix_us, max_attempts, backoff_base_us, backoff_cap_us, jitter_percent,
	keep_completed_us, keep_failed_us, keep_dead_us, keep_cancelled_us, keep_events_us`

func scanProduction(r pgx.Row) (store.Production, error) {
	var p store.Production
	err := r.Scan(productionDest(&p)...)
	return p, err
}

// productionDest are the destinations of productionColumns, in order: the
// one list every read of a production scans into.
func productionDest(p *store.Production) []any {
	return []any{&p.ID, &p.Name, &p.CreatedAt, &p.Policy.MaxAttempts, &p.Policy.BackoffBaseUS,
		&p.Policy.BackoffCapUS, &p.Policy.JitterPercent, &p.Retention.CompletedUS, &p.Retention.FailedUS,
		&p.Retention.DeadUS, &p.Retention.CancelledUS, &p.Retention.EventsUS}
}

func (q queries) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	p, err := scanProduction(q.q.QueryRow(ctx, `SELECT `+productionColumns+` FROM leases_productions WHERE name = $1`, name))
	return p, classify(err)
}

func (q queries) ProductionByID(ctx context.Context, id string) (store.Production, error) {
	p, err := scanProduction(q.q.QueryRow(ctx, `SELECT `+productionColumns+` FROM leases_productions WHERE id = $1`, id))
	return p, classify(err)
}

func (q queries) Productions(ctx context.Context) ([]store.Production, error) {
	rows, err := q.q.Query(ctx, `SELECT `+productionColumns+` FROM leases_productions ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, classify(err)
	}
	return collectProductions(rows)
}

func (q queries) JobByID(ctx context.Context, id string) (store.Job, error) {
	return scanJob(q.q.QueryRow(ctx, `SELECT `+jobColumns+` FROM leases_jobs WHERE id = $1`+q.lock("FOR UPDATE"), id))
}

// JobByKey takes no row lock, even in a write transaction: it serves the
// idempotent request, which decides on the key and the payload, and those
// never change. A lock would hide the job from claims (they skip locked
// rows) until the requesting transaction ends.
func (q queries) JobByKey(ctx context.Context, productionID, key string) (store.Job, error) {
	return scanJob(q.q.QueryRow(ctx, jobByKeySQL, productionID, key))
}

// jobByKeySQL finds a job by its key in the unique index of keys, which is
// in byte order ("C"): the comparison names that collation, or the index
// would not serve it (observe_test.go).
const jobByKeySQL = `SELECT ` + jobColumns + ` FROM leases_jobs
	WHERE production_id = $1 AND key COLLATE "C" = $2`

func (q queries) Jobs(ctx context.Context, productionID string) ([]store.Job, error) {
	rows, err := q.q.Query(ctx, `SELECT `+jobColumns+` FROM leases_jobs WHERE production_id = $1 ORDER BY seq`, productionID)
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

// NextClaimable takes the first due job in claim order, the first entry of
// the partial index leases_jobs_due that no other transaction holds (FOR
// UPDATE SKIP LOCKED), so concurrent claimers take different jobs.
func (q queries) NextClaimable(ctx context.Context, productionID string, now int64) (store.Job, error) {
	return scanJob(q.q.QueryRow(ctx, nextClaimableSQL+q.lock("FOR UPDATE SKIP LOCKED"), productionID))
}

// The claim path's statements (plan_test.go pins their plans).
const (
	nextClaimableSQL = `SELECT ` + jobColumns + ` FROM leases_jobs
		WHERE production_id = $1 AND state = 'requested' AND due
		ORDER BY priority DESC, claimable_unix_us, seq LIMIT 1`
	// ARRAY(...) runs the range once (an InitPlan) and the update then
	// finds each row by its key: an IN subquery may be planned as a join
	// that reads the whole table.
	promoteDueSQL = `UPDATE leases_jobs SET due = true WHERE id = ANY(ARRAY(SELECT id FROM leases_jobs
		WHERE production_id = $1 AND state = 'requested' AND NOT due AND ready_unix_us <= $2
		ORDER BY ready_unix_us LIMIT $3 FOR UPDATE SKIP LOCKED))`
	lapsedClaimsSQL = `SELECT ` + jobColumns + ` FROM leases_jobs
		WHERE production_id = $1 AND state = 'claimed' AND ready_unix_us <= $2
		ORDER BY ready_unix_us LIMIT $3`
)

// PromoteDue marks due the delayed jobs whose time has come, from the
// partial index leases_jobs_delayed; rows another transaction holds are
// left for a later claim.
func (q queries) PromoteDue(ctx context.Context, productionID string, now int64, limit int) (int64, error) {
	tag, err := q.q.Exec(ctx, promoteDueSQL, productionID, now, limit)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

// LapsedClaims reads claims whose expiry and backoff have passed, from the
// partial index leases_jobs_claimed_ready, skipping rows others hold.
func (q queries) LapsedClaims(ctx context.Context, productionID string, now int64, limit int) ([]store.Job, error) {
	return q.jobs(ctx, lapsedClaimsSQL+q.lock("FOR UPDATE SKIP LOCKED"), productionID, now, limit)
}

// JobsInState reads a page of one state in request order
// (leases_jobs_by_state), skipping rows others hold.
func (q queries) JobsInState(ctx context.Context, productionID, state string, limit int) ([]store.Job, error) {
	return q.jobs(ctx, `SELECT `+jobColumns+` FROM leases_jobs
		WHERE production_id = $1 AND state = $2 ORDER BY seq LIMIT $3`+q.lock("FOR UPDATE SKIP LOCKED"),
		productionID, state, limit)
}

func (q queries) jobs(ctx context.Context, text string, args ...any) ([]store.Job, error) {
	rows, err := q.q.Query(ctx, text, args...)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r pgx.CollectableRow) (store.Job, error) { return scanJob(r) })
}

func (q queries) UpdatePolicy(ctx context.Context, productionID string, p store.Policy) error {
	tag, err := q.q.Exec(ctx, `UPDATE leases_productions SET max_attempts = $1, backoff_base_us = $2,
		backoff_cap_us = $3, jitter_percent = $4 WHERE id = $5`,
		p.MaxAttempts, p.BackoffBaseUS, p.BackoffCapUS, p.JitterPercent, productionID)
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return store.ErrNoRow
	}
	return nil
}

func (q queries) UpdateRetention(ctx context.Context, productionID string, r store.Retention) error {
	tag, err := q.q.Exec(ctx, `UPDATE leases_productions SET keep_completed_us = $1, keep_failed_us = $2,
		keep_dead_us = $3, keep_cancelled_us = $4, keep_events_us = $5 WHERE id = $6`,
		r.CompletedUS, r.FailedUS, r.DeadUS, r.CancelledUS, r.EventsUS, productionID)
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return store.ErrNoRow
	}
	return nil
}

// NewestJobSeq reads the last of the production's jobs in order.
// PostgreSQL numbers jobs from a sequence, which never reuses a number, so
// the rule this serves (pruning keeps the newest) costs it nothing more.
func (q queries) NewestJobSeq(ctx context.Context, productionID string) (int64, error) {
	var seq int64
	err := q.q.QueryRow(ctx, newestJobSeqSQL, productionID).Scan(&seq)
	return seq, classify(err)
}

// newestJobSeqSQL is the greatest of each state's last entry of
// leases_jobs_by_state (there is no index of a production's jobs in
// request order from schema 12): one seek per state.
var newestJobSeqSQL = func() string {
	parts := make([]string, len(store.JobStates))
	for i, st := range store.JobStates {
		parts[i] = `(SELECT seq FROM leases_jobs WHERE production_id = $1 AND state = '` + st + `' ORDER BY seq DESC LIMIT 1)`
	}
	return `SELECT COALESCE(greatest(` + strings.Join(parts, `, `) + `), 0)`
}()

const newestEventSQL = `SELECT seq, job_id FROM leases_events ORDER BY seq DESC LIMIT 1`

func (q queries) NewestEvent(ctx context.Context) (int64, string, error) {
	var seq int64
	var job string
	err := q.q.QueryRow(ctx, newestEventSQL).Scan(&seq, &job)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	return seq, job, classify(err)
}

func (q queries) DeleteJobEvents(ctx context.Context, jobID string, limit int) (int64, error) {
	tag, err := q.q.Exec(ctx, `DELETE FROM leases_events WHERE seq = ANY(ARRAY(
		SELECT seq FROM leases_events WHERE job_id = $1 ORDER BY seq LIMIT $2))`, jobID, limit)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

func (q queries) CountJobEvents(ctx context.Context, ids []string) (int64, error) {
	var n int64
	err := q.q.QueryRow(ctx, `SELECT count(*) FROM leases_events WHERE job_id = ANY($1)`, ids).Scan(&n)
	return n, classify(err)
}

// DeleteJobs deletes the jobs' rows in one round trip.
func (q queries) DeleteJobs(ctx context.Context, ids []string) (int64, int64, error) {
	var jobs, events int64
	err := q.q.QueryRow(ctx, `WITH e AS (DELETE FROM leases_events WHERE job_id = ANY($1) RETURNING 1),
		f AS (DELETE FROM leases_facts WHERE job_id = ANY($1)),
		o AS (DELETE FROM leases_outputs WHERE job_id = ANY($1)),
		a AS (DELETE FROM leases_attempts WHERE job_id = ANY($1)),
		j AS (DELETE FROM leases_jobs WHERE id = ANY($1) RETURNING 1)
		SELECT (SELECT count(*) FROM j), (SELECT count(*) FROM e)`, ids).Scan(&jobs, &events)
	return jobs, events, classify(err)
}

// DeleteFinishedJobs deletes, in one round trip, those of ids that still
// qualify, locked first (skipping rows another transaction holds: a job
// being changed now is not one to prune). Each table's delete takes the
// locked ids as an array, which its index on the job's id answers; a join
// with the locked rows would let the planner scan the tables.
func (q queries) DeleteFinishedJobs(ctx context.Context, ids []string, state string, updatedBy int64) (int64, int64, error) {
	var jobs, events int64
	err := q.q.QueryRow(ctx, deleteFinishedJobsSQL, ids, state, updatedBy).Scan(&jobs, &events)
	return jobs, events, classify(err)
}

const deleteFinishedJobsSQL = `WITH l AS (SELECT ARRAY(SELECT id FROM leases_jobs WHERE id = ANY($1) AND state = $2
		AND updated_unix_us <= $3
		AND id IS DISTINCT FROM (SELECT job_id FROM leases_events ORDER BY seq DESC LIMIT 1)
		FOR UPDATE SKIP LOCKED) AS ids),
	e AS (DELETE FROM leases_events WHERE job_id = ANY((SELECT ids FROM l)::text[]) RETURNING 1),
	f AS (DELETE FROM leases_facts WHERE job_id = ANY((SELECT ids FROM l)::text[])),
	o AS (DELETE FROM leases_outputs WHERE job_id = ANY((SELECT ids FROM l)::text[])),
	a AS (DELETE FROM leases_attempts WHERE job_id = ANY((SELECT ids FROM l)::text[])),
	j AS (DELETE FROM leases_jobs WHERE id = ANY((SELECT ids FROM l)::text[]) RETURNING 1)
	SELECT (SELECT count(*) FROM j), (SELECT count(*) FROM e)`

// DeleteJob deletes the job's rows in one round trip.
func (q queries) DeleteJob(ctx context.Context, jobID string) error {
	var n int64
	err := q.q.QueryRow(ctx, `WITH f AS (DELETE FROM leases_facts WHERE job_id = $1),
		o AS (DELETE FROM leases_outputs WHERE job_id = $1),
		a AS (DELETE FROM leases_attempts WHERE job_id = $1),
		j AS (DELETE FROM leases_jobs WHERE id = $1 RETURNING 1)
		SELECT count(*) FROM j`, jobID).Scan(&n)
	if err != nil {
		return classify(err)
	}
	if n != 1 {
		return store.ErrNoRow
	}
	return nil
}

func (q queries) DeleteProduction(ctx context.Context, productionID string) error {
	tag, err := q.q.Exec(ctx, `DELETE FROM leases_productions WHERE id = $1`, productionID)
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return store.ErrNoRow
	}
	return nil
}

func (q queries) DeleteEvents(ctx context.Context, productionID string, seqs []int64) (int64, error) {
	tag, err := q.q.Exec(ctx, `DELETE FROM leases_events WHERE seq = ANY($2) AND production_id = $1`,
		productionID, seqs)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

const attemptColumns = `job_id, number, worker, claimed_unix_us, ended_unix_us, ending, reason`

func (q queries) Attempts(ctx context.Context, jobID string) ([]store.Attempt, error) {
	rows, err := q.q.Query(ctx, attemptsSQL, jobID)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, func(r pgx.CollectableRow) (store.Attempt, error) {
		var a store.Attempt
		err := r.Scan(&a.JobID, &a.Number, &a.Worker, &a.ClaimedAt, &a.EndedAt, &a.Ending, &a.Reason)
		return a, err
	})
}

// The attempt history's statements: each reads one job's range of the
// primary key (job_id, id), the table's only index from schema 12
// (indexes_test.go pins their plans).
const (
	attemptsSQL     = `SELECT ` + attemptColumns + ` FROM leases_attempts WHERE job_id = $1 ORDER BY id`
	trimAttemptsSQL = `DELETE FROM leases_attempts WHERE job_id = $1 AND id <= (SELECT id FROM leases_attempts
		WHERE job_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`
	// insertAttemptSQL appends an attempt ($1..$7) and trims the history
	// to its newest $8 + 1 entries in one statement. The trim runs on the
	// statement's snapshot, which does not hold the new entry: it keeps
	// the newest $8 of the entries before it, and the new one, whose id
	// (drawn from the identity while the job's row is held, as every
	// entry's of the job was) is greater than all of theirs. So it deletes
	// the rows the insert and then trimAttemptsSQL with $8 + 1 would.
	insertAttemptSQL = `WITH a AS (INSERT INTO leases_attempts (` + attemptColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7))
	DELETE FROM leases_attempts WHERE job_id = $1 AND id <= (SELECT id FROM leases_attempts
		WHERE job_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $8)`
)

// InsertAttempt appends to the history and drops what is older than the
// newest keep entries of the job, in one statement. The job's row is
// locked by the caller, so two writers never trim one history at once.
func (q queries) InsertAttempt(ctx context.Context, a store.Attempt, keep int) error {
	if keep < 1 { // the new entry goes too: the trim must see it
		if err := q.write(ctx, nil, `INSERT INTO leases_attempts (`+attemptColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			a.JobID, a.Number, a.Worker, a.ClaimedAt, a.EndedAt, a.Ending, a.Reason); err != nil {
			return err
		}
		return q.write(ctx, nil, trimAttemptsSQL, a.JobID, keep)
	}
	return q.writeHeld(ctx, heldWrite{sql: insertAttemptSQL, mayWait: true, args: []any{
		a.JobID, a.Number, a.Worker, a.ClaimedAt, a.EndedAt, a.Ending, a.Reason, keep - 1}})
}

// hasClaimableAt is claim-next's condition at now (an expression), read
// from the claim path's partial indexes without a row and without a lock: a
// due job, a delayed job whose time has come (promotion makes it due), or a
// claim whose expiry and backoff have passed (it may also be a last attempt,
// which the claim ends dead: a look may wake for nothing, never sleep through
// a job). A production that no longer exists answers true too: the claim
// that follows says not_found.
func hasClaimableAt(now string) string {
	return `EXISTS (SELECT 1 FROM leases_jobs WHERE production_id = $1 AND state = 'requested' AND due)
		OR EXISTS (SELECT 1 FROM leases_jobs WHERE production_id = $1 AND state = 'requested' AND NOT due
			AND ready_unix_us <= ` + now + `)
		OR EXISTS (SELECT 1 FROM leases_jobs WHERE production_id = $1 AND state = 'claimed' AND ready_unix_us <= ` + now + `)
		OR NOT EXISTS (SELECT 1 FROM leases_productions WHERE id = $1)`
}

// HasClaimable takes no lock: it answers a look, and decides nothing.
func (q queries) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	var has bool
	err := q.q.QueryRow(ctx, `SELECT `+hasClaimableAt("$2"), productionID, now).Scan(&has)
	return has, classify(err)
}

// nextWakeAtSQL is the earliest ready time of a delayed job or of a claim
// (its expiry plus the backoff its lapse costs): the first entry of
// leases_jobs_delayed and of leases_jobs_claimed_ready ($1 production).
const nextWakeAtSQL = `SELECT least(
	(SELECT ready_unix_us FROM leases_jobs
		WHERE production_id = $1 AND state = 'requested' AND NOT due ORDER BY ready_unix_us LIMIT 1),
	(SELECT ready_unix_us FROM leases_jobs
		WHERE production_id = $1 AND state = 'claimed' ORDER BY ready_unix_us LIMIT 1))`

func (q queries) NextWakeAt(ctx context.Context, productionID string) (int64, bool, error) {
	var v *int64
	if err := q.q.QueryRow(ctx, nextWakeAtSQL, productionID).Scan(&v); err != nil || v == nil {
		return 0, false, classify(err)
	}
	return *v, true, nil
}

// lookSQL is a whole look in one statement: the server's clock, then
// HasClaimable and NextWakeAt at that time.
// The mark is read from the statement's snapshot, taken before the clock
// is sampled: it holds no commit's sample later than that one.
var lookSQL = `SELECT c.now, (SELECT COALESCE(max(v), 0) FROM leases_hwm), ` + hasClaimableAt("c.now") + `, (` + nextWakeAtSQL + `)
	FROM (SELECT ` + clockSQL + ` AS now) c`

// Look answers a waiting claim's look in one round trip.
func (db *DB) Look(ctx context.Context, productionID string) (now, mark int64, claimable bool, wakeAt int64, hasWake bool, err error) {
	var at *int64
	err = poolQ{db}.QueryRow(ctx, lookSQL, productionID).Scan(&now, &mark, &claimable, &at)
	if err != nil {
		return 0, 0, false, 0, false, classify(err)
	}
	if at != nil {
		wakeAt, hasWake = *at, true
	}
	return now, mark, claimable, wakeAt, hasWake, nil
}

// eventHorizon is the seq below which every event's writer has finished:
// the sequence's next value, or a running writer's reserved number if less.
func eventHorizon(ctx context.Context, c querier) (int64, error) {
	var next int64
	var called bool
	if err := c.QueryRow(ctx, `SELECT last_value, is_called FROM leases_event_seq`).Scan(&next, &called); err != nil {
		return 0, classify(err)
	}
	if called {
		next++
	}
	var floor *int64
	if err := c.QueryRow(ctx, registeredFloor).Scan(&floor); err != nil {
		return 0, classify(err)
	}
	if floor != nil && *floor < next {
		return *floor, nil
	}
	return next, nil
}

func (q queries) Events(ctx context.Context, productionID string, after int64, limit int) ([]store.Event, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	// A write transaction reads its own snapshot (the rules never list events
	// inside one). Otherwise the horizon is read first, on the connection
	// that then reads the events.
	conn, horizon := q.q, int64(1<<63-1)
	if p, ok := q.q.(poolQ); ok {
		var cancel context.CancelFunc
		ctx, cancel = p.db.bounded(ctx)
		defer cancel()
		c, h, err := p.db.horizonConn(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Release()
		conn, horizon = c, h
	}
	const cols = `SELECT ` + eventColumns + ` FROM leases_events`
	var rows pgx.Rows
	var err error
	if productionID == "" {
		rows, err = conn.Query(ctx, cols+` WHERE seq > $1 AND seq < $3 ORDER BY seq LIMIT $2`, after, lim, horizon)
	} else {
		rows, err = conn.Query(ctx, cols+` WHERE production_id = $1 AND seq > $2 AND seq < $4 ORDER BY seq LIMIT $3`,
			productionID, after, lim, horizon)
	}
	if err != nil {
		return nil, classify(err)
	}
	return collectEvents(rows)
}

func scanFact(r pgx.CollectableRow) (store.Fact, error) {
	var f store.Fact
	err := r.Scan(&f.JobID, &f.Kind, &f.Key, &f.Value)
	return f, err
}

func scanOutput(r pgx.CollectableRow) (store.Output, error) {
	var o store.Output
	err := r.Scan(&o.JobID, &o.Path, &o.Size, &o.SHA256, &o.Nonce)
	return o, err
}

func (q queries) Facts(ctx context.Context, jobID string) ([]store.Fact, error) {
	rows, err := q.q.Query(ctx, `SELECT job_id, kind, key, value_json FROM leases_facts
		WHERE job_id = $1 ORDER BY kind COLLATE "C", key COLLATE "C"`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanFact)
}

func (q queries) FactsOf(ctx context.Context, jobIDs []string) ([]store.Fact, error) {
	rows, err := q.q.Query(ctx, `SELECT job_id, kind, key, value_json FROM leases_facts
		WHERE job_id = ANY($1) ORDER BY job_id COLLATE "C", kind COLLATE "C", key COLLATE "C"`, jobIDs)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanFact)
}

func (q queries) OutputsOf(ctx context.Context, jobIDs []string) ([]store.Output, error) {
	rows, err := q.q.Query(ctx, `SELECT job_id, path, size, sha256, nonce FROM leases_outputs
		WHERE job_id = ANY($1) ORDER BY job_id COLLATE "C", path COLLATE "C"`, jobIDs)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanOutput)
}

func (q queries) Outputs(ctx context.Context, jobID string) ([]store.Output, error) {
	rows, err := q.q.Query(ctx, `SELECT job_id, path, size, sha256, nonce FROM leases_outputs
		WHERE job_id = $1 ORDER BY path COLLATE "C"`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	return collect(rows, scanOutput)
}

func (q queries) InsertProduction(ctx context.Context, p store.Production) error {
	_, err := q.q.Exec(ctx, `INSERT INTO leases_productions (`+productionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		p.ID, p.Name, p.CreatedAt, p.Policy.MaxAttempts, p.Policy.BackoffBaseUS, p.Policy.BackoffCapUS,
		p.Policy.JitterPercent, p.Retention.CompletedUS, p.Retention.FailedUS, p.Retention.DeadUS,
		p.Retention.CancelledUS, p.Retention.EventsUS)
	return classify(err)
}

// InsertJob adds a job; its seq comes from the table's identity sequence, so
// concurrent requesters never contend for a per-production counter.
func (q queries) InsertJob(ctx context.Context, j store.Job) error {
	var key any
	if j.HasKey {
		key = j.Key
	}
	_, err := q.q.Exec(ctx, `INSERT INTO leases_jobs (id, production_id, key, payload, state, claim_hash,
			worker, claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us,
			priority, claimable_unix_us, ready_unix_us, due)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		j.ID, j.ProductionID, key, j.Payload, j.State, j.ClaimHash, j.Worker,
		j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.RequestedAt, j.UpdatedAt,
		j.Priority, j.ClaimableAt, j.ReadyAt, j.Due)
	return classify(err)
}

// UpdateJob writes the job's row. A completion's or a failure's (the job
// leaves a claim for good) may wait behind a read sent ahead
// (queryRowAhead): neither a production's read nor the look for the next
// due job can see the row of a job that was claimed and will not be
// requested again.
func (q queries) UpdateJob(ctx context.Context, j store.Job) error {
	return q.writeHeld(ctx, heldWrite{sql: updateJobSQL, rows: 1, kind: heldJobUpdate,
		mayWait: j.State == store.StateCompleted || j.State == store.StateFailed,
		check:   oneRowOf("the update of job ", j.ID),
		args: []any{j.State, j.ClaimHash, j.Worker, j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.UpdatedAt,
			j.ClaimableAt, j.ReadyAt, j.Due, j.ID}})
}

const updateJobSQL = `UPDATE leases_jobs SET state = $1, claim_hash = $2, worker = $3, claimed_unix_us = $4,
	expiry_unix_us = $5, attempts = $6, reason = $7, updated_unix_us = $8,
	claimable_unix_us = $9, ready_unix_us = $10, due = $11 WHERE id = $12`

// InsertEvent appends an event; its seq is drawn from leases_event_seq (the
// column's identity sequence) now, while the transaction holds its job row.
// The transaction's first event registers it as a writer.
func (t *Tx) InsertEvent(ctx context.Context, e store.Event) error {
	w := heldWrite{sql: insertEvent, rows: 1, kind: heldEvent, mayWait: true,
		args: []any{e.At, e.ProductionID, e.JobID, e.Kind, e.Worker, e.Expiry, e.Detail}}
	if !t.registered {
		w.sql, w.kind = registerAndInsertEvent, heldRegEvent
	}
	err := t.writeHeld(ctx, w)
	if err == nil {
		t.registered = true // held: if it fails, so does the transaction
	}
	return err
}

func (q queries) InsertFacts(ctx context.Context, facts []store.Fact) error {
	for _, f := range facts {
		if err := q.write(ctx, nil, `INSERT INTO leases_facts (job_id, kind, key, value_json) VALUES ($1, $2, $3, $4)`,
			f.JobID, f.Kind, f.Key, f.Value); err != nil {
			return err
		}
	}
	return nil
}

func (q queries) InsertOutputs(ctx context.Context, outs []store.Output) error {
	for _, o := range outs {
		if err := q.write(ctx, nil, `INSERT INTO leases_outputs (job_id, path, size, sha256, nonce) VALUES ($1, $2, $3, $4, $5)`,
			o.JobID, o.Path, o.Size, o.SHA256, o.Nonce); err != nil {
			return err
		}
	}
	return nil
}
