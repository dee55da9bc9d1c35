// The file an authority opened, and whether its path still names it: a
// database removed or replaced under a running authority is detected before
// the next acknowledgement (docs/schema.md, "The file under the path").
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core/store"
)

// ErrFileGone: the path no longer names the database file this handle
// opened (it was deleted, or another file was moved over it). Every later
// call of the handle fails with it; the authority must be reopened.
var ErrFileGone = errors.New("the database file was removed or replaced while the authority had it open")

// fileIdentity is the opened file. SQLite keeps writing to the file it
// opened whatever the path names since: after `rm` it would acknowledge
// work into an unlinked file; after `mv other.db` over it, into the old
// inode, beside a WAL that no longer matches the file under the path.
// Each write transaction, once it holds the writer lock, and each read
// compare the path's device and inode with the opened file's (one stat,
// about a microsecond: docs/schema.md), and a commit is checked again once
// done, so no `ok` is ever reported for a commit the path no longer holds.
type fileIdentity struct {
	path   string
	anchor *os.File    // the opened file, held open so its inode number is never reused
	key    fileKey     // the anchor's, released at close
	opened os.FileInfo // anchor's
	dir    *dirClaim   // the claim on the path that second openers see; nil where unsupported
	pin    *sql.Conn   // a connection of the opened file, to empty its WAL once it is gone
	gone   atomic.Pointer[error]
	once   sync.Once
}

// openFile opens (creating it when allowed) the file at abs that SQLite is
// about to open, and claims its name. A missing file is created here, not
// by SQLite: every connection then opens with mode=rw, so a connection
// opened after the file was deleted fails instead of creating an empty
// second authority at the path. Nor is a file created while another handle
// still has a deleted file of that name open (dirClaim): that would be a
// second authority at one path.
//
// The anchor is shared with the process's other handles of the file and
// closed after the last of them (descriptors.go): closing it earlier would
// drop the shared lock of their SQLite connections on the file.
func openFile(abs, shown string, mustExist bool) (*fileIdentity, error) {
	f, key, err := holdFile(abs, func() (*os.File, error) {
		f, err := os.Open(abs)
		if errors.Is(err, fs.ErrNotExist) && !mustExist {
			if heldByAnother(abs) {
				// A creator that raced us may have just made it (it claims
				// the name only once the file exists): look once more.
				if f, err = os.Open(abs); errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("%w: %s no longer exists, but another handle (in this or another process) still has the removed file open and may still be writing to it; close every handle on it, then open it again (a new file would be a second authority at one path)",
						ErrFileGone, shown)
				}
			} else {
				f, err = os.OpenFile(abs, os.O_RDONLY|os.O_CREATE, 0o644)
			}
		}
		return f, err
	})
	if errors.Is(err, ErrFileGone) {
		return nil, err
	}
	if errors.Is(err, fs.ErrNotExist) && mustExist {
		return nil, fmt.Errorf("%w: %s does not exist", store.ErrNotExist, shown)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open database: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		releaseFile(key)
		return nil, fmt.Errorf("cannot open database: %w", err)
	}
	return &fileIdentity{path: abs, anchor: f, key: key, opened: fi, dir: claimName(abs)}, nil
}

// pinConn keeps one connection that opened the file with the handle. Only
// it is sure to hold the opened file's WAL once the path names another.
func (id *fileIdentity) pinConn(db *sql.DB) error {
	c, err := db.Conn(context.Background())
	if err != nil {
		return classify(err)
	}
	var v int
	if err := c.QueryRowContext(context.Background(), `PRAGMA user_version`).Scan(&v); err != nil {
		c.Close()
		return classify(err)
	}
	id.pin = c
	return nil
}

// check reports ErrFileGone, for good, once the path does not name the
// opened file.
func (id *fileIdentity) check() error {
	if g := id.gone.Load(); g != nil {
		return *g
	}
	fi, err := os.Stat(id.path)
	var gone error
	switch {
	case err == nil && os.SameFile(fi, id.opened):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		gone = fmt.Errorf("%w: %s was deleted; nothing more is written to the deleted file: reopen the authority (what it acknowledged before is in the deleted file)", ErrFileGone, id.path)
	case err != nil:
		return fmt.Errorf("check the database file: %w", err) // e.g. a directory made unreadable: not known to be gone
	default:
		gone = fmt.Errorf("%w: %s is now another file (moved or copied over it); nothing more is written to the file this authority opened: reopen the authority", ErrFileGone, id.path)
	}
	id.gone.CompareAndSwap(nil, &gone)
	return *id.gone.Load()
}

// release is called, holding no transaction, once check has failed: the
// opened file's WAL, if it still lies beside the path, would otherwise be
// read as the WAL of whatever file is at the path now, and corrupt it. A
// TRUNCATE checkpoint on a connection of the opened file copies the WAL
// into the opened (now unlinked) file and empties it. Best effort, bounded
// by releaseCheckpointWait: a writer of another process still in the old
// file keeps it from finishing.
//
// The bound is not the WAL keeper's (walCheckpointWait, 20 ms, retried every
// 100 ms): this checkpoint runs once, and the next opener of the path reads
// whatever WAL it leaves as the new file's. On a loaded machine 20 ms did not
// always suffice, and a second opener after `mv other.db f.db` read the old
// file's pages (TestADatabaseFileRemovedOrReplacedUnderAWriterIsNeverAcknowledgedInto).
const releaseCheckpointWait = 2 * time.Second

func (id *fileIdentity) release() {
	if id.gone.Load() == nil || id.pin == nil {
		return
	}
	id.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseCheckpointWait)
		defer cancel()
		id.pin.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	})
}

// close ends the handle's hold on the file; SQLite's connections must be
// closed first: closing any descriptor of the file drops every POSIX lock
// this process holds on it (the last handle's close closes the anchor).
func (id *fileIdentity) close() {
	releaseFile(id.key)
	id.dir.close()
}

// explain is err, or ErrFileGone when the file is gone: a driver error
// after a deletion (a connection that cannot open the path) is then told
// for what it is.
func (id *fileIdentity) explain(err error) error {
	if err == nil {
		return nil
	}
	if gone := id.check(); errors.Is(gone, ErrFileGone) {
		id.release()
		return gone
	}
	return err
}
