package main

import (
	"strings"
	"testing"
)

// A command on a production that does not exist says what to do: the
// nearest existing name, or the command that creates it.
func TestAMissingProductionSuggestsTheNearestNameOrCreatingIt(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(1)
		e.must("production", "create", "renders")
		wantExit(t, e.run("job", "list", "--production", "nightyl"), 1,
			`not_found: production "nightyl" does not exist (did you mean "nightly"? 'leases production list' lists them)`)
		wantExit(t, e.run("claim", "--production", "rendres", "--worker", "w", "--duration", "1m",
			"--token-out", e.dir+"/tok-missing"), 1, `(did you mean "renders"?`)
		wantExit(t, e.run("job", "request", "--production", "weekly"), 1,
			`not_found: production "weekly" does not exist; create it with: leases production create weekly`)
		wantExit(t, e.run("job", "show", "--production", "new batch", "--job", ids[0]), 1,
			`create it with: leases production create 'new batch'`)
		wantExit(t, e.run("production", "policy", "nightli"), 1,
			`not_found: production "nightli" does not exist (did you mean "nightly"?`)
		r := e.run("cancel", "--production", "nightly2", "--job", ids[0])
		wantExit(t, r, 1, `did you mean "nightly"?`)
		if strings.Count(r.stderr, "leases: ") != 1 {
			t.Fatalf("one error line expected: %s", r)
		}
		if st := e.job(ids[0]).State; st != "requested" {
			t.Fatalf("job is %s", st)
		}
	})
}
