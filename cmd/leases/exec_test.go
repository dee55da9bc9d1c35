// leases exec (docs/DESIGN.md, "The reference executor"): success registers the output,
// failure fails the job, a lost claim kills the program's group, interrupts
// are forwarded, and two workers on one job never touch each other's files.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func (e *env) outDir() string {
	e.t.Helper()
	d := filepath.Join(e.dir, "out")
	if err := os.MkdirAll(d, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// startExec runs leases exec in the background.
func (e *env) startExec(o opts, args ...string) func() result {
	e.t.Helper()
	p := e.startProc(o, append([]string{"exec"}, args...)...)
	return func() result {
		e.t.Helper()
		return p.wait(60 * time.Second)
	}
}

func TestExecCompletesOnExitZeroAndRegistersTheOutput(t *testing.T) {
	e := newEnv(t)
	e.must("production", "create", prod)
	id := strings.TrimSpace(e.runWith(opts{stdin: "payload-bytes"}, "job", "request", "--production", prod, "--payload-file", "-").stdout)
	tok, _ := e.claim("w-exec", "1m")
	out := e.outDir()
	script := `set -e
test "$LEASES_JOB_ID" = "` + id + `"
test "$LEASES_PRODUCTION" = "` + prod + `"
test -f "$LEASES_OUTPUT"
env   # whatever exec hands the program is printed, so the secret scan sees it
{ printf 'got:'; cat; } > "$LEASES_OUTPUT"`
	r := e.run("exec", "--token-file", tok, "--output-dir", out, "--metadata", "frames=1", "--provenance", `tool="sh"`,
		"--", "sh", "-c", script)
	wantExit(t, r, 0, "completed job "+id)
	if e.job(id).State != "completed" {
		t.Fatalf("job not completed: %+v", e.job(id))
	}
	f := e.facts(id)
	if len(f.Outputs) != 1 {
		t.Fatalf("outputs %+v", f.Outputs)
	}
	o := f.Outputs[0]
	content, err := os.ReadFile(o.Path)
	if err != nil || string(content) != "got:payload-bytes" {
		t.Fatalf("registered output %s: %q %v", o.Path, content, err)
	}
	sum := sha256.Sum256(content)
	if o.Size != int64(len(content)) || o.SHA256 != hex.EncodeToString(sum[:]) || filepath.Dir(o.Path) != out {
		t.Fatalf("output fact %+v does not describe the file", o)
	}
	if base := filepath.Base(o.Path); !strings.Contains(base, id) || !strings.Contains(base, o.Nonce) {
		t.Fatalf("final name %s lacks job id or nonce", base)
	}
	if names := listDir(t, out); len(names) != 1 {
		t.Fatalf("output dir holds %v, want only the final file", names)
	}
	if string(f.Metadata["frames"]) != "1" || string(f.Provenance["tool"]) != `"sh"` {
		t.Fatalf("facts %+v", f)
	}
	if strings.Contains(r.stdout, "LEASES_TOKEN") || !strings.Contains(r.stdout, "LEASES_OUTPUT=") {
		t.Fatalf("unexpected program environment:\n%s", r.stdout)
	}
	// Token from standard input works for exec too.
	e.must("job", "request", "--production", prod)
	tok2, _ := e.claim("w-exec", "1m")
	b, _ := os.ReadFile(tok2)
	r = e.runWith(opts{stdin: string(b)}, "exec", "--token-file", "-", "--output-dir", out, "--", "sh", "-c", `echo x > "$LEASES_OUTPUT"`)
	wantExit(t, r, 0)
}

func TestExecFailsTheJobWithTheExitStatus(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(2)
	out := e.outDir()
	tok, _ := e.claim("w", "1m")
	r := e.run("exec", "--token-file", tok, "--output-dir", out, "--", "sh", "-c", `echo partial > "$LEASES_OUTPUT"; exit 7`)
	wantExit(t, r, 1, "exit status 7")
	j := e.job(ids[0])
	if j.State != "failed" || j.Reason == nil || *j.Reason != "exit status 7" {
		t.Fatalf("job %+v, want failed with the exit status", j)
	}
	if names := listDir(t, out); len(names) != 0 {
		t.Fatalf("a failed run left files: %v", names)
	}
	if f := e.facts(ids[0]); len(f.Outputs) != 0 {
		t.Fatalf("a failed run registered %+v", f.Outputs)
	}

	// A program killed by a signal: the reason names it.
	tok, _ = e.claim("w", "1m")
	r = e.run("exec", "--token-file", tok, "--output-dir", out, "--", "sh", "-c", `kill -KILL $$`)
	wantExit(t, r, 1, "killed by signal")
	if j := e.job(ids[1]); j.State != "failed" || !strings.Contains(*j.Reason, "killed") {
		t.Fatalf("job %+v", j)
	}
}

func TestExecThatCannotStartChangesNothing(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := e.outDir()
	tok, _ := e.claim("w", "1m")
	r := e.run("exec", "--token-file", tok, "--output-dir", out, "--", filepath.Join(e.dir, "no-such-program"))
	wantExit(t, r, 1, "cannot start")
	if j := e.job(ids[0]); j.State != "claimed" {
		t.Fatalf("job %+v", j)
	}
	if names := listDir(t, out); len(names) != 0 {
		t.Fatalf("left files: %v", names)
	}
	wantExit(t, e.run("exec", "--token-file", tok, "--output-dir", filepath.Join(e.dir, "missing"), "--", "true"), 2, "output directory")
}

func TestExecRenewsTheClaimWhileTheProgramRuns(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	// 2.4 s, renewed every 800 ms: exec must start and renew within it, on a
	// loaded or stalled host too. The program outlives the original claim
	// twice over.
	tok, _ := e.claim("w", "2400ms")
	r := e.run("exec", "--token-file", tok, "--output-dir", e.outDir(), "--", "sh", "-c", `sleep 5; echo ok > "$LEASES_OUTPUT"`)
	wantExit(t, r, 0)
	if j := e.job(ids[0]); j.State != "completed" {
		t.Fatalf("job %+v", j)
	}
	renewals := 0
	for _, ev := range e.events() {
		if ev.Kind == "renewed" {
			renewals++
		}
	}
	if renewals < 3 {
		t.Fatalf("only %d renewals while the program ran", renewals)
	}
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestExecKillsTheProgramGroupWhenTheLeaseIsLost(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := e.outDir()
	tok, _ := e.claim("w", "3s") // kept alive until the cancel, on a stalled host too
	marker := filepath.Join(e.dir, "child.pid")
	// The program starts a grandchild in its group and waits for it.
	script := `echo started > "$LEASES_OUTPUT"; sleep 60 & echo $! > ` + marker + `; wait`
	wait := e.startExec(opts{}, "--token-file", tok, "--output-dir", out, "--", "sh", "-c", script)
	var grandchild int
	waitFor(t, "the program to start", func() bool {
		b, err := os.ReadFile(marker)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return grandchild > 0
	})
	e.must("cancel", "--production", prod, "--job", ids[0])
	start := time.Now()
	r := wait()
	wantExit(t, r, 1, "lost", "cancelled")
	if took := time.Since(start); took > 1*time.Second+promptly { // one renewal interval
		t.Fatalf("exec noticed the lost claim only after %v", took)
	}
	waitFor(t, "the grandchild to die", func() bool { return !pidAlive(grandchild) })
	if names := listDir(t, out); len(names) != 0 {
		t.Fatalf("a lost claim left files: %v", names)
	}
	if j := e.job(ids[0]); j.State != "cancelled" {
		t.Fatalf("job %+v", j)
	}
}

func TestExecWhoseClaimExpiredRemovesItsOutputAndPublishesNothing(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := e.outDir()
	// Long enough for exec to start within it on a loaded host.
	tok, _ := e.claim("w", "1500ms")
	// The leasestest binary skips renewal here, so the claim expires mid-run.
	r := e.runWith(opts{env: []string{"LEASES_TEST_EXEC_NO_RENEW=1"}},
		"exec", "--token-file", tok, "--output-dir", out, "--", "sh", "-c", `echo late > "$LEASES_OUTPUT"; sleep 2`)
	wantExit(t, r, 1, "completion was rejected", "expired")
	if names := listDir(t, out); len(names) != 0 {
		t.Fatalf("a rejected completion left files: %v", names)
	}
	if f := e.facts(ids[0]); len(f.Outputs)+len(f.Metadata) != 0 {
		t.Fatalf("a rejected completion published %+v", f)
	}
	if j := e.job(ids[0]); j.State != "claimed" {
		t.Fatalf("job %+v", j)
	}
}

func TestTwoExecWorkersOnOneJobNeverTouchEachOthersFiles(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := e.outDir()
	gate := filepath.Join(e.dir, "gate")
	startedA := filepath.Join(e.dir, "a-started")

	tokA, _ := e.claim("worker-a", "1500ms") // long enough for exec to start within it on a loaded host
	waitA := e.startExec(opts{env: []string{"LEASES_TEST_EXEC_NO_RENEW=1"}},
		"--token-file", tokA, "--output-dir", out, "--", "sh", "-c",
		`echo from-a > "$LEASES_OUTPUT"; touch `+startedA+`; while [ ! -e `+gate+` ]; do sleep 0.02; done`)
	waitFor(t, "worker a to start", func() bool { return exists(startedA) })

	// After a's claim expires and its backoff passes (the default policy's,
	// at most 1.2 s after the first attempt), b claims the same job and runs
	// it to the end in the same directory.
	time.Sleep(1500*time.Millisecond + 1300*time.Millisecond)
	tokB, _ := e.claim("worker-b", "1m", "--job", ids[0])
	rb := e.run("exec", "--token-file", tokB, "--output-dir", out, "--", "sh", "-c", `echo from-b > "$LEASES_OUTPUT"`)
	wantExit(t, rb, 0)
	f := e.facts(ids[0])
	if len(f.Outputs) != 1 {
		t.Fatalf("outputs %+v", f.Outputs)
	}
	bFinal := f.Outputs[0].Path
	var aTemp string
	for _, n := range listDir(t, out) {
		if strings.HasSuffix(n, ".tmp") {
			aTemp = filepath.Join(out, n)
		}
	}
	if got, _ := os.ReadFile(aTemp); string(got) != "from-a\n" {
		t.Fatalf("b touched a's temporary file %s: %q", aTemp, got)
	}

	// Now a finishes: its completion is rejected and it removes only its files.
	os.WriteFile(gate, nil, 0o600)
	ra := waitA()
	wantExit(t, ra, 1, "completion was rejected", "lease_lost")
	if names := listDir(t, out); len(names) != 1 || filepath.Join(out, names[0]) != bFinal {
		t.Fatalf("output dir holds %v, want only b's %s", names, filepath.Base(bFinal))
	}
	if got, _ := os.ReadFile(bFinal); string(got) != "from-b\n" {
		t.Fatalf("a's cleanup touched b's output: %q", got)
	}
	if j := e.job(ids[0]); j.State != "completed" || *j.Worker != "worker-b" {
		t.Fatalf("job %+v", j)
	}
}

func TestExecForwardsInterruptsAndAbandonsTheRequest(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			e := newEnv(t)
			ids := e.setup(1)
			out := e.outDir()
			tok, _ := e.claim("w", "1m")
			started := filepath.Join(e.dir, "started")
			got := filepath.Join(e.dir, "got-signal")
			script := `trap 'echo caught > ` + got + `; exit 0' INT TERM
echo partial > "$LEASES_OUTPUT"; touch ` + started + `
while :; do sleep 0.02; done`
			full := []string{"exec", "--token-file", tok, "--output-dir", out, "--", "sh", "-c", script}
			cmd, stdout, stderr, done := e.start(opts{}, full...)
			waitFor(t, "the program to start", func() bool { return exists(started) })
			cmd.Process.Signal(sig)
			var r result
			select {
			case err := <-done:
				r = e.finish(full, err, stdout, stderr)
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("exec did not stop after the signal")
			}
			// Even though the program exited 0 after the signal, nothing is
			// completed: the request is abandoned and the claim left alone.
			wantExit(t, r, 1, "interrupted")
			if !exists(got) {
				t.Fatal("the signal was not forwarded to the program")
			}
			if names := listDir(t, out); len(names) != 0 {
				t.Fatalf("an interrupted run left files: %v", names)
			}
			if j := e.job(ids[0]); j.State != "claimed" {
				t.Fatalf("an interrupted run changed the job: %+v", j)
			}
		})
	}
}

// A signal after exec reserved its output file and before the program
// starts waits, then runs nothing: the output file is removed, the claim is
// unchanged, and leases ends by the signal.
func TestASignalBeforeTheProgramStartsRunsNothingAndRemovesItsFile(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	out := e.outDir()
	tok, _ := e.claim("w", "1m")
	ran := filepath.Join(e.dir, "ran")
	r, ws := e.pausedRun(t, "exec-reserved", syscall.SIGTERM,
		"exec", "--token-file", tok, "--output-dir", out, "--", "sh", "-c", "touch "+ran)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("leases did not end by SIGTERM: %v\n%s", ws, r)
	}
	if !strings.Contains(r.stderr, "nothing was run") || exists(ran) {
		t.Fatalf("the program ran: %s", r)
	}
	if names := listDir(t, out); len(names) != 0 {
		t.Fatalf("the reserved output file was left: %v", names)
	}
	if j := e.job(ids[0]); j.State != "claimed" || j.Attempts != 1 {
		t.Fatalf("the claim changed: %+v", j)
	}
}
