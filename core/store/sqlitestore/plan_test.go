package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimingUsesIndexesAndNeverScansUnexpiredClaims pins the query plans of
// the claim path: a claim, and a waiting claim's look for the next expiry,
// must cost the same with ten or ten thousand outstanding claims.
func TestClaimingUsesIndexesAndNeverScansUnexpiredClaims(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plan.db"), Options{}, func() int64 { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plans := map[string]string{
		"requested": `EXPLAIN QUERY PLAN SELECT ` + jobColumns + ` ` + strings.Replace(claimableRequested, "?", "'p'", 1) +
			` ORDER BY seq LIMIT 1`,
		"expired": `EXPLAIN QUERY PLAN SELECT ` + jobColumns + ` ` +
			strings.Replace(strings.Replace(claimableExpired, "?", "'p'", 1), "?", "5", 1) + ` ORDER BY seq LIMIT 1`,
		"next wake": `EXPLAIN QUERY PLAN ` + strings.Replace(nextWakeAtSQL, "?", "'p'", 1),
	}
	want := map[string]string{
		"requested": "USING INDEX jobs_claimable (production_id=? AND state=?)",
		"expired":   "USING INDEX jobs_claimed_expiry (production_id=? AND expiry_unix_us<?)",
		"next wake": "USING COVERING INDEX jobs_claimed_expiry (production_id=?)",
	}
	for name, q := range plans {
		rows, err := s.db.QueryContext(context.Background(), q)
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
		if !strings.Contains(strings.Join(plan, "\n"), want[name]) {
			t.Fatalf("%s: plan %q does not use %q", name, plan, want[name])
		}
	}
}
