// Package legacyfixture builds databases (SQLite files, and PostgreSQL
// schemas) in the pre-lease schema (version 1),
// where jobs carried a plaintext claim id and a claim time, so migration tests
// start from a real old file rather than a description of one.
package legacyfixture

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // driver
)

// Job is one job row of the old schema.
type Job struct {
	ID        string
	Key       string
	Payload   []byte
	State     string // requested, claimed, completed, failed, cancelled
	Worker    string
	ClaimID   string // plaintext claim id (the old credential)
	ClaimedAt int64  // unix µs
	Reason    string
}

// Fixture describes one old database.
type Fixture struct {
	ProductionID   string
	ProductionName string
	Jobs           []Job
	Facts          map[string]map[string]string // job id -> key -> JSON value (metadata)
}

const schemaV1 = `
CREATE TABLE productions (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);
CREATE TABLE jobs (
	id TEXT PRIMARY KEY, production_id TEXT NOT NULL, key TEXT, payload BLOB NOT NULL,
	seq INTEGER NOT NULL, state TEXT NOT NULL, worker TEXT, claim_id TEXT, claimed_at INTEGER,
	attempts INTEGER NOT NULL DEFAULT 0, reason TEXT, requested_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
	UNIQUE (production_id, key));
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, production_id TEXT NOT NULL,
	job_id TEXT, kind TEXT NOT NULL, worker TEXT, detail TEXT);
CREATE TABLE facts (job_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
	PRIMARY KEY (job_id, kind, key));
PRAGMA user_version = 1;
`

// Build writes f into a new file at path in the pre-lease schema.
func Build(path string, f Fixture) error {
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String())
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(schemaV1); err != nil {
		return fmt.Errorf("legacy schema: %w", err)
	}
	return insertRows(f, "", func(query string, args ...any) error {
		_, err := db.Exec(query, args...)
		return err
	})
}

// insertRows writes f's rows into the version-1 tables named with prefix.
// The placeholders are $1, $2, …: PostgreSQL's, and to SQLite parameters
// numbered in order of appearance.
func insertRows(f Fixture, prefix string, exec func(query string, args ...any) error) error {
	if f.ProductionID == "" {
		f.ProductionID = uuid.NewString()
	}
	null := func(s string) any { // "" is NULL in the old schema
		if s == "" {
			return nil
		}
		return s
	}
	const t0 = int64(1_700_000_000_000_000)
	if err := exec(`INSERT INTO `+prefix+`productions VALUES ($1, $2, $3)`, f.ProductionID, f.ProductionName, t0); err != nil {
		return err
	}
	for i, j := range f.Jobs {
		var claimedAt any
		if j.ClaimedAt != 0 {
			claimedAt = j.ClaimedAt
		}
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		attempts := 0
		if j.State != "requested" {
			attempts = 1
		}
		if err := exec(`INSERT INTO `+prefix+`jobs VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			j.ID, f.ProductionID, null(j.Key), payload, i+1, j.State, null(j.Worker), null(j.ClaimID), claimedAt,
			attempts, null(j.Reason), t0+int64(i), t0+int64(i)+10); err != nil {
			return err
		}
		if err := exec(`INSERT INTO `+prefix+`events (at, production_id, job_id, kind) VALUES ($1, $2, $3, 'requested')`,
			t0+int64(i), f.ProductionID, j.ID); err != nil {
			return err
		}
	}
	for jobID, kv := range f.Facts {
		for k, v := range kv {
			if err := exec(`INSERT INTO `+prefix+`facts VALUES ($1, 'metadata', $2, $3)`, jobID, k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// schemaV1PG is the pre-lease schema as the PostgreSQL store would have
// written it: the SQLite version-1 tables with the leases_ prefix, and the
// version in leases_meta.
const schemaV1PG = `
CREATE TABLE leases_meta (k text PRIMARY KEY, v bigint NOT NULL);
INSERT INTO leases_meta VALUES ('schema_version', 1);
CREATE TABLE leases_productions (id text PRIMARY KEY, name text NOT NULL UNIQUE, created_at bigint NOT NULL);
CREATE TABLE leases_jobs (
	id text PRIMARY KEY, production_id text NOT NULL, key text, payload bytea NOT NULL,
	seq bigint NOT NULL, state text NOT NULL, worker text, claim_id text, claimed_at bigint,
	attempts bigint NOT NULL DEFAULT 0, reason text, requested_at bigint NOT NULL, updated_at bigint NOT NULL,
	UNIQUE (production_id, key));
CREATE TABLE leases_events (seq bigserial PRIMARY KEY, at bigint NOT NULL, production_id text NOT NULL,
	job_id text, kind text NOT NULL, worker text, detail text);
CREATE TABLE leases_facts (job_id text NOT NULL, kind text NOT NULL, key text NOT NULL, value text NOT NULL,
	PRIMARY KEY (job_id, kind, key));
`

// BuildPG writes f in the pre-lease schema into the current schema of the
// PostgreSQL database at url.
func BuildPG(url string, f Fixture) error {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, schemaV1PG); err != nil {
		return fmt.Errorf("legacy schema: %w", err)
	}
	return insertRows(f, "leases_", func(query string, args ...any) error {
		_, err := c.Exec(ctx, query, args...)
		return err
	})
}
