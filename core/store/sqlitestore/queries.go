package sqlitestore

import (
	"context"
	"database/sql"
	"sync"

	"github.com/libleases/libleases/core/store"
)

// stmtCache prepares each statement once per database handle; database/sql
// then keeps it prepared on every connection that runs it, so SQLite parses
// and plans each statement once per connection instead of once per call.
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

// queries holds every statement; it runs on the pool, or inside tx.
type queries struct {
	st   *stmtCache
	tx   *sql.Tx
	file *fileIdentity // checked before each read on the pool (BeginWrite checks a tx's)
}

func (q queries) stmt(ctx context.Context, text string) (*sql.Stmt, error) {
	if q.tx == nil && q.file != nil {
		if err := q.file.check(); err != nil {
			q.file.release()
			return nil, err
		}
	}
	st, err := q.st.get(ctx, text)
	if err != nil || q.tx == nil {
		return st, err
	}
	return q.tx.StmtContext(ctx, st), nil
}

func (q queries) exec(ctx context.Context, text string, args ...any) (sql.Result, error) {
	st, err := q.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (q queries) query(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	st, err := q.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// row is a *sql.Row that can also carry a preparation error.
type row struct {
	r   *sql.Row
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.r.Scan(dest...)
}

func (q queries) queryRow(ctx context.Context, text string, args ...any) row {
	st, err := q.stmt(ctx, text)
	if err != nil {
		return row{err: err}
	}
	return row{r: st.QueryRowContext(ctx, args...)}
}

const jobColumns = `id, production_id, key, payload, seq, state, claim_hash, worker,
	claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us`

type scanner interface{ Scan(dest ...any) error }

func scanJob(r scanner) (store.Job, error) {
	var j store.Job
	var key sql.NullString
	err := r.Scan(&j.ID, &j.ProductionID, &key, &j.Payload, &j.Seq, &j.State, &j.ClaimHash, &j.Worker,
		&j.ClaimedAt, &j.Expiry, &j.Attempts, &j.Reason, &j.RequestedAt, &j.UpdatedAt)
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

func (q queries) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	var p store.Production
	err := q.queryRow(ctx, `SELECT id, name, created_unix_us FROM productions WHERE name = ?`, name).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	return p, classify(err)
}

func (q queries) ProductionByID(ctx context.Context, id string) (store.Production, error) {
	var p store.Production
	err := q.queryRow(ctx, `SELECT id, name, created_unix_us FROM productions WHERE id = ?`, id).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	return p, classify(err)
}

func (q queries) Productions(ctx context.Context) ([]store.Production, error) {
	rows, err := q.query(ctx, `SELECT id, name, created_unix_us FROM productions ORDER BY name`)
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

// NextClaimable takes the first requested job, or the first claimed job whose
// claim has expired, in request order. Two simple statements, each served by
// an index: jobs_claimable for requested jobs, and the partial index
// jobs_claimed_expiry for expired claims, so unexpired claims are never
// scanned however many there are.
// The two kinds of claimable job, each read through its index: requested
// (production_id), and claimed with an expiry at or before now
// (production_id, now).
const (
	claimableRequested = `FROM jobs INDEXED BY jobs_claimable WHERE production_id = ? AND state = 'requested'`
	claimableExpired   = `FROM jobs INDEXED BY jobs_claimed_expiry WHERE production_id = ? AND state = 'claimed' AND expiry_unix_us <= ?`
)

func (q queries) NextClaimable(ctx context.Context, productionID string, now int64) (store.Job, error) {
	req, errReq := scanJob(q.queryRow(ctx, `SELECT `+jobColumns+` `+claimableRequested+` ORDER BY seq LIMIT 1`, productionID))
	if errReq != nil && errReq != store.ErrNoRow {
		return store.Job{}, errReq
	}
	exp, errExp := scanJob(q.queryRow(ctx, `SELECT `+jobColumns+` `+claimableExpired+` ORDER BY seq LIMIT 1`, productionID, now))
	if errExp != nil && errExp != store.ErrNoRow {
		return store.Job{}, errExp
	}
	switch {
	case errReq == nil && (errExp != nil || req.Seq < exp.Seq):
		return req, nil
	case errExp == nil:
		return exp, nil
	}
	return store.Job{}, store.ErrNoRow
}

func (q queries) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	var has bool
	err := q.queryRow(ctx, `SELECT EXISTS (SELECT 1 `+claimableRequested+`) OR EXISTS (SELECT 1 `+claimableExpired+`)`,
		productionID, productionID, now).Scan(&has)
	return has, classify(err)
}

// nextWakeAtSQL reads the earliest claim expiry from the front of the
// partial index jobs_claimed_expiry: one index probe however many claims.
const nextWakeAtSQL = `SELECT expiry_unix_us FROM jobs INDEXED BY jobs_claimed_expiry
	WHERE production_id = ? AND state = 'claimed' ORDER BY expiry_unix_us LIMIT 1`

func (q queries) NextWakeAt(ctx context.Context, productionID string) (int64, bool, error) {
	var v int64
	err := classify(q.queryRow(ctx, nextWakeAtSQL, productionID).Scan(&v))
	if err == store.ErrNoRow {
		return 0, false, nil
	}
	return v, err == nil, err
}

func (q queries) Events(ctx context.Context, productionID string, after int64, limit int) ([]store.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	var rows *sql.Rows
	var err error
	const cols = `SELECT ` + eventColumns + ` FROM events`
	if productionID == "" {
		rows, err = q.query(ctx, cols+` WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	} else {
		rows, err = q.query(ctx, cols+` WHERE production_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
			productionID, after, limit)
	}
	if err != nil {
		return nil, classify(err)
	}
	return scanEvents(rows)
}

func (q queries) Facts(ctx context.Context, jobID string) ([]store.Fact, error) {
	rows, err := q.query(ctx,
		`SELECT job_id, kind, key, value_json FROM facts WHERE job_id = ? ORDER BY kind, key`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	out := []store.Fact{}
	for rows.Next() {
		var f store.Fact
		if err := rows.Scan(&f.JobID, &f.Kind, &f.Key, &f.Value); err != nil {
			return nil, classify(err)
		}
		out = append(out, f)
	}
	return out, classify(rows.Err())
}

func (q queries) Outputs(ctx context.Context, jobID string) ([]store.Output, error) {
	rows, err := q.query(ctx,
		`SELECT job_id, path, size, sha256, nonce FROM outputs WHERE job_id = ? ORDER BY path`, jobID)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	out := []store.Output{}
	for rows.Next() {
		var o store.Output
		if err := rows.Scan(&o.JobID, &o.Path, &o.Size, &o.SHA256, &o.Nonce); err != nil {
			return nil, classify(err)
		}
		out = append(out, o)
	}
	return out, classify(rows.Err())
}

func (q queries) InsertProduction(ctx context.Context, p store.Production) error {
	_, err := q.exec(ctx, `INSERT INTO productions (id, name, created_unix_us) VALUES (?, ?, ?)`,
		p.ID, p.Name, p.CreatedAt)
	return classify(err)
}

func (q queries) InsertJob(ctx context.Context, j store.Job) error {
	var key any
	if j.HasKey {
		key = j.Key
	}
	_, err := q.exec(ctx, `INSERT INTO jobs (id, production_id, key, payload, seq, state, claim_hash,
			worker, claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us)
		VALUES (?, ?, ?, ?, (SELECT COALESCE(max(seq), 0) + 1 FROM jobs WHERE production_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.ID, j.ProductionID, key, j.Payload, j.ProductionID, j.State, j.ClaimHash, j.Worker,
		j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.RequestedAt, j.UpdatedAt)
	return classify(err)
}

func (q queries) UpdateJob(ctx context.Context, j store.Job) error {
	res, err := q.exec(ctx, `UPDATE jobs SET state = ?, claim_hash = ?, worker = ?, claimed_unix_us = ?,
			expiry_unix_us = ?, attempts = ?, reason = ?, updated_unix_us = ? WHERE id = ?`,
		j.State, j.ClaimHash, j.Worker, j.ClaimedAt, j.Expiry, j.Attempts, j.Reason, j.UpdatedAt, j.ID)
	if err != nil {
		return classify(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return store.ErrNoRow
	}
	return nil
}

func (q queries) InsertEvent(ctx context.Context, e store.Event) error {
	_, err := q.exec(ctx, `INSERT INTO events (at_unix_us, production_id, job_id, kind, worker,
			expiry_unix_us, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		e.At, e.ProductionID, e.JobID, e.Kind, e.Worker, e.Expiry, e.Detail)
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
