package main

// The CLI's face of the worker loop's conformance suite
// (tests/vectors/worker_loop.json, docs/workers.md): the scenarios and the
// zero values; and the facts a program publishes through LEASES_FACTS. Both
// stores.

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
				// through LEASES_FACTS.
				prog := `p=$(cat)
touch "` + e.dir + `/started.$LEASES_JOB_ID"
case "$p" in
complete) printf '{"metadata":{"done":true}}' > "$LEASES_FACTS" ;;
error:*) exit 75 ;;
fail:*) exit 3 ;;
wait) while [ ! -e "` + e.dir + `/gate" ]; do sleep 0.02; done; printf '{"metadata":{"done":true}}' > "$LEASES_FACTS" ;;
hang) sleep 60 & wait ;;
esac`
				p := e.startProc(opts{}, append(args, "--", "sh", "-c", prog)...)
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
				want := []string{"work stopped"}
				if sc.End == "gave_back" {
					want = append(want, "1 given back")
				}
				wantExit(t, r, 0, want...)
				for i, id := range ids {
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
