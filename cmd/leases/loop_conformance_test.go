package main

// The CLI's face of the worker loop's conformance suite
// (tests/vectors/worker_loop.json, docs/workers.md): the scenarios, the zero
// values, the back-off sequence; and the facts a program publishes through
// LEASES_FACTS. Both stores.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	leases "github.com/libleases/libleases"
)

type cliScenario struct {
	Name    string `json:"name"`
	Options struct {
		Concurrency    int `json:"concurrency"`
		MaxJobs        int `json:"max_jobs"`
		DrainTimeoutMS int `json:"drain_timeout_ms"`
		IntervalMS     int `json:"interval_ms"`
	} `json:"options"`
	Jobs    []string `json:"jobs"`
	Stop    string   `json:"stop"`
	States  []string `json:"states"`
	End     string   `json:"end"`
	Attempt *struct {
		Ending string `json:"ending"`
		Reason string `json:"reason"`
	} `json:"attempt"`
}

// cliSkips are the scenarios the CLI cannot express, and why.
var cliSkips = map[string]string{
	"a handler that panics or throws fails the attempt for a retry": "a program that crashes (killed by a signal) fails its job for good: " +
		"only an exit status given to --retry-exit retries, and a signal is never one",
	"a give-back releases the job": "a program cannot give its job back: exit 0 completes, any other exit fails it",
	"a lease the handler settled itself is left as it left it": "a program is given no lease or token to settle: " +
		"leases work settles every job itself, from the program's exit status",
}

// cliReason is the attempt's reason for an action whose text a program
// cannot pass: its exit status is the reason.
var cliReason = map[string]string{"error": "exit status 75", "fail": "exit status 3"}

// loopVectors is tests/vectors/worker_loop.json.
type loopVectors struct {
	BackoffUS  []int64           `json:"backoff_us"`
	ZeroValues map[string]string `json:"zero_values"`
	Scenarios  []cliScenario     `json:"scenarios"`
}

func readLoopVectors(t *testing.T) loopVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "tests", "vectors", "worker_loop.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v loopVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEveryScenarioOfTheSharedLoopSuiteHoldsForLeasesWork(t *testing.T) {
	v := readLoopVectors(t)
	for _, sc := range v.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if why, ok := cliSkips[sc.Name]; ok {
				t.Skip(why)
			}
			onBothStores(t, func(t *testing.T, e *env) {
				e.must("production", "create", prod)
				ids := e.requestPayloads(sc.Jobs...)
				args := workArgs("--retry-exit", "75")
				if sc.Options.IntervalMS > 0 {
					// leases work has no interval of its own: it renews every
					// third of --duration. The nearest to a short interval that
					// a stalled host survives: 3 s, renewed every second (a
					// later flag wins over workArgs' --duration).
					args = append(args, "--duration", "3s")
				}
				if sc.Options.Concurrency > 0 {
					args = append(args, "--concurrency", strconvI(sc.Options.Concurrency))
				}
				if sc.Options.MaxJobs > 0 {
					args = append(args, "--max-jobs", strconvI(sc.Options.MaxJobs))
				}
				if sc.Options.DrainTimeoutMS > 0 {
					args = append(args, "--drain-timeout", strconvI(sc.Options.DrainTimeoutMS)+"ms")
				}
				if sc.Stop == "" {
					args = append(args, "--exit-when-empty")
				}
				// The actions as a program: complete publishes its facts
				// through LEASES_FACTS; cancelled waits to be killed (the
				// worker kills its group once the cancel reaches the claim),
				// and leaves a mark if it never was.
				prog := `p=$(cat)
touch "` + e.dir + `/started.$LEASES_JOB_ID"
case "$p" in
complete) printf '{"metadata":{"done":true}}' > "$LEASES_FACTS" ;;
error:*) exit 75 ;;
fail:*) exit 3 ;;
wait) while [ ! -e "` + e.dir + `/gate" ]; do sleep 0.02; done; printf '{"metadata":{"done":true}}' > "$LEASES_FACTS" ;;
hang) sleep 60 & wait ;;
cancelled) sleep 60 & wait; touch "` + e.dir + `/survived.$LEASES_JOB_ID" ;;
esac`
				p := e.startProc(opts{}, append(args, "--", "sh", "-c", prog)...)
				want := []string{"work stopped"}
				for i, id := range ids {
					if sc.Jobs[i] == "cancelled" {
						// The coordinator's cancel, through the CLI, once the
						// program runs.
						waitFor(t, "the program of the job to cancel to start", func() bool { return e.started(id) })
						e.must("cancel", "--production", prod, "--job", id)
						want = append(want, "the claim on job "+id+" was lost", "cancelled")
					}
				}
				if sc.Stop != "" {
					out := min(max(sc.Options.Concurrency, 1), len(sc.Jobs))
					waitFor(t, "the jobs to be out", func() bool {
						n := 0
						for _, id := range ids {
							if e.started(id) {
								n++
							}
						}
						return n >= out
					})
					p.signal(syscall.SIGTERM)
					if sc.Stop == "give_back" {
						waitFor(t, "the worker to report the drain", func() bool { return strings.Contains(p.errb.String(), "draining") })
						p.signal(syscall.SIGINT)
					}
					time.Sleep(20 * time.Millisecond)
					os.WriteFile(filepath.Join(e.dir, "gate"), nil, 0o600)
				}
				r := p.wait(60 * time.Second)
				if sc.End == "gave_back" {
					want = append(want, "1 given back")
				}
				wantExit(t, r, 0, want...)
				for i, id := range ids {
					if exists(filepath.Join(e.dir, "survived."+id)) {
						t.Errorf("job %d (%s): the program was never killed", i, sc.Jobs[i])
					}
					wantStates(t, e, map[string]string{id: sc.States[i]})
					if sc.Jobs[i] == "complete" && sc.States[i] == "completed" {
						if f := e.facts(id); string(f.Metadata["done"]) != "true" {
							t.Errorf("job %s: facts %+v, want the program's", id, f)
						}
					}
				}
				if sc.Attempt != nil {
					rec := e.record(ids[0])
					last := rec.History[len(rec.History)-1]
					kind, _, _ := strings.Cut(sc.Jobs[0], ":")
					if last.Ending != sc.Attempt.Ending || last.Reason == nil || *last.Reason != cliReason[kind] {
						t.Errorf("attempt %+v, want ending %s, reason %q", last, sc.Attempt.Ending, cliReason[kind])
					}
				}
			})
		})
	}
}

func strconvI(n int) string { return strconv.Itoa(n) }

// Every flag of leases work whose knob is in the vectors' zero_values is
// given its zero explicitly, and means what the vectors say: --concurrency 0
// runs one program at a time, --max-jobs 0 claims without limit,
// --drain-timeout 0 lets a drain wait as long as the program takes, and
// --exit-when-empty=false waits for more jobs. (The interval has no flag: the
// CLI always renews every third of --duration, the interval's zero value.)
func TestEveryZeroValueOfLeasesWorkMeansWhatTheSharedVectorsSay(t *testing.T) {
	v := readLoopVectors(t)
	for knob, want := range map[string]string{
		"concurrency":     "one lease out at a time",
		"max_jobs":        "no limit",
		"drain_timeout":   "a drain waits as long as the jobs take",
		"exit_when_empty": "false: wait for more jobs",
		"interval":        "a third of the duration",
	} {
		if v.ZeroValues[knob] != want {
			t.Fatalf("zero_values.%s is %q; this test checks %q", knob, v.ZeroValues[knob], want)
		}
	}
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("one", "two", "three")
		// A program that finds another one running (the busy directory
		// taken) marks the overlap.
		prog := `p=$(cat)
mkdir "` + e.dir + `/busy" 2>/dev/null || touch "` + e.dir + `/overlap"
touch "` + e.dir + `/started.$LEASES_JOB_ID"
case "$p" in
gate) while [ ! -e "` + e.dir + `/gate" ]; do sleep 0.02; done ;;
*) sleep 0.2 ;;
esac
rmdir "` + e.dir + `/busy" 2>/dev/null
exit 0`
		p := e.startProc(opts{}, append(workArgs("--concurrency", "0", "--max-jobs", "0", "--drain-timeout", "0",
			"--exit-when-empty=false"), "--", "sh", "-c", prog)...)
		running := func(what string) {
			t.Helper()
			select {
			case err := <-p.done:
				t.Fatalf("%s: leases work ended (%v); stderr:\n%s", what, err, p.errb.String())
			default:
			}
		}
		waitFor(t, "the three jobs to complete", func() bool {
			jobs := e.jobs()
			for _, id := range ids {
				if jobs[id].State != "completed" {
					return false
				}
			}
			return true
		})
		if exists(filepath.Join(e.dir, "overlap")) {
			t.Fatal("--concurrency 0 ran two programs at once")
		}
		// --exit-when-empty=false: a worker that would exit ends once a claim
		// finds nothing within 100 ms; this one waits for more.
		time.Sleep(500 * time.Millisecond)
		running("nothing left to claim")
		gate := e.requestPayloads("gate")[0]
		waitFor(t, "the gated job to start", func() bool { return e.started(gate) })
		p.signal(syscall.SIGTERM)
		waitFor(t, "the worker to report the drain", func() bool { return strings.Contains(p.errb.String(), "draining") })
		// --drain-timeout 0: the drain waits for the program, well past "at once".
		time.Sleep(500 * time.Millisecond)
		running("draining")
		wantStates(t, e, map[string]string{gate: "claimed"})
		if err := os.WriteFile(filepath.Join(e.dir, "gate"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "work stopped: 4 completed, 0 failed, 0 given back")
		if exists(filepath.Join(e.dir, "overlap")) {
			t.Fatal("--concurrency 0 ran two programs at once")
		}
		wantStates(t, e, map[string]string{ids[0]: "completed", ids[1]: "completed", ids[2]: "completed", gate: "completed"})
	})
}

// holdClaims makes every claim of e's production through another process
// wait until release is called (and fail, past a short busy timeout): on
// SQLite an edit of this process holds the writer lock; on PostgreSQL a
// transaction holds the jobs table in EXCLUSIVE mode, which lets a look read
// the jobs but makes a claim's row lock wait (past its lock_timeout, it
// fails). The same hold as worker/conformance_test.go's.
func holdClaims(t *testing.T, e *env) (release func()) {
	t.Helper()
	if !strings.HasPrefix(e.db, "postgres") {
		a, err := leases.Open(e.db)
		if err != nil {
			t.Fatal(err)
		}
		ed, err := a.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ed.RequestJob(prod, "", nil); err != nil { // takes the writer lock
			t.Fatal(err)
		}
		return func() {
			ed.Abort()
			a.Close()
		}
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, e.db)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE leases_jobs IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Error(err)
		}
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
	}
}

// claimFailedPause is the pause the loop logs after a failed claim.
var claimFailedPause = regexp.MustCompile(`claim failed; trying again.* in=(\S+)`)

// The back-off of leases work is worker.Run's, seen from outside: with its
// claims kept failing (the store's lock held by this test, the CLI's busy
// timeout 1 ms through the test build's LEASES_TEST_BUSY_TIMEOUT_US) the
// loop logs each failure with the pause before the next claim, and the
// pauses are the vectors' backoff_us; once the lock is free the job is
// claimed and run.
func TestLeasesWorkWhoseClaimsFailBacksOffByTheSharedSequence(t *testing.T) {
	v := readLoopVectors(t)
	onBothStores(t, func(t *testing.T, e *env) {
		id := e.requestPayloads("x")[0]
		pauses := t.TempDir()
		p := e.startProc(opts{env: []string{"LEASES_TEST_BUSY_TIMEOUT_US=1000",
			"LEASES_TEST_PAUSE=work-listening", "LEASES_TEST_PAUSE_DIR=" + pauses}},
			append(workArgs("--max-jobs", "1"), "--", "sh", "-c", "cat >/dev/null")...)
		// The authority is open (its opening takes no lock this test holds):
		// hold the claims, then let the loop start.
		waitFor(t, "the worker to open its authority", func() bool { return exists(filepath.Join(pauses, "work-listening.paused")) })
		release := holdClaims(t, e)
		released := false
		defer func() {
			if !released {
				release()
			}
		}()
		if err := os.WriteFile(filepath.Join(pauses, "work-listening.resume"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "four failed claims", func() bool {
			return len(claimFailedPause.FindAllString(p.errb.String(), -1)) >= 4
		})
		release()
		released = true
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "work stopped: 1 completed")
		wantStates(t, e, map[string]string{id: "completed"})
		logged := claimFailedPause.FindAllStringSubmatch(r.stderr, -1)
		if len(logged) < 4 {
			t.Fatalf("%d failed claims logged, want at least 4:\n%s", len(logged), r.stderr)
		}
		// One claimer: each failure is the next of the sequence.
		var seen []string
		for i, m := range logged {
			seen = append(seen, m[1])
			want := time.Duration(v.BackoffUS[min(i, len(v.BackoffUS)-1)]) * time.Microsecond
			if m[1] != want.String() {
				t.Errorf("the pause after %d failed claims is %s, want %s", i+1, m[1], want)
			}
		}
		t.Logf("pauses after the failed claims: %s", strings.Join(seen, " "))
	})
}

func TestAProgramPublishesItsJobsFactsThroughLeasesFacts(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("x")
		out := e.outDir()
		prog := `cat > "$LEASES_OUTPUT"; printf '{"metadata":{"frames":12},"provenance":{"host":"render-7"}}' > "$LEASES_FACTS"`
		r := e.startProc(opts{}, append(workArgs("--exit-when-empty", "--output-dir", out, "--metadata", "tool=\"sh\""),
			"--", "sh", "-c", prog)...).wait(60 * time.Second)
		wantExit(t, r, 0, "1 completed")
		f := e.facts(ids[0])
		if string(f.Metadata["frames"]) != "12" || string(f.Provenance["host"]) != `"render-7"` ||
			string(f.Metadata["tool"]) != `"sh"` || len(f.Outputs) != 1 {
			t.Fatalf("facts %+v: want the program's, the flags' and the output, published together", f)
		}
	})
}

func TestBadFactsFromAProgramFailItsJobWithTheReason(t *testing.T) {
	cases := []struct{ name, write, reason string }{
		{"bad JSON", `printf '{"metadata":' > "$LEASES_FACTS"`, "is not valid"},
		{"an unknown member", `printf '{"outputs":[]}' > "$LEASES_FACTS"`, "is not valid"},
		{"bad UTF-8", `printf '{"metadata":{"a":"\377"}}' > "$LEASES_FACTS"`, "is not valid UTF-8"},
		{"too large", `head -c 1048577 /dev/zero | tr '\0' ' ' > "$LEASES_FACTS"`, "is over the limit of 1048576 bytes"},
		{"a fact the command line sets", `printf '{"metadata":{"tool":"x"}}' > "$LEASES_FACTS"`, `sets metadata "tool", which --metadata sets too`},
	}
	onBothStores(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod)
		for _, c := range cases {
			ids := e.requestPayloads(c.name)
			r := e.startProc(opts{}, append(workArgs("--max-jobs", "1", "--metadata", "tool=\"sh\""),
				"--", "sh", "-c", "cat >/dev/null; "+c.write)...).wait(60 * time.Second)
			wantExit(t, r, 0, "1 failed", "LEASES_FACTS")
			rec := e.record(ids[0])
			if rec.State != "failed" || rec.Reason == nil || !strings.Contains(*rec.Reason, "LEASES_FACTS") ||
				!strings.Contains(*rec.Reason, c.reason) {
				t.Errorf("%s: job %+v, want failed with a reason naming LEASES_FACTS and %q", c.name, rec, c.reason)
			}
		}
	})
}
