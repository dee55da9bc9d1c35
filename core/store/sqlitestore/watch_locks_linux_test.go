// The watcher must never drop SQLite's POSIX locks on the -shm file: closing
// any descriptor of a file drops every such lock this process holds on it.
package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// SQLite's WAL-index locks: bytes 120.. of the -shm file; the first is the
// writer lock, 128 the "dead man switch" every open connection holds shared
// (an opener that gets it exclusive takes itself for the only one and
// rebuilds the WAL index under the others).
const (
	shmWriteLock = 120
	shmDMSLock   = 128
)

// shmLockHeld reports whether some owner other than f's open file
// description holds a lock on byte off of f. An open file description lock
// conflicts with this process's own POSIX locks, so it sees them (a POSIX
// F_GETLK would not). f stays open until the store is closed: closing it
// would itself drop the locks under test.
func shmLockHeld(t *testing.T, f *os.File, off int64) bool {
	t.Helper()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk))
	return lk.Type != unix.F_UNLCK
}

func TestStoppingTheWatcherKeepsSQLitesLocksOnTheWALIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	var shm *os.File
	t.Cleanup(func() { shm.Close() }) // after the store's own cleanup closed it
	s := openAt(t, path)
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "p1", Name: "p1", CreatedAt: 1}))
	shm, err = os.Open(path + "-shm") // read-only: F_OFD_GETLK asks, never locks
	require.NoError(t, err)
	require.True(t, shmLockHeld(t, shm, shmWriteLock), "a write transaction holds the WAL writer lock")
	require.True(t, shmLockHeld(t, shm, shmDMSLock), "an open connection holds the WAL index's DMS lock")
	// A waiting claim starts the watcher; once the waits end it stops, while
	// another operation of this process may be writing.
	_, stop := watching(t, s)
	stop()
	require.True(t, shmLockHeld(t, shm, shmWriteLock),
		"the watcher's stop dropped this process's WAL writer lock: another process may now write beside this transaction, and one commit overwrites the other")
	require.True(t, shmLockHeld(t, shm, shmDMSLock),
		"the watcher's stop dropped this process's DMS lock: the next opener rebuilds the WAL index under this handle")
	require.NoError(t, tx.Commit())
	// Watching again, and again stopping, still leaves the locks.
	_, stop = watching(t, s)
	stop()
	require.True(t, shmLockHeld(t, shm, shmDMSLock), "a second watcher's stop dropped the DMS lock")
}

// SQLite's locks on the database file (unix VFS): a SHARED lock is a read
// lock on these bytes, which a WAL-mode connection holds while it is open
// (the last connection to close takes them exclusive, checkpoints and deletes
// the WAL).
const (
	dbSharedFirst = 0x40000000 + 2
	dbSharedSize  = 510
)

func dbSharedHeld(t *testing.T, f *os.File) bool {
	t.Helper()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: dbSharedFirst, Len: dbSharedSize}
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk))
	return lk.Type != unix.F_UNLCK
}

func TestClosingOneHandleKeepsSQLitesLocksOfAnotherHandleOfTheProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	var shm, db *os.File
	t.Cleanup(func() { shm.Close(); db.Close() }) // after the stores' cleanups
	kept := openAt(t, path)
	ctx := context.Background()
	tx, err := kept.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: "p1", Name: "p1", CreatedAt: 1}))
	shm, err = os.Open(path + "-shm")
	require.NoError(t, err)
	db, err = os.Open(path)
	require.NoError(t, err)
	require.True(t, shmLockHeld(t, shm, shmWriteLock))
	require.True(t, dbSharedHeld(t, db), "an open WAL-mode connection holds a shared lock on the database file")
	// Another handle of this process on the same file watches, and closes.
	other, err := Open(path, Options{Synchronous: "NORMAL"}, func() int64 { return 0 })
	require.NoError(t, err)
	_, stop := watching(t, other)
	stop()
	require.NoError(t, other.Close())
	require.True(t, shmLockHeld(t, shm, shmWriteLock), "closing another handle dropped this handle's WAL writer lock")
	require.True(t, shmLockHeld(t, shm, shmDMSLock), "closing another handle dropped this handle's DMS lock")
	require.True(t, dbSharedHeld(t, db),
		"closing another handle dropped this handle's shared lock on the database file: another process's last close would delete the WAL under it")
	require.NoError(t, tx.Commit())
}
