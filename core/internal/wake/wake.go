// Package wake owns the waiters of one authority: per key (a production id)
// a FIFO of waiters, woken one at a time, with one timer per key for the
// earliest moment worth a look (a claim's expiry, the safety poll).
//
// The protocol that makes a wake-up impossible to lose:
//
//  1. a waiter joins its key's queue before it looks at the store;
//  2. before each look it calls Arm, which forgets the wake it was given;
//  3. a wake given to a waiter after Arm is kept (its channel holds it),
//     so a commit that lands during the look is seen by the next look;
//  4. only the head of a queue looks: a waiter behind it that wants to
//     look (it just joined, or its clock check says the last look that
//     found nothing no longer stands) wakes the head instead (MayLook).
//
// A wake signals the head of the queue only; a head already signalled
// (about to look) absorbs it, because its look will see that commit too. A
// waiter that leaves after claiming, or while it holds an unconsumed wake,
// passes the wake to the next head (more work may be there); one that found
// nothing just waits again. So N waiters and one new job cost one look that
// succeeds and at most one more that finds nothing.
//
// Looks are also not repeated for nothing: every wake, timer and Invalidate
// advances the hub's epoch, and a look that found nothing is remembered with
// the epoch it started at. A waiter that joins while that epoch is current
// (nothing happened since), before the look's next timer and within the
// safety poll, need not look: callers that wait in short slices cost no
// reads.
package wake

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrClosed is Join's answer once the hub is closed.
var ErrClosed = errors.New("wake: hub is closed")

// Hub is the set of waiters of one authority. The zero value is not usable:
// use New.
type Hub struct {
	safety time.Duration // the safety poll; 0: none

	mu     sync.Mutex
	queues map[string]*queue
	closed bool
	done   chan struct{}
	epoch  uint64               // advanced by every wake, timer and Invalidate
	quiet  map[string]quietLook // the last look that found nothing, per key
}

// quietLook is a look that found nothing: at epoch, at, and the time it
// asked to be woken (zero: none).
type quietLook struct {
	epoch  uint64
	at     time.Time
	wakeAt time.Time
}

type queue struct {
	head, tail *Waiter
	timer      *time.Timer
	due        time.Time // when timer fires; zero when no timer
	gen        uint64    // which timer is current
}

// Waiter is one blocked call waiting for work of one key.
type Waiter struct {
	h          *Hub
	q          *queue
	key        string
	prev, next *Waiter
	c          chan struct{} // holds at most one wake
	signalled  bool          // a wake is in c and not yet armed away
	gone       bool
}

// New returns a hub whose queues wake their head at least every safety
// (jittered by ±20%), whatever else happens: the safety poll. 0 means none.
func New(safety time.Duration) *Hub {
	return &Hub{safety: safety, queues: map[string]*queue{}, done: make(chan struct{}), quiet: map[string]quietLook{}}
}

// Done is closed when the hub closes.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Join appends a waiter to key's queue. look is false when the last look
// at key found nothing and nothing happened since: the waiter may wait
// without looking.
func (h *Hub) Join(key string) (w *Waiter, look bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, ErrClosed
	}
	q := h.queues[key]
	if q == nil {
		q = &queue{}
		h.queues[key] = q
	}
	w = &Waiter{h: h, q: q, key: key, c: make(chan struct{}, 1), prev: q.tail}
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	now := time.Now()
	if q.timer == nil && h.safety > 0 {
		h.scheduleLocked(q, now.Add(h.safetyInterval()))
	}
	ql, known := h.quiet[key]
	look = !known || ql.epoch != h.epoch || (h.safety > 0 && now.Sub(ql.at) >= h.safety) ||
		(!ql.wakeAt.IsZero() && !now.Before(ql.wakeAt))
	if !look && !ql.wakeAt.IsZero() {
		h.scheduleLocked(q, ql.wakeAt)
	}
	return w, look, nil
}

// Arm forgets a wake already delivered, so that the next one is kept: call
// it before every look at the store. It returns the epoch the look starts
// at, for FoundNothing.
func (w *Waiter) Arm() uint64 {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.signalled = false
	select {
	case <-w.c:
	default:
	}
	return w.h.epoch
}

// MayLook reports whether this waiter may look at the store now: only the
// head of its queue looks (and claims), so that waiters that want to look
// at once (one joining while the head looks, every waiter checking the
// clock) cost one look and at most one claim, never one each. A waiter
// behind the head hands its look over: it forgets the wake it holds and
// wakes the head instead. The head's next look starts after this call (a
// head already woken has not yet armed; one looking or claiming keeps the
// wake for its next look, or passes it on when it leaves), so it sees all
// this waiter would have seen.
func (w *Waiter) MayLook() bool {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.gone || w.q.head == w {
		return true
	}
	w.signalled = false
	select {
	case <-w.c:
	default:
	}
	signalLocked(w.q.head)
	return false
}

// FoundNothing records that the look started at epoch, at the local time
// started, found nothing, and that something may become claimable by itself
// wakeAfter after started (0: nothing will). The waiter's queue is woken
// then (never sooner than minWake from now); until then, and until anything
// happens, a joining waiter need not look. started must be taken before the
// look read the authority's clock, so that the remembered time is never
// later than the one the look saw coming.
func (w *Waiter) FoundNothing(epoch uint64, started time.Time, wakeAfter, minWake time.Duration) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ql := quietLook{epoch: epoch, at: started}
	if wakeAfter > 0 {
		ql.wakeAt = started.Add(wakeAfter)
		if !w.gone {
			h.scheduleLocked(w.q, later(ql.wakeAt, time.Now().Add(minWake)))
		}
	}
	if old, ok := h.quiet[w.key]; !ok || old.epoch <= epoch {
		h.quiet[w.key] = ql
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Invalidate forgets every look that found nothing: something may have
// happened that no wake reported (a watcher started or stopped).
func (h *Hub) Invalidate() {
	h.mu.Lock()
	h.epoch++
	h.mu.Unlock()
}

// C delivers the waiter's wakes.
func (w *Waiter) C() <-chan struct{} { return w.c }

// WakeIn asks for a wake of this waiter's queue after d at the latest (the
// queue's timer moves earlier, never later).
func (w *Waiter) WakeIn(d time.Duration) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if w.gone {
		return
	}
	w.h.scheduleLocked(w.q, time.Now().Add(d))
}

// Leave removes the waiter. With passOn, or when it leaves holding a wake it
// did not act on, the next head is woken in its place.
func (w *Waiter) Leave(passOn bool) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.gone {
		return
	}
	w.gone = true
	pass := passOn || w.signalled
	q := w.q
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	if q.head == nil {
		if q.timer != nil {
			q.timer.Stop()
			q.timer, q.due = nil, time.Time{}
		}
		if h.queues[w.key] == q {
			delete(h.queues, w.key)
		}
		return
	}
	if pass {
		signalLocked(q.head)
	}
}

// Wake wakes the head of key's queue, if it has one.
func (h *Hub) Wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	if q := h.queues[key]; q != nil && q.head != nil {
		signalLocked(q.head)
	}
}

// WakeAny wakes the head of every queue: something changed, and which key
// it concerns is not known.
func (h *Hub) WakeAny() { h.wakeQueues(false) }

// WakeAll wakes every waiter of every queue.
func (h *Hub) WakeAll() { h.wakeQueues(true) }

func (h *Hub) wakeQueues(all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	for _, q := range h.queues {
		for w := q.head; w != nil; w = w.next {
			signalLocked(w)
			if !all {
				break
			}
		}
	}
}

// Waiting is how many waiters the hub holds.
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, q := range h.queues {
		for w := q.head; w != nil; w = w.next {
			n++
		}
	}
	return n
}

// Close closes Done and refuses later joins. Waiters still in a queue see
// Done; they leave by themselves.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	for _, q := range h.queues {
		if q.timer != nil {
			q.timer.Stop()
			q.timer, q.due = nil, time.Time{}
		}
	}
}

func signalLocked(w *Waiter) {
	if w.signalled {
		return
	}
	w.signalled = true
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func (h *Hub) safetyInterval() time.Duration {
	if h.safety <= 0 {
		return 0
	}
	return time.Duration(float64(h.safety) * (0.8 + 0.4*rand.Float64()))
}

// scheduleLocked makes q's timer fire at at, unless it fires earlier already.
func (h *Hub) scheduleLocked(q *queue, at time.Time) {
	if h.closed {
		return
	}
	if q.timer != nil && !q.due.After(at) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.due = at
	q.gen++
	gen := q.gen
	q.timer = time.AfterFunc(time.Until(at), func() { h.fire(q, gen) })
}

// fire wakes q's head, then re-arms the safety poll.
func (h *Hub) fire(q *queue, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.timer == nil || q.gen != gen { // replaced or stopped after it had started to fire
		return
	}
	q.timer, q.due = nil, time.Time{}
	h.epoch++ // the time asked for has come: a look is due
	if q.head == nil {
		return
	}
	signalLocked(q.head)
	if s := h.safetyInterval(); s > 0 {
		h.scheduleLocked(q, time.Now().Add(s))
	}
}
