package main

// The CLI on a PostgreSQL authority: --db and $LEASES_DB take a postgres://
// URL unchanged. The server is LEASES_TEST_PG_URL (make test starts one);
// each test works in a schema of its own, with a password in its URL (the
// test server trusts every login, so the password is accepted and ignored)
// that must never reach any output.

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/internal/pgtest"
)

const pgPassword = "SECRETPW7f3a"

// pgEnv is a test env whose database is a fresh schema on the test server,
// named by a URL carrying pgPassword.
func pgEnv(t *testing.T) *env {
	t.Helper()
	u, err := url.Parse(pgtest.FreshSchema(t, false))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pgPassword)
	e := newEnv(t)
	e.db = u.String()
	return e
}

// noPassword fails the test if r shows the URL's password.
func noPassword(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.stdout, pgPassword) || strings.Contains(r.stderr, pgPassword) {
		t.Errorf("the database password appeared in the output: %s", r)
	}
}

// dirEntries lists dir, without the token files the test itself named.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range listDir(t, dir) {
		if !strings.HasPrefix(n, "token-") {
			out = append(out, n)
		}
	}
	return out
}

func TestPostgresURLInLEASES_DBRunsClaimRenewCompleteAndExec(t *testing.T) {
	e := pgEnv(t)
	run := func(args ...string) result {
		t.Helper()
		r := e.must(args...)
		noPassword(t, r)
		return r
	}
	ids := e.setup(2)
	for _, id := range ids {
		if e.job(id).State != "requested" {
			t.Fatalf("job %s: %+v", id, e.job(id))
		}
	}
	tok, r := e.claim("w1", "30s")
	noPassword(t, r)
	if j := e.job(ids[0]); j.State != "claimed" || j.Worker == nil || *j.Worker != "w1" {
		t.Fatalf("after claim: %+v", j)
	}
	before := *e.job(ids[0]).Expiry
	run("renew", "--token-file", tok, "--duration", "1m")
	if after := *e.job(ids[0]).Expiry; after <= before {
		t.Fatalf("renew did not extend the expiry: %d -> %d", before, after)
	}
	run("complete", "--token-file", tok, "--metadata", `frames=3`, "--provenance", `tool="cli"`)
	if j := e.job(ids[0]); j.State != "completed" {
		t.Fatalf("after complete: %+v", j)
	}
	if f := e.facts(ids[0]); string(f.Metadata["frames"]) != "3" {
		t.Fatalf("facts: %+v", f)
	}
	// A completed claim's token is refused.
	r = e.run("renew", "--token-file", tok, "--duration", "2m")
	wantExit(t, r, 1, "wrong_state")
	noPassword(t, r)

	// The second job through exec: it completes on exit 0 with an output.
	tok2, _ := e.claim("w2", "30s")
	out := filepath.Join(e.dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	r = e.run("exec", "--token-file", tok2, "--output-dir", out, "--", "sh", "-c", `printf done > "$LEASES_OUTPUT"`)
	wantExit(t, r, 0)
	noPassword(t, r)
	if j := e.job(ids[1]); j.State != "completed" {
		t.Fatalf("after exec: %+v", j)
	}
	if f := e.facts(ids[1]); len(f.Outputs) != 1 {
		t.Fatalf("exec registered %d outputs, want 1", len(f.Outputs))
	}
	r = e.run("claim", "--production", prod, "--worker", "w3", "--duration", "30s", "--token-out", filepath.Join(e.dir, "token-none"))
	wantExit(t, r, 3)

	kinds := map[string]int{}
	for _, ev := range e.events() {
		kinds[ev.Kind]++
	}
	if kinds["claimed"] != 2 || kinds["completed"] != 2 || kinds["renewed"] != 1 {
		t.Fatalf("events by kind: %v", kinds)
	}
	// The location is a URL, not a path: nothing was created beside the
	// command but the test's own files.
	if got := dirEntries(t, e.dir); len(got) != 1 || got[0] != "out" {
		t.Fatalf("the working directory holds %v, want only out", got)
	}
}

func TestPostgresURLInDBFlagWinsOverLEASES_DB(t *testing.T) {
	e := pgEnv(t)
	other := filepath.Join(e.dir, "other.db")
	r := e.runWith(opts{noDB: true, env: []string{"LEASES_DB=" + other}}, "--db", e.db, "production", "create", "a")
	wantExit(t, r, 0)
	r = e.runWith(opts{noDB: true, env: []string{"LEASES_DB=" + other}}, "production", "create", "b", "--db="+e.db)
	wantExit(t, r, 0)
	// Neither set: ./leases.db in the test directory, not the server (and
	// production list creates no database).
	r = e.runWith(opts{noDB: true}, "production", "list", "--json")
	wantExit(t, r, 1, "not_found", "./leases.db")
	r = e.must("production", "list", "--json")
	noPassword(t, r)
	var ps []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "a" || ps[1].Name != "b" {
		t.Fatalf("the schema holds %+v, want a and b", ps)
	}
	if exists(other) {
		t.Fatal("$LEASES_DB was opened although --db named the server")
	}
}

// Every way an operator can hand over a URL with a password, and every kind
// of failure, keeps the password out of standard output and standard error.
func TestAPasswordInThePostgresURLNeverAppearsInAnyOutput(t *testing.T) {
	e := pgEnv(t)
	unreachable := "postgres://u:" + pgPassword + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=5"
	inQuery := "postgresql://u@127.0.0.1:1/x?sslmode=disable&password=" + pgPassword
	unparsable := "postgres://u:" + pgPassword + "@127.0.0.1:notaport/x"
	noDatabase := strings.Replace(e.db, "/postgres?", "/no_such_db_7f3a?", 1)
	if noDatabase == e.db {
		t.Fatalf("the test URL has no /postgres database part")
	}
	// A URL that does not parse is bad input (exit 2); the others reach for
	// the server and fail as storage (exit 1).
	wantCode := map[string]int{unreachable: 1, inQuery: 1, unparsable: 2, noDatabase: 1}
	wantKind := map[int]string{1: "storage", 2: "invalid_argument"}
	for _, loc := range []string{unreachable, inQuery, unparsable, noDatabase} {
		for _, args := range [][]string{
			{"production", "list"},
			{"production", "create", "x"},
			{"job", "request", "--production", "x"},
			{"claim", "--production", "x", "--worker", "w", "--duration", "30s", "--token-out", filepath.Join(e.dir, "token-fail")},
			{"events", "--json"},
			{"cancel", "--production", "x", "--job", uuid.NewString()},
		} {
			viaFlag := e.runWith(opts{noDB: true}, append([]string{"--db", loc}, args...)...)
			wantExit(t, viaFlag, wantCode[loc], wantKind[wantCode[loc]])
			noPassword(t, viaFlag)
			if !strings.Contains(viaFlag.stderr, "xxxxx") && !strings.Contains(viaFlag.stderr, "unparsable") {
				t.Errorf("the message does not name the server by its redacted URL: %s", viaFlag)
			}
			viaEnv := e.runWith(opts{noDB: true, env: []string{"LEASES_DB=" + loc}}, args...)
			wantExit(t, viaEnv, wantCode[loc], wantKind[wantCode[loc]])
			noPassword(t, viaEnv)
		}
		if exists(filepath.Join(e.dir, "token-fail")) {
			t.Fatal("a claim that could not open the database left its token file")
		}
	}
	// Help and usage errors never echo the database either.
	for _, args := range [][]string{
		{"--db", e.db, "--help"},
		{"--db", e.db, "claim", "--help"},
		{"claim", "--db", e.db, "--help"},
		{"--db", e.db, "help", "claim"},
		{"--db=" + e.db, "production", "--help"},
	} {
		r := e.run(args...)
		wantExit(t, r, 0)
		noPassword(t, r)
	}
	for _, args := range [][]string{
		{"--db", e.db, "no-such-command"},
		{"--db", e.db, "claim", "--production", prod, "--worker", "w", "--duration", "30"},
		{"--dbx=" + e.db, "production", "list"},
		{"production", "list", "--db"},
		{"--db", e.db},
	} {
		r := e.run(args...)
		wantExit(t, r, 2)
		noPassword(t, r)
	}
	// A working command under the password URL prints no password either.
	r := e.must("production", "create", prod)
	noPassword(t, r)
}

// cluster runs tests/pg/cluster.sh with args and returns its standard output.
func cluster(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("../../tests/pg/cluster.sh", args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("cluster.sh %v: %v\n%s", args, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// A follower outlives a restart of its server: the connection failures
// while the server is down are waited out (with one warning), and the events
// written after the restart are printed. The server is a cluster of this
// test's own, since the shared one serves every other test.
func TestEventsFollowKeepsFollowingAcrossAPostgresServerRestart(t *testing.T) {
	pgtest.URL(t, false) // skipped without PostgreSQL, as the others; required under make test
	dir, err := os.MkdirTemp("", "leases-pg-restart-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // as root the server runs as nobody, which must reach its directory
	t.Cleanup(func() { os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "cluster")
	url := cluster(t, "start", dataDir)
	t.Cleanup(func() { cluster(t, "stop", dataDir) })

	e := newEnv(t)
	e.db = url
	e.setup(1)
	cmd, out, errb, done := e.start(opts{}, "events", "--follow", "--json", "--interval", "50ms")
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	running := func(what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("--follow ended %s: %v\nstdout:\n%s\nstderr:\n%s", what, err, out, errb)
		default:
		}
	}
	waitFor(t, "the existing events", func() bool { return strings.Contains(out.String(), `"requested"`) })

	cluster(t, "stop", dataDir)
	waitFor(t, "the warning that the server is gone", func() bool {
		return strings.Contains(errb.String(), "still following")
	})
	time.Sleep(300 * time.Millisecond) // several more failed polls
	running("while the server was down")
	if n := strings.Count(errb.String(), "warning"); n != 1 {
		t.Errorf("the outage drew %d warnings, want one:\n%s", n, errb)
	}

	cluster(t, "restart", dataDir)
	id := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "after-restart").stdout)
	waitFor(t, "the event written after the restart", func() bool { return strings.Contains(out.String(), id) })
	running("after the restart")
	if !strings.Contains(errb.String(), "answers again") {
		t.Errorf("no notice that the server is back:\n%s", errb)
	}
	t.Logf("what the follower said on standard error:\n%s", errb)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		wantExit(t, e.finish([]string{"events", "--follow"}, err, out, errb), 0)
	case <-time.After(60 * time.Second):
		t.Fatal("--follow did not stop on SIGTERM")
	}
}

// On PostgreSQL too, a command that creates nothing leaves a schema without
// an authority as it was: no tables.
func TestCommandsThatCreateNothingCreateNoTablesInAPostgresSchema(t *testing.T) {
	e := pgEnv(t)
	r := e.run("job", "list", "--production", prod)
	wantExit(t, r, 1, "not_found", "leases production create")
	noPassword(t, r)
	if tables := pgtest.Tables(t, e.db); len(tables) != 0 {
		t.Fatalf("tables were created: %v", tables)
	}
	e.must("production", "create", prod)
	e.must("job", "list", "--production", prod)
}
