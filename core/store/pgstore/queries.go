package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

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
var registerAndInsertEvent = `WITH reg AS (SELECT pg_advisory_xact_lock_shared(` +
	strconv.Itoa(int(writersLockSpace)) + `, hashtext(current_schema())) AS w,
		pg_advisory_xact_lock_shared(nextval('leases_event_seq')) AS r)
	INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail)
	SELECT $1, $2, $3, $4, $5, $6, $7 FROM reg`

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
	claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us`

func scanJob(r pgx.Row) (store.Job, error) {
	var j store.Job
	var key *string
	err := r.Scan(&j.ID, &j.ProductionID, &key, &j.Payload, &j.Seq, &j.State, &j.ClaimHash, &j.Worker,
		&j.ClaimedAt, &j.Expiry, &j.Attempts, &j.Reason, &j.RequestedAt, &j.UpdatedAt)
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
// does it wait for one.
func (q queries) SetHWM(ctx context.Context, unixUS int64) error {
	// The scalar subquery runs once (an InitPlan): a join could rescan it and
	// lock several rows.
	tag, err := q.q.Exec(ctx, `UPDATE leases_hwm SET v = greatest(v, $1)
		WHERE shard = (SELECT shard FROM leases_hwm ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED)`, unixUS)
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	tag, err = q.q.Exec(ctx, `UPDATE leases_hwm SET v = greatest(v, $1) WHERE shard = $2`, unixUS, rand.IntN(hwmShards))
	if err == nil && tag.RowsAffected() != 1 {
		return fmt.Errorf("the high-water mark rows are missing: %w", store.ErrNotLeases)
	}
	return classify(err)
}

func (q queries) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	var p store.Production
	err := q.q.QueryRow(ctx, `SELECT id, name, created_unix_us FROM leases_productions WHERE name = $1`, name).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	return p, classify(err)
}

func (q queries) ProductionByID(ctx context.Context, id string) (store.Production, error) {
	var p store.Production
	err := q.q.QueryRow(ctx, `SELECT id, name, created_unix_us FROM leases_productions WHERE id = $1`, id).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	return p, classify(err)
}

func (q queries) Productions(ctx context.Context) ([]store.Production, error) {
	rows, err := q.q.Query(ctx, `SELECT id, name, created_unix_us FROM leases_productions ORDER BY name COLLATE "C"`)
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
	return scanJob(q.q.QueryRow(ctx, `SELECT `+jobColumns+` FROM leases_jobs
		WHERE production_id = $1 AND key = $2`, productionID, key))
}

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

// NextClaimable takes the first claimable job in request order. Inside a
// write transaction each of its two reads skips rows other transactions hold
// (FOR UPDATE SKIP LOCKED), so concurrent claimers take different jobs. The
// expired-claim read runs first: it usually finds nothing and locks nothing.
// When it finds a job and an earlier requested job exists too, the earlier
// one is claimed; the expired one stays locked until this transaction ends,
// which only makes other claimers pass over it for that long.
// The two kinds of claimable job: claimed with an expiry at or before now
// ($1 production, now an expression), and requested ($1 production).
func claimableExpiredAt(now string) string {
	return `FROM leases_jobs WHERE production_id = $1 AND state = 'claimed' AND expiry_unix_us <= ` + now
}

var claimableExpired = claimableExpiredAt("$2")

const claimableRequested = `FROM leases_jobs WHERE production_id = $1 AND state = 'requested'`

// hasClaimableAt is HasClaimable's condition at now (an expression).
func hasClaimableAt(now string) string {
	return `EXISTS (SELECT 1 ` + claimableRequested + `) OR EXISTS (SELECT 1 ` + claimableExpiredAt(now) + `)`
}

func (q queries) NextClaimable(ctx context.Context, productionID string, now int64) (store.Job, error) {
	exp, errExp := scanJob(q.q.QueryRow(ctx, `SELECT `+jobColumns+` `+claimableExpired+`
		ORDER BY seq LIMIT 1`+q.lock("FOR UPDATE SKIP LOCKED"), productionID, now))
	if errExp != nil && errExp != store.ErrNoRow {
		return store.Job{}, errExp
	}
	before := int64(1<<63 - 1)
	if errExp == nil {
		before = exp.Seq
	}
	req, errReq := scanJob(q.q.QueryRow(ctx, `SELECT `+jobColumns+` `+claimableRequested+` AND seq < $2
		ORDER BY seq LIMIT 1`+q.lock("FOR UPDATE SKIP LOCKED"), productionID, before))
	switch {
	case errReq == nil:
		return req, nil
	case errReq != store.ErrNoRow:
		return store.Job{}, errReq
	case errExp == nil:
		return exp, nil
	}
	return store.Job{}, store.ErrNoRow
}

// HasClaimable takes no lock: it answers a look, and decides nothing.
func (q queries) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	var has bool
	err := q.q.QueryRow(ctx, `SELECT `+hasClaimableAt("$2"), productionID, now).Scan(&has)
	return has, classify(err)
}

// nextWakeAtSQL reads the earliest claim expiry ($1 production) from the
// front of the partial index leases_jobs_claimed_expiry.
const nextWakeAtSQL = `SELECT expiry_unix_us FROM leases_jobs
	WHERE production_id = $1 AND state = 'claimed' ORDER BY expiry_unix_us LIMIT 1`

func (q queries) NextWakeAt(ctx context.Context, productionID string) (int64, bool, error) {
	var v int64
	err := classify(q.q.QueryRow(ctx, nextWakeAtSQL, productionID).Scan(&v))
	if err == store.ErrNoRow {
		return 0, false, nil
	}
	return v, err == nil, err
}

// lookSQL is a whole look in one statement: the server's clock, then
// HasClaimable and NextWakeAt at that time.
var lookSQL = `SELECT c.now, ` + hasClaimableAt("c.now") + `, (` + nextWakeAtSQL + `)
	FROM (SELECT ` + clockSQL + ` AS now) c`

// Look answers a waiting claim's look in one round trip.
func (db *DB) Look(ctx context.Context, productionID string) (now int64, claimable bool, wakeAt int64, hasWake bool, err error) {
	var at *int64
	err = poolQ{db}.QueryRow(ctx, lookSQL, productionID).Scan(&now, &claimable, &at)
	if err != nil {
		return 0, false, 0, false, classify(err)
	}
	if at != nil {
		wakeAt, hasWake = *at, true
	}
	return now, claimable, wakeAt, hasWake, nil
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

func (q queries) Facts(ctx context.Context, jobID string) ([]store.Fact, error) {
	rows, err := q.q.Query(ctx, `SELECT job_id, kind, key, value_json FROM leases_facts
		WHERE job_id = $1 ORDER BY kind COLLATE "C", key COLLATE "C"`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Fact, error) {
		var f store.Fact
		err := r.Scan(&f.JobID, &f.Kind, &f.Key, &f.Value)
		return f, err
	})
	if out == nil {
		out = []store.Fact{}
	}
	return out, classify(err)
}

func (q queries) Outputs(ctx context.Context, jobID string) ([]store.Output, error) {
	rows, err := q.q.Query(ctx, `SELECT job_id, path, size, sha256, nonce FROM leases_outputs
		WHERE job_id = $1 ORDER BY path COLLATE "C"`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Output, error) {
		var o store.Output
		err := r.Scan(&o.JobID, &o.Path, &o.Size, &o.SHA256, &o.Nonce)
		return o, err
	})
	if out == nil {
		out = []store.Output{}
	}
	return out, classify(err)
}

func (q queries) InsertProduction(ctx context.Context, p store.Production) error {
	_, err := q.q.Exec(ctx, `INSERT INTO leases_productions (id, name, created_unix_us) VALUES ($1, $2, $3)`,
		p.ID, p.Name, p.CreatedAt)
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
			worker, claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		j.ID, j.ProductionID, key, j.Payload, j.State, j.ClaimHash, j.Worker,
		j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.RequestedAt, j.UpdatedAt)
	return classify(err)
}

func (q queries) UpdateJob(ctx context.Context, j store.Job) error {
	tag, err := q.q.Exec(ctx, `UPDATE leases_jobs SET state = $1, claim_hash = $2, worker = $3, claimed_unix_us = $4,
			expiry_unix_us = $5, attempts = $6, reason = $7, updated_unix_us = $8 WHERE id = $9`,
		j.State, j.ClaimHash, j.Worker, j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.UpdatedAt, j.ID)
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return store.ErrNoRow
	}
	return nil
}

// InsertEvent appends an event; its seq is drawn from leases_event_seq (the
// column's identity sequence) now, while the transaction holds its job row.
// The transaction's first event registers it as a writer.
func (t *Tx) InsertEvent(ctx context.Context, e store.Event) error {
	stmt := insertEvent
	if !t.registered {
		stmt = registerAndInsertEvent
	}
	_, err := t.q.Exec(ctx, stmt, e.At, e.ProductionID, e.JobID, e.Kind, e.Worker, e.Expiry, e.Detail)
	if err == nil {
		t.registered = true
	}
	return classify(err)
}

func (q queries) InsertFacts(ctx context.Context, facts []store.Fact) error {
	for _, f := range facts {
		if _, err := q.q.Exec(ctx, `INSERT INTO leases_facts (job_id, kind, key, value_json) VALUES ($1, $2, $3, $4)`,
			f.JobID, f.Kind, f.Key, f.Value); err != nil {
			return classify(err)
		}
	}
	return nil
}

func (q queries) InsertOutputs(ctx context.Context, outs []store.Output) error {
	for _, o := range outs {
		if _, err := q.q.Exec(ctx, `INSERT INTO leases_outputs (job_id, path, size, sha256, nonce) VALUES ($1, $2, $3, $4, $5)`,
			o.JobID, o.Path, o.Size, o.SHA256, o.Nonce); err != nil {
			return classify(err)
		}
	}
	return nil
}
