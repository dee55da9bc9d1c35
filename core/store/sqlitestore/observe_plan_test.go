package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// observedStatements is every statement of the bounded observations, with
// the index range each must be.
func observedStatements() map[string]struct {
	sql  string
	args []any
	want string
} {
	type stmt = struct {
		sql  string
		args []any
		want string
	}
	out := map[string]stmt{}
	job := func(name string, f store.JobFilter, want string) {
		f.ProductionID, f.Limit = "p", 101
		text, args := jobPageSQL(f)
		out["jobs "+name] = stmt{text, args, want}
	}
	job("", store.JobFilter{AfterSeq: 5}, "SEARCH jobs USING INDEX jobs_by_order (production_id=? AND seq>?)")
	for _, s := range []string{"requested", "claimed", "completed", "failed", "cancelled"} {
		job(s, store.JobFilter{State: s, AfterSeq: 5}, "SEARCH jobs USING INDEX jobs_claimable (production_id=? AND state=? AND seq>?)")
	}
	job("key", store.JobFilter{Key: "k"}, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2 (production_id=? AND key=?)")
	job("key+state", store.JobFilter{Key: "k", State: "claimed"}, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2 (production_id=? AND key=?)")
	job("id", store.JobFilter{ID: "i"}, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)")
	job("id+state", store.JobFilter{ID: "i", State: "failed"}, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)")
	event := func(name string, f store.EventFilter, want string) {
		f.Before, f.Limit = 1<<62, 101
		text, args := eventPageSQL(f)
		out["events "+name] = stmt{text, args, want}
	}
	event("", store.EventFilter{AfterSeq: 5}, "SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)")
	event("production", store.EventFilter{ProductionID: "p"}, "SEARCH events USING INDEX events_by_production (production_id=? AND seq>? AND seq<?)")
	event("production+kind", store.EventFilter{ProductionID: "p", Kind: "claimed"}, "SEARCH events USING INDEX events_by_kind (production_id=? AND kind=? AND seq>? AND seq<?)")
	event("job", store.EventFilter{JobID: "j"}, "SEARCH events USING INDEX events_by_job (job_id=? AND seq>? AND seq<?)")
	event("job+kind", store.EventFilter{JobID: "j", Kind: "claimed"}, "SEARCH events USING INDEX events_by_job (job_id=? AND seq>? AND seq<?)")
	out["productions"] = stmt{`SELECT id, name, created_unix_us FROM productions WHERE name > ? ORDER BY name LIMIT ?`,
		[]any{"a", 10}, "SEARCH productions USING INDEX sqlite_autoindex_productions_2 (name>?)"}
	out["count by state"] = stmt{countByStateSQL, []any{"p"}, "SEARCH jobs USING COVERING INDEX jobs_claimable (production_id=?)"}
	out["count expired"] = stmt{countExpiredSQL, []any{"p", 5}, "SEARCH jobs USING COVERING INDEX jobs_claimed_expiry (production_id=? AND expiry_unix_us<?)"}
	out["oldest requested"] = stmt{oldestRequestedSQL, []any{"p"}, "SEARCH jobs USING INDEX jobs_claimable (production_id=? AND state=?)"}
	out["count events"] = stmt{countEventsSQL, []any{60, "p", "completed", 5}, "SEARCH events USING COVERING INDEX events_by_kind_time (production_id=? AND kind=? AND at_unix_us>?)"}
	out["workers seen"] = stmt{workersSeenSQL, []any{"p", 5, 10}, "SEARCH events USING INDEX events_by_kind_time (production_id=? AND kind=? AND at_unix_us>?)"}
	out["holders"] = stmt{holdersSQL, []any{"p", 5}, "SEARCH jobs USING INDEX jobs_claimed_expiry (production_id=? AND expiry_unix_us>?)"}
	return out
}

func queryPlan(t *testing.T, s *DB, text string, args []any) string {
	t.Helper()
	rows, err := s.db.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+text, args...)
	require.NoError(t, err, text)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "\n")
}

// TestEveryObservationIsAnIndexRange pins the plans of the listings, counts
// and rates: each reads one index range (or a few, one per IN value) and
// never scans a table or sorts a page, on an empty file (SQLite's own
// estimates) and after ANALYZE of a realistic one.
func TestEveryObservationIsAnIndexRange(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plan.db"), Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	defer s.Close()
	check := func(when string) {
		for name, st := range observedStatements() {
			plan := queryPlan(t, s, st.sql, st.args)
			require.Contains(t, plan, st.want, "%s (%s)", name, when)
			bad := []string{"SCAN jobs", "SCAN events", "SCAN productions", "TEMP B-TREE FOR ORDER BY"}
			if name == "workers seen" {
				bad = bad[:3] // it sorts its groups, one per worker, not rows
			}
			for _, b := range bad {
				require.NotContains(t, plan, b, "%s (%s)", name, when)
			}
		}
	}
	check("empty")
	fill(t, s, 3, 4000)
	_, err = s.db.Exec(`ANALYZE`)
	require.NoError(t, err)
	check("analyzed")
}

// fill adds productions of n jobs each, in every state, with a few events
// per job.
func fill(t *testing.T, s *DB, productions, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	states := []string{"requested", "claimed", "completed", "completed", "completed", "failed", "cancelled"}
	for p := 0; p < productions; p++ {
		pid := uuid.NewString()
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: pid, Name: fmt.Sprintf("p%d", p), CreatedAt: 1}))
		for i := 0; i < n; i++ {
			j := store.Job{ID: uuid.NewString(), ProductionID: pid, Key: fmt.Sprintf("k%d", i), HasKey: true,
				Payload: []byte("x"), State: states[i%len(states)], Worker: fmt.Sprintf("w%d", i%20),
				ClaimedAt: int64(i), Expiry: int64(i + 100), RequestedAt: int64(i), UpdatedAt: int64(i)}
			require.NoError(t, tx.InsertJob(ctx, j))
			for _, kind := range []string{"requested", "claimed", "completed"} {
				require.NoError(t, tx.InsertEvent(ctx, store.Event{At: int64(i), ProductionID: pid, JobID: j.ID, Kind: kind, Worker: j.Worker}))
			}
		}
	}
	require.NoError(t, tx.Commit())
}
