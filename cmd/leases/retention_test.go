package main

// Retention from the command line, on SQLite and PostgreSQL: the policy at
// create and later, prune by it and by an explicit age, with an archive and
// as a dry run, and deleting a whole production.

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/pgtest"
)

type retentionJSON struct {
	CompletedUS int64 `json:"completed_us"`
	FailedUS    int64 `json:"failed_us"`
	DeadUS      int64 `json:"dead_us"`
	CancelledUS int64 `json:"cancelled_us"`
	EventsUS    int64 `json:"events_us"`
}

func (e *env) retention(args ...string) retentionJSON {
	e.t.Helper()
	var p struct {
		Retention retentionJSON `json:"retention"`
	}
	r := e.must(append([]string{"production", "retention", prod, "--json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		e.t.Fatal(err)
	}
	return p.Retention
}

func TestTheRetentionPolicyIsSetAndShownFromTheCommandLine(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod, "--keep-completed", "forever", "--keep-events", "3d")
		const day = 24 * 3600 * 1_000_000
		if got := e.retention(); got != (retentionJSON{0, 30 * day, 30 * day, 7 * day, 3 * day}) {
			t.Fatalf("retention after create: %+v", got)
		}
		if got := e.retention("--keep-failed", "36h", "--keep-completed", "90d"); got != (retentionJSON{90 * day, 36 * 3600 * 1_000_000, 30 * day, 7 * day, 3 * day}) {
			t.Fatalf("retention after change: %+v", got)
		}
		if out := e.must("production", "retention", prod).stdout; out != "production nightly: keeps completed 90d, failed 36h0m0s, dead 30d, cancelled 7d, events 3d\n" {
			t.Fatalf("text: %q", out)
		}
		for _, bad := range [][]string{{"--keep-failed", "-1h"}, {"--keep-events", "1x"}, {"--keep-dead", "36501d"}, {"--keep-dead", "1.5d"}} {
			wantExit(t, e.run(append([]string{"production", "retention", prod}, bad...)...), 2, bad[0])
		}
		if got := e.retention(); got.CompletedUS != 90*day {
			t.Fatalf("a refused change changed the policy: %+v", got)
		}
		if e.kindCount("retention_changed") != 1 {
			t.Fatal("the change is not recorded by one retention_changed event")
		}
	})
}

func TestPruneFromTheCommandLineDeletesOnlyFinishedJobsPastTheirRetention(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(3)
		e.must("production", "retention", prod, "--keep-completed", "1us")
		tok, _ := e.claim("w", "1m", "--job", ids[0])
		e.must("complete", "--token-file", tok)
		tok, _ = e.claim("w", "1m", "--job", ids[1])

		if out := e.must("prune", "--dry-run").stdout; out != "would prune 1 jobs and 0 events\n" {
			t.Fatalf("dry run: %q", out)
		}
		if _, ok := e.jobs()[ids[0]]; !ok {
			t.Fatal("the dry run deleted the job")
		}
		archive := filepath.Join(e.dir, "archive.jsonl")
		if out := e.must("prune", "--archive", archive).stdout; out != "pruned 1 jobs and 3 events\n" {
			t.Fatalf("prune: %q", out)
		}
		jobs := e.jobs()
		if _, ok := jobs[ids[0]]; ok || jobs[ids[1]].State != "claimed" || jobs[ids[2]].State != "requested" {
			t.Fatalf("after prune: %+v", jobs)
		}
		b, err := os.ReadFile(archive)
		if err != nil || !strings.Contains(string(b), ids[0]) || strings.Contains(string(b), ids[1]) {
			t.Fatalf("archive: %v\n%s", err, b)
		}
		wantExit(t, e.run("job", "show", "--production", prod, "--job", ids[0]), 1, "not_found")
		// The key of the pruned job names a new job.
		if id := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "job-0").stdout); id == ids[0] {
			t.Fatal("the key still names the pruned job")
		}
		e.must("complete", "--token-file", tok)
		// Its completion is the newest event, kept (with its job) until another.
		e.must("job", "request", "--production", prod)
		wantExit(t, e.run("prune", "--older-than", "0"), 2, "--older-than")
		wantExit(t, e.run("prune", "--dry-run", "--archive", archive), 2, "--dry-run")
		var r struct {
			Jobs int64 `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(e.must("prune", "--older-than", "1us", "--json").stdout), &r); err != nil || r.Jobs != 1 {
			t.Fatalf("prune --older-than: %v %+v", err, r)
		}
	})
}

func TestAWholeProductionIsArchivedAndDeletedFromTheCommandLine(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(2)
		tok, _ := e.claim("w", "1m", "--job", ids[0])
		e.must("complete", "--token-file", tok)
		archive := filepath.Join(e.dir, "nightly.jsonl")
		wantExit(t, e.run("production", "archive", prod, "--archive", archive, "--delete"), 1, "wrong_state")
		e.must("cancel", "--production", prod, "--job", ids[1])
		if out := e.must("production", "archive", prod, "--archive", archive, "--delete").stdout; !strings.HasPrefix(out, "archived and deleted 2 jobs") {
			t.Fatalf("archive --delete: %q", out)
		}
		wantExit(t, e.run("job", "list", "--production", prod), 1, "not_found")
		b, err := os.ReadFile(archive)
		if err != nil || !strings.Contains(string(b), ids[0]) || !strings.Contains(string(b), ids[1]) {
			t.Fatalf("archive: %v\n%s", err, b)
		}
	})
}

// pruneJSON is what leases prune --json reports.
type pruneJSON struct {
	Jobs     int64   `json:"jobs"`
	Events   int64   `json:"events"`
	Vacuumed *int64  `json:"vacuumed_tables"`
	Note     *string `json:"note"`
}

// finishedJobs requests n jobs of prod at location (creating prod if need
// be) through the Go API and completes them, all in one edit.
func finishedJobs(t *testing.T, location string, n int) {
	t.Helper()
	a, err := leases.Open(location)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetPruneInterval(0)
	if _, err := a.CreateProduction(prod); err != nil {
		t.Fatal(err)
	}
	ed, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		id, err := ed.RequestJob(prod, "", nil)
		var l *core.Lease
		if err == nil {
			l, err = ed.ClaimJob(prod, id, "w", time.Minute)
		}
		if err == nil {
			err = ed.Complete(l, core.Facts{})
		}
		if err != nil {
			ed.Abort()
			t.Fatal(err)
		}
	}
	if err := ed.Commit(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) pruneJSON(args ...string) pruneJSON {
	e.t.Helper()
	r := e.must(append([]string{"prune", "--older-than", "1us", "--json"}, args...)...)
	var p pruneJSON
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		e.t.Fatalf("prune --json: %v\n%s", err, r)
	}
	return p
}

// leases prune --json reports the tables a PostgreSQL prune vacuumed
// (vacuumed_tables, once a pass deleted at least 128 rows and a tenth of a
// table), and, run by a role that does not own the tables, a note saying
// the space is left to the server's autovacuum, the deletes standing. A
// SQLite prune reports neither.
func TestPruneJSONReportsTheTablesItVacuumedOrANoteWhyItCouldNot(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		e := pgEnv(t)
		finishedJobs(t, e.db, 600)
		r := e.pruneJSON()
		if r.Jobs != 599 || r.Vacuumed == nil || *r.Vacuumed == 0 || r.Note != nil {
			t.Fatalf("a prune of 599 of 600 jobs by the tables' owner: %+v", r)
		}

		// A role that may read and write every row but owns no table.
		u, err := url.Parse(e.db)
		if err != nil {
			t.Fatal(err)
		}
		schema := u.Query().Get("search_path")
		role := "leases_t_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
		owner := e.db
		pgtest.Exec(t, owner, `CREATE ROLE `+role+` NOLOGIN`)
		t.Cleanup(func() {
			pgtest.Exec(t, owner, `DROP OWNED BY `+role)
			pgtest.Exec(t, owner, `DROP ROLE `+role)
		})
		for _, g := range []string{
			`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
			`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role,
		} {
			pgtest.Exec(t, e.db, g)
		}
		q := u.Query()
		q.Set("options", "-crole="+role)
		u.RawQuery = q.Encode()
		e.db = u.String()
		finishedJobs(t, e.db, 600) // and the newest of before, kept then
		r = e.pruneJSON()
		if r.Jobs != 600 || (r.Vacuumed != nil && *r.Vacuumed != 0) || r.Note == nil ||
			!strings.Contains(*r.Note, "does not own") || !strings.Contains(*r.Note, "autovacuum") {
			t.Fatalf("a prune by a role that does not own the tables: %+v", r)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		e := newEnv(t)
		finishedJobs(t, e.db, 200)
		r := e.pruneJSON()
		if r.Jobs != 199 || r.Vacuumed != nil || r.Note != nil {
			t.Fatalf("a SQLite prune: %+v", r)
		}
	})
}
