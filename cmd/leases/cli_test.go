// CLI contract tests (docs/cli.md; the token rules of docs/DESIGN.md): every
// command, every exit status, the token rules and durations, run against the
// binary.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
)

var allCommands = []string{"production create", "production list", "production policy", "production redrive",
	"production retention", "production archive", "prune", "job request", "job list",
	"job show", "job counts", "job retry", "claim", "renew",
	"release", "fail", "complete", "cancel", "events", "exec", "work", "version"}

func TestEveryCommandHasHelpWithExamplesAndNoToken(t *testing.T) {
	e := newEnv(t)
	top := e.must("--help")
	for _, c := range allCommands {
		if !strings.Contains(top.stdout, "  "+c+" ") {
			t.Errorf("leases --help does not list %q", c)
		}
		for _, args := range [][]string{append(strings.Fields(c), "--help"), append([]string{"help"}, strings.Fields(c)...)} {
			r := e.run(args...)
			wantExit(t, r, 0)
			if !strings.Contains(r.stdout, "Usage: leases "+c) || !strings.Contains(r.stdout, "Examples:\n  leases ") {
				t.Errorf("%v: help lacks usage or examples:\n%s", args, r.stdout)
			}
			if c != "version" && !strings.Contains(r.stdout, "  --db PATH") {
				t.Errorf("%v: help does not list the flags:\n%s", args, r.stdout)
			}
			if strings.Contains(r.stdout, "lt1.") {
				t.Errorf("%v: an example contains a token", args)
			}
		}
	}
	for _, g := range []string{"production", "job"} {
		r := e.run(g, "--help")
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, g+" list") {
			t.Errorf("%s --help does not list its commands:\n%s", g, r.stdout)
		}
	}
	if exists(e.db) {
		t.Error("showing help created the database")
	}
}

// flagRE finds the "--name PLACEHOLDER" lines of a command's help.
var flagRE = regexp.MustCompile(`(?m)^  --([a-z-]+)(?: ([A-Z=]+))?`)

func TestNoFlagTakesATokenValue(t *testing.T) {
	e := newEnv(t)
	seen := map[string]bool{}
	for _, c := range allCommands {
		r := e.must(append(strings.Fields(c), "--help")...)
		for _, m := range flagRE.FindAllStringSubmatch(r.stdout, -1) {
			name, placeholder := m[1], m[2]
			if strings.Contains(name, "token") {
				seen[name] = true
				if placeholder != "FILE" {
					t.Errorf("%s --%s takes %q, want a FILE", c, name, placeholder)
				}
			}
		}
	}
	if !seen["token-file"] || !seen["token-out"] || len(seen) != 2 {
		t.Errorf("token flags are %v, want exactly token-file and token-out", seen)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	e := newEnv(t)
	e.setup(0) // with no database, commands that need one say that first
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"production"},
		{"production", "explode"},
		{"production", "create"},
		{"production", "create", "a", "b"},
		{"job", "list"},
		{"job", "request", "--production"},
		{"claim", "--production", prod, "--worker", "w", "--token-out", "x"}, // no duration
		{"claim", "--production", prod, "--worker", "w", "--duration", "1s", "--token-out", "-"},
		{"renew", "--duration", "1s"}, // no token file
		{"fail", "--token-file", "t"}, // no reason
		{"events", "--after", "-1"},
		{"cancel", "--production", prod, "--job", "not-a-uuid"},
		{"exec", "--token-file", "t", "--output-dir", "d"}, // no program
		{"--bogus", "version"},
		{"version", "--bogus"},
	} {
		r := e.run(args...)
		wantExit(t, r, 2, "leases: ")
	}
}

func TestDatabaseIsDBFlagThenEnvironmentThenDefault(t *testing.T) {
	e := newEnv(t)
	viaFlag := filepath.Join(e.dir, "flag.db")
	viaEnv := filepath.Join(e.dir, "env.db")
	e.runWith(opts{env: []string{"LEASES_DB=" + viaEnv}}, "--db", viaFlag, "production", "create", "a")
	e.runWith(opts{env: []string{"LEASES_DB=" + viaEnv}}, "production", "create", "b", "--db", viaFlag)
	e.runWith(opts{noDB: true, env: []string{"LEASES_DB=" + viaEnv}}, "production", "create", "c")
	cwd := filepath.Join(e.dir, "cwd")
	os.Mkdir(cwd, 0o755)
	e.runWith(opts{noDB: true, dir: cwd}, "production", "create", "d")
	names := func(db string) string {
		r := e.runWith(opts{noDB: true}, "production", "list", "--db", db, "--json")
		wantExit(t, r, 0)
		var ps []struct{ Name string }
		if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(viaFlag); got != "a,b" {
		t.Errorf("--db holds %q, want a,b", got)
	}
	if got := names(viaEnv); got != "c" {
		t.Errorf("$LEASES_DB holds %q, want c", got)
	}
	if got := names(filepath.Join(cwd, "leases.db")); got != "d" {
		t.Errorf("./leases.db holds %q, want d", got)
	}
}

func TestProductionAndJobCommands(t *testing.T) {
	e := newEnv(t)
	id1 := strings.TrimSpace(e.must("production", "create", prod).stdout)
	id2 := strings.TrimSpace(e.must("production", "create", prod).stdout)
	if id1 != id2 || len(id1) != 36 {
		t.Fatalf("production create is not idempotent: %q %q", id1, id2)
	}
	var p struct{ ID, Name string }
	if err := json.Unmarshal([]byte(e.must("production", "create", "other", "--json").stdout), &p); err != nil || p.Name != "other" {
		t.Fatalf("production create --json: %v %+v", err, p)
	}
	var ps []struct{ Name string }
	json.Unmarshal([]byte(e.must("production", "list", "--json").stdout), &ps)
	if len(ps) != 2 || ps[0].Name != prod && ps[1].Name != prod {
		t.Fatalf("production list --json: %+v", ps)
	}
	if tbl := e.must("production", "list").stdout; !strings.HasPrefix(tbl, "NAME") || !strings.Contains(tbl, id1) {
		t.Fatalf("production list table:\n%s", tbl)
	}

	a := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "k").stdout)
	again := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "k").stdout)
	if a != again {
		t.Fatal("a keyed job request is not idempotent")
	}
	payload := filepath.Join(e.dir, "payload")
	os.WriteFile(payload, []byte("from a file"), 0o600)
	e.must("job", "request", "--production", prod, "--key", "f", "--payload-file", payload)
	r := e.runWith(opts{stdin: "other bytes"}, "job", "request", "--production", prod, "--key", "k", "--payload-file", "-")
	wantExit(t, r, 1, "wrong_state")
	var jr struct{ ID string }
	r = e.runWith(opts{stdin: "piped"}, "job", "request", "--production", prod, "--payload-file", "-", "--json")
	if json.Unmarshal([]byte(r.stdout), &jr); jr.ID == "" {
		t.Fatalf("job request --json: %s", r)
	}
	if len(e.jobs()) != 3 {
		t.Fatalf("want 3 jobs, got %v", e.jobs())
	}
	tbl := e.must("job", "list", "--production", prod).stdout
	if !strings.HasPrefix(tbl, "ID") || !strings.Contains(tbl, a) || !strings.Contains(tbl, "requested") {
		t.Fatalf("job list table:\n%s", tbl)
	}
	wantExit(t, e.run("job", "list", "--production", "missing"), 1, "not_found")
	wantExit(t, e.run("job", "request", "--production", "missing"), 1, "not_found")
}

func TestClaimWritesTheTokenToANewPrivateFile(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(2)
	tok, r := e.claim("host-7", "30s")
	st, err := os.Stat(tok)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v (%v), want 0600", st.Mode(), err)
	}
	if !strings.Contains(r.stdout, ids[0]) || !strings.Contains(r.stdout, "worker=host-7") {
		t.Fatalf("receipt lacks job or worker: %s", r)
	}
	j := e.job(ids[0])
	if j.State != "claimed" || *j.Worker != "host-7" || *j.Expiry-*j.ClaimedAt != 30_000_000 {
		t.Fatalf("job after claim: %+v", j)
	}
	// --job and --json
	tok2 := filepath.Join(e.dir, "second.token")
	r = e.run("claim", "--production", prod, "--worker", "w2", "--duration", "1m", "--token-out", tok2, "--job", ids[1], "--json")
	wantExit(t, r, 0)
	e.register(tok2)
	var rc receipt
	if err := json.Unmarshal([]byte(r.stdout), &rc); err != nil || rc.JobID != ids[1] || rc.Worker != "w2" || rc.Expiry == 0 {
		t.Fatalf("claim --json receipt: %v %s", err, r)
	}
	// a claimed job cannot be claimed again by id
	tok3 := filepath.Join(e.dir, "third.token")
	wantExit(t, e.run("claim", "--production", prod, "--worker", "w3", "--duration", "1m", "--token-out", tok3, "--job", ids[1]), 1, "wrong_state")
	if exists(tok3) {
		t.Fatal("a refused claim left its token file")
	}
	_ = tok
}

func TestClaimRefusesAnExistingTokenFileAndChangesNothing(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	before := len(e.events())
	existing := filepath.Join(e.dir, "taken")
	os.WriteFile(existing, []byte("keep me"), 0o644)
	target := filepath.Join(e.dir, "symlink-target")
	link := filepath.Join(e.dir, "link")
	os.Symlink(target, link)
	for _, out := range []string{existing, link, "/dev/null"} {
		r := e.run("claim", "--production", prod, "--worker", "w", "--duration", "30s", "--token-out", out)
		wantExit(t, r, 1, "already exists", "nothing was claimed")
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Fatalf("existing file changed: %q", b)
	}
	if exists(target) {
		t.Fatal("the claim wrote through a symlink")
	}
	if j := e.job(ids[0]); j.State != "requested" || j.Attempts != 0 {
		t.Fatalf("a refused claim changed the job: %+v", j)
	}
	if after := len(e.events()); after != before {
		t.Fatalf("a refused claim wrote %d events", after-before)
	}
	// Refused before the database is even opened.
	fresh := filepath.Join(e.dir, "fresh.db")
	e.run("claim", "--db", fresh, "--production", prod, "--worker", "w", "--duration", "30s", "--token-out", existing)
	if exists(fresh) {
		t.Fatal("a refused claim created the database")
	}
}

func TestNothingToClaimExitsThreeAndRemovesTheReservedFile(t *testing.T) {
	e := newEnv(t)
	e.setup(0)
	out := filepath.Join(e.dir, "t")
	r := e.run("claim", "--production", prod, "--worker", "w", "--duration", "30s", "--token-out", out)
	wantExit(t, r, 3, "nothing_to_claim")
	if exists(out) {
		t.Fatal("the reserved token file was left behind")
	}
	wantExit(t, e.run("claim", "--production", "missing", "--worker", "w", "--duration", "30s", "--token-out", out), 1, "not_found")
	if exists(out) {
		t.Fatal("the reserved token file was left behind")
	}
}

// A claim whose commit persisted but was reported failed returns no lease,
// so there is no token to write: the CLI names the job, and how to find and
// give back the claim.
func TestAClaimWhoseOutcomeIsUnknownNamesTheJob(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := filepath.Join(e.dir, "t")
	r := e.runWith(opts{env: []string{"LEASES_TEST_CLAIM_ACK_LOST=1"}},
		"claim", "--production", prod, "--worker", "w-unknown", "--duration", "1m", "--token-out", out)
	wantExit(t, r, 1, "outcome_unknown", "job "+ids[0], "leases cancel --production "+prod+" --job "+ids[0])
	if exists(out) {
		t.Fatal("a token file without a token was left behind")
	}
	if j := e.job(ids[0]); j.State != "claimed" || *j.Worker != "w-unknown" {
		t.Fatalf("the claim did commit, and the listing shows it: %+v", j)
	}
	e.must("cancel", "--production", prod, "--job", ids[0])
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func TestTokenDeliveryFailureExitsFourPrintsReceiptAndKeepsTheClaim(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := filepath.Join(e.dir, "t")
	// The leasestest binary runs the token write under RLIMIT_FSIZE=0: the
	// kernel refuses it (EFBIG) after the claim has committed.
	r := e.runWith(opts{env: []string{"LEASES_TEST_TOKEN_WRITE_EFBIG=1"}},
		"claim", "--production", prod, "--worker", "w-deliver", "--duration", "1m", "--token-out", out)
	wantExit(t, r, 4, "could not be written", "receipt: production="+prod, "job="+ids[0], "worker=w-deliver", "leases cancel")
	if exists(out) {
		t.Fatal("the incomplete token file was not removed")
	}
	if r.stdout != "" {
		t.Fatalf("nothing belongs on stdout after a delivery failure: %q", r.stdout)
	}
	j := e.job(ids[0])
	if j.State != "claimed" || *j.Worker != "w-deliver" {
		t.Fatalf("the committed claim was not kept: %+v", j)
	}
	exp := time.UnixMicro(*j.Expiry).UTC().Format("2006-01-02T15:04:05.000000Z")
	if !strings.Contains(r.stderr, "expiry="+exp) {
		t.Fatalf("receipt expiry does not match the committed claim (%s): %s", exp, r.stderr)
	}
	// The secret was never delivered, so it cannot be registered with the
	// scan: prove instead that the only ids printed are the job's.
	for _, id := range uuidRE.FindAllString(r.stderr, -1) {
		if id != ids[0] {
			t.Fatalf("stderr carries an unexpected id-shaped value: %s", r.stderr)
		}
	}
	if strings.Contains(r.stderr, "lt1.") {
		t.Fatal("stderr carries a token")
	}
	// It is durable: nothing else can claim it, and the coordinator recovers it.
	wantExit(t, e.run("claim", "--production", prod, "--worker", "w2", "--duration", "1m", "--token-out", filepath.Join(e.dir, "t2")), 3)
	e.must("cancel", "--production", prod, "--job", ids[0])
	if j := e.job(ids[0]); j.State != "cancelled" {
		t.Fatalf("cancel did not recover the claim: %+v", j)
	}
}

func TestTokensAreNeverTakenFromArguments(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	tokPath, _ := e.claim("w", "1m")
	tok := e.readToken(tokPath)
	before := len(e.events())
	mutated := tok[:len(tok)-1] + "A" // still token-shaped, fails its checksum
	for _, args := range [][]string{
		{"renew", tok, "--duration", "1m"},
		{"renew", "--duration", "1m", tok},
		{"release", tok},
		{"fail", tok, "--reason", "x"},
		{"complete", tok},
		{"exec", "--output-dir", e.dir, "--", "true", tok},
		{"renew", "--token", tok, "--duration", "1m"},
		{"renew", "--token=" + tok, "--duration", "1m"},
		{"renew", "--token-file", tok, "--duration", "1m"},
		{"renew", "--token-file=" + tok, "--duration", "1m"},
		{"fail", "--token-file", tokPath, "--reason", "token " + tok},
		{"release", mutated},
		{"release", "TOKEN=" + tok},
		{"--db", tok, "release"},
	} {
		r := e.run(args...)
		wantExit(t, r, 2, "looks like a lease token", "--token-file")
	}
	if j := e.job(ids[0]); j.State != "claimed" {
		t.Fatalf("a refused command changed the job: %+v", j)
	}
	if after := len(e.events()); after != before {
		t.Fatalf("refused commands wrote %d events", after-before)
	}
	// The same token from a file, and from standard input, works.
	e.must("renew", "--token-file", tokPath, "--duration", "2m")
	r := e.runWith(opts{stdin: tok + "\n"}, "renew", "--token-file", "-", "--duration", "3m")
	wantExit(t, r, 0)
}

func TestBadTokenInputsAreRejectedWithoutEchoingThem(t *testing.T) {
	e := newEnv(t)
	e.setup(1)
	tokPath, _ := e.claim("w", "1m")
	tok := e.readToken(tokPath)
	bad := filepath.Join(e.dir, "bad")
	for _, content := range []string{"", "garbage", tok[:len(tok)-2] + "xx", strings.Repeat("A", 4096), tok + tok} {
		os.WriteFile(bad, []byte(content), 0o600)
		r := e.run("renew", "--token-file", bad, "--duration", "1m")
		wantExit(t, r, 1)
		if content != "" && strings.Contains(r.stderr, content[:min(len(content), 20)]) {
			t.Fatalf("the error echoes the token input: %s", r)
		}
	}
	wantExit(t, e.run("renew", "--token-file", filepath.Join(e.dir, "missing"), "--duration", "1m"), 1, "token file")

	// A token file others can read still works, with a warning.
	os.Chmod(tokPath, 0o644)
	r := e.run("renew", "--token-file", tokPath, "--duration", "2m")
	wantExit(t, r, 0)
	if !strings.Contains(r.stderr, "warning: token file") || !strings.Contains(r.stderr, "0644") {
		t.Fatalf("no warning about a readable token file: %s", r)
	}
}

func TestDurationsFollowTheSharedVectors(t *testing.T) {
	raw, err := os.ReadFile("../../tests/vectors/durations.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Accepted, Rejected []struct{ Nanoseconds, Text string }
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	accepted := map[string]int64{"1.5ms": 1500, "1m30s": 90_000_000, "0.000001s": 1, "86400000000us": 86_400_000_000,
		"1h59m": 7_140_000_000, "2.5h": 9_000_000_000}
	for _, a := range v.Accepted {
		ns, _ := strconv.ParseInt(a.Nanoseconds, 10, 64)
		if a.Text != "" {
			accepted[a.Text] = ns / 1000
		}
	}
	rejected := []string{"30", "1.5us", "0.0000015s", "1ns", "1e3ms", "", ".5s", "5.s", "1 s", "1S", "1sec", "-1s",
		"+1s", "24h0m0.000001s", "99999999999999999999999h", "0.0us", "1µs"}
	for _, r := range v.Rejected {
		if r.Text != "" {
			rejected = append(rejected, r.Text)
		}
	}
	if len(accepted) < 8 || len(rejected) < 20 {
		t.Fatalf("the shared vectors were not read: %d accepted, %d rejected", len(accepted), len(rejected))
	}

	// The parser itself, exactly, on every spelling.
	for text, us := range accepted {
		d, err := parseDuration(text)
		if err != nil || int64(d) != us*1000 {
			t.Errorf("parseDuration(%q) = %d ns, %v; want %d us", text, d, err, us)
		}
	}
	for _, text := range rejected {
		if d, err := parseDuration(text); err == nil {
			t.Errorf("parseDuration(%q) accepted %v", text, d)
		}
	}

	// Through the binary. A claim shorter than the time a commit takes
	// expires before it commits, so only the claimable spellings are claimed.
	e := newEnv(t)
	e.setup(0)
	texts := make([]string, 0, len(accepted))
	for text, us := range accepted {
		if us >= 1_000_000 {
			texts = append(texts, text)
		}
	}
	sort.Strings(texts)
	if len(texts) < 5 {
		t.Fatalf("too few claimable spellings: %v", texts)
	}
	for _, text := range texts {
		id := strings.TrimSpace(e.must("job", "request", "--production", prod).stdout)
		tok, _ := e.claim("w", text, "--job", id)
		j := e.job(id)
		if got := *j.Expiry - *j.ClaimedAt; got != accepted[text] {
			t.Errorf("--duration %s claimed %dus, want %dus", text, got, accepted[text])
		}
		e.must("release", "--token-file", tok)
	}
	for _, text := range rejected {
		out := filepath.Join(e.dir, "never")
		r := e.run("claim", "--production", prod, "--worker", "w", "--duration", text, "--token-out", out)
		wantExit(t, r, 2, "duration")
		if exists(out) {
			t.Fatalf("--duration %q: a token file was created", text)
		}
		if text == "30" && !strings.Contains(r.stderr, "unit") {
			t.Errorf("a bare number's message does not ask for a unit: %s", r.stderr)
		}
		if text == "1.5us" && !strings.Contains(r.stderr, "whole number of microseconds") {
			t.Errorf("a fractional microsecond's message is unclear: %s", r.stderr)
		}
	}
	for _, j := range e.jobs() {
		if j.State != "requested" {
			t.Fatalf("a rejected duration claimed a job: %+v", j)
		}
	}
}

func TestClaimantCommandsRenewReleaseFailComplete(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(3)

	tok, _ := e.claim("w", "30s")
	e.must("renew", "--token-file", tok, "--duration", "2m")
	if j := e.job(ids[0]); *j.Expiry-*j.ClaimedAt < 110_000_000 {
		t.Fatalf("renew did not extend: %+v", j)
	}
	var rc receipt
	json.Unmarshal([]byte(e.must("renew", "--token-file", tok, "--duration", "3m", "--json").stdout), &rc)
	if rc.JobID != ids[0] || rc.Expiry != *e.job(ids[0]).Expiry {
		t.Fatalf("renew --json: %+v", rc)
	}
	wantExit(t, e.run("renew", "--token-file", tok, "--duration", "1s"), 1, "not_extended")
	e.must("release", "--token-file", tok)
	if j := e.job(ids[0]); j.State != "requested" {
		t.Fatalf("release: %+v", j)
	}
	wantExit(t, e.run("release", "--token-file", tok), 1, "wrong_state")

	tok, _ = e.claim("w", "30s") // the released job again (request order)
	e.must("fail", "--token-file", tok, "--reason", "input corrupt")
	if j := e.job(ids[0]); j.State != "failed" || j.Reason == nil || *j.Reason != "input corrupt" {
		t.Fatalf("fail: %+v", j)
	}

	tok, _ = e.claim("w", "30s")
	wantExit(t, e.run("complete", "--token-file", tok, "--metadata", "frames"), 2, "KEY=JSON")
	wantExit(t, e.run("complete", "--token-file", tok, "--metadata", "frames={bad"), 2, "not valid JSON")
	e.must("complete", "--token-file", tok, "--metadata", "frames=12", "--provenance", `tool="render"`, "--metadata", `ok=true`)
	f := e.facts(ids[1])
	if string(f.Metadata["frames"]) != "12" || string(f.Metadata["ok"]) != "true" || string(f.Provenance["tool"]) != `"render"` {
		t.Fatalf("complete published %+v", f)
	}
	wantExit(t, e.run("complete", "--token-file", tok), 1, "wrong_state")

	tok, _ = e.claim("w", "30s")
	e.must("cancel", "--production", prod, "--job", ids[2])
	wantExit(t, e.run("renew", "--token-file", tok, "--duration", "1m"), 1, "cancelled")
	wantExit(t, e.run("cancel", "--production", prod, "--job", ids[1]), 1, "wrong_state")
	wantExit(t, e.run("cancel", "--production", prod, "--job", "00000000-0000-4000-8000-000000000000"), 1, "not_found")
}

func TestExpiredClaimIsRejected(t *testing.T) {
	e := newEnv(t)
	e.setup(1)
	tok, _ := e.claim("w", "1s") // long enough to commit on a loaded host
	time.Sleep(1200 * time.Millisecond)
	wantExit(t, e.run("complete", "--token-file", tok), 1, "expired")
	wantExit(t, e.run("renew", "--token-file", tok, "--duration", "1m"), 1, "expired")
}

func TestEventsListFilterAndJSONCarryNoSecret(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(2)
	tok, _ := e.claim("w-events", "1m")
	e.must("complete", "--token-file", tok)
	e.must("production", "create", "other")

	tbl := e.must("events").stdout
	if !strings.HasPrefix(tbl, "SEQ") || !strings.Contains(tbl, "claimed") || !strings.Contains(tbl, "w-events") {
		t.Fatalf("events table:\n%s", tbl)
	}
	all := e.events()
	only := e.must("events", "--production", prod, "--json").stdout
	var rows []eventRow
	json.Unmarshal([]byte(only), &rows)
	if len(rows) != len(all)-1 {
		t.Fatalf("--production did not filter: %d of %d", len(rows), len(all))
	}
	json.Unmarshal([]byte(e.must("events", "--after", strconv.FormatInt(all[2].Seq, 10), "--json").stdout), &rows)
	if len(rows) != len(all)-3 || rows[0].Seq != all[3].Seq {
		t.Fatalf("--after did not filter: %+v", rows)
	}
	var kinds []string
	for _, r := range all {
		kinds = append(kinds, r.Kind)
	}
	if !strings.Contains(strings.Join(kinds, ","), "claimed,completed") {
		t.Fatalf("event kinds %v", kinds)
	}
	_ = ids
}

func TestEventsFollowStreamsUntilInterrupted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			e := newEnv(t)
			e.setup(1)
			cmd, out, errb, done := e.start(opts{}, "events", "--follow", "--json", "--interval", "20ms")
			waitFor(t, "the existing events", func() bool { return strings.Contains(out.String(), `"requested"`) })
			id := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "late").stdout)
			waitFor(t, "the new event", func() bool { return strings.Contains(out.String(), id) })
			select {
			case <-done:
				t.Fatal("--follow stopped by itself")
			default:
			}
			cmd.Process.Signal(sig)
			select {
			case err := <-done:
				r := e.finish([]string{"events", "--follow"}, err, out, errb)
				wantExit(t, r, 0)
				for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
					var ev eventRow
					if err := json.Unmarshal([]byte(line), &ev); err != nil {
						t.Fatalf("--follow --json line %q: %v", line, err)
					}
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("--follow did not stop on " + sig.String())
			}
		})
	}
}

func TestVersionPrintsTheVersionFile(t *testing.T) {
	e := newEnv(t)
	r := e.must("version")
	if !strings.HasPrefix(r.stdout, "leases "+repoVersion) {
		t.Fatalf("version %q, want %s", r.stdout, repoVersion)
	}
	// The hooks these tests use exist only in the leasestest build; the
	// smoke test (tests/cli/smoke.sh) checks that the release build has none.
	if !strings.Contains(r.stdout, "(test build)") {
		t.Fatalf("the binary under test is not the leasestest build: %q", r.stdout)
	}
}

// corrupt overwrites every page of a database file but the first, so it
// still opens (the header and schema version are intact) and every listing
// fails as malformed.
func corrupt(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 16))
	for off := int64(4096); off < st.Size(); off += 4096 {
		if _, err := f.WriteAt(junk, off); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEventsFollowExitsOnAPermanentStorageError(t *testing.T) {
	e := newEnv(t)
	e.setup(20)
	corrupt(t, e.db)
	wantExit(t, e.run("events"), 1, "storage", "malformed")

	cmd, out, errb, done := e.start(opts{}, "events", "--follow", "--interval", "20ms")
	select {
	case err := <-done:
		r := e.finish([]string{"events", "--follow"}, err, out, errb)
		wantExit(t, r, 1, "storage", "malformed")
		if r.stdout != "" {
			t.Errorf("a listing that never succeeded printed %q", r.stdout)
		}
		if strings.Contains(r.stderr, "still following") {
			t.Errorf("a corrupt file was taken for a passing failure: %s", r.stderr)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("--follow kept polling a corrupt database for 60 s:\n%s", errb.String())
	}
}

func TestFollowRetriesOnlyTransientFailures(t *testing.T) {
	storage := func(cause error) error { return &core.Error{Kind: core.KindStorage, Msg: "list events", Err: cause} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"busy", &core.Error{Kind: core.KindBusy, Msg: "list events"}, true},
		{"connection refused", storage(fmt.Errorf("failed to connect: %w", refused)), true},
		{"connection reset", storage(fmt.Errorf("read: %w", syscall.ECONNRESET)), true},
		{"connection closed mid-answer", storage(fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF)), true},
		{"server shutting down (57P01)", storage(sqlStateError("57P01")), true},
		{"server starting up (57P03)", storage(sqlStateError("57P03")), true},
		{"connection exception (08006)", storage(sqlStateError("08006")), true},
		{"corrupt file", storage(errors.New("database disk image is malformed (11)")), false},
		{"undefined table (42P01)", storage(sqlStateError("42P01")), false},
		{"refused login (28P01)", storage(sqlStateError("28P01")), false},
		{"schema too new", &core.Error{Kind: core.KindSchemaTooNew, Msg: "open"}, false},
		{"not found", &core.Error{Kind: core.KindNotFound, Msg: "production"}, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("%s: transient = %v, want %v", c.name, got, c.want)
		}
	}
}

// sqlStateError stands for a database driver's error carrying a SQLSTATE.
type sqlStateError string

func (e sqlStateError) Error() string    { return "server error (SQLSTATE " + string(e) + ")" }
func (e sqlStateError) SQLState() string { return string(e) }

// pausedRun starts leases paused at the pause point `at` (a leasestest
// hook), sends sig there, lets it go on, and returns its result and how
// it ended.
func (e *env) pausedRun(t *testing.T, at string, sig syscall.Signal, args ...string) (result, syscall.WaitStatus) {
	t.Helper()
	pauses := t.TempDir()
	cmd, stdout, stderr := e.command(opts{env: []string{"LEASES_TEST_PAUSE=" + at, "LEASES_TEST_PAUSE_DIR=" + pauses}}, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "the pause at "+at, func() bool { return exists(filepath.Join(pauses, at+".paused")) })
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	// The signal is in before the command goes on (nothing shows when the
	// process has taken it; a stalled host needs more than milliseconds).
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(pauses, at+".resume"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		return e.finish(args, err, stdout, stderr), cmd.ProcessState.Sys().(syscall.WaitStatus)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("leases did not end after the pause at %s", at)
	}
	return result{}, 0
}

// A signal between reserving the token file and writing it waits: before
// the claim is made nothing is claimed and the file is removed; once the
// claim is under way it commits, the token is written whole and the receipt
// printed. Then the signal takes effect: leases ends by it.
func TestASignalWhileClaimingLeavesTheTokenFileCompleteOrRemoved(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			e := newEnv(t)
			ids := e.setup(1)
			out := filepath.Join(e.dir, "t")
			claim := []string{"claim", "--production", prod, "--worker", "w-sig", "--duration", "1m", "--token-out", out}

			r, ws := e.pausedRun(t, "claim-reserved", sig, claim...)
			if !ws.Signaled() || ws.Signal() != sig {
				t.Fatalf("leases did not end by %v: %v\n%s", sig, ws, r)
			}
			if !strings.Contains(r.stderr, "nothing was claimed") || exists(out) {
				t.Fatalf("an interrupt before the claim must claim nothing and remove the file: %s", r)
			}
			if j := e.job(ids[0]); j.State != "requested" {
				t.Fatalf("job %+v", j)
			}

			r, ws = e.pausedRun(t, "claim-committed", sig, claim...)
			if !ws.Signaled() || ws.Signal() != sig {
				t.Fatalf("leases did not end by %v: %v\n%s", sig, ws, r)
			}
			if !strings.Contains(r.stdout, "claimed production="+prod+" job="+ids[0]) {
				t.Fatalf("the committed claim's receipt was not printed: %s", r)
			}
			e.register(out) // the token is whole: it decodes
			e.must("renew", "--token-file", out, "--duration", "2m")
			if j := e.job(ids[0]); j.State != "claimed" || *j.Worker != "w-sig" {
				t.Fatalf("job %+v", j)
			}
		})
	}
}

// Commands that do not create things never create a database: a missing
// one is an error naming it and saying how to create one, and its directory
// is left exactly as it was. production create and job request create one
// as before, and so does any command given --create.
func TestCommandsThatCreateNothingNeverCreateADatabase(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	tok, _ := e.claim("w", "1m")
	dbDir := filepath.Join(e.dir, "elsewhere")
	if err := os.Mkdir(dbDir, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dbDir, "leases.db")
	out := e.outDir()
	for _, args := range [][]string{
		{"production", "list"},
		{"job", "list", "--production", prod},
		{"events"},
		{"events", "--follow"},
		{"claim", "--production", prod, "--worker", "w", "--duration", "1m", "--token-out", filepath.Join(dbDir, "t")},
		{"renew", "--token-file", tok, "--duration", "2m"},
		{"release", "--token-file", tok},
		{"fail", "--token-file", tok, "--reason", "r"},
		{"complete", "--token-file", tok},
		{"cancel", "--production", prod, "--job", ids[0]},
		{"exec", "--token-file", tok, "--output-dir", out, "--", "true"},
	} {
		r := e.runWith(opts{env: []string{"LEASES_DB=" + missing}}, args...)
		wantExit(t, r, 1, "not_found", missing, "leases production create", "--create", "nothing was created")
		if names := listDir(t, dbDir); len(names) != 0 {
			t.Fatalf("leases %s created %v", strings.Join(args, " "), names)
		}
	}
	if j := e.job(ids[0]); j.State != "claimed" {
		t.Fatalf("a refused command changed the real database: %+v", j)
	}
	e.runWith(opts{env: []string{"LEASES_DB=" + missing}}, "job", "list", "--production", prod, "--create")
	if !exists(missing) {
		t.Fatal("--create did not create the database")
	}
	for _, creating := range [][]string{{"production", "create", "p2"}, {"job", "request", "--production", "p2"}} {
		fresh := filepath.Join(t.TempDir(), "new.db")
		r := e.runWith(opts{env: []string{"LEASES_DB=" + fresh}}, creating...)
		if !exists(fresh) {
			t.Fatalf("leases %s did not create the database: %s", strings.Join(creating, " "), r)
		}
	}
}

// Sizes and integer ranges are checked before anything large is read or
// converted (the limits audit): a payload stream of 256 MiB is refused after
// at most MaxPayloadLen+1 bytes, with the process staying small, and numbers
// past their type are a usage error; nothing is written.
func TestSizesAndRangesAreCheckedBeforeAnyLargeCopy(t *testing.T) {
	e := newEnv(t)
	e.setup(0)
	cmd, out, errb := e.command(opts{}, "job", "request", "--production", prod, "--payload-file", "-")
	cmd.Stdin = nil
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for i := 0; i < 256; i++ {
			if _, err := stdin.Write(chunk); err != nil {
				break // the command stopped reading: what the test wants
			}
		}
		stdin.Close()
	}()
	r := e.finish([]string{"job", "request", "(256 MiB payload)"}, cmd.Wait(), out, errb)
	wantExit(t, r, 2, fmt.Sprintf("larger than %d bytes", core.MaxPayloadLen))
	if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss; rss > 100<<10 { // KiB
		t.Fatalf("refusing the payload took %d KiB of memory", rss)
	}
	if len(e.jobs()) != 0 {
		t.Fatal("a refused payload requested a job")
	}
	for _, args := range [][]string{
		{"events", "--after", "9223372036854775808"},  // 2^63
		{"events", "--after", "18446744073709551616"}, // 2^64: never wrapped to 0
		{"claim", "--production", prod, "--worker", "w", "--duration", "1m", "--token-out", filepath.Join(e.dir, "t"), "--wait", "24h1us"},
		{"renew", "--token-file", "t", "--duration", "99999999999999999999h"},
	} {
		wantExit(t, e.run(args...), 2)
	}
	if exists(filepath.Join(e.dir, "t")) || len(e.events()) != 1 { // production_created only
		t.Fatalf("a refused command changed something: %v", e.events())
	}
}
