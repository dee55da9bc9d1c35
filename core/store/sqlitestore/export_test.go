package sqlitestore

import (
	"context"
	"testing"

	"github.com/libleases/libleases/core/store"
)

// Seams for the tests of package sqlitestore_test, which drive the lease
// rules (package core) over a handle whose groups the test holds open.

// GroupsStayOpenForTest is groupsStayOpen.
func GroupsStayOpenForTest(t *testing.T) { groupsStayOpen(t) }

// UntilQueuedForTest waits until n writers wait in s's queue.
func UntilQueuedForTest(t *testing.T, s *DB, n int) { untilQueued(t, s.writers, n) }

// LoseGroupForTest is loseGroup: tx, begun on wctx, holds the group.
func LoseGroupForTest(t *testing.T, tx store.Tx, wctx context.Context, cancel context.CancelFunc, full bool) {
	loseGroup(t, tx.(*Tx), wctx, cancel, full)
}
