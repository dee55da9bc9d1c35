package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// watching starts s's watcher and waits for its first report, which says
// that it sees every later commit.
func watching(t *testing.T, s *DB) (<-chan string, func()) {
	t.Helper()
	changes := make(chan string, 100)
	stop := s.Watch(func(id string) { changes <- id })
	require.Empty(t, testwait.Receive(t, changes, testwait.EventuallyBound, "the watcher's readiness"))
	return changes, stop
}

// heldDB stands for a database whose handle holds a header reader's
// descriptors until the test ends.
func heldDB(t *testing.T) fileKey {
	path := filepath.Join(t.TempDir(), "held.db")
	f, k, err := holdFile(path, func() (*os.File, error) { return os.Create(path) })
	require.NoError(t, err)
	require.NotNil(t, f)
	t.Cleanup(func() { releaseFile(k) })
	return k
}

func TestTheWatcherSeesAnotherConnectionsCommitWithoutWritingOrTheWriterLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	watched, writer := openAt(t, path), openAt(t, path)
	changes, stop := watching(t, watched)
	defer stop()
	ctx := context.Background()
	// The other connection holds the writer lock: the watcher needs none.
	tx, err := writer.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "p1", Name: "p1", CreatedAt: 1}))
	time.Sleep(50 * time.Millisecond)
	select {
	case <-changes:
		t.Fatal("a change reported before anything committed")
	default:
	}
	// The watcher wrote nothing meanwhile: a connection of the writer's
	// store sees the same data version before and after.
	conn, err := writer.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var before, after int64
	require.NoError(t, conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&before))
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&after))
	require.Equal(t, before, after, "the watcher committed something")
	require.NoError(t, tx.Commit())
	require.Empty(t, testwait.Receive(t, changes, testwait.EventuallyBound, "the commit"), "a file change names no production")
}

func TestStoppingTheWatcherEndsItsReports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	watched, writer := openAt(t, path), openAt(t, path)
	changes, stop := watching(t, watched)
	stop()
	tx, err := writer.BeginWrite(context.Background())
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "p1", Name: "p1", CreatedAt: 1}))
	require.NoError(t, tx.Commit())
	time.Sleep(50 * time.Millisecond)
	require.Empty(t, changes)
}

func TestTheHeaderReaderReportsChangesAndAReplacedOrMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x-shm")
	header := make([]byte, walIndexHeaderLen)
	r := &shmReader{path: path, db: heldDB(t)}
	now := time.Now()
	require.False(t, r.read(now), "no file: nothing to report")
	require.NoError(t, os.WriteFile(path, header[:10], 0o600))
	r.nextStat = time.Time{}
	require.False(t, r.read(now), "a file that appears is not a change by itself")
	require.False(t, r.read(now), "too short to hold a header: no reading")
	require.NoError(t, os.WriteFile(path, header, 0o600))
	require.False(t, r.read(now), "the first reading")
	require.False(t, r.read(now), "unchanged")
	header[24] = 1 // mxFrame
	require.NoError(t, os.WriteFile(path, header, 0o600))
	require.True(t, r.read(now))
	require.False(t, r.read(now))
	// Replaced by another file with the same bytes: noticed at the next
	// identity check, as a change (commits may have happened in between).
	other := path + ".new"
	require.NoError(t, os.WriteFile(other, header, 0o600))
	require.NoError(t, os.Rename(other, path))
	require.False(t, r.read(now), "before the identity check the old file is read")
	r.nextStat = time.Time{}
	require.True(t, r.read(now), "the replaced file")
	require.NoError(t, os.Remove(path))
	r.nextStat = time.Time{}
	require.True(t, r.read(now), "the file went away")
	require.False(t, r.read(now.Add(2*statEvery)))
}

func TestThePollIsFastAfterAChangeAndSlowWhenQuiet(t *testing.T) {
	require.Equal(t, pollFast, pollInterval(0))
	require.Equal(t, pollFast, pollInterval(quietFast-time.Millisecond))
	require.Equal(t, pollSlow, pollInterval(time.Minute))
	for q := time.Duration(0); q < time.Second; q += 10 * time.Millisecond {
		require.LessOrEqual(t, pollInterval(q), pollInterval(q+10*time.Millisecond))
	}
}

func TestWritesToTheWALAreReportedAndOtherFilesIgnored(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "x.db")
	ev, err := watchWrites(db)
	if err != nil {
		t.Skipf("no inotify here (%v): the watcher polls, as TestPollingFindsACommit checks", err)
	}
	defer ev.close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.db-wal"), []byte("x"), 0o600))
	wrote, err := ev.wait(time.Now().Add(50 * time.Millisecond))
	require.NoError(t, err)
	require.False(t, wrote, "another database's WAL is not ours")
	wrote, err = ev.wait(time.Now().Add(50 * time.Millisecond))
	require.NoError(t, err)
	require.False(t, wrote, "nothing happened")
	require.NoError(t, os.WriteFile(db+"-wal", []byte("frame"), 0o600))
	wrote, err = ev.wait(time.Now().Add(5 * time.Second))
	require.NoError(t, err)
	require.True(t, wrote)
	ev.close()
	_, err = ev.wait(time.Time{})
	require.Error(t, err, "a closed watch ends every wait")
}

func TestPollingFindsACommitWithoutFileEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	writer := openAt(t, path)
	r := shmReader{path: path + "-shm", db: writer.file.key}
	defer r.close()
	r.read(time.Now())
	changes := make(chan string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll(ctx, &r, func(id string) { changes <- id })
	}()
	defer func() { cancel(); <-done }()
	tx, err := writer.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "p1", Name: "p1", CreatedAt: 1}))
	require.NoError(t, tx.Commit())
	testwait.Receive(t, changes, testwait.EventuallyBound, "the commit")
}

// A commit that may make a production's job claimable reaches the watchers
// of other handles and processes as that production's, so that only its
// waiters are woken; a commit that makes nothing claimable rings no
// production's doorbell.
func TestACommitThatMayMakeAJobClaimableIsReportedAsItsProductions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	watched, writer := openAt(t, path), openAt(t, path)
	changes, stop := watching(t, watched)
	defer stop()
	ctx := context.Background()
	tx, err := writer.BeginWrite(ctx)
	require.NoError(t, err)
	first := tx
	t.Cleanup(func() { _ = first.Rollback() }) // a failure below must not leave the writer lock held
	n, ok := tx.(store.Notifier)
	require.True(t, ok, "a SQLite transaction tells the other processes which production it may make claimable")
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "p1", Name: "p1", CreatedAt: 1}))
	require.NoError(t, n.Claimable(ctx, "p1"))
	require.NoError(t, tx.Commit())
	require.Equal(t, "p1", testwait.Receive(t, changes, testwait.EventuallyBound, "the commit's doorbell"))
	// Rolled back: no doorbell rings.
	tx, err = writer.BeginWrite(ctx)
	require.NoError(t, err)
	second := tx
	t.Cleanup(func() { _ = second.Rollback() })
	require.NoError(t, tx.(store.Notifier).Claimable(ctx, "p2"))
	require.NoError(t, tx.Rollback())
	time.Sleep(50 * time.Millisecond)
	for len(changes) > 0 {
		require.NotEqual(t, "p2", <-changes, "a transaction that did not commit rang")
	}
}

// timedEvents is a writeEvents that reports one write, then none, and
// counts the waits with a deadline the watcher makes (each a timer
// wake-up of the process when nothing comes).
type timedEvents struct {
	first bool
	timed int
	calls chan struct{}
}

func (e *timedEvents) wait(deadline time.Time) (bool, error) {
	defer func() { e.calls <- struct{}{} }()
	if !e.first {
		e.first = true
		return true, nil
	}
	if !deadline.IsZero() {
		e.timed++
		time.Sleep(time.Until(deadline))
		return false, nil
	}
	select {} // no more writes: the test ends the watcher
}

func (e *timedEvents) drain() (bool, error) {
	e.calls <- struct{}{}
	return false, nil
}

func (e *timedEvents) close() {}

// While doorbells are heard, the watcher reads the header after writes at
// most every foreignEvery; when it wakes for that, it takes the writes
// reported while it slept as they stand, without waiting a moment longer
// for more: one wake-up of the process per reading, not two (an idle
// waiter's process pays every wake-up, every second while another
// production of the file is busy).
func TestTheWatcherGathersTheWritesReportedWhileItSleptWithoutWaitingForMore(t *testing.T) {
	old := foreignEvery
	foreignEvery = 5 * time.Millisecond
	t.Cleanup(func() { foreignEvery = old })
	ev := &timedEvents{calls: make(chan struct{}, 100)}
	r := shmReader{path: filepath.Join(t.TempDir(), "none.db-shm"), db: heldDB(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		unrung(ctx, ev, &r, func(string) {}, new(atomic.Bool))
	}()
	for i := 0; i < 6; i++ { // the write, then readings a foreignEvery apart
		testwait.Receive(t, ev.calls, testwait.EventuallyBound, "the watcher's next look at its events")
	}
	cancel()
	<-done
	require.Zero(t, ev.timed, "the watcher waited for more writes after it woke")
}
