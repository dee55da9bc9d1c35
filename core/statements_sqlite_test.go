package core

import (
	"testing"
	"time"

	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/stretchr/testify/require"
)

// How many statements a commit runs on SQLite, besides BEGIN and COMMIT
// (sqlitestore's count of the statements of its write transactions): each
// is a pass through the driver and SQLite's VM, most of a step's CPU at
// synchronous=NORMAL next to the commit's page writes (docs/PERFORMANCE.md,
// sections 1 and 2). SQLite's writer lock makes the reads these counts
// leave out exact: nothing but the transaction itself changes the file
// while it holds it.

// sqliteStatementsOf is how many statements fn's write transactions ran on the
// fixture's SQLite file; the projection and the pruner stand still.
func sqliteStatementsOf(t *testing.T, f *fixture, fn func()) int64 {
	t.Helper()
	if testingPostgres() {
		t.Skip("counts the SQLite store's statements; the PostgreSQL pass bounds its own in pg_roundtrips_test.go")
	}
	s, ok := f.a.b.(*sqlitestore.DB)
	require.True(t, ok, "the fixture's store is SQLite")
	s.HoldProjection(true)
	f.a.SetPruneInterval(0)
	before := s.WriteStatements()
	fn()
	return s.WriteStatements() - before
}

// A lone claim of a due job reads its production together with the clock
// mark, then finds the job, updates it, records its event and writes the
// mark: five statements.
func TestALoneClaimRunsAtMostFiveStatementsOnSQLite(t *testing.T) {
	f := newFixture(t)
	f.request(3)
	f.claim("w", time.Minute) // the connection is warm
	n := sqliteStatementsOf(t, f, func() { f.claim("w", time.Minute) })
	require.LessOrEqual(t, n, int64(5))
}

// An edit's claims read their production once: the production cannot
// change under the edit but through the edit itself. Each further claim
// finds its job, updates it and records its event; the mark is read and
// written once.
func TestAnEditReadsItsProductionOnceHoweverManyJobsItClaimsOnSQLite(t *testing.T) {
	f := newFixture(t)
	const claims = 10
	f.request(claims + 1)
	f.claim("w", time.Minute)
	n := sqliteStatementsOf(t, f, func() {
		e, err := f.a.Begin()
		require.NoError(t, err)
		for range claims {
			_, err := e.Claim("p", "w", time.Minute)
			require.NoError(t, err)
		}
		require.NoError(t, e.Commit())
	})
	require.LessOrEqual(t, n, int64(3*claims+2))
}
