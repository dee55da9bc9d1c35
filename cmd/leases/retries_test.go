package main

// Retries, dead jobs, run-at and priorities from the command line, on SQLite
// and PostgreSQL: retry policies at create and later, the claim order that
// priority and run-at give, fail --retry up to dead, job retry and
// production redrive, and bad input refused with exit 2 and nothing changed.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/internal/pgtest"
)

type policyJSON struct {
	MaxAttempts   int   `json:"max_attempts"`
	BackoffBaseUS int64 `json:"backoff_base_us"`
	BackoffCapUS  int64 `json:"backoff_cap_us"`
	JitterPercent int   `json:"jitter_percent"`
}

type productionJSON struct {
	ID     string     `json:"id"`
	Name   string     `json:"name"`
	Policy policyJSON `json:"policy"`
}

// jobRecord is job show --json: the retry fields.
type jobRecord struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Attempts    int64   `json:"attempts"`
	Reason      *string `json:"reason"`
	Priority    int     `json:"priority"`
	ClaimableAt *int64  `json:"claimable_at_unix_us"`
	History     []struct {
		Number int64   `json:"number"`
		Worker string  `json:"worker"`
		Ending string  `json:"ending"`
		Reason *string `json:"reason"`
	} `json:"attempt_history"`
}

func (e *env) record(id string) jobRecord {
	e.t.Helper()
	var rec jobRecord
	r := e.must("job", "show", "--production", prod, "--job", id, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		e.t.Fatalf("job show --json: %v\n%s", err, r.stdout)
	}
	return rec
}

// noAuthority fails the test if the database exists: a SQLite file, or
// tables in the PostgreSQL schema.
func (e *env) noAuthority(what string) {
	e.t.Helper()
	if strings.HasPrefix(e.db, "postgres") {
		if tables := pgtest.Tables(e.t, e.db); len(tables) != 0 {
			e.t.Fatalf("%s created tables: %v", what, tables)
		}
	} else if exists(e.db) {
		e.t.Fatalf("%s created the database", what)
	}
}

func (e *env) policy(name string) policyJSON {
	e.t.Helper()
	var p productionJSON
	if err := json.Unmarshal([]byte(e.must("production", "policy", name, "--json").stdout), &p); err != nil {
		e.t.Fatal(err)
	}
	return p.Policy
}

// kindCount counts the events of one kind.
func (e *env) kindCount(kind string) int {
	n := 0
	for _, ev := range e.events() {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func TestProductionCreateAndPolicySetTheRetryPolicyAndBadPoliciesChangeNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		// Bad input is refused before anything is opened: no database.
		for _, args := range [][]string{
			{"--max-attempts", "0"}, {"--max-attempts", "1001"}, {"--max-attempts", "x"},
			{"--jitter", "101"}, {"--jitter", "-1"}, {"--backoff", "1s,500ms"}, {"--backoff", "-1s"},
			{"--backoff", "8785h"}, {"--backoff", "1s,8785h"}, {"--backoff", "1.5us"}, {"--backoff", "10"},
		} {
			wantExit(t, e.run(append([]string{"production", "create", prod}, args...)...), 2, "leases: ")
		}
		e.noAuthority("a refused policy")

		var p productionJSON
		r := e.must("production", "create", prod, "--max-attempts", "5", "--backoff", "30s,10m", "--jitter", "10%", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
			t.Fatal(err)
		}
		want := policyJSON{MaxAttempts: 5, BackoffBaseUS: 30e6, BackoffCapUS: 600e6, JitterPercent: 10}
		if p.Policy != want {
			t.Fatalf("created with %+v, want %+v", p.Policy, want)
		}
		// Creating is idempotent with the same policy, and without flags.
		if id := strings.TrimSpace(e.must("production", "create", prod, "--max-attempts", "5", "--backoff", "30s,10m", "--jitter", "10").stdout); id != p.ID {
			t.Fatalf("the same create gave %s, want %s", id, p.ID)
		}
		if id := strings.TrimSpace(e.must("production", "create", prod).stdout); id != p.ID {
			t.Fatalf("create without flags gave %s, want %s", id, p.ID)
		}
		wantExit(t, e.run("production", "create", prod, "--max-attempts", "6"), 1, "wrong_state", "another retry policy")
		if got := e.policy(prod); got != want {
			t.Fatalf("a refused create changed the policy to %+v", got)
		}

		// Shown, then changed part by part: the rest is kept.
		if out := e.must("production", "policy", prod).stdout; out != "production nightly: max attempts 5, backoff 30s doubling up to 10m0s, jitter 10%\n" {
			t.Fatalf("production policy printed %q", out)
		}
		e.must("production", "policy", prod, "--max-attempts", "7")
		want.MaxAttempts = 7
		if got := e.policy(prod); got != want {
			t.Fatalf("after --max-attempts 7: %+v, want %+v", got, want)
		}
		e.must("production", "policy", prod, "--backoff", "20m") // longer than the cap: a constant wait
		want.BackoffBaseUS, want.BackoffCapUS = 1200e6, 1200e6
		if got := e.policy(prod); got != want {
			t.Fatalf("after --backoff 20m: %+v, want %+v", got, want)
		}
		e.must("production", "policy", prod, "--backoff", "0")
		want.BackoffBaseUS = 0
		if got := e.policy(prod); got != want {
			t.Fatalf("after --backoff 0: %+v, want %+v", got, want)
		}
		if out := e.must("production", "policy", prod).stdout; !strings.Contains(out, "no backoff") {
			t.Fatalf("a policy without backoff printed %q", out)
		}
		changes := e.kindCount("policy_changed")
		if changes != 3 {
			t.Fatalf("%d policy_changed events, want 3", changes)
		}
		e.must("production", "policy", prod, "--max-attempts", "7") // the same policy: no change, no event
		for _, args := range [][]string{{"--max-attempts", "0"}, {"--jitter", "x"}, {"--backoff", "2s,1s"}} {
			wantExit(t, e.run(append([]string{"production", "policy", prod}, args...)...), 2, "leases: ")
		}
		wantExit(t, e.run("production", "policy", prod, "extra"), 2, "exactly one")
		wantExit(t, e.run("production", "policy", "missing", "--max-attempts", "3"), 1, "not_found")
		if got := e.policy(prod); got != want || e.kindCount("policy_changed") != changes {
			t.Fatalf("refused changes changed the policy to %+v (%d events)", got, e.kindCount("policy_changed"))
		}
	})
}

func TestJobRequestPriorityAndRunAtOrderTheClaimsOnTheAuthoritysClock(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod)
		request := func(key string, args ...string) string {
			t.Helper()
			return strings.TrimSpace(e.must(append([]string{"job", "request", "--production", prod, "--key", key}, args...)...).stdout)
		}
		low := request("low")
		past := request("past", "--run-at", "2020-01-01T00:00:00Z") // in the past: now, behind low
		later := request("later", "--delay", "1h")
		future := request("future", "--run-at", time.Now().Add(2*time.Hour).UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
		high := request("high", "--priority", "1000")
		// Bad input: exit 2, and no job is requested.
		for _, args := range [][]string{
			{"--priority", "1001"}, {"--priority", "-1"}, {"--priority", "x"},
			{"--delay", "0"}, {"--delay", "8785h"}, {"--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"},
			{"--run-at", "2030-01-01T00:00:00"}, {"--run-at", "tomorrow"}, {"--run-at", "2030-01-01T00:00:00.0000001Z"},
			{"--run-at", time.Now().Add(367 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		} {
			wantExit(t, e.run(append([]string{"job", "request", "--production", prod, "--key", "bad"}, args...)...), 2, "leases: ")
		}
		if n := len(e.jobs()); n != 5 {
			t.Fatalf("%d jobs after the refused requests, want 5", n)
		}

		if rec := e.record(high); rec.Priority != 1000 {
			t.Fatalf("job show --json of the high job: %+v", rec)
		}
		now := time.Now()
		for id, want := range map[string]time.Duration{later: time.Hour, future: 2 * time.Hour} {
			rec := e.record(id)
			if rec.ClaimableAt == nil {
				t.Fatalf("job %s has no claimable time: %+v", id, rec)
			}
			if at := time.UnixMicro(*rec.ClaimableAt); at.Before(now.Add(want-time.Minute)) || at.After(now.Add(want+time.Minute)) {
				t.Fatalf("job %s is claimable at %v, want about now + %v", id, at, want)
			}
		}
		show := e.must("job", "show", "--production", prod, "--job", high).stdout
		if !strings.Contains(show, "priority    1000\n") || !strings.Contains(show, "claimable   20") {
			t.Fatalf("job show lacks the priority or the claimable time:\n%s", show)
		}

		// The highest priority first, then the earliest claimable time.
		for _, want := range []string{high, low, past} {
			_, r := e.claim("w", "1m", "--json")
			var rc receipt
			if err := json.Unmarshal([]byte(r.stdout), &rc); err != nil || rc.JobID != want {
				t.Fatalf("claimed %s (%v), want %s", rc.JobID, err, want)
			}
		}
		wantExit(t, e.run("claim", "--production", prod, "--worker", "w", "--duration", "1m", "--token-out", filepath.Join(e.dir, "token-none")), 3)
		wantExit(t, e.run("claim", "--production", prod, "--worker", "w", "--duration", "1m", "--job", later,
			"--token-out", filepath.Join(e.dir, "token-early")), 1, "wrong_state", "not claimable before")
	})
}

func TestFailRetryReturnsTheJobUntilItsLastAttemptMakesItDead(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod, "--max-attempts", "3", "--backoff", "0")
		id := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "flaky").stdout)

		tok, _ := e.claim("w1", "1m")
		wantExit(t, e.run("fail", "--token-file", tok, "--reason", "x", "--delay", "1s"), 2, "--delay needs --retry")
		wantExit(t, e.run("fail", "--token-file", tok, "--reason", "x", "--retry", "--delay", "8785h"), 2)
		if rec := e.record(id); rec.State != "claimed" || len(rec.History) != 0 {
			t.Fatalf("a refused fail changed the job: %+v", rec)
		}
		r := e.must("fail", "--token-file", tok, "--reason", "upstream 503", "--retry")
		if !strings.Contains(r.stdout, "failed (retryable) job "+id) || !strings.Contains(r.stdout, "requested again, claimable at") {
			t.Fatalf("fail --retry printed %q", r.stdout)
		}
		wantExit(t, e.run("fail", "--token-file", tok, "--reason", "again", "--retry"), 1, "wrong_state")

		// A retry with a delay is not claimable before it; a waiting claim
		// takes it once the authority's clock reaches it.
		tok, _ = e.claim("w2", "1m")
		e.must("fail", "--token-file", tok, "--reason", "rate limited", "--retry", "--delay", "300ms")
		if rec := e.record(id); rec.State != "requested" || rec.Attempts != 2 {
			t.Fatalf("after the second retry: %+v", rec)
		}
		start := time.Now()
		// Eventually: a loaded or stalled host may take seconds.
		tok, _ = e.claim("w3", "1m", "--wait", "2m")
		if waited := time.Since(start); waited > 60*time.Second {
			t.Fatalf("the waiting claim took %v", waited)
		}
		r = e.must("fail", "--token-file", tok, "--reason", "still broken", "--retry")
		if !strings.Contains(r.stdout, "dead, all 3 attempts used") {
			t.Fatalf("the last fail --retry printed %q", r.stdout)
		}

		rec := e.record(id)
		if rec.State != "dead" || rec.Attempts != 3 || rec.Reason == nil || *rec.Reason != "still broken" || len(rec.History) != 3 {
			t.Fatalf("the dead job: %+v", rec)
		}
		for i, want := range []string{"upstream 503", "rate limited", "still broken"} {
			h := rec.History[i]
			if h.Number != int64(i+1) || h.Ending != "retry" || h.Reason == nil || *h.Reason != want || h.Worker != []string{"w1", "w2", "w3"}[i] {
				t.Fatalf("attempt %d: %+v", i+1, h)
			}
		}
		show := e.must("job", "show", "--production", prod, "--job", id).stdout
		if !strings.Contains(show, "history     #1 w1 ") || !strings.Contains(show, " retry: still broken\n") {
			t.Fatalf("job show lacks the history:\n%s", show)
		}
		if e.kindCount("retry") != 3 || e.kindCount("dead") != 1 {
			t.Fatalf("events: %d retry, %d dead", e.kindCount("retry"), e.kindCount("dead"))
		}
		dead := e.must("events", "--production", prod, "--kind", "dead", "--jsonl").stdout
		if !strings.Contains(dead, "attempts used up (3 of 3)") {
			t.Fatalf("the dead event: %s", dead)
		}
		if ids := jsonIDs(t, e.must("job", "list", "--production", prod, "--state", "dead", "--json").stdout); len(ids) != 1 || ids[0] != id {
			t.Fatalf("job list --state dead: %v", ids)
		}
		var c struct{ Dead, Requested int64 }
		json.Unmarshal([]byte(e.must("job", "counts", "--production", prod, "--json").stdout), &c)
		if c.Dead != 1 || c.Requested != 0 {
			t.Fatalf("job counts: %+v", c)
		}
		if !strings.Contains(e.must("job", "counts", "--production", prod).stdout, "dead              1\n") {
			t.Fatal("job counts does not count the dead job")
		}

		// A failure without --retry is terminal whatever attempts are left.
		id2 := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "corrupt").stdout)
		tok, _ = e.claim("w4", "1m")
		e.must("fail", "--token-file", tok, "--reason", "input corrupt")
		if rec := e.record(id2); rec.State != "failed" || rec.Attempts != 1 {
			t.Fatalf("a plain fail: %+v", rec)
		}
	})
}

func TestJobRetryAndRedriveRequeueFailedDeadAndCancelledJobsWithAttemptsReset(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod, "--max-attempts", "1")
		ids := make([]string, 5)
		for i := range ids {
			ids[i] = strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "k"+string(rune('0'+i))).stdout)
		}
		// 0 and 1 dead (a release on the last attempt), 2 failed, 3 cancelled, 4 requested.
		for i := 0; i < 2; i++ {
			tok, _ := e.claim("w", "1m", "--job", ids[i])
			e.must("release", "--token-file", tok)
		}
		tok, _ := e.claim("w", "1m", "--job", ids[2])
		e.must("fail", "--token-file", tok, "--reason", "bad")
		e.must("cancel", "--production", prod, "--job", ids[3])
		wantStates(t, e, map[string]string{ids[0]: "dead", ids[1]: "dead", ids[2]: "failed", ids[3]: "cancelled", ids[4]: "requested"})

		// Refusals change nothing.
		wantExit(t, e.run("job", "retry", "--production", prod, "--job", ids[4]), 1, "wrong_state")
		wantExit(t, e.run("job", "retry", "--production", prod, "--job", "not-a-uuid"), 2, "invalid_argument")
		wantExit(t, e.run("job", "retry", "--production", prod), 2, "--job is required")
		wantExit(t, e.run("production", "redrive", prod, "--state", "requested"), 2, "dead, failed or cancelled")
		wantExit(t, e.run("production", "redrive", "missing"), 1, "not_found")
		wantExit(t, e.run("production", "redrive"), 2, "exactly one")
		if e.kindCount("redriven") != 0 {
			t.Fatal("a refused redrive wrote an event")
		}

		var out struct {
			Production, State string
			Redriven          int64
		}
		if err := json.Unmarshal([]byte(e.must("production", "redrive", prod, "--json").stdout), &out); err != nil {
			t.Fatal(err)
		}
		if out.Production != prod || out.State != "dead" || out.Redriven != 2 {
			t.Fatalf("production redrive --json: %+v", out)
		}
		if r := e.must("production", "redrive", prod, "--state", "failed"); r.stdout != "redrove 1 failed job(s) of production nightly\n" {
			t.Fatalf("production redrive --state failed printed %q", r.stdout)
		}
		e.must("job", "retry", "--production", prod, "--job", ids[3])
		for i := 0; i < 4; i++ {
			rec := e.record(ids[i])
			if rec.State != "requested" || rec.Attempts != 0 || rec.Reason != nil {
				t.Fatalf("job %d after its redrive: %+v", i, rec)
			}
			if wantHistory := map[int]int{0: 1, 1: 1, 2: 1, 3: 0}[i]; len(rec.History) != wantHistory {
				t.Fatalf("job %d kept %d attempts of history, want %d", i, len(rec.History), wantHistory)
			}
		}
		if e.kindCount("redriven") != 4 {
			t.Fatalf("%d redriven events, want 4", e.kindCount("redriven"))
		}
		// Redriven jobs get the whole policy again: claimable now.
		tok, _ = e.claim("w", "1m", "--job", ids[0])
		e.must("complete", "--token-file", tok)
		if r := e.must("production", "redrive", prod); !strings.HasPrefix(r.stdout, "redrove 0 dead") {
			t.Fatalf("a redrive with nothing dead printed %q", r.stdout)
		}
	})
}

func TestBadSchedulingFlagsAreRefusedBeforeAnythingIsCreated(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		for _, args := range [][]string{{"--priority", "1001"}, {"--run-at", "soon"}, {"--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}} {
			wantExit(t, e.run(append([]string{"job", "request", "--production", prod}, args...)...), 2)
		}
		e.noAuthority("a refused request")
	})
}

func TestAProgramExitGivenToRetryExitFailsItsJobWithARetryAndOtherExitsForGood(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod, "--max-attempts", "2", "--backoff", "0")
		first := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "exec").stdout)
		out := e.outDir()
		tok, _ := e.claim("w1", "1m")
		for _, bad := range []string{"0", "256", "x", "75,"} {
			wantExit(t, e.run("exec", "--token-file", tok, "--output-dir", out, "--retry-exit", bad, "--", "true"), 2, "--retry-exit")
		}
		r := e.run("exec", "--token-file", tok, "--output-dir", out, "--retry-exit", "75,76", "--", "sh", "-c",
			`echo partial > "$LEASES_OUTPUT"; exit 75`)
		wantExit(t, r, 1, "exit status 75", "failed with a retry: requested again")
		rec := e.record(first)
		if rec.State != "requested" || rec.Attempts != 1 || len(rec.History) != 1 || rec.History[0].Ending != "retry" ||
			*rec.History[0].Reason != "exit status 75" {
			t.Fatalf("after exit 75: %+v", rec)
		}
		if names := listDir(t, out); len(names) != 0 {
			t.Fatalf("a retried run left files: %v", names)
		}
		// Another exit status, or a signal, fails it for good.
		tok, _ = e.claim("w2", "1m")
		wantExit(t, e.run("exec", "--token-file", tok, "--output-dir", out, "--retry-exit", "75", "--", "sh", "-c", "exit 7"), 1, "marked failed")
		if rec := e.record(first); rec.State != "failed" || rec.Attempts != 2 {
			t.Fatalf("after exit 7: %+v", rec)
		}

		// Under leases work: retried until the last attempt, then dead.
		second := strings.TrimSpace(e.must("job", "request", "--production", prod, "--key", "work").stdout)
		r = e.run(workArgs("--exit-when-empty", "--retry-exit", "75", "--", "sh", "-c", "exit 75")...)
		wantExit(t, r, 0, "work stopped: 0 completed, 2 failed, 0 given back, 0 lost", "dead, all 2 attempts used")
		rec = e.record(second)
		if rec.State != "dead" || rec.Attempts != 2 || len(rec.History) != 2 || rec.History[1].Ending != "retry" {
			t.Fatalf("the job leases work retried: %+v", rec)
		}
	})
}
