// Tests of group commit: writers of one handle queued behind each other
// share one transaction and one COMMIT (group.go).
package sqlitestore

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// groupsStayOpen lets a group take members however long it has been open:
// these tests hold a group's first writer while they queue others behind it.
func groupsStayOpen(t *testing.T) {
	old := groupMaxOpen
	groupMaxOpen = time.Hour
	t.Cleanup(func() { groupMaxOpen = old })
}

// walCommits counts the commits in the database's WAL: frames of the
// current WAL (their salts match the header's) whose header records the
// database size, which only a transaction's last frame does. Nothing here
// checkpoints (no test writes anywhere near WALAutoCheckpoint pages).
func walCommits(t *testing.T, s *DB) int {
	t.Helper()
	b, err := os.ReadFile(s.path + "-wal")
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	if len(b) < 32 {
		return 0
	}
	page := int(binary.BigEndian.Uint32(b[8:12]))
	salt1, salt2 := b[16:20], b[20:24]
	n := 0
	for off := 32; off+24+page <= len(b); off += 24 + page {
		h := b[off : off+24]
		if string(h[8:12]) != string(salt1) || string(h[12:16]) != string(salt2) {
			break
		}
		if binary.BigEndian.Uint32(h[4:8]) != 0 {
			n++
		}
	}
	return n
}

// holdWrite begins a write on s and inserts name, leaving it open.
func holdWrite(t *testing.T, s *DB, name string) store.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: name, CreatedAt: 1}))
	return tx
}

// queuedBegin begins a write on s in a goroutine (it queues); the channel
// gets the open transaction once it is this writer's turn.
func queuedBegin(t *testing.T, s *DB, ctx context.Context) <-chan store.Tx {
	t.Helper()
	got := make(chan store.Tx, 1)
	go func() {
		tx, err := s.BeginWrite(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- tx
	}()
	return got
}

func commitAsync(tx store.Tx) <-chan error {
	done := make(chan error, 1)
	go func() { done <- tx.Commit() }()
	return done
}

func requireNotYet(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before the group's COMMIT", what, err)
	default:
	}
}

// openGroup opens a handle of a fresh file whose groups stay open, and
// begins the holder's write that the test queues writers behind; before is
// the WAL's commit count before it.
func openGroup(t *testing.T, file string) (s *DB, holder store.Tx, before int) {
	t.Helper()
	groupsStayOpen(t)
	s = openWriters(t, filepath.Join(t.TempDir(), file), time.Minute)
	before = walCommits(t, s)
	return s, holdWrite(t, s, "holder"), before
}

func TestWritersOfOneHandleQueuedBehindAHolderCommitInOneTransaction(t *testing.T) {
	s, holder, before := openGroup(t, "group.db")
	ctx := context.Background()
	const n = 8
	var results []<-chan error
	for i := 0; i < n; i++ {
		results = append(results, writeProduction(s, ctx, string(rune('a'+i))))
		untilQueued(t, s.writers, i+1)
	}
	require.NoError(t, holder.Commit())
	for _, r := range results {
		require.NoError(t, <-r, "each member gets its own result")
	}
	require.Equal(t, 1, walCommits(t, s)-before, "the holder and the writers queued behind it shared one COMMIT")
	require.Len(t, productionNames(t, s), n+1)
	require.Zero(t, s.writers.waiting())
}

func TestAGroupMemberThatRollsBackUndoesOnlyItsOwnWrites(t *testing.T) {
	s, holder, before := openGroup(t, "member.db")
	ctx := context.Background()
	first := writeProduction(s, ctx, "first")
	untilQueued(t, s.writers, 1)
	failing := make(chan error, 1)
	go func() {
		tx, err := s.BeginWrite(ctx)
		if err == nil {
			err = tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "failing", CreatedAt: 1})
			if err == nil { // the name is taken: the constraint refuses this one
				err = tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "holder", CreatedAt: 1})
			}
			require.NoError(t, tx.Rollback())
		}
		failing <- err
	}()
	untilQueued(t, s.writers, 2)
	last := writeProduction(s, ctx, "last")
	untilQueued(t, s.writers, 3)
	require.NoError(t, holder.Commit())
	require.NoError(t, <-first)
	require.ErrorIs(t, <-failing, store.ErrConstraint)
	require.NoError(t, <-last)
	require.Equal(t, map[string]bool{"holder": true, "first": true, "last": true}, productionNames(t, s),
		"the member that rolled back left nothing, the others all committed")
	require.Equal(t, 1, walCommits(t, s)-before)
}

// A member after the first reads the writes of the members before it,
// which are not durable until the group's COMMIT: whatever it then answers
// rests on them. So a member that rolls back (a rule's refusal) is
// answered, like one that commits, only once the group has ended: nil if
// the group committed, and if it did not, an error that says what it read
// may never have been written and that running it again may succeed.
func TestAMemberThatRollsBackAfterAnotherReleasedAnswersOnlyOnTheGroupsOutcome(t *testing.T) {
	for _, lost := range []bool{false, true} {
		name := "the group commits"
		if lost {
			name = "the group is lost"
		}
		t.Run(name, func(t *testing.T) {
			s, holder, _ := openGroup(t, "refusal.db")
			ctx := context.Background()
			refusing := queuedBegin(t, s, ctx)
			untilQueued(t, s.writers, 1)
			lctx, cancel := context.WithCancel(ctx)
			defer cancel()
			last := queuedBegin(t, s, lctx)
			untilQueued(t, s.writers, 2)
			held := commitAsync(holder)
			tx := <-refusing
			_, err := tx.ProductionByName(ctx, "holder")
			require.NoError(t, err, "the member reads the holder's released write")
			refused := make(chan error, 1)
			go func() { refused <- tx.Rollback() }()
			w := (<-last).(*Tx) // the refusing member has passed the group on
			time.Sleep(50 * time.Millisecond)
			early := false
			select {
			case err = <-refused:
				early = true
			default:
			}
			if lost {
				loseGroup(t, w, lctx, cancel, false)
				require.ErrorIs(t, <-held, store.ErrNotCommitted)
			} else {
				require.NoError(t, w.Commit())
				require.NoError(t, <-held)
			}
			require.False(t, early, "the refusing member's Rollback returned (%v) before the group ended", err)
			err = <-refused
			if lost {
				require.ErrorIs(t, err, store.ErrReadUncommitted, "the refusal read a write that was lost")
				require.ErrorIs(t, err, store.ErrRetry, "running it again reads what is durable")
				require.Empty(t, productionNames(t, s))
			} else {
				require.NoError(t, err, "what the refusal read was committed")
				require.Equal(t, map[string]bool{"holder": true}, productionNames(t, s))
			}
		})
	}
}

// A member that rolls back after others released waits for its group at
// most its busy timeout, as one that commits does: a group still open then
// has not committed what the member read, so it is told busy (what it read
// may never be written), not that it may go by what it read.
func TestAMemberThatRollsBackWaitsForItsGroupAtMostItsBusyTimeout(t *testing.T) {
	groupsStayOpen(t)
	const busy = 100 * time.Millisecond
	s := openWriters(t, filepath.Join(t.TempDir(), "stalled-refusal.db"), busy)
	ctx := context.Background()
	holder := holdWrite(t, s, "holder")
	refusing := queuedBegin(t, s, ctx)
	untilQueued(t, s.writers, 1)
	last := queuedBegin(t, s, ctx)
	untilQueued(t, s.writers, 2)
	held := commitAsync(holder)
	tx := <-refusing
	start := time.Now()
	refused := make(chan error, 1)
	go func() { refused <- tx.Rollback() }()
	w := <-last // holds the group past the refusing member's busy timeout
	err := <-refused
	waited := time.Since(start)
	require.ErrorIs(t, <-held, store.ErrBusy)
	require.NoError(t, w.Commit())
	require.GreaterOrEqual(t, waited, busy, "the Rollback returned (%v) while the group was open", err)
	require.ErrorIs(t, err, store.ErrReadUncommitted)
	require.ErrorIs(t, err, store.ErrBusy)
	require.NotErrorIs(t, err, store.ErrRetry, "running again would only queue behind the open group")
	require.Equal(t, map[string]bool{"holder": true}, productionNames(t, s))
}

// SQLite rolls back the whole transaction when a write inside it is
// interrupted: the members that had released their savepoints lose their
// writes too, and learn that nothing was written and that running again may
// succeed; the writer queued behind begins afresh and commits.
func TestALostGroupTransactionTellsTheReleasedMembersNothingWasWritten(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := "interrupted"
		if full {
			name = "after a full disk"
		}
		t.Run(name, func(t *testing.T) {
			s, holder, before := openGroup(t, "lost.db")
			ctx := context.Background()
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			joined := queuedBegin(t, s, wctx)
			untilQueued(t, s.writers, 1)
			behind := writeProduction(s, ctx, "behind")
			untilQueued(t, s.writers, 2)
			held := commitAsync(holder)
			loseGroup(t, (<-joined).(*Tx), wctx, cancel, full)
			err := <-held
			require.ErrorIs(t, err, store.ErrNotCommitted)
			if full {
				require.ErrorIs(t, err, store.ErrFull)
				require.NotErrorIs(t, err, store.ErrRetry)
			} else {
				require.ErrorIs(t, err, store.ErrRetry)
			}
			require.NoError(t, <-behind)
			require.Equal(t, map[string]bool{"behind": true}, productionNames(t, s), "the lost group wrote nothing")
			require.Equal(t, 1, walCommits(t, s)-before, "only the writer behind committed")
			require.Zero(t, s.writers.waiting())
		})
	}
}

// loseGroup makes SQLite roll back the whole transaction of w's group, as
// an interrupted write does: w, a member holding the group and begun on
// wctx, writes, then has a write of its own interrupted (cancel ends wctx),
// and rolls back. full first fills the file: the next page w needs fails
// with SQLITE_FULL, a failure the released members must see.
func loseGroup(t *testing.T, w *Tx, wctx context.Context, cancel context.CancelFunc, full bool) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, w.InsertProduction(wctx, store.Production{ID: uuid.NewString(), Name: "lost", CreatedAt: 1}))
	if full {
		var pages int
		require.NoError(t, w.tx.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages))
		_, err := w.tx.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.Itoa(pages))
		require.NoError(t, err)
		for i := 0; ; i++ {
			err = w.InsertProduction(wctx, store.Production{ID: uuid.NewString(), Name: "filler" + strconv.Itoa(i), CreatedAt: 1})
			if err != nil {
				break
			}
		}
		require.ErrorIs(t, err, store.ErrFull)
	}
	_, err := w.tx.ExecContext(wctx, `CREATE TEMP TABLE endless (x INTEGER)`)
	require.NoError(t, err)
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = w.tx.ExecContext(wctx, `INSERT INTO endless WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c`)
	require.Error(t, err, "the endless INSERT ended without its interrupt")
	require.Error(t, w.Rollback(), "SQLite had rolled the whole transaction back already")
}

func TestNothingAGroupMemberWroteIsVisibleBeforeTheGroupCommits(t *testing.T) {
	groupsStayOpen(t)
	s := openWriters(t, filepath.Join(t.TempDir(), "visible.db"), time.Minute)
	ctx := context.Background()
	holder := holdWrite(t, s, "holder")
	second := queuedBegin(t, s, ctx)
	untilQueued(t, s.writers, 1)
	third := queuedBegin(t, s, ctx)
	untilQueued(t, s.writers, 2)
	heldDone := commitAsync(holder)
	tx2 := <-second
	require.NoError(t, tx2.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "second", CreatedAt: 1}))
	secondDone := commitAsync(tx2)
	tx3 := <-third // the second released its savepoint and handed the group on
	defer tx3.Rollback()
	require.Empty(t, productionNames(t, s), "a reader saw a member's writes before the group's COMMIT")
	requireNotYet(t, heldDone, "the holder's Commit")
	requireNotYet(t, secondDone, "the second member's Commit")
	require.NoError(t, tx3.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "third", CreatedAt: 1}))
	require.NoError(t, tx3.Commit())
	require.NoError(t, <-heldDone)
	require.NoError(t, <-secondDone)
	require.Equal(t, map[string]bool{"holder": true, "second": true, "third": true}, productionNames(t, s))
}

// The head of the queue writes through another handle of the file: the
// group commits and that writer goes next, before a writer of the group's
// handle queued behind it.
func TestAGroupNeverJumpsAWriterOfAnotherHandleThatWaitsAhead(t *testing.T) {
	groupsStayOpen(t)
	path := filepath.Join(t.TempDir(), "order.db")
	h0, h1 := openWriters(t, path, time.Minute), openWriters(t, path, time.Minute)
	ctx := context.Background()
	before := walCommits(t, h0)
	holder := holdWrite(t, h0, "holder")
	var mu sync.Mutex
	var served []string
	serve := func(s *DB, name string) <-chan error {
		done := make(chan error, 1)
		go func() {
			tx, err := s.BeginWrite(ctx)
			if err == nil {
				mu.Lock()
				served = append(served, name)
				mu.Unlock()
				if err = tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: name, CreatedAt: 1}); err == nil {
					err = tx.Commit()
				}
			}
			done <- err
		}()
		return done
	}
	other := serve(h1, "other handle")
	untilQueued(t, h0.writers, 1)
	same := serve(h0, "same handle")
	untilQueued(t, h0.writers, 2)
	require.NoError(t, holder.Commit(), "the holder's Commit returned: its group did not wait for the writer behind")
	require.NoError(t, <-other)
	require.NoError(t, <-same)
	require.Equal(t, []string{"other handle", "same handle"}, served)
	require.Equal(t, 3, walCommits(t, h0)-before, "three transactions: nothing was grouped across the other handle")
}

// A member whose context ends before its Commit is abandoned: its own
// writes are rolled back, and the group's other members commit.
func TestAGroupMemberWhoseContextEndsBeforeItsCommitIsAbandonedAndTheGroupGoesOn(t *testing.T) {
	s, holder, before := openGroup(t, "abandoned.db")
	ctx := context.Background()
	wctx, cancel := context.WithCancel(ctx)
	joined := queuedBegin(t, s, wctx)
	untilQueued(t, s.writers, 1)
	last := writeProduction(s, ctx, "last")
	untilQueued(t, s.writers, 2)
	heldDone := commitAsync(holder)
	tx := <-joined
	require.NoError(t, tx.InsertProduction(wctx, store.Production{ID: uuid.NewString(), Name: "abandoned", CreatedAt: 1}))
	cancel()
	err := tx.Commit()
	require.ErrorIs(t, err, store.ErrAbandoned)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, <-heldDone)
	require.NoError(t, <-last)
	require.Equal(t, map[string]bool{"holder": true, "last": true}, productionNames(t, s))
	require.Equal(t, 1, walCommits(t, s)-before)
}

// A writer handed the open group just as its wait ends (its context ended)
// gets the group back from acquire, to pass on: the group is never left
// with nobody to end it.
func TestAWriterHandedTheGroupAsItsWaitEndsGetsItToPassOn(t *testing.T) {
	var q writerQueue
	owner := &writerConn{}
	handed := 0
	for i := 0; i < 200; i++ {
		_, ok := q.acquire(context.Background(), time.Now().Add(time.Minute), owner)
		require.True(t, ok)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan *group, 1)
		go func() {
			g, _ := q.acquire(ctx, time.Now().Add(time.Minute), owner)
			got <- g
		}()
		untilQueued(t, &q, 1)
		g := &group{}
		go cancel()
		if q.handOff(owner, g) {
			handed++
			require.Same(t, g, <-got, "the group handed on was dropped")
		} else { // the writer left the queue first: the turn is still ours
			require.Nil(t, <-got)
		}
		q.release()
	}
	require.Positive(t, handed)
	require.Zero(t, q.waiting())
}

// A member that released its writes waits for the group's COMMIT at most its
// busy timeout: the member holding the group may wait for something the
// first one's caller holds (an edit runs the caller's code inside its
// transaction). It then learns the outcome is unknown (busy, not done), and
// its writes still commit with the group.
func TestAGroupMemberWaitsForTheGroupsCommitAtMostItsBusyTimeout(t *testing.T) {
	groupsStayOpen(t)
	const busy = 100 * time.Millisecond
	s := openWriters(t, filepath.Join(t.TempDir(), "stalled.db"), busy)
	ctx := context.Background()
	holder := holdWrite(t, s, "holder")
	joined := queuedBegin(t, s, ctx)
	untilQueued(t, s.writers, 1)
	start := time.Now()
	heldDone := commitAsync(holder)
	tx := <-joined
	err := <-heldDone
	require.ErrorIs(t, err, store.ErrBusy)
	require.Contains(t, err.Error(), "may still commit")
	require.GreaterOrEqual(t, time.Since(start), busy)
	require.Empty(t, productionNames(t, s))
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "member", CreatedAt: 1}))
	require.NoError(t, tx.Commit())
	require.Equal(t, map[string]bool{"holder": true, "member": true}, productionNames(t, s))
}

// An edit's transaction runs its caller's code (store.HoldsCaller): a group
// ends before an edit queued next in line, which begins a transaction of
// its own, so no writer's commit waits on the edit.
func TestAnEditNeverJoinsAGroupSoNoWritersCommitWaitsOnItsCallersCode(t *testing.T) {
	s, holder, before := openGroup(t, "edit.db")
	ctx := context.Background()
	writer := writeProduction(s, ctx, "writer")
	untilQueued(t, s.writers, 1)
	edit := queuedBegin(t, s, store.HoldsCaller(ctx))
	untilQueued(t, s.writers, 2)
	held := commitAsync(holder)
	tx, ok := <-edit
	require.True(t, ok)
	if !tx.(*Tx).first {
		tx.Rollback() // ends the group, so that the handle closes
		t.Fatal("the edit joined the group instead of beginning a transaction of its own")
	}
	require.NoError(t, <-held, "the holder's group ended before the edit's turn")
	require.NoError(t, <-writer, "the writer joined the holder's group and committed with it")
	require.Equal(t, 1, walCommits(t, s)-before, "holder and writer shared one COMMIT")
	// The edit holds its transaction (its caller's code runs) while a
	// writer queues behind it; that writer joins once the edit commits.
	later := writeProduction(s, ctx, "later")
	untilQueued(t, s.writers, 1)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "edit", CreatedAt: 1}))
	require.NoError(t, tx.Commit())
	require.NoError(t, <-later)
	require.Equal(t, 2, walCommits(t, s)-before, "the edit and the writer after it shared the second COMMIT")
	require.Len(t, productionNames(t, s), 4)
}
