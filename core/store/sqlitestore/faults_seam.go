//go:build leasestest

package sqlitestore

import "database/sql"

// SharedForTest reports whether t's transaction holds the writes of
// members that released into it before t. Test builds only.
func (t *Tx) SharedForTest() bool { return !t.first && t.g.released > 0 }

// LoseGroupForTest ends t as a member whose failure made SQLite roll back
// the whole transaction of its group, as an I/O error or an interrupted
// write does: nothing of any member is written. It rolls the transaction
// back on SQLite's side, then rolls t back; the group then ends lost, and
// the members that released into it before t are told so (group.lostErr).
// A member alone in its group (the first) only rolls back. It reports how
// many members had released before t. Test builds only: the fault seam of
// package core (core.CommitGroupLost) calls it.
func (t *Tx) LoseGroupForTest() (released int, err error) {
	if t.ended {
		return 0, sql.ErrTxDone
	}
	released = t.g.released
	if !t.first {
		if _, err := t.g.conn.ExecContext(t.g.ctx, "ROLLBACK"); err != nil {
			t.Rollback()
			return released, err
		}
	}
	t.Rollback() // its error tells of the lost group, which the caller knows
	return released, nil
}
