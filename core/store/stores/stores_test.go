// Choosing the store by location, and naming it without a password.
package stores

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

func TestAPostgresURLSelectsPostgresAndAnythingElseIsASQLitePath(t *testing.T) {
	for _, loc := range []string{"postgres://h/db", "postgresql://h/db", "POSTGRES://h/db", "PostgreSQL://u@h:5/db?sslmode=disable"} {
		require.True(t, IsPostgres(loc), loc)
	}
	for _, loc := range []string{"leases.db", "/tmp/postgres://x", "./postgres:/x", "postgres:/x", "file:postgres://x", "", "pg://h/db"} {
		require.False(t, IsPostgres(loc), loc)
	}
	b, err := Open(pgtest.FreshSchema(t, false), Options{})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, "*pgstore.DB", fmt.Sprintf("%T", b), "a postgres URL opens the PostgreSQL store")
	b, err = Open(filepath.Join(t.TempDir(), "postgres:x"), Options{})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, "*sqlitestore.DB", fmt.Sprintf("%T", b), "anything else is a SQLite path")
}

func TestANameNeverShowsAPassword(t *testing.T) {
	require.Equal(t, "leases.db", Name("leases.db"))
	for _, loc := range []string{"postgres://u:SECRETPW@h/x", "postgresql://u@h/x?password=SECRETPW", "postgres://u:SECRETPW@[::1/x"} {
		require.NotContains(t, Name(loc), "SECRETPW", loc)
	}
}
