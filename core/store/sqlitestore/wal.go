// The WAL's size: the limits every connection sets, and the checkpoint a
// writer runs when back-to-back readers have kept the WAL from starting over
// (docs/schema.md, "The WAL").
package sqlitestore

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// JournalSizeLimit is the size, in bytes, the WAL file is cut back to when
// a writer starts it over. Without it a WAL that once grew keeps its size
// until the last connection closes. It is also the size past which a writer
// checkpoints with RESTART (walKeeper): a WAL that starts over in time
// never grows past the automatic checkpoint's 4 MiB and one transaction, so
// a file larger than this has been held back by readers.
const JournalSizeLimit = 16 << 20

// WALAutoCheckpoint is SQLite's automatic checkpoint threshold in pages
// (4 KiB each): its default, written down so the WAL's steady size is ours.
// A commit past it checkpoints (PASSIVE: it never waits), and once a
// checkpoint has copied the whole WAL the next writer starts it over.
const WALAutoCheckpoint = 1000

// A writer that has committed runs a RESTART checkpoint when the WAL file
// is past JournalSizeLimit. The automatic checkpoint never copies pages of
// a snapshot a reader still uses, so while listings read back to back some
// reader always holds one, the WAL is never all copied, never starts over,
// and grows as long as writes go on. RESTART takes the writer lock (no page
// is added meanwhile), waits for those readers (each holds one page's read:
// milliseconds), copies the whole WAL and lets the next writer start it
// over, which cuts the file back to the limit. Readers that begin meanwhile
// read the database file and hold nothing back.

// walCheckpointWait bounds that wait (for readers, or for another writer);
// after a wait in vain, walRetryAfter passes before the next try. The wait
// is short and the retries frequent: a machine under load may need several
// tries to find a moment with no reader, and the WAL grows by every commit
// meanwhile. A reader that holds its snapshot for long (outside the
// library) costs the writer at most a fifth of its time while the WAL is
// past the limit, never every commit in full.
//
// Listings help: before a page, while the WAL is past the limit, a listing
// waits up to walPace for it to shrink, so the checkpoint finds a moment
// with no reader. Once a wait was in vain, it does not wait again for
// walPaceRetryAfter.
const (
	walCheckpointWait = 20 * time.Millisecond
	walRetryAfter     = 100 * time.Millisecond
	walPace           = 100 * time.Millisecond
	walPaceRetryAfter = time.Second
)

// walKeeper runs those checkpoints, one at a time per handle, on a
// connection of its own whose busy timeout is walCheckpointWait, and paces
// listings.
type walKeeper struct {
	path, syncMode string
	mu             sync.Mutex
	db             *sql.DB // opened at the first checkpoint
	closed         bool
	notBefore      atomic.Int64
	paceNotBefore  atomic.Int64
}

func newWALKeeper(abs, syncMode string) *walKeeper { return &walKeeper{path: abs, syncMode: syncMode} }

// yield runs a RESTART checkpoint if the WAL is past JournalSizeLimit. It is
// best effort: a checkpoint that cannot finish in time changes nothing, and
// runs after a commit, which is already durable.
func (w *walKeeper) yield() {
	fi, err := os.Stat(w.path + "-wal")
	if err != nil || fi.Size() <= JournalSizeLimit || time.Now().UnixNano() < w.notBefore.Load() || !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.db == nil {
		if w.db, err = sql.Open("sqlite", dsn(w.path, walCheckpointWait, w.syncMode)); err != nil {
			return
		}
		w.db.SetMaxOpenConns(1)
	}
	var busy, logFrames, copied int
	err = w.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &logFrames, &copied)
	if err != nil || busy != 0 {
		w.notBefore.Store(time.Now().Add(walRetryAfter).UnixNano())
	}
}

func (w *walKeeper) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.db != nil {
		w.db.Close()
		w.db = nil
	}
}

// pace holds a listing back before its next page while the WAL is past
// the limit, for at most walPace.
func (w *walKeeper) pace() {
	if time.Now().UnixNano() < w.paceNotBefore.Load() {
		return
	}
	deadline := time.Now().Add(walPace)
	for {
		if fi, err := os.Stat(w.path + "-wal"); err != nil || fi.Size() <= JournalSizeLimit {
			return
		}
		if time.Now().After(deadline) {
			w.paceNotBefore.Store(time.Now().Add(walPaceRetryAfter).UnixNano())
			return
		}
		time.Sleep(time.Millisecond)
	}
}
