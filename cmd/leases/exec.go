// The reference executor (leases exec, and each job of leases work): it runs
// a program for a claimed job with the claim kept alive, and turns the
// program's exit into a completion (with the registered output) or a failure.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/worker"
	"github.com/libleases/libleases/worker/loop"
)

func init() {
	register(&command{name: "exec",
		args:    "--token-file F --output-dir DIR [--duration D] [--retry-exit CODE[,CODE]] [--metadata KEY=JSON]... [--provenance KEY=JSON]... -- PROGRAM [ARG]...",
		summary: "run PROGRAM for a claimed job; complete on exit 0 with its output, fail otherwise",
		detail: `PROGRAM runs in its own process group with:
  LEASES_OUTPUT      a fresh private file in DIR to write the output to
  LEASES_JOB_ID      the job id (LEASES_PRODUCTION: the production name)
  LEASES_FACTS       an empty private file: JSON written to it, {"metadata": {...},
                     "provenance": {...}}, is published with the completion
  standard input     the job's payload
The token never reaches PROGRAM. While it runs, the claim is kept alive: renewed to now+D
every third of D (D defaults to the claim's current span; sooner when less time is left).
On exit 0 the output is fsynced and renamed to DIR/<job>.<nonce>.out and the job completes,
registering its path, size, SHA-256 and nonce with the given metadata/provenance and the
facts PROGRAM wrote to LEASES_FACTS, in one commit; facts that are not valid JSON of that form,
not UTF-8, over 1 MiB or set by a flag too fail the job instead, with why. A non-zero
exit fails the job with the exit status as its reason: for good, or, for an exit status given
to --retry-exit, with a retry (back in the queue after the production's backoff; dead if it
was the last attempt). If the claim is lost while PROGRAM
runs (expired, cancelled, taken), PROGRAM's process group is killed and its files removed.
SIGINT and SIGTERM are forwarded to PROGRAM (a second one kills it); the output is then
discarded and the claim left as it is, until its expiry or 'leases release'.
PROGRAM's process group never outlives exec, however exec ends (kill -9 included); a later
exec or work on DIR removes the temporary output so left once the job is no longer claimed.
A closed standard output or error (| head) kills neither exec nor PROGRAM.`,
		examples: []string{
			`leases exec --token-file job.token --output-dir out -- sh -c 'render < /dev/stdin > "$LEASES_OUTPUT"'`,
			"leases exec --token-file job.token --output-dir out --metadata frames=12 -- ./render.sh",
			"leases exec --token-file job.token --output-dir out --retry-exit 75 -- ./fetch.sh",
		},
		run: runExec})
}

func runExec(cc *cmdContext) error {
	survivingClosedLogs()
	tf := tokenFileFlag(cc)
	outDir := cc.fs.String("output-dir", "", "`DIR` for the output files")
	var dur durationFlag
	cc.fs.Var(&dur, "duration", "renew the claim to now + `DURATION` (default: the claim's current span)")
	retryExit := retryExitFlags(cc)
	md, pv := cc.factFlags()
	prog, done, err := prepare(cc, false)
	if done || err != nil {
		return err
	}
	if len(prog) == 0 {
		return usagef(cc.cmd.name, "give the PROGRAM to run after --")
	}
	if err := cc.required("output-dir", *outDir); err != nil {
		return err
	}
	a, l, err := cc.importLease(*tf)
	if err != nil {
		return err
	}
	defer a.Close()
	renewFor := dur.d
	if !dur.set {
		j, err := a.Job(l.Production(), l.JobID())
		if err != nil {
			return err
		}
		renewFor = min(j.Expiry.Sub(j.ClaimedAt).Truncate(time.Microsecond), core.MaxDuration)
		if renewFor <= 0 {
			renewFor = time.Minute
		}
	}
	if !execRenewalDisabled() {
		// The first renewal must come before the claim's current expiry,
		// which may be nearer than a third of D.
		interval := max(min(renewFor, time.Until(l.Expiry()))/3, core.MinKeepAliveInterval)
		if err := l.KeepAlive(renewFor, core.KeepAliveInterval(min(interval, renewFor-time.Microsecond))); err != nil {
			return err
		}
		defer l.StopKeepAlive()
	}
	// The lease's end (a rejected renewal: expired, cancelled, lost) stops
	// the program.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		select {
		case <-l.Done():
			cancel(l.Err())
		case <-ctx.Done():
		}
	}()
	// From the reserved output file until the program runs, and again from
	// its exit until the outcome is recorded, SIGINT and SIGTERM wait (a
	// signal before the program starts runs nothing); while it runs they
	// are forwarded to it.
	held.start()
	sweepTemporaries(a, l.Production(), *outDir) // what earlier runs left behind (supervise.go)
	err = execute(ctx, job{a: a, l: l, argv: prog, outDir: *outDir,
		facts: core.Facts{Metadata: md.m, Provenance: pv.m}, hold: held, retryExit: retryExit.codes})
	sweepTemporaries(a, l.Production(), *outDir) // this job is settled now: its earlier claims' files go too
	return err
}

// job is one run of the reference executor.
type job struct {
	a      *core.Authority
	l      *core.Lease // active, kept alive by the caller
	argv   []string
	outDir string // "" (work without --output-dir): no output file; the job completes with the facts alone
	facts  core.Facts
	hold   *signalHold // exec: signals are forwarded to the program; nil for work, whose signals drain
	// retryExit are the exit statuses that fail the job with a retry
	// rather than for good.
	retryExit map[int]bool
}

// programFailed: the program exited non-zero (or was killed) and the job was
// marked failed with that reason.
type programFailed struct{ msg string }

func (e *programFailed) Error() string { return e.msg }

// startFailed: the program could not be started; nothing ran and the claim
// is unchanged.
type startFailed struct{ err error }

func (e *startFailed) Error() string { return e.err.Error() }
func (e *startFailed) Unwrap() error { return e.err }

// execute runs j's program for its lease and settles the job by its exit:
// exit 0 completes it (registering the output), any other exit fails it.
// When ctx ends first (the lease is over, or work's drain is cut short:
// context.Cause says which), the program's process group is killed, its
// output removed, and the claim left to the caller. nil means the job
// completed; the result is reported on standard error either way.
func execute(ctx context.Context, j job) error {
	l, name := j.l, j.argv[0]
	payload, err := j.a.Payload(l.Production(), l.JobID())
	if err != nil {
		return err
	}
	var x *core.Execution
	if j.outDir != "" {
		if x, err = l.BeginExecution(j.outDir); err != nil {
			return err
		}
		if lock := lockTemporary(x.TempPath()); lock != nil {
			defer lock.Close() // after Finish or Abandon
		}
	}
	abandon := func() {
		if x != nil {
			x.Abandon()
		}
	}
	pausePoint("exec-reserved")

	factsFile, err := newFactsFile()
	if err != nil {
		abandon()
		return fmt.Errorf("facts file: %w", err)
	}
	defer os.Remove(factsFile)

	cmd := exec.Command(name, j.argv[1:]...)
	vars := []string{"LEASES_JOB_ID=" + l.JobID(), "LEASES_PRODUCTION=" + l.Production(), "LEASES_FACTS=" + factsFile}
	if x != nil {
		vars = append(vars, "LEASES_OUTPUT="+x.TempPath())
	}
	cmd.Env = programEnv(vars...)
	stdout, err := newProgramLog(os.Stdout)
	if err != nil {
		abandon()
		return fmt.Errorf("output pipe: %w", err)
	}
	stderr, err := newProgramLog(os.Stderr)
	if err != nil {
		stdout.closeChildEnd()
		abandon()
		return fmt.Errorf("output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = stdout.child, stderr.child
	pr, pw, err := os.Pipe()
	if err != nil {
		stdout.closeChildEnd()
		stderr.closeChildEnd()
		abandon()
		return fmt.Errorf("payload pipe: %w", err)
	}
	cmd.Stdin = pr

	var signals <-chan os.Signal
	if j.hold != nil {
		if s := j.hold.interrupted(); s != nil {
			pr.Close()
			pw.Close()
			stdout.closeChildEnd()
			stderr.closeChildEnd()
			abandon()
			return fmt.Errorf("interrupted (%v) before %s started: nothing was run, its output file was removed, and the claim is unchanged",
				s, name)
		}
		signals = j.hold.signals()
	}
	waited, err := startSupervised(cmd)
	stdout.closeChildEnd()
	stderr.closeChildEnd()
	if err != nil {
		pr.Close()
		pw.Close()
		abandon()
		return &startFailed{fmt.Errorf("cannot start %s: %w; nothing was run and the claim is unchanged", name, unwrapExec(err))}
	}
	pr.Close()
	go func() {
		pw.Write(payload) // a program that ignores its input gets EPIPE here, harmlessly
		pw.Close()
	}()
	pgid := cmd.Process.Pid
	killGroup := func(sig syscall.Signal) { syscall.Kill(-pgid, sig) }

	var stopped error
	var interrupted os.Signal
loop:
	for {
		select {
		case <-waited:
			break loop
		case s := <-signals:
			if interrupted == nil {
				interrupted = s
				killGroup(s.(syscall.Signal))
			} else {
				killGroup(syscall.SIGKILL)
			}
		case <-ctx.Done():
			stopped = context.Cause(ctx)
			killGroup(syscall.SIGKILL)
			<-waited
			break loop
		}
	}
	// Nothing of PROGRAM's group may keep writing the output once it is judged.
	killGroup(syscall.SIGKILL)
	reaper.release(pgid)
	stdout.drained()
	stderr.drained()
	state := cmd.ProcessState

	switch {
	case errors.Is(stopped, worker.ErrDrainTimeout):
		abandon()
		return fmt.Errorf("%s for job %s was stopped at the drain timeout; its process group was killed, its output removed, "+
			"and the job given back", name, l.JobID())
	case errors.Is(stopped, worker.ErrGivenBack):
		abandon()
		return fmt.Errorf("%s for job %s was stopped by a second signal; its process group was killed, its output removed, "+
			"and the job given back", name, l.JobID())
	case stopped != nil:
		abandon()
		return fmt.Errorf("the claim on job %s was lost while %s ran (%v); its process group was killed and its output removed",
			l.JobID(), name, stopped)
	case interrupted != nil:
		abandon()
		return fmt.Errorf("interrupted (%v forwarded to %s); its output was removed; the claim is unchanged and lasts until "+
			"its expiry (leases release --token-file FILE gives the job back)", interrupted, name)
	case state.Success():
		f, err := programFacts(factsFile, j.facts)
		if err != nil {
			// The program's facts cannot be published: the job fails (for
			// good: the same program would write them again) with why.
			abandon()
			reason := loop.Reason(err.Error())
			if ferr := l.Fail(reason); ferr != nil {
				return fmt.Errorf("%s exited 0 but %s, and the failure could not be recorded: %v; its output was removed", name, reason, ferr)
			}
			return &programFailed{fmt.Sprintf("%s exited 0 but %s; job %s is marked failed and its output was removed", name, reason, l.JobID())}
		}
		j.facts = f
		return complete(j, x)
	case j.retryExit[state.ExitCode()]: // -1 (killed by a signal) is never one
		abandon()
		reason := exitReason(state)
		if err := l.FailRetry(reason, 0); err != nil {
			return fmt.Errorf("%s failed (%s), and the retry could not be recorded: %v; its output was removed", name, reason, err)
		}
		return &programFailed{fmt.Sprintf("%s failed (%s); job %s failed with a retry: %s; its output was removed",
			name, reason, l.JobID(), afterRetry(j.a, l.Production(), l.JobID()))}
	default:
		abandon()
		reason := exitReason(state)
		if err := l.Fail(reason); err != nil {
			return fmt.Errorf("%s failed (%s), and the failure could not be recorded: %v; its output was removed", name, reason, err)
		}
		return &programFailed{fmt.Sprintf("%s failed (%s); job %s is marked failed and its output was removed", name, reason, l.JobID())}
	}
}

// newFactsFile makes the empty private file a program may write its job's
// facts to (LEASES_FACTS).
func newFactsFile() (string, error) {
	f, err := os.CreateTemp("", "leases-facts-*.json")
	if err != nil {
		return "", err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// programFacts reads the facts a program wrote to its LEASES_FACTS file
// (nothing written: none) and adds them to the command line's: the same
// JSON as leases_lease_complete's facts, valid UTF-8, at most
// core.MaxFactsLen bytes, no fact the command line sets too.
func programFacts(path string, flags core.Facts) (core.Facts, error) {
	f, err := os.Open(path)
	if err != nil {
		return flags, fmt.Errorf("its facts file (LEASES_FACTS) cannot be read: %v", unwrapPath(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, core.MaxFactsLen+1))
	if err != nil {
		return flags, fmt.Errorf("its facts file (LEASES_FACTS) cannot be read: %v", unwrapPath(err))
	}
	if len(b) > core.MaxFactsLen {
		return flags, fmt.Errorf("its facts file (LEASES_FACTS) is over the limit of %d bytes", core.MaxFactsLen)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return flags, nil
	}
	if !utf8.Valid(b) {
		return flags, errors.New("its facts file (LEASES_FACTS) is not valid UTF-8")
	}
	got, err := core.ParseFacts(string(b))
	if err != nil {
		return flags, fmt.Errorf("its facts file (LEASES_FACTS) is not valid: %v", err)
	}
	out := core.Facts{Metadata: map[string]json.RawMessage{}, Provenance: map[string]json.RawMessage{}}
	for _, m := range []struct {
		what        string
		flag, given map[string]json.RawMessage
		into        map[string]json.RawMessage
	}{{"metadata", flags.Metadata, got.Metadata, out.Metadata}, {"provenance", flags.Provenance, got.Provenance, out.Provenance}} {
		for k, v := range m.flag {
			m.into[k] = v
		}
		for k, v := range m.given {
			if _, dup := m.flag[k]; dup {
				return flags, fmt.Errorf("its facts file (LEASES_FACTS) sets %s %q, which --%s sets too", m.what, k, m.what)
			}
			m.into[k] = v
		}
	}
	return out, nil
}

// unwrapPath drops the path from a file error (it is a temporary name).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// complete records a successful run: with an output, the execution request
// registers it in the completion's commit; without one, the facts alone.
func complete(j job, x *core.Execution) error {
	l, name := j.l, j.argv[0]
	if x == nil {
		if err := l.Complete(j.facts); err != nil {
			return fmt.Errorf("%s succeeded, but the completion was not recorded (%v)", name, err)
		}
		fmt.Fprintf(os.Stderr, "leases: completed job %s of production %s\n", l.JobID(), nameText(l.Production()))
		return nil
	}
	if err := x.Finish(j.facts); err != nil {
		if core.KindOf(err) == core.KindOutcomeUnknown {
			return fmt.Errorf("%s succeeded, but whether the completion was recorded is unknown (%v); its output is kept at %s",
				name, err, x.FinalPath())
		}
		return fmt.Errorf("%s succeeded, but the completion was rejected (%v); its output was removed", name, err)
	}
	report := fmt.Sprintf("completed job %s of production %s; output %s", l.JobID(), nameText(l.Production()), x.FinalPath())
	if f, err := j.a.FactsOf(l.Production(), l.JobID()); err == nil {
		for _, o := range f.Outputs {
			if o.Nonce == x.Nonce() {
				report += fmt.Sprintf(" (%d bytes, sha256 %s)", o.Size, o.SHA256)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "leases: %s\n", report)
	return nil
}

// exitCodes reads --retry-exit: exit statuses 1..255, separated by commas.
type exitCodes struct{ codes map[int]bool }

func (f *exitCodes) String() string {
	if f == nil {
		return ""
	}
	var out []string
	for c := 1; c <= 255; c++ {
		if f.codes[c] {
			out = append(out, strconv.Itoa(c))
		}
	}
	return strings.Join(out, ",")
}

func (f *exitCodes) Set(s string) error {
	codes := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		c, err := strconv.Atoi(part)
		if err != nil || c < 1 || c > 255 {
			return fmt.Errorf("want exit statuses from 1 to 255, separated by commas (e.g. 75)")
		}
		codes[c] = true
	}
	f.codes = codes
	return nil
}

func retryExitFlags(cc *cmdContext) *exitCodes {
	f := &exitCodes{}
	cc.fs.Var(f, "retry-exit", "fail the job with a retry, not for good, when PROGRAM exits with one of `CODE[,CODE]` (e.g. 75, EX_TEMPFAIL)")
	return f
}

func exitReason(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %s", ws.Signal())
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
