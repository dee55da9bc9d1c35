// Package pgtest gives tests an isolated PostgreSQL schema on the server
// named by LEASES_TEST_PG_URL (make test starts a throwaway cluster; see
// tests/pg/cluster.sh).
package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// URL is the test server's URL. Without one the test is skipped, unless
// LEASES_REQUIRE_PG is set (make test sets it) or required is true, when
// that is a failure.
func URL(t testing.TB, required bool) string {
	t.Helper()
	u := os.Getenv("LEASES_TEST_PG_URL")
	if u == "" {
		if required || os.Getenv("LEASES_REQUIRE_PG") != "" {
			t.Fatal("LEASES_TEST_PG_URL is not set: run under tests/pg/cluster.sh run (make test does)")
		}
		t.Skip("no PostgreSQL server: set LEASES_TEST_PG_URL (tests/pg/cluster.sh run -- go test ...)")
	}
	return u
}

// FreshSchema creates an empty schema on the test server, dropped when the
// test ends, and returns a URL whose search_path selects it.
func FreshSchema(t testing.TB, required bool) string {
	t.Helper()
	base := URL(t, required)
	schema := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	Exec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { drop(t, base, schema) })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// FreshDatabase creates an empty database on the test server, dropped
// (with any session still on it) when the test ends, and returns a URL that
// names it. A test of what a vacuum removes needs one: a transaction left
// open by another test in the same database holds back what any vacuum
// there may remove. A database of its own does not hide every other
// session, though: one transaction left open in another database still
// kept the pruned-space test's vacuums from bringing back the space.
func FreshDatabase(t testing.TB, required bool) string {
	t.Helper()
	base := URL(t, required)
	name := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	Exec(t, base, `CREATE DATABASE `+name)
	t.Cleanup(func() { Exec(t, base, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// Exec runs one statement on its own connection.
func Exec(t testing.TB, location, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
}

// drop drops a test's schema. A failed test may have left a transaction open
// on it: after a short wait, the sessions idle in a transaction that holds a
// lock on the schema or one of its relations are ended, and no other (the
// tests of a run share the server, and some hold a transaction open on
// purpose).
func drop(t testing.TB, base, schema string) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `SET lock_timeout = '5s'`)
	require.NoError(t, err)
	for attempt := 0; ; attempt++ {
		if _, err = c.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err == nil {
			return
		}
		require.Less(t, attempt, 3, "drop schema %s: %v", schema, err)
		_, err = c.Exec(ctx, `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
			WHERE a.state LIKE 'idle in transaction%' AND a.pid <> pg_backend_pid()
			AND a.pid IN (SELECT l.pid FROM pg_locks l LEFT JOIN pg_class r ON r.oid = l.relation
				WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
				AND (r.relnamespace = to_regnamespace($1)
					OR (l.classid = 'pg_namespace'::regclass AND l.objid = to_regnamespace($1))))`, schema)
		require.NoError(t, err)
	}
}

// Dump returns every row of every leases_ table in location's schema as
// text, followed by every claim hash raw (a secret or hash in binary would
// not show in the hex text form), for secret scans.
func Dump(t testing.TB, location string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	tables := Tables(t, location)
	require.NotEmpty(t, tables)
	var out strings.Builder
	for _, tbl := range tables {
		rows, err := c.Query(ctx, `SELECT t::text FROM `+tbl+` t`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		out.WriteString(strings.Join(texts, "\n"))
	}
	rows, err := c.Query(ctx, `SELECT claim_hash FROM leases_jobs WHERE claim_hash IS NOT NULL`)
	require.NoError(t, err)
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	require.NoError(t, err)
	for _, h := range hashes {
		out.Write(h)
	}
	return out.String()
}

// Tables lists the leases_ tables of location's current schema.
func Tables(t testing.TB, location string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'leases\_%'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return tables
}

// WaitSessionsEnd waits until the server has no session named application
// (application_name) left: once a client process is dead, the server ends
// its sessions after finishing what they were doing (a COMMIT already sent
// still commits), so after this nothing the process started can take effect.
func WaitSessionsEnd(t testing.TB, location, application string, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	deadline := time.Now().Add(within)
	for {
		var n int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, application).Scan(&n))
		if n == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d sessions of %s still open after %s", n, application, within)
		time.Sleep(5 * time.Millisecond)
	}
}

// VacuumAnalyze vacuums and analyzes table until the visibility map covers
// its pages, as a quiet server's one VACUUM leaves it. On a server shared
// with other tests, a transaction open elsewhere holds back the horizon:
// VACUUM then leaves pages not all-visible, index-only scans look costly,
// and a plan test would see the planner's answer to that moment rather
// than to the table. It retries for up to 30 s, then fails saying so.
func VacuumAnalyze(t testing.TB, location, table string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = c.Exec(ctx, `VACUUM ANALYZE `+table)
		require.NoError(t, err)
		var pages, visible int64
		require.NoError(t, c.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class
			WHERE oid = $1::regclass`, table).Scan(&pages, &visible))
		if visible >= pages {
			return
		}
		require.True(t, time.Now().Before(deadline),
			"VACUUM of %s leaves %d of %d pages not all-visible after 30 s: a transaction elsewhere holds the horizon", table, pages-visible, pages)
		time.Sleep(200 * time.Millisecond)
	}
}
