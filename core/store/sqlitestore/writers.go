// The queue in which the writers of one process wait for a file's writer
// lock, in the order they asked, and the one connection each handle writes
// through (docs/schema.md, "Writers of one process").
package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/libleases/libleases/core/store"
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
	waiters []*waiter // in arrival order
}

// waiter is one queued writer: the handle it writes through, and, once it
// is handed the turn, the open group it joins (nil: it begins its own).
type waiter struct {
	turn  chan struct{} // closed when handed the turn
	owner *writerConn
	alone bool // an edit's (store.HoldsCaller) or a redoable write's (store.Redoable): it never joins a group
	grp   *group
}

// acquire waits for this process's turn at the writer lock until ctx ends
// or deadline passes (ok false: then nothing is held). A writer handed the
// turn with an open group of its handle gets that group (group.go). A
// writer handed the turn just as its wait ends passes it on; handed a group
// then, it returns the group with ok false, and the caller must pass the
// group on (group.pass): only a writer of the handle can end it.
func (q *writerQueue) acquire(ctx context.Context, deadline time.Time, owner *writerConn) (g *group, ok bool) {
	q.mu.Lock()
	if !q.held && len(q.waiters) == 0 {
		q.held = true
		q.mu.Unlock()
		return nil, true
	}
	w := &waiter{turn: make(chan struct{}), owner: owner, alone: store.IsHoldingCaller(ctx) || store.IsRedoable(ctx)}
	q.waiters = append(q.waiters, w)
	q.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.turn:
		return w.grp, true
	case <-ctx.Done():
	case <-timer.C:
	}
	q.mu.Lock()
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.mu.Unlock()
			return nil, false
		}
	}
	g = w.grp
	q.mu.Unlock()
	if g == nil {
		q.release() // handed the turn meanwhile: it is ours to pass on
	}
	return g, false
}

// release passes the turn to the first waiter, or frees it.
func (q *writerQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.held = false
		return
	}
	close(q.pop().turn)
}

// handOff hands the turn, with the open group g of owner's handle, to the
// first waiter if it writes through that handle too, and reports whether
// it did. A waiter of another handle ahead is never jumped: the group then
// ends, and that waiter's turn comes next, in order. Nor is the group
// handed to an edit, whose transaction runs its caller's code: the members
// would wait on that code for their COMMIT (and an edit that completes a
// lease whose renewal waits in the group would wait for that renewal).
func (q *writerQueue) handOff(owner *writerConn, g *group) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 || q.waiters[0].owner != owner || q.waiters[0].alone {
		return false
	}
	next := q.pop()
	next.grp = g
	close(next.turn)
	return true
}

// pop removes the first waiter; q.mu is held.
func (q *writerQueue) pop() *waiter {
	next := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	return next
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
// other packages that check a write path waits its turn there. It makes
// the handle a store.SerialWriter: the background pruner's batches are
// small here.
func (s *DB) WaitingWriters() int { return s.writers.waiting() }

var _ store.SerialWriter = (*DB)(nil)

// writerConn is the one connection a handle writes through; readers keep
// the pool. The queue lets one writer of the process in at a time, so one
// connection is enough, and it is the one that stays warm: its prepared
// statements are ready, and its page cache is only dropped when another
// connection or process wrote since its last transaction. Taken from the
// pool, each write could land on another connection (the pool grows while
// readers run beside the writers), whose page cache WAL mode drops because
// the file changed under it, and which prepares every statement anew.
//
// Only the writer holding the turn uses it, so mu only guards against
// Close and a replacement.
type writerConn struct {
	db     *sql.DB
	mu     sync.Mutex
	conn   *sql.Conn // nil until the first write, and after a discard
	closed bool
	// stmts are the statements prepared on conn, by text (stmt).
	stmts map[string]*sql.Stmt
	// inTx: a transaction is open on conn, from its BEGIN to the end of
	// its group (txEnded); close waits for it (ended) before it closes
	// the statements, which must be closed before their connection.
	inTx  bool
	ended *sync.Cond
}

// stmt is text prepared on c, the writer connection, once: a write
// transaction's statements run on the connection itself, which is in the
// transaction, with no per-statement copy for the transaction
// (sql.Tx.StmtContext: a lock, an allocation and a registration each) and
// no goroutine per query watching the transaction's context, which the
// group's own context (it ends only once the group has) would need. A
// connection discarded meanwhile answers sql.ErrConnDone.
func (w *writerConn) stmt(ctx context.Context, c *sql.Conn, text string) (*sql.Stmt, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != c || c == nil {
		return nil, sql.ErrConnDone
	}
	if st, ok := w.stmts[text]; ok {
		return st, nil
	}
	st, err := c.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if w.stmts == nil {
		w.stmts = map[string]*sql.Stmt{}
	}
	w.stmts[text] = st
	return st, nil
}

// forgetStmts closes the statements prepared on the connection, which is
// in no transaction; w.mu is held. A connection database/sql closed by
// itself (a driver answer of ErrBadConn) has taken SQLite's statements
// with it: they are dropped, never closed again.
func (w *writerConn) forgetStmts() {
	if w.conn != nil && w.conn.Raw(func(any) error { return nil }) == nil {
		for _, st := range w.stmts {
			st.Close()
		}
	}
	w.stmts = nil
}

// txEnded records that the transaction open on the connection has ended
// (its group's end, or a BEGIN that opened none).
func (w *writerConn) txEnded() {
	w.mu.Lock()
	w.inTx = false
	if w.ended != nil {
		w.ended.Broadcast()
	}
	w.mu.Unlock()
}

// begin sends BEGIN IMMEDIATE on the writer connection (run), opening one first
// if there is none. A connection database/sql has given up on (a driver
// answer of ErrBadConn closes it) is replaced once, at once: a broken
// connection must not poison the handle. Any other failure of BEGIN short
// of busy discards the connection too, so the next writer starts on a
// fresh one rather than one left in an unknown state: that includes a
// BEGIN that took effect just as ctx ended, which the driver reports as
// the context's error.
//
// lowered first sets the connection's synchronous level to NORMAL, for a
// redoable transaction (store.Redoable); the caller sets level back once
// the transaction has ended (group.end). A BEGIN that fails sets it back at
// once, and a connection whose level cannot be set back is discarded:
// no other transaction may ever commit on it at NORMAL.
func (w *writerConn) begin(ctx context.Context, lowered bool, level string) (*sql.Conn, error) {
	for retried := false; ; retried = true {
		c, err := w.get(ctx)
		if err != nil {
			return nil, err
		}
		if lowered {
			if _, err := c.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
				w.discard(c) // its level is unknown
				return nil, err
			}
		}
		err = w.run(ctx, c, "BEGIN IMMEDIATE")
		if err == nil {
			w.mu.Lock()
			w.inTx = true
			w.mu.Unlock()
			return c, nil
		}
		gone := errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)
		if gone || !errors.Is(classify(err), store.ErrBusy) || (lowered && !w.setLevel(c, level)) {
			w.discard(c)
		}
		if gone && !retried {
			continue
		}
		return nil, err
	}
}

// run runs text, a statement without rows or arguments (BEGIN, COMMIT,
// ROLLBACK, a savepoint's), prepared once on c (stmt). A statement that
// fails leaves the transaction as SQLite left it: a caller that cannot
// tell ends it by discarding c (closing it rolls back).
func (w *writerConn) run(ctx context.Context, c *sql.Conn, text string) error {
	st, err := w.stmt(ctx, c, text)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx)
	return err
}

func (w *writerConn) get(ctx context.Context) (*sql.Conn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errors.New("sql: database is closed")
	}
	if w.conn == nil {
		c, err := w.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		// Its commits never checkpoint: the WAL keeper does, off the
		// writers' turn (WALAutoCheckpoint).
		if _, err := c.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
			c.Raw(func(any) error { return driver.ErrBadConn })
			return nil, err
		}
		w.conn = c
	}
	return w.conn, nil
}

// setLevel sets c's synchronous level back to the authority's (level), on
// a context of its own: it must run even once the writer's has ended.
func (w *writerConn) setLevel(c *sql.Conn, level string) bool {
	_, err := c.ExecContext(context.Background(), "PRAGMA synchronous="+level)
	return err == nil
}

// discard closes c for good (not back into the pool) and forgets it; the
// next writer opens another. c must not be in a transaction.
func (w *writerConn) discard(c *sql.Conn) {
	w.mu.Lock()
	if w.conn == c {
		w.forgetStmts()
		w.conn = nil
	}
	w.mu.Unlock()
	c.Raw(func(any) error { return driver.ErrBadConn }) // database/sql closes a connection that answers ErrBadConn
}

// close returns the connection to the pool, which closes it with the rest.
func (w *writerConn) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	// A transaction still open on the connection ends first, as closing
	// the connection alone would wait for it.
	if w.ended == nil {
		w.ended = sync.NewCond(&w.mu)
	}
	for w.inTx {
		w.ended.Wait()
	}
	w.forgetStmts()
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}
