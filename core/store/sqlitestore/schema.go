package sqlitestore

// SchemaVersion is the schema this library writes. Version 1 is the pre-lease
// schema (jobs carried a plaintext claim id and a claim time); version 3 adds
// the indexes of the paged listings (migrateV2toV3); version 4 adds retry
// policies, the dead state, priorities, run-at and the attempt history
// (migrateV3toV4); version 5 adds the index of workers seen (migrateV4toV5);
// version 6 numbers events and attempts without AUTOINCREMENT (migrateV5toV6);
// version 7 adds retention policies (migrateV6toV7); version 9 keeps one
// index of claims (migrateV7toV9; 8 is PostgreSQL's alone); version 10
// counts events per minute from the index by kind (migrateV9toV10); version
// 11 keeps the attempt history in one b-tree by job (migrateV10toV11);
// version 13 builds the event log's secondary indexes by a projection that
// trails the log (migrateV11toV13, projector.go; 12 is PostgreSQL's alone).
const SchemaVersion = 13

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

// migrateV3toV4 adds retries, run-at and priorities (docs/schema.md). Every
// path that opens a file below version 4 ends with these, a new file too,
// so a migrated file has exactly the schema of a new one.
//
// The state CHECK gains 'dead' by editing the stored table definition:
// SQLite cannot alter a CHECK, and widening an IN list leaves every stored
// row valid, which is the case its documentation allows without rebuilding
// the table (rebuilding would drop and recreate the table facts and outputs
// reference). Existing jobs keep their state and
// order: requested ones are due at once, ordered by their request time, and
// a claimed one becomes claimable again at its expiry, as before.
var migrateV3toV4 = []string{
	`PRAGMA writable_schema = ON`,
	`UPDATE sqlite_schema SET sql = replace(sql,
		'CHECK (state IN (''requested'',''claimed'',''completed'',''failed'',''cancelled''))',
		'CHECK (state IN (''requested'',''claimed'',''completed'',''failed'',''cancelled'',''dead''))')
		WHERE type = 'table' AND name = 'jobs'`,
	`PRAGMA writable_schema = OFF`,
	`ALTER TABLE productions ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 25`,
	`ALTER TABLE productions ADD COLUMN backoff_base_us INTEGER NOT NULL DEFAULT 1000000`,
	`ALTER TABLE productions ADD COLUMN backoff_cap_us INTEGER NOT NULL DEFAULT 3600000000`,
	`ALTER TABLE productions ADD COLUMN jitter_percent INTEGER NOT NULL DEFAULT 20`,
	`ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE jobs ADD COLUMN claimable_unix_us INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE jobs ADD COLUMN ready_unix_us INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE jobs ADD COLUMN due INTEGER NOT NULL DEFAULT 0`,
	`UPDATE jobs SET claimable_unix_us = requested_unix_us,
		ready_unix_us = CASE state WHEN 'claimed' THEN expiry_unix_us ELSE requested_unix_us END,
		due = (state = 'requested')`,
	// Claim-next: the best due job is the first entry of one index range.
	`CREATE INDEX jobs_due ON jobs (production_id, priority DESC, claimable_unix_us, seq)
		WHERE state = 'requested' AND due = 1`,
	// Promotion reads only delayed jobs whose time has come, and lapsed
	// claims only once their backoff has passed.
	`CREATE INDEX jobs_delayed ON jobs (production_id, ready_unix_us) WHERE state = 'requested' AND due = 0`,
	`CREATE INDEX jobs_claimed_ready ON jobs (production_id, ready_unix_us) WHERE state = 'claimed'`,
	`CREATE TABLE attempts (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		job_id TEXT NOT NULL REFERENCES jobs(id),
		number INTEGER NOT NULL,
		worker TEXT NOT NULL,
		claimed_unix_us INTEGER NOT NULL,
		ended_unix_us INTEGER NOT NULL,
		ending TEXT NOT NULL CHECK (ending IN ('completed','failed','retry','released','expired','cancelled')),
		reason TEXT NOT NULL DEFAULT ''
	) STRICT`,
	`CREATE INDEX attempts_by_job ON attempts (job_id, id)`,
	`PRAGMA user_version = 4`,
}

// migrateV4toV5 adds the index the status page's "workers seen recently"
// reads (docs/schema.md): each worker's events in time order, only the
// kinds a worker causes itself (store.WorkerKinds, in that order: a query
// names the same IN list to use it). A worker's last event is then the last
// entry of its range, so listing the workers costs a few index steps per
// worker, not one row per event of the window. Every path that opens a file
// below version 5 ends with these, a new file too.
var migrateV4toV5 = []string{
	`CREATE INDEX events_by_worker ON events (production_id, worker, at_unix_us)
		WHERE kind IN ('claimed', 'renewed', 'released', 'failed', 'retry', 'completed')`,
	`PRAGMA user_version = 5`,
}

// migrateV5toV6 drops AUTOINCREMENT from events and attempts: with it every
// insert also rewrites sqlite_sequence, one more page in every commit that
// writes an event (all of them). Neither table ever loses its newest row
// (events are never deleted; the attempt trim keeps each job's newest), so
// SQLite's plain choice, the largest rowid plus one, gives exactly the
// numbers AUTOINCREMENT gave. AUTOINCREMENT is not stored in the table's
// pages, only in its definition, so the definition is edited the way
// SQLite's ALTER TABLE documentation describes for a change that leaves the
// stored content valid: under writable_schema, then schema_version advanced
// so every connection, of any process, reloads the schema. sqlite_sequence
// itself stays (SQLite refuses to drop it), empty, in new files too: every
// path that opens a file below version 6 runs this, a new file too.
var migrateV5toV6 = []string{
	`PRAGMA writable_schema = ON`,
	`UPDATE sqlite_schema SET sql = replace(sql, 'seq INTEGER PRIMARY KEY AUTOINCREMENT', 'seq INTEGER PRIMARY KEY')
		WHERE type = 'table' AND name = 'events'`,
	`UPDATE sqlite_schema SET sql = replace(sql, 'id INTEGER PRIMARY KEY AUTOINCREMENT', 'id INTEGER PRIMARY KEY')
		WHERE type = 'table' AND name = 'attempts'`,
	`PRAGMA writable_schema = OFF`,
	`DELETE FROM sqlite_sequence`,
	`PRAGMA user_version = 6`,
}

// migrateV6toV7 adds each production's retention policy (docs/schema.md):
// how long finished jobs of each state and events are kept, in µs, 0 for
// good. Productions that existed before keep everything (the column
// defaults): an upgrade deletes nothing nobody asked to delete; a new
// production is created with core's default policy. Every path that opens
// a file below version 7 ends with these, a new file too.
var migrateV6toV7 = []string{
	`ALTER TABLE productions ADD COLUMN keep_completed_us INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE productions ADD COLUMN keep_failed_us INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE productions ADD COLUMN keep_dead_us INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE productions ADD COLUMN keep_cancelled_us INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE productions ADD COLUMN keep_events_us INTEGER NOT NULL DEFAULT 0`,
	`PRAGMA user_version = 7`,
}

// migrateV7toV9 keeps one index of claims instead of two: claims by ready
// time (the claim path's lapses, the waiting claim's looks) now also hold
// each claim's expiry and worker, so the status page's expired claims and
// claims held per worker read that index alone, one entry per claim of the
// production, never the table. A claim and a completion then write one
// b-tree less. The claims of a production are the jobs in flight, so reading
// all of them costs what the claims held per worker cost before. Every path
// that opens a file below version 9 ends with these, a new file too.
var migrateV7toV9 = []string{
	`DROP INDEX jobs_claimed_expiry`,
	`DROP INDEX jobs_claimed_ready`,
	`CREATE INDEX jobs_claimed_ready ON jobs (production_id, ready_unix_us, expiry_unix_us, worker)
		WHERE state = 'claimed'`,
	`PRAGMA user_version = 9`,
}

// migrateV9toV10 serves the per-minute counts from the index of a kind's
// events in seq order, so an event is written into one index by kind, not
// two. An event is late when its time is earlier than that of an earlier
// event (by seq) of its production and kind; the others are in order, and
// their times never decrease along seq, so a bucket of time is one range of
// them. events_by_kind holds the two apart (late before seq), and late
// events, rare unless a clock ran ahead and came back, get a partial index
// by time. The migration marks the late events of before (each against the
// greatest time before it) and rebuilds the indexes. Every path that opens
// a file below version 10 ends with these, a new file too.
var migrateV9toV10 = []string{
	`ALTER TABLE events ADD COLUMN late INTEGER NOT NULL DEFAULT 0`,
	`UPDATE events SET late = 1 WHERE seq IN (SELECT seq FROM (SELECT seq, at_unix_us,
		max(at_unix_us) OVER (PARTITION BY production_id, kind ORDER BY seq
			ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS m FROM events) WHERE at_unix_us < m)`,
	`DROP INDEX events_by_kind`,
	`DROP INDEX events_by_kind_time`,
	`CREATE INDEX events_by_kind ON events (production_id, kind, late, seq)`,
	`CREATE INDEX events_by_kind_late ON events (production_id, kind, at_unix_us) WHERE late = 1`,
	`PRAGMA user_version = 10`,
}

// migrateV10toV11 keeps the attempt history in one b-tree ordered by job: a
// table without rowid whose key is (job_id, id), so an attempt is written
// once, not into a table and an index by job as well. An attempt's id only
// orders one job's history (docs/schema.md), so it is numbered within its
// job from schema 11 on (the job's largest plus one: the trim keeps each
// job's newest entry); the entries of before keep theirs. Every path that
// opens a file below version 11 ends with these, a new file too.
var migrateV10toV11 = []string{
	`CREATE TABLE attempts_v11 (
		job_id TEXT NOT NULL REFERENCES jobs(id),
		id INTEGER NOT NULL,
		number INTEGER NOT NULL,
		worker TEXT NOT NULL,
		claimed_unix_us INTEGER NOT NULL,
		ended_unix_us INTEGER NOT NULL,
		ending TEXT NOT NULL CHECK (ending IN ('completed','failed','retry','released','expired','cancelled')),
		reason TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (job_id, id)
	) STRICT, WITHOUT ROWID`,
	`INSERT INTO attempts_v11 (job_id, id, number, worker, claimed_unix_us, ended_unix_us, ending, reason)
		SELECT job_id, id, number, worker, claimed_unix_us, ended_unix_us, ending, reason FROM attempts`,
	`DROP TABLE attempts`,
	`ALTER TABLE attempts_v11 RENAME TO attempts`,
	`PRAGMA user_version = 11`,
}

// migrateV11toV13 takes the event log's four secondary indexes out of the
// commit that records an event: an event is inserted unprojected
// (projected = 0), which none of them holds, and the projector
// (projector.go) marks the events after the mark projected in batches of
// its own, each advancing the mark in meta. Every event with seq at or
// below the mark is projected, every later one is not, so a reader serves
// the projected part of a listing from an index (its query names
// projected = 1) and the rest from the tail after the mark, read by the
// primary key. The column defaults to 1, so the events of before count as
// projected without a rewrite, and the mark starts at the newest event.
// Every path that opens a file below version 13 ends with these, a new
// file too.
var migrateV11toV13 = []string{
	`ALTER TABLE events ADD COLUMN projected INTEGER NOT NULL DEFAULT 1`,
	`INSERT INTO meta (k, v) VALUES ('projected_seq', (SELECT coalesce(max(seq), 0) FROM events))`,
	`DROP INDEX events_by_production`,
	`DROP INDEX events_by_job`,
	`DROP INDEX events_by_kind`,
	`DROP INDEX events_by_worker`,
	`CREATE INDEX events_by_production ON events (production_id, seq) WHERE projected = 1`,
	`CREATE INDEX events_by_job ON events (job_id, seq) WHERE projected = 1`,
	`CREATE INDEX events_by_kind ON events (production_id, kind, late, seq) WHERE projected = 1`,
	`CREATE INDEX events_by_worker ON events (production_id, worker, at_unix_us)
		WHERE kind IN ('claimed', 'renewed', 'released', 'failed', 'retry', 'completed') AND projected = 1`,
	`PRAGMA user_version = 13`,
}
