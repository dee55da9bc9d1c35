package main

// The CLI's face of the worker loop's conformance suite
// (tests/vectors/worker_loop.json, docs/workers.md), and the facts a
// program publishes through LEASES_FACTS. Both stores.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	"a give-back releases the job":                             "a program cannot give its job back: exit 0 completes, any other exit fails it",
	"a lease the handler settled itself is left as it left it": "the reference executor always settles the job itself: every CLI job is settled by its handler",
}

// cliReason is the attempt's reason for an action whose text a program
// cannot pass: its exit status is the reason.
var cliReason = map[string]string{"error": "exit status 75", "fail": "exit status 3"}

func TestEveryScenarioOfTheSharedLoopSuiteHoldsForLeasesWork(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "tests", "vectors", "worker_loop.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Scenarios []cliScenario `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
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
