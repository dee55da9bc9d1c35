package core

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// The space of pruned rows on PostgreSQL: the server's autovacuum wakes
// once a minute (autovacuum_naptime), so a store pruned more often than
// that would grow between its wakes unless the pruner vacuums what it
// deleted. These need LEASES_TEST_PG_URL and run in both passes.

// pgTablesSize is the bytes of the authority's jobs and events tables,
// their indexes included.
func pgTablesSize(t *testing.T, location string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	var n int64
	require.NoError(t, c.QueryRow(ctx, `SELECT pg_total_relation_size('leases_jobs') +
		pg_total_relation_size('leases_events') + pg_total_relation_size('leases_attempts')`).Scan(&n))
	return n
}

// fillAndFinish requests n jobs and completes each, at the fake clock's
// time.
func fillAndFinish(t *testing.T, a *Authority, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := a.RequestJob("p", "", []byte("payload of a job"))
		require.NoError(t, err)
		l, err := a.Claim("p", "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(Facts{}))
	}
}

func TestOnPostgresTheSpaceOfPrunedRowsIsReusedSoRepeatedFillAndPruneCyclesStopGrowing(t *testing.T) {
	// A database of its own: no other test's open transaction holds back
	// what a vacuum in it may remove.
	u := pgtest.FreshDatabase(t, testingPostgres())
	a, clk := pruningAuthority(t, u)
	// The store's vacuums are the only ones: an autovacuum can neither
	// bring the space back for it nor hold a table's vacuum lock, which
	// makes the store's vacuum pass the table by.
	for _, table := range []string{"leases_jobs", "leases_events", "leases_attempts", "leases_facts", "leases_outputs"} {
		pgExec(t, u, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`)
	}
	// Each cycle fills as many jobs as the last one pruned and prunes
	// them all (but the newest): without a vacuum between, each cycle's
	// rows would take new pages, and the tables would grow by a cycle's
	// rows every cycle.
	//
	// A vacuum brings back only what no open transaction may still see,
	// and a database of its own does not hide the server's other sessions
	// from it (PostgreSQL 15 recycles a deleted index page by the horizon
	// of every database: one transaction left open in another database
	// made every cycle grow). The other tests of a run, and other runs on
	// a shared server, open transactions of their own; while a long one
	// lasts, the cycles grow. So the cycles go on, past the first ten,
	// until growth has stopped for three of them, or until
	// testwait.EventuallyBound has passed.
	const perCycle, minCycles = 600, 10
	// stopped: over the last three cycles the tables grew by less than
	// half of what the first cycle's rows took. Without the vacuum each
	// cycle adds about that much again; with it the freed pages take the
	// next cycle's rows (an index's freed pages come back one vacuum
	// later: the first cycles may still grow).
	var sizes []int64
	stopped := func() bool {
		n := len(sizes)
		return n >= minCycles && sizes[n-1]-sizes[n-4] <= sizes[0]/2
	}
	var vacuumed int64
	deadline := time.Now().Add(testwait.EventuallyBound)
	for c := 0; !stopped() && (c < minCycles || time.Now().Before(deadline)); c++ {
		fillAndFinish(t, a, perCycle)
		clk.advance(2 * time.Hour)
		r, err := a.Prune(context.Background(), PruneOptions{})
		require.NoError(t, err)
		require.Empty(t, r.Note)
		if c > 0 {
			require.EqualValues(t, perCycle, r.Jobs, "cycle %d", c)
		}
		vacuumed += r.Vacuumed
		sizes = append(sizes, pgTablesSize(t, u))
	}
	t.Logf("sizes after each cycle: %v; tables vacuumed: %d", sizes, vacuumed)
	require.True(t, stopped(), "the tables kept growing across fill and prune cycles: %v; the server's oldest transactions: %s",
		sizes, pgOldestTransactions(t, u))
	require.Positive(t, vacuumed)
}

// pgOldestTransactions names the server's three oldest open transactions,
// which hold back what any vacuum may remove.
func pgOldestTransactions(t *testing.T, location string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	var s string
	require.NoError(t, c.QueryRow(ctx, `SELECT COALESCE(string_agg(format('pid %s in %s for %s: %s', pid, datname,
		now() - xact_start, left(query, 60)), '; '), 'none') FROM (SELECT * FROM pg_stat_activity
		WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() ORDER BY xact_start LIMIT 3) o`).Scan(&s))
	return s
}

func TestAPruneByARoleThatMayNotVacuumStillDeletesAndSaysTheSpaceIsLeftToAutovacuum(t *testing.T) {
	u := freshSchema(t)
	clk := &fakeClock{now: t0}
	owner, err := Open(u)
	require.NoError(t, err)
	owner.SetPruneInterval(0)
	owner.setClock(clk.Now)
	_, err = owner.CreateProductionWithPolicies("p", noBackoff, RetentionPolicy{Completed: time.Hour, Failed: time.Hour,
		Dead: time.Hour, Cancelled: time.Hour, Events: time.Hour})
	require.NoError(t, err)
	require.NoError(t, owner.Close())

	// A role that may read and write every row but owns no table.
	role := "leases_t_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	pgu, err := url.Parse(u)
	require.NoError(t, err)
	schema := pgu.Query().Get("search_path")
	pgExec(t, u, `CREATE ROLE `+role+` NOLOGIN`)
	t.Cleanup(func() {
		pgExec(t, u, `DROP OWNED BY `+role)
		pgExec(t, u, `DROP ROLE `+role)
	})
	for _, g := range []string{
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		pgExec(t, u, g)
	}
	q := pgu.Query()
	q.Set("options", "-crole="+role)
	pgu.RawQuery = q.Encode()
	a, err := Open(pgu.String())
	require.NoError(t, err)
	defer a.Close()
	a.SetPruneInterval(0)
	a.setClock(clk.Now)

	fillAndFinish(t, a, 600)
	clk.advance(2 * time.Hour)
	r, err := a.Prune(context.Background(), PruneOptions{})
	require.NoError(t, err, "a prune whose role may not vacuum is no failure")
	require.EqualValues(t, 599, r.Jobs, "every job but the newest is pruned")
	require.Zero(t, r.Vacuumed)
	require.Contains(t, r.Note, fmt.Sprintf("the role %q does not own", role))
	require.Contains(t, r.Note, "autovacuum")
	left, err := a.Jobs("p")
	require.NoError(t, err)
	require.Len(t, left, 1)
}

func TestOnPostgresAPruneVacuumsATableOnlyOnceEnoughOfItsRowsHaveGoneSinceItsLastVacuum(t *testing.T) {
	u := freshSchema(t)
	a, clk := pruningAuthority(t, u)
	cycle := func(jobs int) PruneResult {
		t.Helper()
		fillAndFinish(t, a, jobs)
		clk.advance(2 * time.Hour)
		r, err := a.Prune(context.Background(), PruneOptions{})
		require.NoError(t, err)
		require.Empty(t, r.Note)
		return r
	}
	// The store vacuums a table once 128 of its rows, and a tenth of
	// them, have gone since its last vacuum of it. 30 jobs and their 90
	// events: too few for either.
	r := cycle(30)
	require.EqualValues(t, 90, r.Events)
	require.Zero(t, r.Vacuumed, "a prune of few rows vacuums nothing")
	// 30 more: the events deleted since the last vacuum pass 128, the
	// jobs do not: the events' table alone is vacuumed.
	r = cycle(30)
	require.EqualValues(t, 1, r.Vacuumed, "the events' table, not the jobs' four")
	r = cycle(30)
	require.Zero(t, r.Vacuumed, "counted again from the last vacuum")
	r = cycle(30)
	require.EqualValues(t, 1, r.Vacuumed, "the events' table again")
	// The jobs deleted pass 128 at the fifth cycle: the jobs' four tables.
	r = cycle(30)
	require.EqualValues(t, 4, r.Vacuumed, "the jobs' tables: jobs, facts, outputs, attempts")
}

// pruningAuthority opens u on a test clock with production "p", whose
// finished jobs and events are kept an hour, and background pruning off
// (the test prunes).
func pruningAuthority(t *testing.T, u string) (*Authority, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: t0}
	a, err := Open(u)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	a.setClock(clk.Now)
	a.SetPruneInterval(0)
	_, err = a.CreateProductionWithPolicies("p", noBackoff, RetentionPolicy{Completed: time.Hour, Failed: time.Hour,
		Dead: time.Hour, Cancelled: time.Hour, Events: time.Hour})
	require.NoError(t, err)
	return a, clk
}
