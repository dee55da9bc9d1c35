package main

// A poison job with real processes: its program kill -9s the `leases work`
// that runs it, every time. A supervisor (the test) starts a new worker
// whenever one dies, as systemd or a container runtime would. The job must be
// dead after exactly max-attempts claims, each lapsing at its expiry, while
// the production's other jobs keep completing.

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
)

func TestAPoisonJobThatKillsItsWorkerIsDeadAfterExactlyMaxAttemptsClaims(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		const maxAttempts = 3
		// No backoff: each lapsed claim is claimable again at its expiry, so
		// the test waits only for the three claims' one-second durations.
		e.must("production", "create", prod, "--max-attempts", fmt.Sprint(maxAttempts), "--backoff", "0")
		request := func(payload string) string {
			t.Helper()
			r := e.runWith(opts{stdin: payload}, "job", "request", "--production", prod, "--payload-file", "-")
			if r.code != 0 {
				t.Fatalf("job request: %s", r)
			}
			return strings.TrimSpace(r.stdout)
		}
		poison := request("poison")
		var good []string
		for i := 0; i < 4; i++ {
			good = append(good, request(fmt.Sprintf("ok-%d", i)))
		}
		tokens := t.TempDir()
		program := []string{"--", "sh", "-c", `p=$(cat)
if [ "$p" = poison ]; then kill -9 $PPID; exit 1; fi
sleep 0.2`}

		a, err := leases.Open(e.db)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		state := func(id string) string {
			j, err := a.Job(prod, id)
			if err != nil {
				t.Fatal(err)
			}
			return j.State
		}
		finished := func() bool {
			if state(poison) != "dead" {
				return false
			}
			for _, id := range good {
				if state(id) != "completed" {
					return false
				}
			}
			return true
		}

		// The supervisor: one worker at a time, restarted when it dies.
		workers := 0
		start := func() *proc {
			workers++
			args := append([]string{"work", "--production", prod, "--worker", fmt.Sprintf("w-%d", workers), "--duration", "1s"}, program...)
			return e.startProc(opts{env: []string{"LEASES_TEST_WORK_TOKENS=" + tokens}}, args...)
		}
		p := start()
		killed := 0
		deadline := time.After(120 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	supervise:
		for {
			select {
			case err := <-p.done:
				r := e.finish(p.args, err, p.out, p.errb)
				ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("worker %d ended, but not by the poison's kill -9: %s", workers, r)
				}
				killed++
				if killed == 1 {
					// Work requested after a crash is served by the next workers.
					for i := 0; i < 3; i++ {
						good = append(good, request(fmt.Sprintf("late-%d", i)))
					}
				}
				p = start()
			case <-tick.C:
				if finished() {
					break supervise
				}
			case <-deadline:
				t.Fatalf("after 120s: %d workers killed, poison %s, jobs %v", killed, state(poison), e.jobs())
			}
		}
		// The last worker outlives the poison: SIGTERM drains it, exit 0.
		p.signal(syscall.SIGTERM)
		p.beforeFinish = func() { e.registerWorkTokens(tokens) }
		wantExit(t, p.wait(60*time.Second), 0)

		if killed != maxAttempts {
			t.Fatalf("the poison killed %d workers, want exactly %d", killed, maxAttempts)
		}
		if n := claimEvents(e, poison); n != maxAttempts {
			t.Fatalf("the poison job was claimed %d times, want %d", n, maxAttempts)
		}
		rec := e.record(poison)
		if rec.State != "dead" || rec.Attempts != maxAttempts || len(rec.History) != maxAttempts {
			t.Fatalf("the poison job: %+v", rec)
		}
		for i, h := range rec.History {
			if h.Number != int64(i+1) || h.Ending != "expired" || h.Worker != fmt.Sprintf("w-%d", i+1) {
				t.Fatalf("attempt %d of the poison job: %+v", i+1, h)
			}
		}
		// One event per attempt: each claim, and each lapse when noticed.
		expired := 0
		for _, ev := range e.events() {
			if ev.Kind == "claim_expired" && ev.JobID != nil && *ev.JobID == poison {
				expired++
			}
		}
		if expired != maxAttempts {
			t.Fatalf("%d claim_expired events of the poison job, want %d", expired, maxAttempts)
		}
		if e.kindCount("dead") != 1 {
			t.Fatalf("%d dead events, want 1", e.kindCount("dead"))
		}
		for _, id := range good {
			if rec := e.record(id); rec.State != "completed" || rec.Attempts != 1 || len(rec.History) != 1 || rec.History[0].Ending != "completed" {
				t.Fatalf("job %s: %+v", id, rec)
			}
		}
		if dead := e.must("job", "list", "--production", prod, "--state", "dead", "--jsonl").stdout; strings.Count(dead, "\n") != 1 ||
			!strings.Contains(dead, poison) {
			t.Fatalf("job list --state dead:\n%s", dead)
		}
	})
}
