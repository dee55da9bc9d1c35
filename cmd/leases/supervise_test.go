// What a running program may and may not outlive or inherit, with real
// processes on SQLite and PostgreSQL: a worker killed outright (kill -9)
// takes its program and the program's children with it, and the temporary
// output it leaves is removed once its claim is over; a closed log (standard
// output and error a pipe whose reader has gone) neither kills the worker nor
// fails a job; and a program sees only its own job's LEASES_* values.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// running reports whether pid is a live process: a zombie (killed, not yet
// reaped by whatever adopted it) is not.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z'
}

// wantGoneWithin fails unless every pid stops running within d.
func wantGoneWithin(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var alive []int
		for _, pid := range pids {
			if running(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range alive {
				syscall.Kill(pid, syscall.SIGKILL) // leave nothing behind the test
			}
			t.Fatalf("processes %v of the program still ran %v after their worker was killed", alive, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killOutright kill -9s a background leases and waits until it is gone
// (reaped: its cmd.Wait may still wait for programs that hold its output).
func (p *proc) killOutright() {
	p.e.t.Helper()
	p.signal(syscall.SIGKILL)
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(promptly)
	for running(pid) {
		if time.Now().After(deadline) {
			p.e.t.Fatal("leases did not end after SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// onceThenWrite is a program that, on its job's first run only, records its
// pid and a child's and runs until killed; any later run writes its output.
func (e *env) onceThenWrite() []string {
	return []string{"--", "sh", "-c", `cat >/dev/null
if [ ! -e "` + e.dir + `/ran.$LEASES_JOB_ID" ]; then
  touch "` + e.dir + `/ran.$LEASES_JOB_ID"
  sleep 60 & echo "$$ $!" > "` + e.dir + `/pids.$LEASES_JOB_ID"; wait
fi
printf second > "$LEASES_OUTPUT"`}
}

func temporaries(t *testing.T, dir string) []string {
	t.Helper()
	var tmp []string
	for _, n := range listDir(t, dir) {
		if strings.HasSuffix(n, ".tmp") {
			tmp = append(tmp, n)
		}
	}
	return tmp
}

// The program must not outlive its worker, whatever kills the worker: a
// kill -9 of leases work or leases exec ends the program and every process
// of its group within seconds, so no orphan goes on writing after the claim
// lapses and another worker runs the job.
func TestAProgramAndItsChildrenNeverOutliveTheirWorker(t *testing.T) {
	t.Run("work", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.requestPayloads("hang")
			p := e.startProc(opts{}, append(workArgs("--output-dir", e.outDir()), e.script()...)...)
			pids := e.pids(ids[0])
			p.killOutright()
			wantGoneWithin(t, pids, promptly)
			p.wait(promptly)
		})
	})
	t.Run("exec", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.setup(1)
			tok, _ := e.claim("w-exec", "1m")
			pidFile := filepath.Join(e.dir, "pids."+ids[0])
			p := e.startProc(opts{}, "exec", "--token-file", tok, "--output-dir", e.outDir(), "--",
				"sh", "-c", `sleep 60 & echo "$$ $!" > "`+pidFile+`"; wait`)
			pids := e.pids(ids[0])
			p.killOutright()
			wantGoneWithin(t, pids, promptly)
			p.wait(promptly)
		})
	})
}

// The reaper that kills a program's group when its worker dies outright
// runs before the program does, from the first program on: started after
// it, a worker killed in between left the program's children to nobody.
// The program records its own pid and its worker's other children (pid
// and command line): the reaper is among them, started first (pids grow).
func TestTheReaperRunsBeforeTheFirstProgramStarts(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.setup(1)
		tok, _ := e.claim("w-exec", "1m")
		seen := filepath.Join(e.dir, "children."+ids[0])
		e.must("exec", "--token-file", tok, "--output-dir", e.outDir(), "--", "sh", "-c",
			`{ echo "$$"; for c in $(cat /proc/$PPID/task/*/children); do printf '%s ' "$c"; tr '\0' ' ' < /proc/$c/cmdline; echo; done; } > "`+seen+`"`)
		b, err := os.ReadFile(seen)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		self, _ := strconv.Atoi(lines[0])
		reaperPid := 0
		for _, l := range lines[1:] {
			if pid, cmdline, _ := strings.Cut(l, " "); strings.Contains(cmdline, reaperArg) {
				reaperPid, _ = strconv.Atoi(pid)
			}
		}
		if reaperPid == 0 || reaperPid > self {
			t.Fatalf("the reaper was not started before the first program (program %d); the worker's children: %q", self, b)
		}
	})
}

// Nothing of a program runs before the reaper knows its group: a worker
// killed between the program's start and its word to the reaper (here, at
// a leasestest pause point between the two) leaves nothing running. Before
// the program was held at its first instruction until then, it ran and
// forked meanwhile, and its children outlived the worker: the program died
// by its parent-death signal, its children by nothing.
func TestNothingOfAProgramRunsBeforeTheReaperKnowsItsGroup(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		ids := e.setup(1)
		tok, _ := e.claim("w-exec", "1m")
		pauses := t.TempDir()
		ran := filepath.Join(e.dir, "ran."+ids[0])
		p := e.startProc(opts{env: []string{"LEASES_TEST_PAUSE=program-held", "LEASES_TEST_PAUSE_DIR=" + pauses}},
			"exec", "--token-file", tok, "--output-dir", e.outDir(), "--",
			"sh", "-c", `sleep 60 & echo "$$ $!" > "`+ran+`"; wait`)
		waitFor(t, "the pause between the program's start and the reaper's word", func() bool {
			return exists(filepath.Join(pauses, "program-held.paused"))
		})
		program := programOf(t, p.cmd.Process.Pid)
		// An unheld program starts a child and writes its file within
		// milliseconds; this leaves it half a second.
		time.Sleep(500 * time.Millisecond)
		ranWhileUnknown := exists(ran)
		p.killOutright()
		pids := []int{program}
		if b, err := os.ReadFile(ran); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					pids = append(pids, n)
				}
			}
		}
		wantGoneWithin(t, pids, promptly)
		p.wait(promptly)
		if ranWhileUnknown {
			t.Fatalf("the program ran (and forked) before the reaper knew its group")
		}
		time.Sleep(200 * time.Millisecond)
		if exists(ran) {
			t.Fatalf("the program ran after its worker was killed")
		}
	})
}

// programOf is the one child of the worker pid that is not its reaper.
func programOf(t *testing.T, worker int) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", worker))
	var programs []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(c)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if !strings.Contains(string(cmdline), reaperArg) {
				programs = append(programs, pid)
			}
		}
	}
	if len(programs) != 1 {
		t.Fatalf("the worker's children other than its reaper: %v, want one program", programs)
	}
	return programs[0]
}

// A killed worker's temporary output does not stay for good: once its owner
// is gone and its job is no longer claimed (here: run again and completed by
// the next worker, or cancelled after the crash), the next sweep of the
// directory (a worker's start, the end of each job) removes it.
func TestAKilledWorkersTemporaryOutputIsRemovedOnceItsClaimIsOver(t *testing.T) {
	t.Run("the job claimed again", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			e.must("production", "create", prod, "--backoff", "0")
			id := strings.TrimSpace(e.must("job", "request", "--production", prod).stdout)
			out := e.outDir()
			first := e.startProc(opts{}, append([]string{"work", "--production", prod, "--worker", "w-1", "--duration", "2s",
				"--output-dir", out}, e.onceThenWrite()...)...)
			pids := e.pids(id)
			if tmp := temporaries(t, out); len(tmp) != 1 {
				t.Fatalf("the running program's output dir holds %v, want one temporary file", listDir(t, out))
			}
			first.killOutright()
			wantGoneWithin(t, pids, promptly)
			first.wait(promptly)
			// The claim lapses after 2 s; the next worker takes the job then.
			r := e.startProc(opts{}, append([]string{"work", "--production", prod, "--worker", "w-2", "--duration", "1m",
				"--output-dir", out, "--max-jobs", "1"}, e.onceThenWrite()...)...).wait(60 * time.Second)
			wantExit(t, r, 0, "1 completed")
			f := e.facts(id)
			if len(f.Outputs) != 1 {
				t.Fatalf("outputs %+v", f.Outputs)
			}
			if names := listDir(t, out); len(names) != 1 || filepath.Join(out, names[0]) != f.Outputs[0].Path {
				t.Fatalf("output dir holds %v, want only the registered output %s", names, f.Outputs[0].Path)
			}
		})
	})
	t.Run("the job no longer claimed", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.requestPayloads("hang")
			out := e.outDir()
			first := e.startProc(opts{}, append(workArgs("--output-dir", out), e.script()...)...)
			pids := e.pids(ids[0])
			if tmp := temporaries(t, out); len(tmp) != 1 {
				t.Fatalf("the running program's output dir holds %v, want one temporary file", listDir(t, out))
			}
			first.killOutright()
			wantGoneWithin(t, pids, promptly)
			first.wait(promptly)
			e.must("cancel", "--production", prod, "--job", ids[0])
			r := e.startProc(opts{}, append(workArgs("--output-dir", out, "--exit-when-empty"), e.script()...)...).wait(60 * time.Second)
			wantExit(t, r, 0, "0 completed")
			if names := listDir(t, out); len(names) != 0 {
				t.Fatalf("output dir holds %v after a worker started on it, want the cancelled job's temporary output gone", names)
			}
		})
	})
}

// closedLog is a pipe whose reader has gone: writing to it raises SIGPIPE
// (and fails with EPIPE), as a `| head` that exited or a restarted log
// collector does.
func closedLog(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// runLogClosed runs leases with standard output and error a closed log and
// returns how it ended.
func (e *env) runLogClosed(args ...string) *os.ProcessState {
	e.t.Helper()
	cmd, _, _ := e.command(opts{}, args...)
	log := closedLog(e.t)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		e.t.Fatalf("leases %s still ran after 60s", strings.Join(args, " "))
	}
	return cmd.ProcessState
}

func wantNormalExit(t *testing.T, st *os.ProcessState, code int) {
	t.Helper()
	ws := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("leases was killed by %v (its log closed)", ws.Signal())
	}
	if ws.ExitStatus() != code {
		t.Fatalf("leases exited %d, want %d", ws.ExitStatus(), code)
	}
}

// A closed log never kills the worker or fails a job: with standard output
// and error a pipe nobody reads, leases work and leases exec run the
// program, which writes to both, and complete its job.
func TestAClosedLogNeverKillsTheWorkerOrFailsAJob(t *testing.T) {
	noisy := `cat >/dev/null; i=0
while [ $i -lt 200 ]; do echo "progress $i" >&2; echo "line $i"; i=$((i+1)); done
printf ok > "$LEASES_OUTPUT"`
	t.Run("work", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.requestPayloads("a", "b")
			st := e.runLogClosed(append(workArgs("--output-dir", e.outDir(), "--exit-when-empty"), "--", "sh", "-c", noisy)...)
			wantNormalExit(t, st, 0)
			wantStates(t, e, map[string]string{ids[0]: "completed", ids[1]: "completed"})
		})
	})
	t.Run("exec", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.setup(1)
			tok, _ := e.claim("w-exec", "1m")
			st := e.runLogClosed("exec", "--token-file", tok, "--output-dir", e.outDir(), "--", "sh", "-c", noisy)
			wantNormalExit(t, st, 0)
			wantStates(t, e, map[string]string{ids[0]: "completed"})
		})
	})
}

// envOf reads the environment a program wrote with `env > FILE`.
func envOf(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func wantOnly(t *testing.T, env []string, name, value string) {
	t.Helper()
	var got []string
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			got = append(got, kv)
		}
	}
	switch {
	case value == "" && len(got) != 0:
		t.Fatalf("the program got %v, want no %s", got, name)
	case value != "" && (len(got) != 1 || got[0] != name+"="+value):
		t.Fatalf("the program got %v, want only %s=%s", got, name, value)
	}
}

// A program is started with only its own job's LEASES_* values: those the
// worker's own environment holds (another job's, say) never reach it, and
// without --output-dir it gets no LEASES_OUTPUT at all.
func TestAProgramGetsOnlyItsOwnJobsLeasesVariables(t *testing.T) {
	inherited := func(e *env) []string {
		return []string{"LEASES_OUTPUT=" + filepath.Join(e.dir, "another-job.tmp"), "LEASES_JOB_ID=another-job",
			"LEASES_PRODUCTION=another-production"}
	}
	t.Run("work", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.requestPayloads("a")
			args := append(workArgs("--exit-when-empty"), e.script()...)
			args[len(args)-1] = `env > "` + e.dir + `/env.$LEASES_JOB_ID"; ` + args[len(args)-1]
			r := e.startProc(opts{env: inherited(e)}, args...).wait(60 * time.Second)
			wantExit(t, r, 0, "1 completed")
			env := envOf(t, filepath.Join(e.dir, "env."+ids[0]))
			wantOnly(t, env, "LEASES_OUTPUT", "")
			wantOnly(t, env, "LEASES_JOB_ID", ids[0])
			wantOnly(t, env, "LEASES_PRODUCTION", prod)
			if exists(filepath.Join(e.dir, "another-job.tmp")) {
				t.Fatal("the program wrote to another job's output")
			}
		})
	})
	t.Run("exec", func(t *testing.T) {
		onBothStores(t, func(t *testing.T, e *env) {
			ids := e.setup(1)
			tok, _ := e.claim("w-exec", "1m")
			out := e.outDir()
			envFile := filepath.Join(e.dir, "env")
			r := e.startProc(opts{env: inherited(e)}, "exec", "--token-file", tok, "--output-dir", out, "--",
				"sh", "-c", `env > "`+envFile+`"; printf ok > "$LEASES_OUTPUT"`).wait(60 * time.Second)
			wantExit(t, r, 0, "completed job "+ids[0])
			f := e.facts(ids[0])
			if len(f.Outputs) != 1 {
				t.Fatalf("outputs %+v", f.Outputs)
			}
			env := envOf(t, envFile)
			wantOnly(t, env, "LEASES_OUTPUT", strings.TrimSuffix(f.Outputs[0].Path, ".out")+".tmp")
			wantOnly(t, env, "LEASES_JOB_ID", ids[0])
			wantOnly(t, env, "LEASES_PRODUCTION", prod)
		})
	})
}
