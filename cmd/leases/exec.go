// leases exec: the reference executor. It runs a program for a claimed job,
// keeps the claim alive while it runs, and turns the program's exit into a
// completion (with the registered output) or a failure.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/libleases/libleases/core"
)

func init() {
	register(&command{name: "exec",
		args:    "--token-file F --output-dir DIR [--duration D] [--metadata KEY=JSON]... [--provenance KEY=JSON]... -- PROGRAM [ARG]...",
		summary: "run PROGRAM for a claimed job; complete on exit 0 with its output, fail otherwise",
		detail: `PROGRAM runs in its own process group with:
  LEASES_OUTPUT      a fresh private file in DIR to write the output to
  LEASES_JOB_ID      the job id (LEASES_PRODUCTION: the production name)
  standard input     the job's payload
The token never reaches PROGRAM. While it runs, the claim is renewed to now+D whenever a
third of the time left has passed (D defaults to the claim's current span). On exit 0 the
output is fsynced and renamed to DIR/<job>.<nonce>.out and the job completes, registering
its path, size, SHA-256 and nonce with the given metadata/provenance. A non-zero exit fails
the job with the exit status as its reason. If the claim is lost while PROGRAM runs
(expired, cancelled, taken), PROGRAM's process group is killed and its files removed.
SIGINT and SIGTERM are forwarded to PROGRAM (a second one kills it); the output is then
discarded and the claim left as it is, until its expiry or 'leases release'.`,
		examples: []string{
			`leases exec --token-file job.token --output-dir out -- sh -c 'render < /dev/stdin > "$LEASES_OUTPUT"'`,
			"leases exec --token-file job.token --output-dir out --metadata frames=12 -- ./render.sh",
		},
		run: runExec})
}

// renewRetryable: renewal failures that do not mean the claim is gone.
func renewRetryable(err error) bool {
	switch core.KindOf(err) {
	case core.KindBusy, core.KindStorage, core.KindOutcomeUnknown, core.KindClockRegressed, core.KindNotExtended:
		return true
	}
	return false
}

// nextRenewal waits a third of the time left on the claim.
func nextRenewal(l *core.Lease) time.Duration {
	return max(time.Until(l.Expiry())/3, 5*time.Millisecond)
}

func runExec(cc *cmdContext) error {
	tf := tokenFileFlag(cc)
	outDir := cc.fs.String("output-dir", "", "`DIR` for the output files")
	var dur durationFlag
	cc.fs.Var(&dur, "duration", "renew the claim to now + `DURATION` (default: the claim's current span)")
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
	payload, err := a.Payload(l.Production(), l.JobID())
	if err != nil {
		return err
	}
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
	// From the reserved output file until the program runs, and again from
	// its exit until the outcome is recorded, SIGINT and SIGTERM wait (a
	// signal before the program starts runs nothing); while it runs they
	// are forwarded to it.
	held.start()
	x, err := l.BeginExecution(*outDir)
	if err != nil {
		return err
	}
	pausePoint("exec-reserved")

	cmd := exec.Command(prog[0], prog[1:]...)
	cmd.Env = append(os.Environ(),
		"LEASES_OUTPUT="+x.TempPath(),
		"LEASES_JOB_ID="+l.JobID(),
		"LEASES_PRODUCTION="+l.Production())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		x.Abandon()
		return fmt.Errorf("payload pipe: %w", err)
	}
	cmd.Stdin = pr

	if s := held.interrupted(); s != nil {
		pr.Close()
		pw.Close()
		x.Abandon()
		return fmt.Errorf("interrupted (%v) before %s started: nothing was run, its output file was removed, and the claim is unchanged",
			s, prog[0])
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		x.Abandon()
		return fmt.Errorf("cannot start %s: %w; nothing was run and the claim is unchanged", prog[0], unwrapExec(err))
	}
	pr.Close()
	go func() {
		pw.Write(payload) // a program that ignores its input gets EPIPE here, harmlessly
		pw.Close()
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	killGroup := func(sig syscall.Signal) { syscall.Kill(-pgid, sig) }

	var renew <-chan time.Time
	var timer *time.Timer
	if !execRenewalDisabled() {
		timer = time.NewTimer(nextRenewal(l))
		defer timer.Stop()
		renew = timer.C
	}
	var lost error
	var interrupted os.Signal
loop:
	for {
		select {
		case <-waited:
			break loop
		case s := <-held.signals():
			if interrupted == nil {
				interrupted = s
				killGroup(s.(syscall.Signal))
			} else {
				killGroup(syscall.SIGKILL)
			}
		case <-renew:
			err := l.Renew(renewFor)
			if err != nil && !renewRetryable(err) {
				lost = err
				killGroup(syscall.SIGKILL)
				<-waited
				break loop
			}
			if err != nil && core.KindOf(err) != core.KindNotExtended {
				fmt.Fprintf(os.Stderr, "leases: warning: renewal failed, retrying: %v\n", err)
			}
			timer.Reset(nextRenewal(l))
		}
	}
	// Nothing of PROGRAM's group may keep writing the output once it is judged.
	killGroup(syscall.SIGKILL)
	state := cmd.ProcessState

	switch {
	case lost != nil:
		x.Abandon()
		return fmt.Errorf("the claim was lost while %s ran (%v); its process group was killed and its output removed", prog[0], lost)
	case interrupted != nil:
		x.Abandon()
		return fmt.Errorf("interrupted (%v forwarded to %s); its output was removed; the claim is unchanged and lasts until "+
			"its expiry (leases release --token-file FILE gives the job back)", interrupted, prog[0])
	case state.Success():
		if err := x.Finish(core.Facts{Metadata: md.m, Provenance: pv.m}); err != nil {
			if core.KindOf(err) == core.KindOutcomeUnknown {
				return fmt.Errorf("%s succeeded, but whether the completion was recorded is unknown (%v); its output is kept at %s",
					prog[0], err, x.FinalPath())
			}
			return fmt.Errorf("%s succeeded, but the completion was rejected (%v); its output was removed", prog[0], err)
		}
		report := fmt.Sprintf("completed job %s of production %s; output %s", l.JobID(), l.Production(), x.FinalPath())
		if f, err := a.FactsOf(l.Production(), l.JobID()); err == nil {
			for _, o := range f.Outputs {
				if o.Nonce == x.Nonce() {
					report += fmt.Sprintf(" (%d bytes, sha256 %s)", o.Size, o.SHA256)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "leases: %s\n", report)
		return nil
	default:
		x.Abandon()
		reason := exitReason(state)
		if err := l.Fail(reason); err != nil {
			return fmt.Errorf("%s failed (%s), and the failure could not be recorded: %v; its output was removed", prog[0], reason, err)
		}
		return fmt.Errorf("%s failed (%s); job %s is marked failed and its output was removed", prog[0], reason, l.JobID())
	}
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
