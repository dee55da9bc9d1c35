package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimingUsesIndexesAndNeverScansUnexpiredClaims pins the query plans of
// the claim path and of a waiting claim's look: a claim, and a look for
// whether one would find a job and for the next time one could, must cost
// the same with ten or ten thousand outstanding claims, or delayed and
// backed-off jobs.
func TestClaimingUsesIndexesAndNeverScansUnexpiredClaims(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plan.db"), Options{}, func() int64 { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	args := map[string][]any{"next": {"p"}, "promote": {"p", 5, 1000}, "lapsed": {"p", 5, 64}, "next wake": {"p"},
		"has claimable": {"p", 5}, "insert attempt": {"j", 1, "w", 1, 2, "released", ""},
		"next with looks": {"p", 5}, "look at": {"p", 5}}
	plans := map[string]string{
		"next":          `EXPLAIN QUERY PLAN ` + nextClaimableSQL,
		"promote":       `EXPLAIN QUERY PLAN ` + promoteDueSQL,
		"lapsed":        `EXPLAIN QUERY PLAN ` + lapsedClaimsSQL,
		"next wake":     `EXPLAIN QUERY PLAN ` + nextWakeAtSQL,
		"has claimable": `EXPLAIN QUERY PLAN ` + hasClaimableSQL,
		// EXPLAIN runs nothing: no attempt of an unknown job is written.
		"insert attempt":  `EXPLAIN QUERY PLAN ` + insertAttemptSQL,
		"next with looks": `EXPLAIN QUERY PLAN ` + nextWithLooksSQL,
		"look at":         `EXPLAIN QUERY PLAN ` + lookAtSQL,
	}
	// The best due job is the first entry of jobs_due (no sort: delayed
	// jobs and claims are not in it); promotion and lapses read a range of
	// due times over delayed jobs or claims only; the next wake is the first
	// entry of each of those two indexes, and a look probes all three.
	want := map[string][]string{
		"next":    {"SEARCH jobs USING INDEX jobs_due (production_id=?)"},
		"promote": {"USING INDEX jobs_delayed (production_id=? AND ready_unix_us<?)"},
		"lapsed":  {"USING INDEX jobs_claimed_ready (production_id=? AND ready_unix_us<?)"},
		"next wake": {"SEARCH jobs USING COVERING INDEX jobs_delayed (production_id=?)",
			"SEARCH jobs USING COVERING INDEX jobs_claimed_ready (production_id=?)"},
		"has claimable": {"USING COVERING INDEX jobs_due (production_id=?)",
			"USING COVERING INDEX jobs_delayed (production_id=? AND ready_unix_us<?)",
			"USING COVERING INDEX jobs_claimed_ready (production_id=? AND ready_unix_us<?)"},
		// The attempt's number and the history length the insert returns
		// each read one job's entries.
		"insert attempt": {"SEARCH attempts USING PRIMARY KEY (job_id=?)"},
		// The claim's usual look: the first due job and a probe of each of
		// the other two ranges, in one statement.
		"next with looks": {"SEARCH jobs USING INDEX jobs_due (production_id=?)",
			"USING COVERING INDEX jobs_delayed (production_id=? AND ready_unix_us<?)",
			"USING COVERING INDEX jobs_claimed_ready (production_id=? AND ready_unix_us<?)"},
		// A waiter's look after its clock sample: the has-claimable probes
		// and the next wake's first entries, in one statement.
		"look at": {"USING COVERING INDEX jobs_due (production_id=?)",
			"USING COVERING INDEX jobs_delayed (production_id=? AND ready_unix_us<?)",
			"USING COVERING INDEX jobs_claimed_ready (production_id=? AND ready_unix_us<?)",
			"SEARCH jobs USING COVERING INDEX jobs_delayed (production_id=?)",
			"SEARCH jobs USING COVERING INDEX jobs_claimed_ready (production_id=?)"},
	}
	for name, q := range plans {
		rows, err := s.db.QueryContext(context.Background(), q, args[name]...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, w := range want[name] {
			if !strings.Contains(strings.Join(plan, "\n"), w) {
				t.Fatalf("%s: plan %q does not use %q", name, plan, w)
			}
		}
		if strings.Contains(strings.Join(plan, "\n"), "TEMP B-TREE") {
			t.Fatalf("%s: plan %q sorts", name, plan)
		}
	}
}
