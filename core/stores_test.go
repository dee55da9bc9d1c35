package core

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The conformance suite (every test of this package) runs once per store:
// SQLite by default, PostgreSQL with LEASES_TEST_STORE=postgres and
// LEASES_TEST_PG_URL naming a server (make test starts a throwaway one).
// Each test then gets a schema of its own, dropped when it ends.

func testingPostgres() bool { return os.Getenv("LEASES_TEST_STORE") == "postgres" }

// pgURL is the test server's URL. Without one the test is skipped, unless
// LEASES_REQUIRE_PG is set (make test sets it), when that is a failure.
func pgURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LEASES_TEST_PG_URL")
	if u == "" {
		if os.Getenv("LEASES_REQUIRE_PG") != "" || testingPostgres() {
			t.Fatal("LEASES_TEST_PG_URL is not set: run under tests/pg/cluster.sh run (make test does)")
		}
		t.Skip("no PostgreSQL server: set LEASES_TEST_PG_URL (tests/pg/cluster.sh run -- go test ...)")
	}
	return u
}

// newLocation is a fresh, empty authority location for the store under test.
func newLocation(t testing.TB, name string) string {
	t.Helper()
	if !testingPostgres() {
		return filepath.Join(t.TempDir(), name)
	}
	return freshSchema(t)
}

// freshSchema creates an empty schema on the test server and returns a URL
// whose search_path selects it.
func freshSchema(t testing.TB) string {
	t.Helper()
	base := pgURL(t)
	schema := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	pgExec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { dropSchema(t, base, schema) })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func pgExec(t testing.TB, location, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
}

// sqliteOnly marks a test about the SQLite file itself; it ran in the SQLite
// pass. PostgreSQL's counterparts are in postgres_test.go.
func sqliteOnly(t *testing.T) {
	t.Helper()
	if testingPostgres() {
		t.Skip("about the SQLite file; covered by the SQLite pass")
	}
}

// storedBytes is everything the store holds for location, as text: the
// SQLite file and its WAL, or every row of every leases_ table.
func storedBytes(t *testing.T, location string) string {
	t.Helper()
	if !testingPostgres() {
		files := ""
		for _, suffix := range []string{"", "-wal"} {
			if b, err := os.ReadFile(location + suffix); err == nil {
				files += string(b)
			}
		}
		return files
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'leases\_%'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	var out strings.Builder
	for _, tbl := range tables {
		// Rows as text, and every bytea column raw too (a hash or secret in
		// binary would not show in the hex text form).
		rows, err := c.Query(ctx, `SELECT t::text FROM `+tbl+` t`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		out.WriteString(strings.Join(texts, "\n"))
	}
	rows, err = c.Query(ctx, `SELECT claim_hash FROM leases_jobs WHERE claim_hash IS NOT NULL`)
	require.NoError(t, err)
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	require.NoError(t, err)
	for _, h := range hashes {
		out.Write(h)
	}
	return out.String()
}

// dropSchema drops a test's schema. A failed test may have left a
// transaction open on it: after a short wait, such sessions are ended.
func dropSchema(t testing.TB, base, schema string) {
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
		_, err = c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`)
		require.NoError(t, err)
	}
}
