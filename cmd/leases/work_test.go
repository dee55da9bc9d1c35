// leases work and claim --wait, with real processes on SQLite and PostgreSQL:
// waiting without polling, N programs at once, --max-jobs, --exit-when-empty,
// SIGTERM/SIGINT draining (final states checked), the drain timeout and a
// second signal giving jobs back, a coordinator's cancel stopping a running
// program, and failing programs.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// onBothStores runs body on a SQLite file and on a fresh PostgreSQL schema.
func onBothStores(t *testing.T, body func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { body(t, newEnv(t)) })
	t.Run("postgres", func(t *testing.T) { body(t, pgEnv(t)) })
}

// proc is a leases process running in the background.
type proc struct {
	e    *env
	args []string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	errb *bytes.Buffer
	done <-chan error
	res  *result
	// beforeFinish runs once the process has ended, before its outputs are
	// recorded and scanned for secrets.
	beforeFinish func()
}

func (e *env) startProc(o opts, args ...string) *proc {
	e.t.Helper()
	cmd, out, errb, done := e.start(o, args...)
	e.t.Cleanup(func() { cmd.Process.Kill() })
	return &proc{e: e, args: args, cmd: cmd, out: out, errb: errb, done: done}
}

// wait returns the process's result, failing the test if it runs past d.
func (p *proc) wait(d time.Duration) result {
	p.e.t.Helper()
	if p.res != nil {
		return *p.res
	}
	select {
	case err := <-p.done:
		if p.beforeFinish != nil {
			p.beforeFinish()
		}
		r := p.e.finish(p.args, err, p.out, p.errb)
		p.res = &r
		return r
	case <-time.After(d):
		p.cmd.Process.Kill()
		p.e.t.Fatalf("leases %s still ran after %v; stderr so far:\n%s", strings.Join(p.args, " "), d, p.errb.String())
	}
	return result{}
}

func (p *proc) signal(sig syscall.Signal) {
	p.e.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.e.t.Fatal(err)
	}
}

// requestPayloads requests one job per payload, in order, and returns their ids.
func (e *env) requestPayloads(payloads ...string) []string {
	e.t.Helper()
	e.must("production", "create", prod)
	var ids []string
	for _, p := range payloads {
		r := e.runWith(opts{stdin: p}, "job", "request", "--production", prod, "--payload-file", "-")
		if r.code != 0 {
			e.t.Fatalf("job request: %s", r)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	return ids
}

func workArgs(extra ...string) []string {
	return append([]string{"work", "--production", prod, "--worker", "w-work", "--duration", "1m"}, extra...)
}

// script is a program for `leases work` that acts on its payload: "hang"
// records its pid and a grandchild's and runs until killed, "gate" waits for
// the test's gate file, "fail" exits 7, anything else writes the payload to
// its output. Each run first marks itself started.
func (e *env) script() []string {
	return []string{"--", "sh", "-c", `set -e
p=$(cat)
touch "` + e.dir + `/started.$LEASES_JOB_ID"
case "$p" in
hang) sleep 60 & echo "$$ $!" > "` + e.dir + `/pids.$LEASES_JOB_ID"; wait ;;
gate) while [ ! -e "` + e.dir + `/gate" ]; do sleep 0.02; done ;;
fail) exit 7 ;;
esac
if [ -n "$LEASES_OUTPUT" ]; then printf 'done:%s' "$p" > "$LEASES_OUTPUT"; fi`}
}

func (e *env) started(id string) bool { return exists(filepath.Join(e.dir, "started."+id)) }

// pids returns the pids a "hang" run recorded: the program and its grandchild.
func (e *env) pids(id string) []int {
	e.t.Helper()
	var out []int
	waitFor(e.t, "the program to record its pids", func() bool {
		b, err := os.ReadFile(filepath.Join(e.dir, "pids."+id))
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		out = nil
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
		return len(out) == 2
	})
	return out
}

// waitGone waits for processes to be gone (a killed grandchild stays a
// zombie until its new parent reaps it).
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the processes %v of a stopped program to die", pids), func() bool {
		for _, pid := range pids {
			if pidAlive(pid) {
				return false
			}
		}
		return true
	})
}

func wantStates(t *testing.T, e *env, want map[string]string) {
	t.Helper()
	jobs := e.jobs()
	for id, state := range want {
		if got := jobs[id]; got.State != state {
			t.Errorf("job %s: %+v, want %s", id, got, state)
		}
	}
}

func claimEvents(e *env, id string) int {
	n := 0
	for _, ev := range e.events() {
		if ev.Kind == "claimed" && ev.JobID != nil && *ev.JobID == id {
			n++
		}
	}
	return n
}

// The secrets of the claims leases work makes never leave it: the leasestest
// hook LEASES_TEST_WORK_TOKENS hands them to the secret scan, which then
// looks for them in everything the worker and its programs printed (the
// programs print their whole environment) and in the database files.
func (e *env) registerWorkTokens(dir string) {
	e.t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.token"))
	if len(files) == 0 {
		e.t.Fatal("leases work handed no token to the secret scan")
	}
	for _, f := range files {
		e.register(f)
	}
}

func TestWorkRunsEveryJobThroughTheExecutorAndExitsWhenEmpty(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("a", "b", "c", "d", "e")
		out := e.outDir()
		tokens := t.TempDir()
		args := append(workArgs("--concurrency", "2", "--output-dir", out, "--exit-when-empty", "--metadata", "tool=\"sh\""), e.script()...)
		args[len(args)-1] = "env; " + args[len(args)-1]
		p := e.startProc(opts{env: []string{"LEASES_TEST_WORK_TOKENS=" + tokens}}, args...)
		p.beforeFinish = func() { e.registerWorkTokens(tokens) } // before the outputs are recorded and scanned
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "work stopped: 5 completed, 0 failed, 0 given back, 0 lost")
		for i, id := range ids {
			wantStates(t, e, map[string]string{id: "completed"})
			f := e.facts(id)
			if len(f.Outputs) != 1 || string(f.Metadata["tool"]) != `"sh"` {
				t.Fatalf("job %s facts %+v", id, f)
			}
			got, err := os.ReadFile(f.Outputs[0].Path)
			if want := "done:" + string(rune('a'+i)); err != nil || string(got) != want {
				t.Fatalf("job %s output %q %v, want %q", id, got, err, want)
			}
			if !strings.Contains(r.stderr, "completed job "+id) {
				t.Errorf("no report of job %s: %s", id, r)
			}
		}
	})
}

func TestWorkRunsUpToConcurrencyProgramsAtOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("x", "y", "z")
		// Each program waits until all three have started: with fewer at
		// once they give up after 20 s and fail their jobs.
		barrier := `touch "` + e.dir + `/started.$LEASES_JOB_ID"; i=0
while [ $(ls "` + e.dir + `" | grep -c '^started\.') -lt 3 ]; do i=$((i+1)); [ $i -lt 1000 ] || exit 9; sleep 0.02; done`
		r := e.startProc(opts{}, append(workArgs("--concurrency", "3", "--exit-when-empty"), "--", "sh", "-c", barrier)...).wait(60 * time.Second)
		wantExit(t, r, 0, "3 completed")
		for _, id := range ids {
			wantStates(t, e, map[string]string{id: "completed"})
		}
	})
}

func TestWorkMaxJobsClaimsAtMostThatMany(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("1", "2", "3", "4", "5")
		r := e.startProc(opts{}, append(workArgs("--max-jobs", "2"), e.script()...)...).wait(60 * time.Second)
		wantExit(t, r, 0, "2 completed")
		wantStates(t, e, map[string]string{ids[0]: "completed", ids[1]: "completed", ids[2]: "requested", ids[3]: "requested", ids[4]: "requested"})
		for _, id := range ids[2:] {
			if n := claimEvents(e, id); n != 0 {
				t.Fatalf("job %s was claimed %d times past --max-jobs", id, n)
			}
		}
	})
}

// Without --exit-when-empty the worker waits: a job requested after it
// started is run at once (the wait wakes on the request's commit; the test's
// bound is far below the wait of a minute the loop's claims use).
func TestWorkWaitsForAJobRequestedAfterItStarted(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod)
		p := e.startProc(opts{}, append(workArgs("--max-jobs", "1"), e.script()...)...)
		time.Sleep(300 * time.Millisecond) // let it start waiting (a request before that is claimed too)
		requested := time.Now()
		id := strings.TrimSpace(e.must("job", "request", "--production", prod).stdout)
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "1 completed")
		// Seconds for a stalled host; the claims wait a minute each.
		if took := time.Since(requested); took > 30*time.Second {
			t.Fatalf("the waiting worker took %v to run a new job", took)
		}
		wantStates(t, e, map[string]string{id: "completed"})
	})
}

// SIGTERM or SIGINT drains: nothing more is claimed, the running program
// finishes, its job completes, and the worker exits 0.
func TestASignalDrainsWorkLettingTheRunningProgramFinishAndClaimingNothingMore(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			onBothStores(t, func(t *testing.T, e *env) {
				ids := e.requestPayloads("gate", "next", "next")
				p := e.startProc(opts{}, append(workArgs("--output-dir", e.outDir()), e.script()...)...)
				waitFor(t, "the first program to start", func() bool { return e.started(ids[0]) })
				p.signal(sig)
				waitFor(t, "the worker to report the drain", func() bool {
					return strings.Contains(p.errb.String(), "draining")
				})
				time.Sleep(200 * time.Millisecond) // a worker that went on claiming would claim now
				os.WriteFile(filepath.Join(e.dir, "gate"), nil, 0o600)
				r := p.wait(60 * time.Second)
				wantExit(t, r, 0, "draining", "work stopped: 1 completed, 0 failed, 0 given back, 0 lost")
				wantStates(t, e, map[string]string{ids[0]: "completed", ids[1]: "requested", ids[2]: "requested"})
				for _, id := range ids[1:] {
					if n := claimEvents(e, id); n != 0 || e.started(id) {
						t.Fatalf("job %s was claimed after the signal", id)
					}
				}
				if len(e.facts(ids[0]).Outputs) != 1 {
					t.Fatal("the drained job's output was not registered")
				}
			})
		})
	}
}

// A worker waiting for a job (each waiting claim lasts a minute) stops at
// once on SIGTERM or SIGINT: the signal interrupts the wait, and exit 0.
func TestASignalEndsAnIdleWorkersWaitAtOnce(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			onBothStores(t, func(t *testing.T, e *env) {
				e.must("production", "create", prod)
				pauses := t.TempDir()
				p := e.startProc(opts{env: []string{"LEASES_TEST_PAUSE=work-listening", "LEASES_TEST_PAUSE_DIR=" + pauses}},
					append(workArgs("--concurrency", "4"), e.script()...)...)
				// A signal before the worker listens would kill it: wait
				// until it listens, then give it time to start waiting (a
				// signal before that drains it all the same).
				waitFor(t, "the worker to listen for signals", func() bool { return exists(filepath.Join(pauses, "work-listening.paused")) })
				if err := os.WriteFile(filepath.Join(pauses, "work-listening.resume"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				time.Sleep(500 * time.Millisecond) // into the wait
				p.signal(sig)
				signalled := time.Now()
				r := p.wait(60 * time.Second)
				took := time.Since(signalled)
				wantExit(t, r, 0, "draining", "work stopped: 0 completed")
				// It takes milliseconds; seconds leave room for a stalled host,
				// and are nothing like the minute each waiting claim lasts.
				if took > promptly {
					t.Fatalf("the idle worker took %v to stop after %v", took, sig)
				}
				t.Logf("stopped %v after %v", took, sig)
			})
		})
	}
}

// A program still running when --drain-timeout passes is killed with its
// whole process group, its output removed and its job given back.
func TestTheDrainTimeoutStopsRunningProgramsAndReleasesTheirJobs(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("hang", "hang")
		out := e.outDir()
		p := e.startProc(opts{}, append(workArgs("--concurrency", "2", "--output-dir", out, "--drain-timeout", "300ms"), e.script()...)...)
		pids := append(e.pids(ids[0]), e.pids(ids[1])...)
		p.signal(syscall.SIGTERM)
		signalled := time.Now()
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "stopped at the drain timeout", "0 completed, 0 failed, 2 given back, 0 lost")
		if took := time.Since(signalled); took < 300*time.Millisecond {
			t.Fatalf("the worker stopped %v after the signal, before the drain timeout", took)
		}
		waitGone(t, pids)
		wantStates(t, e, map[string]string{ids[0]: "requested", ids[1]: "requested"})
		if names := listDir(t, out); len(names) != 0 {
			t.Fatalf("stopped programs left files: %v", names)
		}
	})
}

// A second signal does at once what the drain timeout does.
func TestASecondSignalStopsTheRunningProgramsAndGivesTheirJobsBack(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("hang")
		p := e.startProc(opts{}, append(workArgs(), e.script()...)...)
		pids := e.pids(ids[0])
		p.signal(syscall.SIGINT)
		waitFor(t, "the worker to report the drain", func() bool {
			return strings.Contains(p.errb.String(), "draining")
		})
		p.signal(syscall.SIGINT)
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "stopped by a second signal", "1 given back")
		waitGone(t, pids)
		wantStates(t, e, map[string]string{ids[0]: "requested"})
	})
}

// A coordinator's cancel reaches the kept-alive claim within one renewal
// interval (a third of --duration): the program's group is killed, the job
// stays cancelled, and the worker goes on with the next job.
func TestACoordinatorsCancelStopsTheRunningProgram(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("hang", "after")
		out := e.outDir()
		// 3 s: the next job's claim, kept alive every second, survives a
		// host stalled for over a second.
		p := e.startProc(opts{}, append([]string{"work", "--production", prod, "--worker", "w-work", "--duration", "3s",
			"--output-dir", out, "--exit-when-empty"}, e.script()...)...)
		pids := e.pids(ids[0])
		e.must("cancel", "--production", prod, "--job", ids[0])
		cancelled := time.Now()
		waitGone(t, pids)
		// One renewal interval (1 s), with seconds to spare for a stalled host.
		if took := time.Since(cancelled); took > 1*time.Second+promptly {
			t.Fatalf("the cancel reached the program after %v (one renewal interval is 1s)", took)
		}
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0, "was lost", "cancelled", "1 completed, 0 failed, 0 given back, 1 lost")
		wantStates(t, e, map[string]string{ids[0]: "cancelled", ids[1]: "completed"})
		if f := e.facts(ids[0]); len(f.Outputs) != 0 {
			t.Fatalf("the cancelled run registered %+v", f.Outputs)
		}
		if names := listDir(t, out); len(names) != 1 {
			t.Fatalf("output dir holds %v, want only the second job's output", names)
		}
	})
}

func TestAFailingProgramFailsItsJobAndTheWorkerGoesOn(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.requestPayloads("fail", "ok", "fail")
		out := e.outDir()
		r := e.startProc(opts{}, append(workArgs("--output-dir", out, "--exit-when-empty"), e.script()...)...).wait(60 * time.Second)
		wantExit(t, r, 0, "failed (exit status 7)", "1 completed, 2 failed")
		wantStates(t, e, map[string]string{ids[0]: "failed", ids[1]: "completed", ids[2]: "failed"})
		if j := e.jobs()[ids[0]]; j.Reason == nil || *j.Reason != "exit status 7" {
			t.Fatalf("failed job %+v, want the exit status as its reason", j)
		}
		if names := listDir(t, out); len(names) != 1 {
			t.Fatalf("output dir holds %v, want only the successful job's output", names)
		}
	})
}

func TestWorkRefusesBadInputClaimingNothing(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{workArgs(), 2, "give the PROGRAM"},
		{append(workArgs("--concurrency", "-1"), "--", "true"), 2, "--concurrency must be from 0 (one at a time) to 1024"},
		{append(workArgs("--concurrency", "1025"), "--", "true"), 2, "--concurrency must be from 0 (one at a time) to 1024"},
		{append(workArgs("--concurrency", "99999999999999999999"), "--", "true"), 2, "invalid --concurrency"},
		{append(workArgs("--max-jobs", "99999999999999999999"), "--", "true"), 2, "invalid --max-jobs"},
		{append(workArgs("--drain-timeout", "25h"), "--", "true"), 2, "at most 24h"},
		{append(workArgs("--max-jobs", "-1"), "--", "true"), 2, "--max-jobs must not be negative"},
		{[]string{"work", "--production", prod, "--worker", "w", "--", "true"}, 2, "--duration is required"},
		{append(workArgs("--drain-timeout", "-1s"), "--", "true"), 2, "--drain-timeout"},
		{append(workArgs("--drain-timeout", "0"), "--", "./no-such-program"), 1, "nothing was claimed"}, // 0 is valid
		{append(workArgs(), "--", "./no-such-program"), 1, "nothing was claimed"},
		{append(workArgs("--output-dir", filepath.Join(e.dir, "missing")), "--", "true"), 1, "not a directory"},
		{[]string{"work", "--production", "absent", "--worker", "w", "--duration", "1m", "--", "true"}, 1, "not_found"},
	} {
		r := e.run(c.args...)
		wantExit(t, r, c.code, c.msg)
	}
	wantStates(t, e, map[string]string{ids[0]: "requested"})
	if n := claimEvents(e, ids[0]); n != 0 {
		t.Fatalf("bad input claimed the job %d times", n)
	}
}

func TestClaimWaitTakesAJobRequestedWhileItWaits(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod)
		tok := filepath.Join(e.dir, "waited.token")
		p := e.startProc(opts{}, "claim", "--production", prod, "--worker", "w-wait", "--duration", "1m", "--token-out", tok, "--wait", "1m")
		time.Sleep(300 * time.Millisecond)
		requested := time.Now()
		id := strings.TrimSpace(e.must("job", "request", "--production", prod).stdout)
		r := p.wait(60 * time.Second)
		wantExit(t, r, 0)
		// Seconds for a stalled host; the claim waits a minute.
		if took := time.Since(requested); took > 30*time.Second {
			t.Fatalf("the waiting claim took %v", took)
		}
		e.register(tok)
		if !strings.Contains(r.stdout, "claimed production="+prod+" job="+id) {
			t.Fatalf("receipt: %s", r)
		}
		wantStates(t, e, map[string]string{id: "claimed"})
	})
}

func TestClaimWaitEndsWithNothingToClaimWhenTheWaitPasses(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod)
		tok := filepath.Join(e.dir, "t")
		start := time.Now()
		r := e.run("claim", "--production", prod, "--worker", "w", "--duration", "1m", "--token-out", tok, "--wait", "400ms")
		wantExit(t, r, 3, "nothing_to_claim")
		if took := time.Since(start); took < 400*time.Millisecond {
			t.Fatalf("gave up after %v, before the wait of 400ms", took)
		}
		if exists(tok) {
			t.Fatal("the token file was left")
		}
		r = e.run("claim", "--production", prod, "--worker", "w", "--duration", "1m", "--token-out", tok, "--wait", "1s", "--job", "x")
		wantExit(t, r, 2, "cannot be combined with --job")
	})
}

// SIGINT or SIGTERM ends a waiting claim at once: nothing is claimed, the
// token file is removed, and leases ends by the signal.
func TestASignalEndsAWaitingClaimClaimingNothing(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			onBothStores(t, func(t *testing.T, e *env) {
				e.must("production", "create", prod)
				tok := filepath.Join(e.dir, "t")
				p := e.startProc(opts{}, "claim", "--production", prod, "--worker", "w", "--duration", "1m", "--token-out", tok, "--wait", "1m")
				waitFor(t, "the token file to be reserved", func() bool { return exists(tok) })
				time.Sleep(500 * time.Millisecond) // into the wait
				p.signal(sig)
				signalled := time.Now()
				r := p.wait(60 * time.Second)
				if took := time.Since(signalled); took > promptly {
					t.Fatalf("the wait ended %v after the signal", took)
				}
				ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != sig {
					t.Fatalf("leases did not end by %v: %v\n%s", sig, ws, r)
				}
				if !strings.Contains(r.stderr, "nothing was claimed") || exists(tok) {
					t.Fatalf("an interrupted wait must claim nothing and remove the file: %s", r)
				}
				id := strings.TrimSpace(e.must("job", "request", "--production", prod).stdout)
				if n := claimEvents(e, id); n != 0 {
					t.Fatalf("the interrupted wait claimed %d times", n)
				}
			})
		})
	}
}
