// Package loop is the worker loop's policy, written once: every face of
// libleases (Go's worker.Run, `leases work`, the C handle leases_worker and
// the bindings over it) runs on a Loop and keeps only what is its own:
// calling the handler on its threads, its signals, its types.
//
// A Loop hands out leases already kept alive (Next), takes each job's
// result (Settle), completes and claims the next job in one commit when it
// would claim again anyway, and owns the back-off after a failed claim, the
// concurrency bound, max jobs, exit-when-empty, drain and the drain timeout
// (docs/workers.md). Every method is safe for concurrent use: N callers call
// Next and Settle at once, and at most Concurrency leases are out at a time.
package loop

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/libleases/libleases/core"
)

// The back-off after a failed claim (busy, storage, outcome unknown, a
// clock behind its mark): BackoffMin after the first failure, doubling
// after each further consecutive failure, at most BackoffMax; a claim that
// succeeds or finds nothing starts the sequence again.
// tests/vectors/worker_loop.json holds the sequence every face checks.
const (
	BackoffMin = 50 * time.Millisecond
	BackoffMax = 5 * time.Second
)

// Backoff is the pause after the n-th consecutive failed claim (n >= 1).
func Backoff(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := BackoffMin
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

// ClaimWait is how long one waiting claim of Next lasts at most before it
// looks at the loop's state again.
const ClaimWait = time.Minute

// EmptyGrace is the wait of a claim that decides whether the production is
// empty (ExitWhenEmpty). A wait rather than a bare claim: on PostgreSQL a
// bare claim passes over a job another claimer's transaction holds, and that
// transaction may yet give it up; the wait looks again when it ends.
const EmptyGrace = 100 * time.Millisecond

// Reason is the one rule that turns a handler's error text into an
// attempt's failure reason: invalid UTF-8 becomes U+FFFD (one per bad
// sequence), NUL bytes are dropped, and the text is cut at a character
// boundary to core.MaxReasonLen bytes.
func Reason(text string) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	if len(s) > core.MaxReasonLen {
		s = strings.ToValidUTF8(s[:core.MaxReasonLen], "") // drops a character cut in two
	}
	return s
}

// Config is what a Loop works on and how. Zero values: Concurrency 1,
// MaxJobs no limit, DrainTimeout as long as the jobs take, Interval a third
// of Duration, ExitWhenEmpty false (wait for more jobs).
type Config struct {
	Production string
	Worker     string // attribution of every claim
	// Duration of each claim; the loop renews it every Interval (0:
	// Duration/3) while the job runs.
	Duration time.Duration
	Interval time.Duration
	// Concurrency is how many leases are out at once (0: 1).
	Concurrency int
	// MaxJobs stops claiming after this many claims (0: no limit).
	MaxJobs int
	// ExitWhenEmpty ends claiming, for every caller, once a claim finds
	// nothing within EmptyGrace, instead of waiting for more.
	ExitWhenEmpty bool
	// DrainTimeout bounds a drain (Stop(Drain)): when it passes, the jobs
	// still out are given back (released) and the loop ends with
	// EndGaveBack. 0: the drain waits as long as the jobs take.
	DrainTimeout time.Duration
	// Logger receives what the loop cannot return: a claim retried after a
	// failure, a job given back that could not be. nil: slog.Default().
	Logger *slog.Logger
}

// maxConcurrency bounds Concurrency: each slot may hold a claim, a
// keep-alive and a handler at once.
const maxConcurrency = 1024

func (c Config) check(a *core.Authority) error {
	switch {
	case a == nil:
		return invalid("authority is nil")
	case c.Concurrency < 0 || c.Concurrency > maxConcurrency:
		return invalid("concurrency %d is out of range: 0 (one) to %d", c.Concurrency, maxConcurrency)
	case c.MaxJobs < 0:
		return invalid("max jobs %d is negative (0: no limit)", c.MaxJobs)
	case c.DrainTimeout < 0:
		return invalid("drain timeout %s is negative (0: as long as the jobs take)", c.DrainTimeout)
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

// Outcome is what became of a job, as its handler reports it to Settle.
type Outcome int

const (
	// Complete completes the job with Result.Facts (and claims the next
	// one in the same commit when the loop would claim again anyway).
	Complete Outcome = iota + 1
	// FailRetry fails the attempt: the job comes back after the
	// production's backoff, or is dead after its last attempt.
	FailRetry
	// Fail fails the job for good.
	Fail
	// Release gives the job back: it is claimable again at once.
	Release
	// Settled: the handler closed the lease itself (completed, failed or
	// released it); the loop leaves the job as the handler left it.
	Settled
)

// Result is a job's result. Reason (FailRetry, Fail) is passed through
// Reason first.
type Result struct {
	Outcome Outcome
	Facts   core.Facts
	Reason  string
}

// StopMode says how Stop stops.
type StopMode int

const (
	// Drain claims nothing more; the jobs out finish and are settled, up
	// to the drain timeout.
	Drain StopMode = iota + 1
	// GiveBack claims nothing more and gives every job out back at once:
	// their leases are released (Done closes; a later Settle of one
	// returns a KindClosed error).
	GiveBack
)

// End says how a loop ended.
type End int

const (
	// Running: the loop has not ended.
	Running End = iota
	// EndStopped: it stopped as asked (a drain that finished, MaxJobs
	// claimed and settled, ExitWhenEmpty found nothing more) and every job
	// it handed out was settled.
	EndStopped
	// EndGaveBack: it gave the jobs still out back, at its drain timeout or
	// at Stop(GiveBack).
	EndGaveBack
	// EndFailed: it could not go on (Err says why: an unknown production, a
	// closed authority); claiming stopped and the jobs out were settled.
	EndFailed
)

func (e End) String() string {
	return [...]string{"running", "stopped", "gave_back", "failed"}[e]
}

// ErrSlice is Next's error when its wait passed with no job to hand out
// and the loop still running: call Next again (it lets a caller look at its
// own flags, such as a signal, between waits).
var ErrSlice = &core.Error{Kind: core.KindNothingToClaim, Msg: "worker: no job within the wait; the loop goes on"}

// Loop is one worker loop. Create it with New; every method is safe for
// concurrent use.
type Loop struct {
	a   *core.Authority
	cfg Config
	log *slog.Logger

	stopCtx context.Context // ends at Stop: ends the waiting claims
	stopNow context.CancelFunc

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced at every change of state
	out       int           // leases handed out, being claimed, or claimed for the next caller
	claimed   int           // claims made or under way (MaxJobs)
	ready     []*core.Lease // claimed by a completion, for the next Next
	running   map[*core.Lease]bool
	stopped   bool
	empty     bool
	fatal     error
	gaveBack  bool
	givenBack map[*core.Lease]bool
	giving    int // giveBackRunning calls whose releases are under way
	drainT    *time.Timer
	failures  int           // consecutive failed claims
	retryAt   time.Time     // no claim before (back-off)
	pause     time.Duration // the current back-off
	completed int
	failedN   int
	released  int
	settled   int
}

// New checks cfg and makes a Loop; it claims nothing until Next.
func New(a *core.Authority, cfg Config) (*Loop, error) {
	if err := cfg.check(a); err != nil {
		return nil, err
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Loop{a: a, cfg: cfg, log: cfg.Logger, changed: make(chan struct{}), running: map[*core.Lease]bool{}}
	w.stopCtx, w.stopNow = context.WithCancel(context.Background())
	return w, nil
}

// Config is the loop's configuration, zero values resolved.
func (w *Loop) Config() Config { return w.cfg }

// signal wakes every waiter; w.mu is held.
func (w *Loop) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// claiming reports whether the loop still claims at all; w.mu is held.
func (w *Loop) claiming() bool {
	return !w.stopped && !w.empty && w.fatal == nil && !(w.cfg.MaxJobs > 0 && w.claimed >= w.cfg.MaxJobs)
}

// overLocked: the loop has ended; w.mu is held.
func (w *Loop) overLocked() bool {
	return w.out == 0 && !w.claiming()
}

// Next hands out the next job's lease, already kept alive, waiting up to
// wait for one (0: only a job claimable now). It returns
//   - a lease: the caller runs the job and then calls Settle exactly once;
//   - nil, nil: this caller gets no more jobs (the loop stopped, MaxJobs
//     are claimed, ExitWhenEmpty found nothing, or it failed: Wait says
//     which); end its loop;
//   - nil, ErrSlice: wait passed and the loop goes on: call again;
//   - nil, an error of kind KindInterrupted: ctx ended;
//   - nil, the error that ended the loop (an unknown production, a closed
//     authority), to every caller from then on.
//
// A claim that fails and may succeed later is retried after the back-off.
func (w *Loop) Next(ctx context.Context, wait time.Duration) (*core.Lease, error) {
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		if n := len(w.ready); n > 0 {
			l := w.ready[n-1]
			w.ready = w.ready[:n-1]
			w.running[l] = true
			w.mu.Unlock()
			return l, nil
		}
		if !w.claiming() {
			fatal := w.fatal
			w.mu.Unlock()
			return nil, fatal
		}
		now := time.Now()
		var until time.Time // when to look again, if not claiming now
		switch {
		case w.out >= w.cfg.Concurrency:
			until = deadline
		case now.Before(w.retryAt):
			until = w.retryAt
		}
		if !until.IsZero() {
			if until.After(deadline) {
				until = deadline
			}
			changed := w.changed
			w.mu.Unlock()
			if !now.Before(deadline) {
				return nil, ErrSlice
			}
			if err := w.sleep(ctx, changed, until); err != nil {
				return nil, err
			}
			continue
		}
		w.out++
		w.claimed++
		w.mu.Unlock()
		l, err, done := w.claim(ctx, deadline)
		if done {
			return l, err
		}
	}
}

// sleep waits until t, a change of state, a stop or ctx's end.
func (w *Loop) sleep(ctx context.Context, changed <-chan struct{}, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-changed:
	case <-w.stopCtx.Done():
	case <-ctx.Done():
		return interrupted(ctx)
	}
	return nil
}

func interrupted(ctx context.Context) error {
	return &core.Error{Kind: core.KindInterrupted, Err: context.Cause(ctx),
		Msg: "worker: the wait was interrupted (" + context.Cause(ctx).Error() + ")"}
}

// unreserve gives back a slot and a claim that did not hand a job out;
// w.mu is held.
func (w *Loop) unreserve() {
	w.out--
	w.claimed--
	w.signal()
}

// claim makes one waiting claim for Next, its slot reserved; done says
// whether Next returns (l, err).
func (w *Loop) claim(ctx context.Context, deadline time.Time) (l *core.Lease, err error, done bool) {
	bound := max(time.Until(deadline), 0)
	if bound > ClaimWait {
		bound = ClaimWait
	}
	if w.cfg.ExitWhenEmpty {
		bound = EmptyGrace // whatever the caller's slice: nothing within it ends claiming
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.stopCtx, cancel)
	defer stop()
	l, err = w.a.ClaimWait(cctx, w.cfg.Production, w.cfg.Worker, w.cfg.Duration, bound)
	if err == nil {
		if kerr := w.keepAlive(l); kerr != nil {
			w.log.Warn("worker: cannot keep the lease alive; giving the job back", "lease", l, "error", kerr)
			w.giveBack(l)
			w.mu.Lock()
			w.unreserve()
			w.mu.Unlock()
			return nil, nil, false
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch kind := core.KindOf(err); {
	case err == nil:
		w.failures, w.pause, w.retryAt = 0, 0, time.Time{}
		if w.stopped || w.fatal != nil {
			// Stopped while the claim committed: no job starts after a stop.
			w.unreserve()
			go w.giveBack(l)
			return nil, nil, true
		}
		w.running[l] = true
		w.signal()
		return l, nil, true
	case kind == core.KindInterrupted:
		w.unreserve()
		if w.stopCtx.Err() != nil {
			return nil, nil, true
		}
		return nil, interrupted(ctx), true
	case kind == core.KindNothingToClaim:
		w.unreserve()
		w.failures, w.pause, w.retryAt = 0, 0, time.Time{}
		if w.cfg.ExitWhenEmpty {
			w.empty = true
			w.signal()
			return nil, nil, true
		}
		if !time.Now().Before(deadline) {
			return nil, ErrSlice, true
		}
		return nil, nil, false
	case kind == core.KindBusy, kind == core.KindStorage, kind == core.KindOutcomeUnknown, kind == core.KindClockRegressed:
		w.unreserve()
		w.failed()
		w.log.Warn("worker: claim failed; trying again", "production", w.cfg.Production,
			"worker", w.cfg.Worker, "error", err, "in", w.pause)
		return nil, nil, false
	default:
		w.unreserve()
		if w.fatal == nil {
			w.fatal = err
		}
		w.releaseReady()
		return nil, err, true
	}
}

// failed records a failed claim and sets the back-off; w.mu is held. Claims
// that fail together (several callers at once) count once: a failure
// counts when no back-off was pending when it happened.
func (w *Loop) failed() {
	now := time.Now()
	if now.Before(w.retryAt) {
		return
	}
	w.failures++
	w.pause = Backoff(w.failures)
	w.retryAt = now.Add(w.pause)
}

func (w *Loop) keepAlive(l *core.Lease) error {
	var opts []core.KeepAliveOption
	if w.cfg.Interval != 0 {
		opts = append(opts, core.KeepAliveInterval(w.cfg.Interval))
	}
	return l.KeepAlive(w.cfg.Duration, opts...)
}

// giveBack releases a job the loop will not finish.
func (w *Loop) giveBack(l *core.Lease) {
	l.StopKeepAlive()
	if err := l.Release(); err != nil && core.KindOf(l.Err()) != core.KindClosed {
		w.log.Warn("worker: the job was not given back", "lease", l, "error", err)
	}
}

// releaseReady gives back the leases claimed for callers that will not
// take them now; w.mu is held.
func (w *Loop) releaseReady() {
	for _, l := range w.ready {
		w.out--
		w.claimed--
		go w.giveBack(l)
	}
	w.ready = nil
	w.signal()
}

// ErrGivenBack is Settle's error for a job the loop gave back already (its
// drain timeout passed, or Stop(GiveBack)): the result was not recorded.
var ErrGivenBack = &core.Error{Kind: core.KindClosed, Msg: "worker: the job was given back (drain timeout or stop) before its result came"}

// Settle records job l's result: it completes, fails or releases the job,
// or (Settled) leaves it as the handler left it, and frees its slot. A
// completion claims the next job in the same commit when the loop would
// claim again anyway; that lease goes to the next Next. Settle returns nil
// once the job is settled, ErrGivenBack when the loop gave it back already,
// the store's error when the operation failed (the job is no longer the
// caller's either way), or a KindInvalidArgument error that changed
// nothing (l was not handed out by this loop, bad facts, an outcome out of
// range, Settled for a lease that is still active): the job is still the
// caller's to settle.
func (w *Loop) Settle(l *core.Lease, r Result) error {
	if r.Outcome < Complete || r.Outcome > Settled {
		return invalid("outcome %d is not one of complete, fail_retry, fail, release, settled", int(r.Outcome))
	}
	if r.Outcome == Settled && core.KindOf(l.Err()) != core.KindClosed {
		return invalid("the lease is still active: the handler did not settle it (complete, fail or release the job)")
	}
	w.mu.Lock()
	if !w.running[l] {
		w.mu.Unlock()
		if w.GivenBack(l) {
			return ErrGivenBack
		}
		return invalid("the lease was not handed out by this worker, or was settled already")
	}
	delete(w.running, l)
	again := r.Outcome == Complete && w.claiming()
	if again {
		w.claimed++ // the next job's claim, in the completion's commit
	}
	w.mu.Unlock()

	var next *core.Lease
	var err error
	switch r.Outcome {
	case Complete:
		if again {
			next, err = CompleteNext(l, r.Facts, w.cfg.Duration)
			if core.KindOf(err) == core.KindInvalidDuration && l.Err() == nil {
				// The next claim would have been born expired (the commit
				// took longer than a claim lasts): nothing was written and
				// this lease still holds its job, so complete it alone
				// rather than let it lapse; the next Next claims afresh.
				next, err = nil, l.Complete(r.Facts)
			}
		} else {
			err = l.Complete(r.Facts)
		}
	case FailRetry:
		err = l.FailRetry(Reason(r.Reason), 0)
	case Fail:
		err = l.Fail(Reason(r.Reason))
	case Release:
		err = l.Release()
	}
	if core.KindOf(err) == core.KindInvalidArgument && l.Err() == nil {
		// Refused before anything was written (bad facts): still the caller's.
		w.mu.Lock()
		w.running[l] = true
		if again {
			w.claimed--
		}
		w.mu.Unlock()
		return err
	}
	l.StopKeepAlive()
	if next != nil {
		if kerr := w.keepAlive(next); kerr != nil {
			w.log.Warn("worker: cannot keep the lease alive; giving the job back", "lease", next, "error", kerr)
			w.giveBack(next)
			next = nil
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.Outcome {
	case Complete:
		if err == nil {
			w.completed++
		}
	case FailRetry, Fail:
		if err == nil {
			w.failedN++
		}
	case Release:
		if err == nil {
			w.released++
		}
	case Settled:
		w.settled++
	}
	switch {
	case next != nil && !w.stopped && w.fatal == nil:
		// Its claim counted already; the slot passes to the next Next.
		w.ready = append(w.ready, next)
		w.signal()
		return err
	case next != nil: // stopped while the completion claimed it
		go w.giveBack(next)
		w.claimed--
	case again: // the completion found nothing to claim, or failed
		w.claimed--
	}
	w.out--
	w.signal()
	return err
}

// GivenBack reports whether the loop gave job l back while it was out (at
// the drain timeout or Stop(GiveBack)).
func (w *Loop) GivenBack(l *core.Lease) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.givenBack[l]
}

// CompleteNext is Lease.CompleteAndClaimNext; the tests count its calls.
var CompleteNext = (*core.Lease).CompleteAndClaimNext

// Stop stops claiming. Drain lets the jobs out finish (up to DrainTimeout,
// after which they are given back); GiveBack gives them back at once. A
// waiting Next returns nil, nil. Stop may be called again (GiveBack after
// Drain cuts the drain short); it returns at once.
func (w *Loop) Stop(mode StopMode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		w.stopNow()
		w.releaseReady()
		if mode == Drain && w.cfg.DrainTimeout > 0 && len(w.running) > 0 {
			w.drainT = time.AfterFunc(w.cfg.DrainTimeout, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.giveBackRunning()
			})
		}
	}
	if mode == GiveBack {
		w.giveBackRunning()
		// The drain timeout may be giving jobs back at this moment (their
		// releases under way, w.mu let go meanwhile): those too are
		// released before Stop returns, so a caller that ends then (closes
		// the authority, exits) never cuts a release short.
		for w.giving > 0 {
			changed := w.changed
			w.mu.Unlock()
			<-changed
			w.mu.Lock()
		}
	}
	w.signal()
}

// giveBackRunning releases every job out; w.mu is held.
func (w *Loop) giveBackRunning() {
	if len(w.running) == 0 {
		return
	}
	w.gaveBack = true
	if w.givenBack == nil {
		w.givenBack = map[*core.Lease]bool{}
	}
	var wg sync.WaitGroup
	n := len(w.running)
	for l := range w.running {
		delete(w.running, l)
		w.givenBack[l] = true
		wg.Add(1)
		go func() { defer wg.Done(); w.giveBack(l) }()
	}
	// Released before Stop returns (a handler's Done has closed by then),
	// and before the loop counts as ended: their slots free up after.
	w.giving++
	w.mu.Unlock()
	wg.Wait()
	w.mu.Lock()
	w.giving--
	w.out -= n
	w.signal()
}

// Wait waits until the loop has ended (claiming stopped and every job it
// handed out settled or given back), at most wait, and says how; Running
// when wait passed first. With EndFailed, the error is what ended it; ctx's
// end is a KindInterrupted error.
func (w *Loop) Wait(ctx context.Context, wait time.Duration) (End, error) {
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		end, err := w.endLocked()
		changed := w.changed
		w.mu.Unlock()
		if end != Running || !time.Now().Before(deadline) {
			return end, err
		}
		if err := w.sleepChanged(ctx, changed, deadline); err != nil {
			return Running, err
		}
	}
}

func (w *Loop) sleepChanged(ctx context.Context, changed <-chan struct{}, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-changed:
	case <-ctx.Done():
		return interrupted(ctx)
	}
	return nil
}

func (w *Loop) endLocked() (End, error) {
	if !w.overLocked() {
		return Running, nil
	}
	switch {
	case w.fatal != nil:
		return EndFailed, w.fatal
	case w.gaveBack:
		return EndGaveBack, nil
	}
	return EndStopped, nil
}

// Stats is a snapshot of the loop, for observation and tests.
type Stats struct {
	State     string `json:"state"` // running, stopped, gave_back, failed
	Out       int    `json:"out"`   // leases handed out or being claimed
	Claimed   int    `json:"claimed"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	Released  int    `json:"released"`
	Settled   int    `json:"settled"` // by the handler itself
	// FailedClaims is the number of consecutive failed claims, BackoffUS
	// the pause they set (0 when the last claim succeeded or found nothing).
	FailedClaims int   `json:"failed_claims"`
	BackoffUS    int64 `json:"backoff_us"`
}

// Stats reports the loop's counters now.
func (w *Loop) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	end, _ := w.endLocked()
	return Stats{State: end.String(), Out: w.out, Claimed: w.claimed, Completed: w.completed, Failed: w.failedN,
		Released: w.released, Settled: w.settled, FailedClaims: w.failures, BackoffUS: w.pause.Microseconds()}
}

// Close gives back every job still out (Stop(GiveBack)) and stops any
// drain timer. The loop is unusable afterwards.
func (w *Loop) Close() {
	w.Stop(GiveBack)
	w.mu.Lock()
	if w.drainT != nil {
		w.drainT.Stop()
	}
	w.mu.Unlock()
}
