// Package clockstep tells a process's waiting claims that the wall clock
// may have been set (stepped): one watcher for the whole process, however
// many claims of however many authorities wait, running only while someone
// subscribes.
//
// Where the kernel can say that the clock was set (Linux: a timerfd armed
// with TFD_TIMER_CANCEL_ON_SET), the watcher sleeps until it is: a process
// whose clock is not stepped is never woken by it. A slew is not reported,
// and need not be: a slewed clock runs with the monotonic clock within
// 500 ppm, which the waiters' own checks allow for. Where it cannot (another
// system, or the kernel refused), and for subscribers that ask to poll (a
// test's clock seam, which no kernel sees move), the watcher reports every
// Period instead.
package clockstep

import (
	"sync"
	"sync/atomic"
	"time"
)

// period is how often the watcher reports when it polls, in ns.
var period atomic.Int64

func init() { period.Store(int64(100 * time.Millisecond)) }

// Period is how often the watcher reports when it polls: 100 ms.
func Period() time.Duration { return time.Duration(period.Load()) }

// SetPeriod changes Period (tests) and returns the old one. A running
// watcher takes it at its next report.
func SetPeriod(d time.Duration) time.Duration { return time.Duration(period.Swap(int64(d))) }

// Sub is one subscription.
type Sub struct {
	f    func()
	poll bool
}

// source waits for the clock to be set.
// The watcher calls arm and interrupt with mu held, so an interrupt is
// never lost between the choice of a deadline and the wait.
type source interface {
	arm(deadline time.Time) // the next wait's deadline (zero: none)
	// wait returns true when the clock may have been set, false at the
	// deadline or when interrupted, and an error once closed.
	wait() (bool, error)
	interrupt() // makes a pending or the next wait return false
	close()
	hearsSteps() bool // false: it only keeps time, the watcher must poll
}

var (
	mu      sync.Mutex
	subs    = map[*Sub]struct{}{}
	polls   int     // subscribers that poll
	running *runner // nil while nobody subscribes

	runs    atomic.Int64 // watchers running: 0 or 1
	reports atomic.Int64 // reports made, for tests
)

type runner struct {
	src  source
	done chan struct{}
	stop atomic.Bool
}

// Running is how many watchers run in this process: 0 or 1.
func Running() int64 { return runs.Load() }

// Reports is how many reports the watchers of this process made so far.
func Reports() int64 { return reports.Load() }

// Subscribe calls f, on the watcher's goroutine, after the wall clock may
// have been set; with poll, also every Period (the others are not told of
// another's poll, unless the watcher cannot hear steps and polls for all). f must not block. The
// watcher is armed when Subscribe returns: a step after that is reported.
func Subscribe(f func(), poll bool) *Sub {
	s := &Sub{f: f, poll: poll}
	mu.Lock()
	defer mu.Unlock()
	subs[s] = struct{}{}
	if poll {
		polls++
	}
	if running == nil {
		r := &runner{src: newSource(), done: make(chan struct{})}
		running = r
		runs.Add(1)
		go r.loop()
	} else if poll && polls == 1 {
		running.src.interrupt() // it slept without a deadline
	}
	return s
}

// Poll makes the subscription poll from now on.
func (s *Sub) Poll() {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := subs[s]; !ok || s.poll {
		return
	}
	s.poll = true
	polls++
	if polls == 1 && running != nil {
		running.src.interrupt()
	}
}

// Cancel ends the subscription; the last one stops the watcher. f is not
// called once Cancel returned.
func (s *Sub) Cancel() {
	mu.Lock()
	if _, ok := subs[s]; !ok {
		mu.Unlock()
		return
	}
	delete(subs, s)
	if s.poll {
		polls--
	}
	var r *runner
	if len(subs) == 0 {
		r, running = running, nil
	}
	mu.Unlock()
	if r != nil {
		r.stop.Store(true)
		r.src.close()
		<-r.done
		runs.Add(-1)
		return
	}
	// The watcher may be calling f right now: wait for its report to end.
	reporting.Lock()
	reporting.Unlock() //nolint:staticcheck // a barrier
}

// reporting is held while the watcher calls its subscribers.
var reporting sync.Mutex

func (r *runner) loop() {
	defer close(r.done)
	for {
		mu.Lock()
		hears := r.src.hearsSteps()
		poll := polls > 0 || !hears
		var deadline time.Time
		if poll {
			deadline = time.Now().Add(Period())
		}
		r.src.arm(deadline)
		mu.Unlock()
		stepped, err := r.src.wait()
		if err != nil || r.stop.Load() {
			return
		}
		if !stepped && !poll {
			continue // interrupted: a subscriber now polls
		}
		reporting.Lock()
		mu.Lock()
		fs := make([]func(), 0, len(subs))
		for s := range subs {
			if stepped || s.poll || !hears { // a poll's report is for those that poll
				fs = append(fs, s.f)
			}
		}
		mu.Unlock()
		if !r.stop.Load() {
			reports.Add(1)
			for _, f := range fs {
				f()
			}
		}
		reporting.Unlock()
	}
}

// ticker is the source that hears no steps: it only keeps time.
type ticker struct {
	deadline time.Time
	kick     chan struct{}
	closed   chan struct{}
	once     sync.Once
}

func newTicker() *ticker {
	return &ticker{kick: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (t *ticker) arm(deadline time.Time) { t.deadline = deadline }

func (t *ticker) wait() (bool, error) {
	var c <-chan time.Time
	if !t.deadline.IsZero() {
		tm := time.NewTimer(time.Until(t.deadline))
		defer tm.Stop()
		c = tm.C
	}
	select {
	case <-c:
		return false, nil
	case <-t.kick:
		return false, nil
	case <-t.closed:
		return false, errClosed
	}
}

func (t *ticker) interrupt() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *ticker) close()           { t.once.Do(func() { close(t.closed) }) }
func (t *ticker) hearsSteps() bool { return false }
