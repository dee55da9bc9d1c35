// Group commit: the writers of one handle that queue behind each other share
// one SQLite transaction and its one COMMIT (docs/schema.md, "Writers of one
// process", and docs/decisions.md, "Group commit").
package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/libleases/libleases/core/store"
)

// groupMaxOpen is how long a group takes new members after its BEGIN. The
// group holds the file's writer lock, so this bounds what other processes
// (in SQLite's busy handler) and the writers of this process's other
// handles (in the queue) wait beyond one write: time is what they wait, so
// the cap is a time, not a member count (which would need a guess at a
// member's length). A few milliseconds is several members' work at 16
// goroutines, and well under one sleep of SQLite's busy handler (up to
// 100 ms), so another process barely notices it.
// A variable only so that tests can hold a group open while they queue
// writers behind it.
var groupMaxOpen = 5 * time.Millisecond

// memberSavepoint is each member's savepoint. Members follow each other, so
// at most one is open at a time and one name serves them all.
const memberSavepoint = "member"

// group is one SQLite transaction on a handle's writer connection, run by
// its members one after the other: the writer that sent BEGIN, then each
// writer of the handle that was first in the queue when the one before it
// ended its part. Each member's writes but the first's sit in a savepoint
// of its own, so a member that rolls back undoes only its own. A member that commits
// releases its savepoint and waits for the group's outcome; so does one
// after the first that rolls back, whose answer (a refusal) may rest on
// what the members before it wrote: no answer comes from a write that is
// not durable (Tx.Rollback). The member that
// finds no writer of the handle next in the queue (or the group past
// groupMaxOpen) ends the group: COMMIT if any member released, then the turn
// passes on. Only the member holding the turn touches the fields; the turn
// passes through the queue's lock, and done publishes err.
type group struct {
	s     *DB
	conn  *sql.Conn // the handle's writer connection, in BEGIN IMMEDIATE until the group ends
	ctx   context.Context
	stop  context.CancelFunc // ends ctx, the transaction's own context
	begun time.Time

	// restore, when not "", is the synchronous level to set conn back to
	// once the group ends: its one member is redoable (store.Redoable) and
	// committed at NORMAL. Such a group is never handed on.
	restore string

	released int   // members whose writes wait for the COMMIT
	lost     error // SQLite rolled the whole transaction back (or its state is unknown)
	cause    error // a statement's failure the released members must see if the transaction is lost

	err  error         // the outcome for the released members, once done is closed
	done chan struct{} // closed when the group has ended
}

// join opens the member's savepoint. The statement runs on the group's own
// context: SQLite would roll back the whole transaction if it were
// interrupted, and the member's context was looked at just before.
func (g *group) join() error {
	if err := g.s.writer.run(g.ctx, g.conn, "SAVEPOINT "+memberSavepoint); err != nil {
		g.lose(err)
		return classify(err)
	}
	return nil
}

// release keeps the member's writes for the group's COMMIT.
func (g *group) release() error {
	if err := g.s.writer.run(g.ctx, g.conn, "RELEASE "+memberSavepoint); err != nil {
		g.lose(err)
		return classify(err)
	}
	g.released++
	return nil
}

// undo rolls back the member's savepoint. SQLite rolls back the whole
// transaction after some failures (a full disk, an I/O error, an
// interrupted write, out of memory): the savepoint is then gone, and with
// it every write of the members before.
func (g *group) undo() error {
	err := g.s.writer.run(g.ctx, g.conn, "ROLLBACK TO "+memberSavepoint)
	if err == nil {
		err = g.s.writer.run(g.ctx, g.conn, "RELEASE "+memberSavepoint)
	}
	if err != nil {
		g.lose(err)
		return classify(err)
	}
	g.cause = nil // that member's failure is undone with it
	return nil
}

func (g *group) lose(err error) {
	if g.lost == nil {
		g.lost = err
	}
}

// note keeps a failed statement's error if it is one the released members
// must see should it have cost the transaction: the disk is full, the file
// is damaged or cannot be written. Running their writes again would only
// meet it again.
func (g *group) note(err error) {
	if err == nil || g.cause != nil {
		return
	}
	if c := classify(err); errors.Is(c, store.ErrFull) || errors.Is(c, store.ErrCorrupt) || errors.Is(c, store.ErrReadOnly) {
		g.cause = c
	}
}

// pass ends the holder's part: it hands the open group to the next writer
// of the handle, if that writer is first in the queue and the group may
// still grow, and otherwise ends the group.
func (g *group) pass() {
	if g.lost == nil && g.restore == "" && !g.s.closing.Load() && time.Since(g.begun) < groupMaxOpen &&
		g.s.writers.handOff(g.s.writer, g) {
		return
	}
	g.end()
}

// outcome is the group's outcome for a member that released (or rolled
// back after others released), once the group has ended. The member that
// ended it (a writer alone, every time) has it at once, with no timer. No
// member runs its caller's code (an edit never joins a group: handOff), so
// the group ends within its members' statements; the wait is still bounded,
// to the busy timeout since the member's Commit or Rollback began (since),
// in case a member is stalled: the outcome is then unknown, never reported
// done. That bounds the time from a member's last clock sample (core's, just
// before its Commit: then only the mark's write) to a durable COMMIT it
// reports done (docs/CLOCK.md, "Group commit").
func (g *group) outcome(since time.Time) error {
	select {
	case <-g.done:
		return g.err
	default:
	}
	timer := time.NewTimer(time.Until(since.Add(g.s.busy)))
	defer timer.Stop()
	select {
	case <-g.done:
		return g.err
	case <-timer.C:
		return fmt.Errorf("%w: the transaction this write shares with other writers of the handle did not commit "+
			"within the busy timeout (%s); the write may still commit with it", store.ErrBusy, g.s.busy)
	}
}

// ended reports whether the group has ended (its outcome is known).
func (g *group) ended() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// end commits the released members' writes (or rolls back a group with
// none), tells every member the outcome, and passes the turn on. As for a
// lone writer before, a connection whose COMMIT or ROLLBACK failed is
// closed before the next writer comes in, and the WAL keeper looks at the
// WAL before the turn passes on (walKeeper.committed).
func (g *group) end() {
	s := g.s
	failed := false
	switch {
	case g.lost != nil:
		g.err = g.lostErr()
		g.s.writer.run(context.Background(), g.conn, "ROLLBACK") // SQLite has none open any more, or its state is unknown: the connection goes
		failed = true
	case g.released == 0:
		g.err = g.s.writer.run(context.Background(), g.conn, "ROLLBACK") // nobody waits for it: the first member's Rollback reports it
		failed = g.err != nil
	default:
		if err := g.s.writer.run(context.Background(), g.conn, "COMMIT"); err != nil {
			// SQLite may still be in the transaction: the connection goes
			// (discard), which rolls it back.
			failed = true
			g.err = s.file.explain(classify(err))
		} else if err := s.file.check(); err != nil {
			// Committed, but into the file the path names? If it was removed
			// or replaced meanwhile, no member may read this as done (core
			// reports the outcome unknown).
			s.file.release()
			g.err = err
		} else {
			s.wal.committed()
		}
	}
	g.stop()
	if !failed && g.restore != "" && !s.writer.setLevel(g.conn, g.restore) {
		failed = true // never let the next writer commit at NORMAL
	}
	s.writer.txEnded()
	if failed {
		s.writer.discard(g.conn)
	}
	s.writers.release()
	close(g.done)
}

// lostErr is what the released members of a lost transaction get: nothing
// of theirs was written (store.ErrNotCommitted), though their own writes
// had all succeeded (store.ErrLostWithOthers), because of the failure
// noted (a full disk ...), or else a broken connection (store.ErrReconnect)
// or a failure another member met, which running their writes again
// should not meet (store.ErrRetry).
func (g *group) lostErr() error {
	cause := g.cause
	switch {
	case cause != nil:
	case errors.Is(g.lost, sql.ErrConnDone) || errors.Is(g.lost, driver.ErrBadConn):
		cause = fmt.Errorf("%w: the writer connection broke while writers of this handle shared its transaction (%v)",
			store.ErrReconnect, g.lost)
	default:
		cause = fmt.Errorf("%w: SQLite rolled back the transaction this write shared with other writers of the "+
			"handle, after another writer's statement failed (%v)", store.ErrRetry, g.lost)
	}
	return fmt.Errorf("%w: %w: %w", store.ErrNotCommitted, store.ErrLostWithOthers, cause)
}
