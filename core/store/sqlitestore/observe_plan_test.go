package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// observedStatements is every statement of the bounded observations, with
// the index range each must be.
func observedStatements() map[string]storetest.Statement {
	out := map[string]storetest.Statement{}
	index := map[string]string{
		"jobs":                   "SEARCH jobs USING INDEX jobs_by_order (production_id=? AND seq>?)",
		"jobs key":               "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2 (production_id=? AND key=?)",
		"jobs key+state":         "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2 (production_id=? AND key=?)",
		"jobs id":                "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)",
		"jobs id+state":          "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)",
		"jobs backward":          "SEARCH jobs USING INDEX jobs_by_order (production_id=? AND seq<?)",
		"events":                 "SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
		"events production":      "SEARCH events USING INDEX events_by_production (production_id=? AND seq>? AND seq<?)",
		"events production+kind": "SEARCH events USING INDEX events_by_kind (production_id=? AND kind=? AND late=? AND seq>? AND seq<?)",
		"events job":             "SEARCH events USING INDEX events_by_job (job_id=? AND seq>? AND seq<?)",
		"events job+kind":        "SEARCH events USING INDEX events_by_job (job_id=? AND seq>? AND seq<?)",
	}
	for name, f := range storetest.JobPages("p") {
		want, ok := index[name]
		switch {
		case ok:
		case f.Backward:
			want = "SEARCH jobs USING INDEX jobs_claimable (production_id=? AND state=? AND seq<?)" // one state
		default:
			want = "SEARCH jobs USING INDEX jobs_claimable (production_id=? AND state=? AND seq>?)" // one state
		}
		text, args := jobPageSQL(f)
		out[name] = storetest.Statement{SQL: text, Args: args, Want: want}
	}
	for name, f := range storetest.EventPages("p") {
		text, args := eventPageSQL(f)
		st := storetest.Statement{SQL: text, Args: args, Want: index[strings.TrimSuffix(name, " newest")]}
		if f.ProductionID != "" || f.JobID != "" {
			st.Also = []string{tailPlan + " AND rowid<?)"} // the events after the projection's mark
		}
		out[name] = st
	}
	out["productions"] = storetest.Statement{SQL: `SELECT id, name, created_unix_us FROM productions WHERE name > ? ORDER BY name LIMIT ?`, Args: []any{"a", 10}, Want: "SEARCH productions USING INDEX sqlite_autoindex_productions_2 (name>?)"}
	out["count by state"] = storetest.Statement{SQL: countByStateSQL, Args: []any{"p"}, Want: "SEARCH jobs USING COVERING INDEX jobs_claimable (production_id=? AND state=?)"}
	out["count expired"] = storetest.Statement{SQL: countExpiredSQL, Args: []any{"p", 5}, Want: "SEARCH jobs USING COVERING INDEX jobs_claimed_ready (production_id=?)"}
	out["oldest requested"] = storetest.Statement{SQL: oldestRequestedSQL, Args: []any{"p"}, Want: "SEARCH jobs USING INDEX jobs_claimable (production_id=? AND state=?)"}
	// A bucket's count: a binary search of seq, one seek each step, then a
	// bare count of the in-order range; late events from their own index.
	out["count events first"] = storetest.Statement{SQL: firstInOrderSQL, Args: []any{"p", "completed", 5},
		Want: "SEARCH events USING INDEX events_by_kind (production_id=? AND kind=? AND late=? AND seq>?)"}
	out["count events last"] = storetest.Statement{SQL: lastInOrderSQL, Args: []any{"p", "completed"},
		Want: "SEARCH events USING INDEX events_by_kind (production_id=? AND kind=? AND late=?)"}
	out["count events range"] = storetest.Statement{SQL: countInOrderSQL, Args: []any{"p", "completed", 5, 9},
		Want: "SEARCH events USING COVERING INDEX events_by_kind (production_id=? AND kind=? AND late=? AND seq>? AND seq<?)"}
	out["count events late"] = storetest.Statement{SQL: countLateSQL, Args: []any{"p", "completed", 60, 5},
		Want: "SEARCH events USING COVERING INDEX events_by_kind_late (production_id=? AND kind=? AND at_unix_us>?)"}
	out["count events tail"] = storetest.Statement{SQL: countTailSQL, Args: []any{"p", "completed", 60, 5},
		Want: tailPlan + ")"}
	// The pruner's reads of a production's and some jobs' events: the
	// projected ones from an index, the tail from the primary key.
	out["prune events"] = storetest.Statement{SQL: pruneEventsSQL, Args: []any{"p", 5, 10},
		Want: "SEARCH events USING INDEX events_by_production (production_id=? AND seq>?)",
		Also: []string{tailPlan + ")"}}
	out["prune count job events"] = storetest.Statement{SQL: countJobEventsSQL, Args: []any{`["a","b"]`},
		Want: "SEARCH events USING COVERING INDEX events_by_job (job_id=?)", Also: []string{tailPlan + ")"}}
	// From one worker to the next, then each one's last entry: steps per
	// worker, never a range of the window's events.
	out["workers seen"] = storetest.Statement{SQL: workersSeenSQL, Args: []any{"p", 5, 10},
		Want: "SEARCH events USING INDEX events_by_worker (production_id=? AND worker>?)",
		Also: []string{"SEARCH events USING INDEX events_by_worker (production_id=? AND worker=?)", tailPlan + ")"}}
	out["holders"] = storetest.Statement{SQL: holdersSQL, Args: []any{"p", 5}, Want: "SEARCH jobs USING COVERING INDEX jobs_claimed_ready (production_id=?)"}
	// A worker's jobs: its entries of the worker index from the top down,
	// one seek of the job each.
	for name, f := range map[string]store.WorkerJobFilter{
		"worker jobs":        {ProductionID: "p", Worker: "w3", Limit: 51},
		"worker jobs cursor": {ProductionID: "p", Worker: "w3", BeforeAt: 900, BeforeID: "m", Limit: 51},
		"worker jobs newer":  {ProductionID: "p", Worker: "w3", Newer: true, AfterAt: 900, AfterID: "m", Limit: 51},
		"worker jobs states": {ProductionID: "p", Worker: "w3", States: []string{"completed", "failed"}, Key: "k7", Limit: 51},
	} {
		text, args := workerJobsSQL(f)
		want := "SEARCH e USING INDEX events_by_worker (production_id=? AND worker=?)"
		if f.BeforeAt != 0 {
			want = "SEARCH e USING INDEX events_by_worker (production_id=? AND worker=? AND at_unix_us<?)"
		}
		if f.Newer {
			want = "SEARCH e USING INDEX events_by_worker (production_id=? AND worker=? AND at_unix_us>?)"
		}
		out[name] = storetest.Statement{SQL: text, Args: args, Want: want,
			Also: []string{"SEARCH j USING INDEX sqlite_autoindex_jobs_1 (id=?)", "SEARCH e USING INTEGER PRIMARY KEY (rowid>?)"}}
	}
	// A page's times: per id, a seek of the primary key, of the job's
	// events and of its attempts; never a range of a production.
	out["job times"] = storetest.Statement{SQL: jobTimesSQL, Args: []any{"p", `["a","b","c"]`},
		Want: "SEARCH j USING INDEX sqlite_autoindex_jobs_1 (id=?)",
		Also: []string{"SEARCH e USING INDEX events_by_job (job_id=?)", "SEARCH t USING INTEGER PRIMARY KEY (rowid>?)",
			"SEARCH x USING PRIMARY KEY (job_id=?)", "SEARCH a USING PRIMARY KEY (job_id=? AND id=?)"}}
	// A key prefix is one range of the (production_id, key) unique index,
	// BINARY (byte order), read in its order: never a sort.
	for name, f := range map[string]store.JobFilter{
		"jobs key prefix":          {KeyFrom: "k1", KeyBelow: "k2"},
		"jobs key prefix after":    {KeyFrom: "k1", KeyAfter: "k15", KeyBelow: "k2"},
		"jobs key prefix backward": {KeyFrom: "k1", KeyBelow: "k15", Backward: true},
		"jobs key prefix state":    {KeyFrom: "k1", KeyBelow: "k2", State: "completed"},
		"jobs key prefix open":     {KeyFrom: "k1"},
	} {
		f.ProductionID, f.Limit = "p", 101
		text, args := jobPageSQL(f)
		want := "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2 (production_id=? AND key>? AND key<?)"
		if f.KeyBelow == "" {
			want = "SEARCH jobs USING INDEX sqlite_autoindex_jobs_2 (production_id=? AND key>?)"
		}
		out[name] = storetest.Statement{SQL: text, Args: args, Want: want}
	}
	// A job id prefix is one range of the primary key, in a production or in all.
	for name, f := range map[string]store.JobIDFilter{
		"job ids":            {From: "0a1b2c3d", To: "0a1b2c3e", Limit: 6},
		"job ids production": {ProductionID: "p", From: "0a1b2c3d", To: "0a1b2c3e", Limit: 6},
		"job ids open":       {ProductionID: "p", From: "ffffffff", Limit: 6},
	} {
		text, args := jobIDsSQL(f)
		want := "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id>? AND id<?)"
		if f.To == "" {
			want = "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id>?)"
		}
		out[name] = storetest.Statement{SQL: text, Args: args, Want: want}
	}
	return out
}

// tailPlan is how a listing reads the events after the projection's mark
// (projector.go): a range of the primary key from the mark.
const tailPlan = "SEARCH events USING INTEGER PRIMARY KEY (rowid>?"

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
			plan := queryPlan(t, s, st.SQL, st.Args)
			require.Contains(t, plan, st.Want, "%s (%s)", name, when)
			for _, also := range st.Also {
				require.Contains(t, plan, also, "%s (%s)", name, when)
			}
			bad := []string{"SCAN jobs", "SCAN events", "SCAN productions", "TEMP B-TREE FOR ORDER BY"}
			indexed := plan
			if strings.HasPrefix(name, "worker jobs") {
				// The tail's few claimed events are sorted; the index's
				// part is read in its order.
				indexed = plan[:strings.LastIndex(plan, "SEARCH e USING INTEGER PRIMARY KEY")]
				require.NotContains(t, indexed, "TEMP B-TREE FOR ORDER BY", "%s (%s)", name, when)
				bad = bad[:3]
			}
			switch name {
			case "workers seen":
				bad = bad[:3] // it sorts the workers it found, not events
				require.NotContains(t, plan, "events_by_kind_time", "%s (%s)", name, when)
			case "count events late", "count events tail":
				bad = bad[:3] // it groups the late (or the tail's) events of the window by bucket
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
