package core

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/stores"
	"github.com/libleases/libleases/internal/pgtest"
)

// Core chooses no store: its tests open one by location as package leases
// does for programs.
type Options = stores.Options

func Open(location string) (*Authority, error) { return OpenWith(location, Options{}) }

func OpenWith(location string, opts Options) (*Authority, error) {
	return OpenStore(location, stores.Name(location), func() (store.Backend, error) { return stores.Open(location, opts) })
}

// The conformance suite (every test of this package) runs once per store:
// SQLite by default, PostgreSQL with LEASES_TEST_STORE=postgres and
// LEASES_TEST_PG_URL naming a server (make test starts a throwaway one).
// Each test then gets a schema of its own, dropped when it ends. Tests about
// the SQLite file itself name their files directly, so they test SQLite in
// both passes; PostgreSQL's counterparts are in postgres_test.go.

func testingPostgres() bool { return os.Getenv("LEASES_TEST_STORE") == "postgres" }

// freshSchema is an empty schema on the test server (pgtest.FreshSchema);
// in the PostgreSQL pass a missing server is a failure.
func freshSchema(t testing.TB) string { return pgtest.FreshSchema(t, testingPostgres()) }

// newLocation is a fresh, empty authority location for the store under test.
func newLocation(t testing.TB, name string) string {
	t.Helper()
	if !testingPostgres() {
		return filepath.Join(t.TempDir(), name)
	}
	return freshSchema(t)
}

func pgExec(t testing.TB, location, sql string, args ...any) { pgtest.Exec(t, location, sql, args...) }

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
	return pgtest.Dump(t, location)
}
