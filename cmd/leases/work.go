// leases work: the long-running shell worker. It waits for jobs (no polling),
// runs each through the reference executor with its claim kept alive, N at a
// time, and drains on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/worker"
)

func init() {
	register(&command{name: "work",
		args: "--production P --worker W --duration D [--concurrency N] [--output-dir DIR] [--max-jobs N] " +
			"[--exit-when-empty] [--drain-timeout D] [--retry-exit CODE[,CODE]] [--metadata KEY=JSON]... [--provenance KEY=JSON]... -- PROGRAM [ARG]...",
		summary: "wait for jobs and run PROGRAM for each (as exec does), N at a time, until stopped",
		detail: `Each job is claimed for D and kept alive (renewed every D/3) while PROGRAM runs, exactly
as 'leases exec' runs it: payload on standard input, LEASES_JOB_ID and LEASES_PRODUCTION set,
a private LEASES_FACTS file whose JSON facts are published with the completion, and with
--output-dir a private LEASES_OUTPUT file that is registered on exit 0. Exit 0
completes the job; any other exit fails it (reason: the exit status), for good or, for an exit
status given to --retry-exit, with a retry (back in the queue after the production's backoff;
dead on its last attempt). A worker killed outright leaves its claims to lapse at their
expiry, each costing an attempt, so a job that kills every worker ends dead; its programs and
their process groups die with it, and their temporary outputs are removed by a later worker
on the directory once their jobs are no longer claimed. A closed standard output or error
(| head) kills neither the worker nor a program. PROGRAM gets only its own job's LEASES_*
variables. A coordinator's cancel
or a lost claim kills PROGRAM's process group within one renewal interval. Between jobs the
worker waits for the next one without polling and without writing.
SIGTERM or SIGINT drains: nothing new is claimed, running programs finish and their jobs are
settled, then the worker exits 0. With --drain-timeout, programs still running when it passes
are killed and their jobs given back (released); a second signal does that at once.
PROGRAM's process group is its own, so a terminal's Ctrl-C reaches only the worker.
Exit status: 0 stopped as asked (drained after a signal, --max-jobs claimed and settled,
--exit-when-empty found nothing more), whatever the programs' exits; 1 the worker cannot go
on (unknown production, database failure, PROGRAM cannot be started: nothing more is
claimed, running programs finish); 2 usage error.`,
		examples: []string{
			`leases work --production nightly --worker "$HOSTNAME" --duration 5m --output-dir out -- ./render.sh`,
			"leases work --production nightly --worker host-7 --duration 1m --concurrency 4 --exit-when-empty -- sh -c 'convert - png:- > \"$LEASES_OUTPUT\"'",
			"leases work --production nightly --worker host-7 --duration 2m --drain-timeout 30s --max-jobs 100 -- ./job.sh",
			"leases work --production imports --worker host-7 --duration 1m --retry-exit 75 -- ./fetch.sh",
		},
		run: runWork})
}

// maxConcurrency bounds --concurrency: each slot is a claimer, a waiting
// claim and a program at once, so a mistyped count must not start millions.
const maxConcurrency = 1024

func runWork(cc *cmdContext) error {
	survivingClosedLogs()
	prod := cc.fs.String("production", "", "production `NAME`")
	workerName := cc.fs.String("worker", "", "worker `NAME` recorded as every claim's attribution")
	var dur durationFlag
	// Zero is every knob's "none" here as in every face of the loop
	// (tests/vectors/worker_loop.json, zero_values): a drain timeout of 0
	// waits as long as the programs take, concurrency 0 runs one at a time,
	// max jobs 0 is no limit.
	drain := durationFlag{rule: spanRule{max: core.MaxDuration, zeroOK: true}}
	cc.fs.Var(&dur, "duration", "claim each job for `DURATION` (us, ms, s, m, h), renewed every third of it while PROGRAM runs")
	concurrency := cc.fs.Int("concurrency", 1, "run up to `N` programs at once (0: one; at most 1024)")
	outDir := cc.fs.String("output-dir", "", "register each run's output file in `DIR` (without it, PROGRAM gets no LEASES_OUTPUT)")
	maxJobs := cc.fs.Int("max-jobs", 0, "claim at most `N` jobs, then stop once they are settled (0: no limit)")
	exitWhenEmpty := cc.fs.Bool("exit-when-empty", false, "stop once nothing is left to claim, instead of waiting for more")
	cc.fs.Var(&drain, "drain-timeout", "after SIGTERM/SIGINT, let running programs go on for at most `DURATION` (0, the default: until they finish)")
	retryExit := retryExitFlags(cc)
	md, pv := cc.factFlags()
	prog, done, err := prepare(cc, false)
	if done || err != nil {
		return err
	}
	for _, name := range []string{"production", "worker", "duration"} {
		if err := cc.required(name, cc.fs.Lookup(name).Value.String()); err != nil {
			return err
		}
	}
	switch {
	case len(prog) == 0:
		return usagef(cc.cmd.name, "give the PROGRAM to run after --")
	case *concurrency < 0 || *concurrency > maxConcurrency:
		return usagef(cc.cmd.name, "--concurrency must be from 0 (one at a time) to %d", maxConcurrency)
	case *maxJobs < 0:
		return usagef(cc.cmd.name, "--max-jobs must not be negative")
	}
	// Found now, so that a missing program claims nothing: each job would
	// otherwise be claimed and given back again.
	if _, err := exec.LookPath(prog[0]); err != nil {
		return fmt.Errorf("cannot run %s: %w; nothing was claimed", prog[0], unwrapExec(err))
	}
	if *outDir != "" {
		if st, err := os.Stat(*outDir); err != nil || !st.IsDir() {
			return fmt.Errorf("--output-dir %s is not a directory; nothing was claimed", *outDir)
		}
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	if *outDir != "" {
		sweepTemporaries(a, *prod, *outDir) // what earlier workers left behind (supervise.go)
	}

	w := &workRun{a: a, argv: prog, outDir: *outDir, facts: core.Facts{Metadata: md.m, Provenance: pv.m}, retryExit: retryExit.codes}
	// The first SIGTERM or SIGINT drains, a second gives the jobs back at
	// once: the rule of every face of the loop (worker.NotifySignals).
	runCtx, giveBack, stopSignals := worker.NotifySignals(context.Background(), func(n int, s os.Signal) {
		if n == 1 {
			fmt.Fprintf(os.Stderr, "leases: %v: draining: claiming nothing more; running programs finish (a second signal stops them)\n", s)
		} else {
			fmt.Fprintf(os.Stderr, "leases: %v again: stopping the running programs and giving their jobs back\n", s)
		}
	})
	defer stopSignals()
	runCtx, stopClaiming := context.WithCancel(runCtx)
	defer stopClaiming()
	w.stopClaiming = stopClaiming
	pausePoint("work-listening") // a test's signal from here on is handled

	err = worker.Run(runCtx, a, worker.Config{
		Production: *prod, Worker: *workerName, Duration: dur.d, Concurrency: *concurrency,
		DrainTimeout: drain.d, MaxJobs: *maxJobs, ExitWhenEmpty: *exitWhenEmpty, GiveBack: giveBack,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{ReplaceAttr: dropTime})),
	}, w.handle)
	if errors.Is(err, worker.ErrDrainTimeout) || errors.Is(err, worker.ErrGivenBack) {
		// Run has released the jobs still running; their programs are
		// being killed, and nothing of theirs may outlive the worker.
		w.running.Wait()
		err = nil
	}
	fmt.Fprintf(os.Stderr, "leases: work stopped: %s\n", w.summary())
	if err != nil {
		return err
	}
	return w.fatalErr()
}

// workRun is one leases work process: what every job's run shares.
type workRun struct {
	a            *core.Authority
	argv         []string
	outDir       string
	facts        core.Facts
	retryExit    map[int]bool
	stopClaiming context.CancelFunc
	running      sync.WaitGroup

	mu                                 sync.Mutex
	completed, failed, givenBack, lost int
	fatal                              error
}

// handle runs one job through the reference executor, which settles it
// (completes or fails it); when the run was cut short with the claim still
// held, the error makes the loop give the job back.
func (w *workRun) handle(ctx context.Context, l *core.Lease) (core.Facts, error) {
	w.running.Add(1)
	defer w.running.Done()
	workLeaseHook(l)
	err := execute(ctx, job{a: w.a, l: l, argv: w.argv, outDir: w.outDir, facts: w.facts, retryExit: w.retryExit})
	if w.outDir != "" {
		sweepTemporaries(w.a, l.Production(), w.outDir) // this job is settled now: its earlier claims' files go too
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var pf *programFailed
	var sf *startFailed
	switch {
	case err == nil:
		w.completed++
		return core.Facts{}, nil
	case errors.As(err, &pf):
		w.failed++
	case errors.As(err, &sf):
		// The next job would fail to start too: stop claiming, and exit 1.
		w.givenBack++
		if w.fatal == nil {
			w.fatal = err
		}
		w.stopClaiming()
	case errors.Is(context.Cause(ctx), worker.ErrDrainTimeout), errors.Is(context.Cause(ctx), worker.ErrGivenBack):
		w.givenBack++ // by the loop: at the drain timeout, or below
	case l.Err() != nil:
		w.lost++
	default:
		w.givenBack++ // the loop releases it (the run failed with the claim held)
	}
	fmt.Fprintf(os.Stderr, "leases: %v\n", err)
	return core.Facts{}, err
}

func (w *workRun) fatalErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fatal
}

func (w *workRun) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d completed, %d failed, %d given back, %d lost (cancelled, expired or taken)",
		w.completed, w.failed, w.givenBack, w.lost)
}

// dropTime leaves the time out of the loop's log lines: a worker's output is
// usually stamped by whatever collects it (journald, a container runtime).
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
