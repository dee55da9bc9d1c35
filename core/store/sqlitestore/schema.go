package sqlitestore

// SchemaVersion is the schema this library writes. Version 1 is the pre-lease
// schema (jobs carried a plaintext claim id and a claim time); version 3 adds
// the indexes of the paged listings (migrateV2toV3).
const SchemaVersion = 3

// schemaV2 creates the lease schema from nothing.
var schemaV2 = []string{
	`CREATE TABLE meta (
		k TEXT PRIMARY KEY,
		v INTEGER NOT NULL
	) STRICT`,
	`INSERT INTO meta (k, v) VALUES ('hwm_unix_us', 0)`,
	`CREATE TABLE productions (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL UNIQUE,
		created_unix_us INTEGER NOT NULL
	) STRICT`,
	`CREATE TABLE jobs (
		id TEXT PRIMARY KEY,
		production_id TEXT NOT NULL REFERENCES productions(id),
		key TEXT,
		payload BLOB NOT NULL,
		seq INTEGER NOT NULL,
		state TEXT NOT NULL CHECK (state IN ('requested','claimed','completed','failed','cancelled')),
		claim_hash BLOB,
		worker TEXT NOT NULL DEFAULT '',
		claimed_unix_us INTEGER NOT NULL DEFAULT 0,
		expiry_unix_us INTEGER NOT NULL DEFAULT 0,
		attempts INTEGER NOT NULL DEFAULT 0,
		reason TEXT NOT NULL DEFAULT '',
		requested_unix_us INTEGER NOT NULL,
		updated_unix_us INTEGER NOT NULL,
		UNIQUE (production_id, key)
	) STRICT`,
	`CREATE UNIQUE INDEX jobs_by_order ON jobs (production_id, seq)`,
	`CREATE INDEX jobs_claimable ON jobs (production_id, state, seq)`,
	// Expired claims are found by expiry without visiting unexpired ones.
	`CREATE INDEX jobs_claimed_expiry ON jobs (production_id, expiry_unix_us) WHERE state = 'claimed'`,
	`CREATE TABLE events (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		at_unix_us INTEGER NOT NULL,
		production_id TEXT NOT NULL,
		job_id TEXT NOT NULL DEFAULT '',
		kind TEXT NOT NULL,
		worker TEXT NOT NULL DEFAULT '',
		expiry_unix_us INTEGER NOT NULL DEFAULT 0,
		detail TEXT NOT NULL DEFAULT ''
	) STRICT`,
	`CREATE INDEX events_by_production ON events (production_id, seq)`,
	`CREATE TABLE facts (
		job_id TEXT NOT NULL REFERENCES jobs(id),
		kind TEXT NOT NULL CHECK (kind IN ('metadata','provenance')),
		key TEXT NOT NULL,
		value_json TEXT NOT NULL,
		PRIMARY KEY (job_id, kind, key)
	) STRICT`,
	`CREATE TABLE outputs (
		job_id TEXT NOT NULL REFERENCES jobs(id),
		path TEXT NOT NULL,
		size INTEGER NOT NULL,
		sha256 TEXT NOT NULL,
		nonce TEXT NOT NULL,
		PRIMARY KEY (job_id, path)
	) STRICT`,
	`PRAGMA user_version = 2`,
}

// migrateV1toV2 turns the pre-lease schema into the lease schema. Every claim
// expires (claimed jobs become requested again, with an event saying why);
// requested and terminal jobs are copied as they are. The old plaintext claim
// ids are not carried over. "?1" is the migration time in unix µs.
var migrateV1toV2 = []string{
	`ALTER TABLE productions RENAME TO productions_v1`,
	`ALTER TABLE jobs RENAME TO jobs_v1`,
	`ALTER TABLE events RENAME TO events_v1`,
	`ALTER TABLE facts RENAME TO facts_v1`,
}

var migrateV1toV2Copy = []string{
	`INSERT INTO productions (id, name, created_unix_us)
		SELECT id, name, created_at FROM productions_v1`,
	`INSERT INTO jobs (id, production_id, key, payload, seq, state, claim_hash, worker,
			claimed_unix_us, expiry_unix_us, attempts, reason, requested_unix_us, updated_unix_us)
		SELECT id, production_id, key, payload, seq,
			CASE state WHEN 'claimed' THEN 'requested' ELSE state END,
			NULL,
			CASE state WHEN 'claimed' THEN '' ELSE COALESCE(worker, '') END,
			CASE state WHEN 'claimed' THEN 0 ELSE COALESCE(claimed_at, 0) END,
			0, attempts, COALESCE(reason, ''), requested_at,
			CASE state WHEN 'claimed' THEN ?1 ELSE updated_at END
		FROM jobs_v1`,
	`INSERT INTO events (seq, at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail)
		SELECT seq, at, production_id, COALESCE(job_id, ''), kind, COALESCE(worker, ''), 0, COALESCE(detail, '')
		FROM events_v1 ORDER BY seq`,
	`INSERT INTO events (at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail)
		SELECT ?1, production_id, id, 'claim_expired', COALESCE(worker, ''), 0,
			'claim expired by the migration to authority-controlled leases (schema 2)'
		FROM jobs_v1 WHERE state = 'claimed' ORDER BY seq`,
	`INSERT INTO facts (job_id, kind, key, value_json)
		SELECT job_id, kind, key, value FROM facts_v1`,
	`UPDATE meta SET v = ?1 WHERE k = 'hwm_unix_us'`,
	`DROP TABLE facts_v1`,
	`DROP TABLE events_v1`,
	`DROP TABLE jobs_v1`,
	`DROP TABLE productions_v1`,
}

// migrateV2toV3 adds the event indexes the bounded observations read
// (docs/schema.md): a job's timeline, a production's events of one kind in
// seq order, and by time for the per-minute counts. Jobs need none: the
// listings use jobs_by_order and jobs_claimable. Every path that opens a
// file below version 3 ends with these.
var migrateV2toV3 = []string{
	`CREATE INDEX events_by_job ON events (job_id, seq)`,
	`CREATE INDEX events_by_kind ON events (production_id, kind, seq)`,
	`CREATE INDEX events_by_kind_time ON events (production_id, kind, at_unix_us)`,
	`PRAGMA user_version = 3`,
}
