// The queue in which the writers of one process wait for a file's writer
// lock, in the order they asked (docs/schema.md, "Writers of one process").
package sqlitestore

import (
	"context"
	"os"
	"sync"
	"time"
)

// writerQueue hands a file's writer lock from one writer of this process
// to the next in FIFO order. SQLite's own wait, its busy handler, sleeps
// with back-off (up to 100 ms a sleep) and retries: writers of one process
// then overtake each other at random, and one that keeps losing waits far
// longer than the rest. Only the writer at the head of this queue asks
// SQLite for the lock, so the busy handler is left to waiting for other
// processes. sync.Mutex is not used: it is not FIFO (a goroutine that
// arrives while the lock is free barges in) and its wait cannot end with a
// context or a timeout.
type writerQueue struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{} // in arrival order; closed when handed the turn
}

// acquire waits for this process's turn at the writer lock until ctx ends
// or deadline passes (ok false: then nothing is held). A writer that is
// handed the turn just as its wait ends passes it on.
func (q *writerQueue) acquire(ctx context.Context, deadline time.Time) (ok bool) {
	q.mu.Lock()
	if !q.held && len(q.waiters) == 0 {
		q.held = true
		q.mu.Unlock()
		return true
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	q.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-turn:
		return true
	case <-ctx.Done():
	case <-timer.C:
	}
	q.mu.Lock()
	for i, w := range q.waiters {
		if w == turn {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.mu.Unlock()
			return false
		}
	}
	q.mu.Unlock()
	q.release() // handed the turn meanwhile: it is ours to pass on
	return false
}

// release passes the turn to the first waiter, or frees it.
func (q *writerQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.held = false
		return
	}
	next := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	close(next)
}

// waiting is how many writers wait behind the one holding the turn.
func (q *writerQueue) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}

// Every handle of this process on one file shares its queue: a program
// whose threads each open their own handle (a thread pool in Python, a
// connection per task) is served in order too. A file is its device and
// inode (os.SameFile), held by each handle's anchor, so the number is not
// reused while the entry lives.
var writerQueues struct {
	mu      sync.Mutex
	entries []*queueEntry
}

type queueEntry struct {
	file os.FileInfo
	refs int
	q    *writerQueue
}

// queueFor returns the queue of the file fi names, counting one more
// handle on it; each call is matched by one call of dropQueue.
func queueFor(fi os.FileInfo) *writerQueue {
	writerQueues.mu.Lock()
	defer writerQueues.mu.Unlock()
	for _, e := range writerQueues.entries {
		if os.SameFile(e.file, fi) {
			e.refs++
			return e.q
		}
	}
	e := &queueEntry{file: fi, refs: 1, q: &writerQueue{}}
	writerQueues.entries = append(writerQueues.entries, e)
	return e.q
}

// dropQueue forgets a closed handle; the last one removes the entry.
func dropQueue(q *writerQueue) {
	writerQueues.mu.Lock()
	defer writerQueues.mu.Unlock()
	for i, e := range writerQueues.entries {
		if e.q == q {
			if e.refs--; e.refs == 0 {
				writerQueues.entries = append(writerQueues.entries[:i], writerQueues.entries[i+1:]...)
			}
			return
		}
	}
}

// WaitingWriters is how many writers of this process wait for the file's
// writer lock behind the one holding it: the queue's length, for tests of
// other packages that check a write path waits its turn there.
func (s *DB) WaitingWriters() int { return s.writers.waiting() }
