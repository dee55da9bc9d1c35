// Package worker is the Go worker loop: it waits for jobs of one production
// without polling, runs a handler for each with its lease kept alive, and
// drains when its context ends (docs/workers.md).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/worker/loop"
)

// Handler does one job. Its context ends when the lease is over (a
// coordinator's cancel, an expiry, a lost claim: context.Cause says which,
// an error of the core kind) or when the drain timeout passes; it does not
// end when Run's context does, so that a running job can finish. It returns
// the facts to publish with the completion, or an error to give the job back;
// a handler may instead close the lease itself (complete or fail it), and
// the loop then leaves the job as the handler left it.
type Handler func(ctx context.Context, l *core.Lease) (core.Facts, error)

// Config is what Run works on and how.
type Config struct {
	Production string
	Worker     string // attribution of every claim
	// Duration of each claim; the loop renews it every Interval (default
	// Duration/3) while the handler runs. See docs/workers.md for the
	// margin a duration needs.
	Duration time.Duration
	Interval time.Duration
	// Concurrency is how many handlers run at once (default 1).
	Concurrency int
	// DrainTimeout bounds how long running handlers may go on once Run's
	// context has ended (0: as long as they take, in every face). When it passes, their
	// contexts are cancelled, their jobs released, and Run returns
	// ErrDrainTimeout without waiting for them further.
	DrainTimeout time.Duration
	// MaxJobs stops claiming after this many claims (0: no limit).
	MaxJobs int
	// ExitWhenEmpty stops claiming once the production has nothing to
	// claim (once a claim finds nothing within a short grace, no claimer
	// claims again), instead of waiting for more.
	ExitWhenEmpty bool
	// GiveBack, once closed, stops the loop at once: claiming stops and the
	// jobs still running are given back (released; their handlers'
	// contexts end with ErrGivenBack) and Run returns ErrGivenBack. It is
	// the second Ctrl-C (NotifySignals). nil: never.
	GiveBack <-chan struct{}
	// Logger receives what the loop cannot return: a completion or release
	// that failed, a handler's panic, a claim retried after a storage error.
	// nil: slog.Default().
	Logger *slog.Logger
}

// ErrDrainTimeout is Run's result when the drain timeout passed with
// handlers still running (their jobs were given back, released); it is also
// the cause that ends those handlers' contexts.
var ErrDrainTimeout = errors.New("worker: the drain timeout passed; the jobs still running were released")

// ErrGivenBack is Run's result when GiveBack closed with handlers still
// running (their jobs were given back at once, released); it is also the
// cause that ends those handlers' contexts.
var ErrGivenBack = errors.New("worker: stopped at once; the jobs still running were released")

// Run claims jobs of cfg.Production and runs h for each, cfg.Concurrency at
// a time, until ctx ends, MaxJobs are claimed, or (ExitWhenEmpty) there is
// nothing to claim; then it stops claiming, waits for running handlers (up
// to DrainTimeout after ctx ended) and returns. A job whose handler returns
// facts is completed with them; one whose handler fails or panics is failed
// for a retry (FailRetry with the error as the reason, by the rule of
// loop.Reason: it comes back after the production's backoff, or is dead
// after its last attempt). Run returns nil after a clean stop,
// ErrDrainTimeout, ErrGivenBack, or the error that made it stop: a bad
// Config, an unknown production, a closed authority.
//
// The policy (claims, back-off, max jobs, exit when empty, drain) is
// package loop's, the one every face of libleases runs on; Run only calls
// the handler on goroutines.
func Run(ctx context.Context, a *core.Authority, cfg Config, h Handler) error {
	if h == nil {
		return invalid("handler is nil")
	}
	w, err := loop.New(a, loop.Config{Production: cfg.Production, Worker: cfg.Worker, Duration: cfg.Duration,
		Interval: cfg.Interval, Concurrency: cfg.Concurrency, MaxJobs: cfg.MaxJobs, ExitWhenEmpty: cfg.ExitWhenEmpty,
		DrainTimeout: cfg.DrainTimeout, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	defer w.Close()
	r := &runner{w: w, h: h, ctx: ctx, base: context.WithoutCancel(ctx), log: w.Config().Logger}
	stopDrain := context.AfterFunc(ctx, func() { w.Stop(loop.Drain) })
	defer stopDrain()
	if cfg.GiveBack != nil {
		quit := make(chan struct{})
		defer close(quit)
		go func() {
			select {
			case <-cfg.GiveBack:
				r.givingBack.Store(true)
				w.Stop(loop.GiveBack)
			case <-quit:
			}
		}()
	}
	var slots sync.WaitGroup
	var fatal error
	var fatalOnce sync.Once
	for i := 0; i < w.Config().Concurrency; i++ {
		slots.Add(1)
		go func() {
			defer slots.Done()
			if err := r.slot(); err != nil {
				fatalOnce.Do(func() { fatal = err })
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		slots.Wait()
		close(done)
	}()
	for {
		end, werr := w.Wait(context.Background(), loop.ClaimWait)
		switch end {
		case loop.Running:
			continue
		case loop.EndGaveBack:
			// The jobs still running were released; their handlers' contexts
			// have ended, and Run does not wait for them further.
			if r.givingBack.Load() {
				return ErrGivenBack
			}
			return ErrDrainTimeout
		case loop.EndFailed:
			<-done
			return werr
		}
		<-done
		return fatal
	}
}

func invalid(format string, args ...any) error {
	return &core.Error{Kind: core.KindInvalidArgument, Msg: "worker: " + fmt.Sprintf(format, args...)}
}

// runner calls the handler for the jobs a loop hands out.
type runner struct {
	w          *loop.Loop
	h          Handler
	ctx        context.Context // Run's: its end drains
	base       context.Context // Run's values, never its cancellation
	log        *slog.Logger
	givingBack atomic.Bool
}

// slot takes jobs from the loop and handles them one after the other until
// the loop hands out no more.
func (r *runner) slot() error {
	for {
		l, err := r.w.Next(context.Background(), loop.ClaimWait)
		switch {
		case err == loop.ErrSlice:
			continue
		case err != nil:
			return err
		case l == nil:
			return nil
		}
		r.handle(l)
	}
}

// handle runs the handler for one lease, kept alive by the loop, and
// settles the job with what it returned.
func (r *runner) handle(l *core.Lease) {
	ctx, cancel := context.WithCancelCause(r.base)
	defer cancel(nil)
	go func() { // the lease's end reaches the handler
		select {
		case <-l.Done():
			cause := l.Err()
			if r.w.GivenBack(l) {
				cause = ErrDrainTimeout
				if r.givingBack.Load() {
					cause = ErrGivenBack
				}
			}
			cancel(cause)
		case <-ctx.Done():
		}
	}()
	facts, err := r.call(ctx, l)
	res := loop.Result{Outcome: loop.Complete, Facts: facts}
	switch {
	case core.KindOf(l.Err()) == core.KindClosed:
		// The handler closed the lease itself (completed it through an
		// execution request with its output, or failed it: the CLI's
		// reference executor), or the loop gave the job back.
		res = loop.Result{Outcome: loop.Settled}
	case err != nil:
		// A failing handler is a failed attempt: the job comes back after
		// the production's backoff (dead once its attempts are used up),
		// with the error as the attempt's reason, rather than at once.
		res = loop.Result{Outcome: loop.FailRetry, Reason: err.Error()}
	}
	if r.ctx.Err() != nil {
		// Draining already (AfterFunc may not have run yet): a completion
		// claims nothing more.
		r.w.Stop(loop.Drain)
	}
	serr := r.w.Settle(l, res)
	if core.KindOf(serr) == core.KindInvalidArgument && res.Outcome == loop.Complete {
		// The completion was refused before anything was written (facts
		// the core rejects): the job would otherwise stay claimed, so its
		// attempt fails for a retry, with why.
		serr = r.w.Settle(l, loop.Result{Outcome: loop.FailRetry, Reason: "worker: the handler's facts were refused: " + serr.Error()})
	}
	if core.KindOf(serr) == core.KindInvalidArgument {
		serr = r.w.Settle(l, loop.Result{Outcome: loop.Release}) // nothing else can take it back
	}
	if serr != nil && serr != loop.ErrGivenBack {
		r.log.Warn("worker: the job was not settled", "lease", l, "error", serr)
	}
}

// call runs the handler; a panic is the handler's failure, not the process's.
func (r *runner) call(ctx context.Context, l *core.Lease) (f core.Facts, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("worker: the handler panicked; failing the job for a retry", "lease", l, "panic", fmt.Sprint(p))
			err = fmt.Errorf("worker: the handler panicked: %v", p)
		}
	}()
	return r.h(ctx, l)
}

// failureReason is a handler's error as an attempt's reason (loop.Reason).
func failureReason(err error) string { return loop.Reason(err.Error()) }
