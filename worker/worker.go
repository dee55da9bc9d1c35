// Package worker is the Go worker loop: it waits for jobs of one production
// without polling, runs a handler for each with its lease kept alive, and
// drains when its context ends (docs/workers.md).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/libleases/libleases/core"
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
	// context has ended (0: as long as they take). When it passes, their
	// contexts are cancelled, their jobs released, and Run returns
	// ErrDrainTimeout without waiting for them further.
	DrainTimeout time.Duration
	// MaxJobs stops claiming after this many claims (0: no limit).
	MaxJobs int
	// ExitWhenEmpty stops claiming once the production has nothing to
	// claim (each of the Concurrency claimers stops when a claim finds
	// nothing within a short grace), instead of waiting for more.
	ExitWhenEmpty bool
	// Logger receives what the loop cannot return: a completion or release
	// that failed, a handler's panic, a claim retried after a storage error.
	// nil: slog.Default().
	Logger *slog.Logger
}

// ErrDrainTimeout is Run's result when the drain timeout passed with
// handlers still running (their jobs were released).
var ErrDrainTimeout = errors.New("worker: the drain timeout passed; the jobs still running were released")

// claimWait is how long one waiting claim lasts before the loop claims
// again; the context ends a wait at once.
const claimWait = time.Minute

// emptyGrace is the wait of a claim that decides whether the production is
// empty (ExitWhenEmpty). A wait rather than a bare claim: on PostgreSQL a
// bare claim passes over a job another claimer's transaction holds, and
// that transaction may yet give it up; the wait looks again when it ends.
const emptyGrace = 100 * time.Millisecond

// Retrying a claim after a failure that may pass (busy, storage, a clock
// behind its mark) backs off from retryMin to retryMax.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
)

// Run claims jobs of cfg.Production and runs h for each, cfg.Concurrency at
// a time, until ctx ends, MaxJobs are claimed, or (ExitWhenEmpty) there is
// nothing to claim; then it stops claiming, waits for running handlers (up
// to DrainTimeout after ctx ended) and returns. A job whose handler returns
// facts is completed with them; one whose handler fails or panics is failed
// for a retry (FailRetry with the error as the reason: it comes back after
// the production's backoff, or is dead after its last attempt). Run returns nil after a clean stop,
// ErrDrainTimeout, or the error that made it stop: a bad Config, an unknown
// production, a closed authority.
func Run(ctx context.Context, a *core.Authority, cfg Config, h Handler) error {
	if err := cfg.check(a, h); err != nil {
		return err
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &runner{a: a, cfg: cfg, h: h, base: context.WithoutCancel(ctx), running: map[*core.Lease]context.CancelCauseFunc{}}
	claimCtx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	var slots sync.WaitGroup
	for i := 0; i < cfg.Concurrency; i++ {
		slots.Add(1)
		go func() {
			defer slots.Done()
			r.slot(claimCtx, stopClaiming)
		}()
	}
	done := make(chan struct{})
	go func() {
		slots.Wait()
		close(done)
	}()
	select {
	case <-done:
		return r.fatalErr()
	case <-ctx.Done():
	}
	stopClaiming()
	if cfg.DrainTimeout <= 0 {
		<-done
		return r.fatalErr()
	}
	t := time.NewTimer(cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return r.fatalErr()
	case <-t.C:
	}
	if r.abandonRunning() == 0 {
		<-done // the last handler was settling
		return r.fatalErr()
	}
	return ErrDrainTimeout
}

func (c Config) check(a *core.Authority, h Handler) error {
	switch {
	case a == nil:
		return invalid("authority is nil")
	case h == nil:
		return invalid("handler is nil")
	case c.Concurrency < 0:
		return invalid("concurrency %d is negative", c.Concurrency)
	case c.MaxJobs < 0:
		return invalid("max jobs %d is negative", c.MaxJobs)
	case c.DrainTimeout < 0:
		return invalid("drain timeout %s is negative", c.DrainTimeout)
	}
	if _, err := core.ValidateDuration(c.Duration); err != nil {
		return err
	}
	if c.Interval != 0 && (c.Interval < core.MinKeepAliveInterval || c.Interval >= c.Duration) {
		return &core.Error{Kind: core.KindInvalidDuration, Msg: fmt.Sprintf(
			"keep-alive interval %s must be at least %s and shorter than the duration %s",
			c.Interval, core.MinKeepAliveInterval, c.Duration)}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return &core.Error{Kind: core.KindInvalidArgument, Msg: "worker: " + fmt.Sprintf(format, args...)}
}

type runner struct {
	a    *core.Authority
	cfg  Config
	h    Handler
	base context.Context // Run's values, never its cancellation

	mu      sync.Mutex
	claimed int
	fatal   error
	running map[*core.Lease]context.CancelCauseFunc
}

func (r *runner) fatalErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// reserve takes one of MaxJobs before a claim; false when none is left.
func (r *runner) reserve() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.MaxJobs > 0 && r.claimed >= r.cfg.MaxJobs {
		return false
	}
	r.claimed++
	return true
}

func (r *runner) unreserve() {
	r.mu.Lock()
	r.claimed--
	r.mu.Unlock()
}

// slot claims and handles jobs one after the other until claiming stops. A
// completion that claimed the slot's next job in its commit (settle) saves
// the claim at the top of the loop.
func (r *runner) slot(ctx context.Context, stopClaiming context.CancelFunc) {
	pause := retryMin
	var next *core.Lease
	for {
		l := next
		next = nil
		if l != nil && ctx.Err() != nil {
			// Claiming stopped while the completion claimed this one: no
			// handler starts after the stop, so the job goes back.
			r.unreserve()
			r.giveBack(l)
			return
		}
		if l == nil {
			if ctx.Err() != nil || !r.reserve() { // stopped, or the others hold the last claims
				return
			}
			wait := claimWait
			if r.cfg.ExitWhenEmpty {
				wait = emptyGrace
			}
			var err error
			l, err = r.a.ClaimWait(ctx, r.cfg.Production, r.cfg.Worker, r.cfg.Duration, wait)
			if err != nil {
				r.unreserve()
			}
			switch kind := core.KindOf(err); {
			case err == nil:
			case kind == core.KindInterrupted:
				return
			case kind == core.KindNothingToClaim:
				if r.cfg.ExitWhenEmpty { // the other slots stop when they find nothing too
					return
				}
				continue
			case kind == core.KindBusy, kind == core.KindStorage, kind == core.KindOutcomeUnknown, kind == core.KindClockRegressed:
				r.cfg.Logger.Warn("worker: claim failed; trying again", "production", r.cfg.Production,
					"worker", r.cfg.Worker, "error", err, "in", pause)
				select {
				case <-ctx.Done():
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, retryMax)
				continue
			default:
				r.mu.Lock()
				if r.fatal == nil {
					r.fatal = err
				}
				r.mu.Unlock()
				stopClaiming()
				return
			}
		}
		pause = retryMin
		next = r.handle(ctx, l)
	}
}

// handle runs the handler for one lease, kept alive meanwhile, and settles
// the job with what it returned; it returns the next lease when the
// settlement claimed one (claimCtx: whether the loop still claims).
func (r *runner) handle(claimCtx context.Context, l *core.Lease) *core.Lease {
	var opts []core.KeepAliveOption
	if r.cfg.Interval != 0 {
		opts = append(opts, core.KeepAliveInterval(r.cfg.Interval))
	}
	if err := l.KeepAlive(r.cfg.Duration, opts...); err != nil {
		r.cfg.Logger.Warn("worker: cannot keep the lease alive; giving the job back", "lease", l, "error", err)
		return r.settle(claimCtx, l, core.Facts{}, err)
	}
	ctx, cancel := context.WithCancelCause(r.base)
	defer cancel(nil)
	go func() { // the lease's end reaches the handler
		select {
		case <-l.Done():
			cancel(l.Err())
		case <-ctx.Done():
		}
	}()
	r.mu.Lock()
	r.running[l] = cancel
	r.mu.Unlock()
	facts, err := r.call(ctx, l)
	r.mu.Lock()
	_, mine := r.running[l]
	delete(r.running, l)
	r.mu.Unlock()
	if !mine { // the drain timeout released it already
		return nil
	}
	return r.settle(claimCtx, l, facts, err)
}

// call runs the handler; a panic is the handler's failure, not the process's.
func (r *runner) call(ctx context.Context, l *core.Lease) (f core.Facts, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.cfg.Logger.Error("worker: the handler panicked; failing the job for a retry", "lease", l, "panic", fmt.Sprint(p))
			err = fmt.Errorf("worker: the handler panicked: %v", p)
		}
	}()
	return r.h(ctx, l)
}

// settle completes the job with the handler's facts, or, when the handler
// failed, fails it for a retry. This is the one place that decides what a failed
// job becomes. A handler that closed the lease itself (completed it through
// an execution request with its output, or failed it: the CLI's reference
// executor) leaves nothing to settle.
//
// When the loop would claim again anyway (claimCtx has not ended and
// MaxJobs leaves a claim), the completion claims the production's next job
// in the same commit (Lease.CompleteAndClaimNext: one commit per job instead
// of two) and returns it; nil when nothing was claimable, or when draining
// or at MaxJobs, where a plain completion claims nothing.
func (r *runner) settle(claimCtx context.Context, l *core.Lease, f core.Facts, handlerErr error) *core.Lease {
	defer l.StopKeepAlive()
	if core.KindOf(l.Err()) == core.KindClosed {
		return nil
	}
	if handlerErr != nil {
		// A failing handler is a failed attempt: the job comes back after
		// the production's backoff (dead once its attempts are used up), with
		// the error as the attempt's reason, rather than at once.
		if err := l.FailRetry(failureReason(handlerErr), 0); err != nil && l.Err() == nil {
			r.cfg.Logger.Warn("worker: the job was not failed for a retry", "lease", l, "error", err)
		}
		return nil
	}
	if claimCtx.Err() != nil || !r.reserve() {
		if err := l.Complete(f); err != nil {
			r.cfg.Logger.Warn("worker: the job was not completed", "lease", l, "error", err)
		}
		return nil
	}
	next, err := completeNext(l, f, r.cfg.Duration)
	if next == nil {
		r.unreserve()
	}
	if err != nil {
		r.cfg.Logger.Warn("worker: the job was not completed", "lease", l, "error", err)
	}
	return next
}

// failureReason is a handler's error as an attempt's reason: valid UTF-8
// without NUL bytes, cut at a character boundary to core.MaxReasonLen.
func failureReason(err error) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "\uFFFD"), "\x00", "")
	if len(s) > core.MaxReasonLen {
		s = strings.ToValidUTF8(s[:core.MaxReasonLen], "") // drops a character cut in two
	}
	return s
}

// completeNext is Lease.CompleteAndClaimNext; the tests count its calls.
var completeNext = (*core.Lease).CompleteAndClaimNext

// giveBack releases a job the loop will not finish.
func (r *runner) giveBack(l *core.Lease) {
	if err := l.Release(); err != nil && l.Err() == nil {
		r.cfg.Logger.Warn("worker: the job was not given back", "lease", l, "error", err)
	}
}

// abandonRunning cancels every running handler and releases its job (the
// drain timeout passed); it returns how many it abandoned.
func (r *runner) abandonRunning() int {
	r.mu.Lock()
	running := r.running
	r.running = map[*core.Lease]context.CancelCauseFunc{}
	r.mu.Unlock()
	for l, cancel := range running {
		cancel(ErrDrainTimeout)
		l.StopKeepAlive()
		if err := l.Release(); err != nil {
			r.cfg.Logger.Warn("worker: a job still running at the drain timeout was not given back", "lease", l, "error", err)
		}
	}
	return len(running)
}
