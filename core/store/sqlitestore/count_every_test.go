package sqlitestore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryProductionIsCountedInOnePassOverTheIndexOfJobsByState: the
// count of every production's jobs (the first /metrics of a farm) is one
// pass over the covering index jobs_claimable, in its order (no sort, no
// row), then per production a seek of its claims and of its first
// requested job: never a scan of the jobs table, never an event; on an
// empty file (SQLite's own estimates) and after ANALYZE of a realistic one.
func TestEveryProductionIsCountedInOnePassOverTheIndexOfJobsByState(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plan.db"), Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	defer s.Close()
	check := func(when string) {
		t.Helper()
		plan := queryPlan(t, s, countEverySQL, []any{5})
		require.Equal(t, 1, strings.Count(plan, "SCAN jobs"), "%s:\n%s", when, plan)
		for _, want := range []string{
			"SCAN jobs USING COVERING INDEX jobs_claimable\n",
			"SEARCH jobs USING COVERING INDEX jobs_claimed_ready (production_id=?)\n",
			"SEARCH jobs USING INDEX jobs_claimable (production_id=? AND state=?)",
		} {
			require.Contains(t, plan, want, "%s:\n%s", when, plan)
		}
		require.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", when, plan)
		require.NotContains(t, plan, "events", "%s:\n%s", when, plan)
	}
	check("empty")
	fill(t, s, 3, 4000)
	_, err = s.db.Exec(`ANALYZE`)
	require.NoError(t, err)
	check("analyzed")
}
