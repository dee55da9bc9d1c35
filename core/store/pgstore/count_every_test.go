package pgstore

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// countEveryPlan is the plan of the count of every production's jobs
// (CountEveryProduction): the walk that finds the productions, then the
// counts of those given.
func countEveryPlan(t *testing.T, c *pgx.Conn, ids string) string {
	t.Helper()
	rows, err := c.Query(ctx, `EXPLAIN `+productionsWithJobsSQL) // no argument to plan for
	require.NoError(t, err)
	walk, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(walk, "\n") + "\n" + plan(t, c, "count every production", countEverySQL, []any{int64(3900), ids})
}

// TestEveryProductionIsCountedFromTheJobIndexesNeverTheTableNorTheEventLog:
// the count of every production's jobs (the first /metrics of a farm)
// finds the productions that have jobs by a walk over the index of jobs by
// state, one entry a step, and counts each one's states index-only, on a
// realistic schema (vacuumed and analyzed): never a scan of the jobs
// table, never a sort, never an event.
func TestEveryProductionIsCountedFromTheJobIndexesNeverTheTableNorTheEventLog(t *testing.T) {
	u := freshURL(t)
	fillRealistic(t, u, 10, 5000)
	c := connect(t, u)
	p := countEveryPlan(t, c, "{p1,p2,p3,p4,p5,p6,p7,p8,p9,p10}")
	require.NotRegexp(t, "Seq Scan|Parallel|Sort|leases_events|JIT", p)
	require.Regexp(t, "Limit[^\\n]*\\n *->  Index Only Scan using leases_jobs_by_state", p, "the walk over the productions:\n%s", p)
	require.Regexp(t, "Index Only Scan using leases_jobs_by_state on leases_jobs \\w+[^\\n]*\\n *Index Cond: \\(\\(production_id = ps.id\\) AND \\(state = 'completed'", p)
	require.Regexp(t, "Index Only Scan using leases_jobs_claimed_ready", p, "the expired claims:\n%s", p)
	require.Regexp(t, "Function Scan on unnest ps  \\([^)]*rows=10 ", p, "planned for the productions given:\n%s", p)
}

// TestABusyProductionIsCountedWithEveryProductionAsItIsAlone: the plan of
// each state's count, made once for the productions given, is the plan the
// counts of that production alone get (countByStateSQL): index-only while
// its pages are all-visible, and under three reads of the table's pages
// once workers have touched every page; and no JIT compiling (planned for
// as many productions as a walk might find, it took 500 ms).
func TestABusyProductionIsCountedWithEveryProductionAsItIsAlone(t *testing.T) {
	u := freshURL(t)
	fillBusy(t, u)
	pgtest.VacuumAnalyze(t, u, "leases_jobs")
	c := connect(t, u)
	ids := "{" + busyPID + "}"
	p := countEveryPlan(t, c, ids)
	require.NotRegexp(t, "Seq Scan on leases_jobs|Sort|JIT", p)
	require.Regexp(t, "Index Only Scan using leases_jobs_by_state on leases_jobs \\w+[^\n]*rows=[1-9][0-9]{4}", p)

	pgtest.Exec(t, u, `ALTER TABLE leases_jobs SET (autovacuum_enabled = false)`)
	pgtest.Exec(t, u, `UPDATE leases_jobs SET updated_unix_us = updated_unix_us + 1`)
	pgtest.Exec(t, u, `ANALYZE leases_jobs`)
	var pages int64
	require.NoError(t, c.QueryRow(ctx, `SELECT relpages FROM pg_class WHERE oid = 'leases_jobs'::regclass`).Scan(&pages))
	read := int64(0)
	for _, text := range []string{productionsWithJobsSQL, strings.NewReplacer("$1", "3900", "$2", "'"+ids+"'").Replace(countEverySQL)} {
		rows, err := c.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+text)
		require.NoError(t, err)
		plans, err := pgx.CollectRows(rows, pgx.RowTo[[]map[string]any])
		require.NoError(t, err)
		top := plans[0][0]["Plan"].(map[string]any)
		read += int64(top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64))
		require.Nil(t, plans[0][0]["JIT"], "compiled:\n%s", countEveryPlan(t, c, ids))
	}
	p = countEveryPlan(t, c, ids)
	require.Less(t, read, 3*pages, "the counts read %d pages of a table of %d:\n%s", read, pages, p)
}
