// The WAL's size: the limits every connection sets, the checkpoint that
// copies the WAL into the database off the writers' turn, and the one a
// writer runs when back-to-back readers have kept the WAL from starting
// over (docs/schema.md, "The WAL").
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// JournalSizeLimit is the size, in bytes, the WAL file is cut back to when
// a writer starts it over. Without it a WAL that once grew keeps its size
// until the last connection closes. It is also the size past which a writer
// checkpoints with RESTART (walKeeper): a WAL that starts over in time
// never grows past walWriterCheckpoint's 8 MiB and one transaction, so a
// file larger than this has been held back by readers.
const JournalSizeLimit = 16 << 20

// WALAutoCheckpoint is the WAL's checkpoint threshold in pages (4 KiB
// each): SQLite's default, written down so the WAL's steady size is ours.
// Connections of the pool keep SQLite's automatic checkpoint at it (they
// write only to migrate a file); the handle's writer connection turns it
// off (wal_autocheckpoint 0), because SQLite runs it inside the commit that
// crosses it, before the writer passes on: 6-9 ms of copying and fsyncs
// that the next writer in the queue (a claim) waits for. Instead, a commit
// that leaves more than this many frames in the WAL not yet copied wakes
// the handle's checkpointer (walKeeper.run), which runs a PASSIVE
// checkpoint on a connection of its own: it takes no writer lock, writers
// go on appending meanwhile, and once a checkpoint has copied the whole WAL
// the next writer starts it over. Other processes on the file keep their
// own automatic checkpoint; nothing here depends on them.
const WALAutoCheckpoint = 1000

// walWriterCheckpoint bounds a WAL that grows faster than the checkpointer
// copies it (it copies what was there when it began; writers append
// meanwhile): a commit that leaves at least this many frames in the WAL,
// not all copied, runs the PASSIVE checkpoint itself before the turn
// passes on, as SQLite's automatic checkpoint did at WALAutoCheckpoint.
// Holding the turn, no writer of the handle appends meanwhile, so that
// checkpoint copies the whole WAL (but for a reader's snapshot) and the
// next writer starts it over: the WAL holds at most this many frames and
// one transaction, 8 MiB and one transaction at 4 KiB pages, unless
// readers hold it back (then JournalSizeLimit's RESTART bounds it).
const walWriterCheckpoint = 2 * WALAutoCheckpoint

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
// listings. Its goroutine (run) runs the PASSIVE checkpoints a commit asks
// for (wake), off the writers' turn, until close.
type walKeeper struct {
	path, syncMode string
	file           *fileIdentity // the database's descriptors: its anchor, and the -shm's (holdShm)
	mu             sync.Mutex
	db             *sql.DB // opened at the first checkpoint
	closed         bool
	notBefore      atomic.Int64
	paceNotBefore  atomic.Int64

	wake      chan struct{} // a commit left more than WALAutoCheckpoint frames not yet copied
	quit      chan struct{} // closed by close: run returns
	done      chan struct{} // closed when run has returned
	closeOnce sync.Once

	offTurn atomic.Int64 // PASSIVE checkpoints run off the writers' turn
	onTurn  atomic.Int64 // PASSIVE checkpoints a writer ran itself (walResidue, walWriterCheckpoint)
}

func newWALKeeper(abs, syncMode string, file *fileIdentity) *walKeeper {
	w := &walKeeper{path: abs, syncMode: syncMode, file: file, wake: make(chan struct{}, 1), quit: make(chan struct{}),
		done: make(chan struct{})}
	go w.run()
	return w
}

// walCheckpointStarts runs as the checkpointer begins a checkpoint off the
// writers' turn (a test's hook: it may hold the checkpointer there).
var walCheckpointStarts = func() {}

// walResidue is how many frames not yet copied a writer copies itself
// once the WAL is past WALAutoCheckpoint. A checkpoint copies what the WAL
// held when it began, and the next writer starts the WAL over only if the
// whole WAL was copied when it began: off the writers' turn, writers append
// meanwhile, so a checkpoint there always leaves a residue (the commits
// during its copy and fsyncs) and the WAL never starts over by itself.
// The writer's checkpoint of the residue, holding the turn (no writer of
// the handle appends meanwhile), copies those few frames with one small
// fsync, not a thousand: the bulk was copied, and synced, off the turn.
const walResidue = WALAutoCheckpoint / 8

// committed runs after a commit of the handle's writer connection, while
// the writer still holds the turn. Once the WAL holds more than
// WALAutoCheckpoint frames, it wakes the checkpointer to copy them, and
// copies a residue itself (walResidue) or any WAL past walWriterCheckpoint
// (waiting for a checkpoint in progress); then it lets a WAL that readers
// held back start over (yield).
func (w *walKeeper) committed() {
	frames, copied, ok := w.frames()
	switch {
	case !ok:
		// The WAL index cannot be read here: the checkpointer runs after
		// every commit (one with nothing to copy costs little), off the turn.
		w.signal()
	case frames <= WALAutoCheckpoint || copied >= frames:
	case frames >= walWriterCheckpoint:
		w.mu.Lock()
		w.checkpoint(&w.onTurn)
	case frames-copied <= walResidue:
		if w.mu.TryLock() { // else a checkpoint is in progress: the next commit looks again
			w.checkpoint(&w.onTurn)
		}
	default:
		w.signal()
	}
	w.yield()
}

func (w *walKeeper) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // already woken: one checkpoint serves every commit before it
	}
}

// run is the handle's checkpointer.
func (w *walKeeper) run() {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case <-w.wake:
		}
		walCheckpointStarts()
		w.mu.Lock()
		w.checkpoint(&w.offTurn)
		// A checkpoint that did not copy the whole WAL (writers appended
		// meanwhile) leaves the pages it wrote to the database unsynced:
		// SQLite syncs the database only once a checkpoint has copied
		// everything, and the writer's checkpoint of the residue would pay
		// for all of them. Synced here, off the turn, that one syncs only
		// the residue. The anchor is the database file itself (held open
		// until the last handle closes); a sync only makes durable what
		// SQLite wrote, which the WAL still holds until it starts over.
		if frames, copied, ok := w.frames(); (!ok || copied < frames) && w.file.anchor != nil {
			_ = w.file.anchor.Sync()
		}
	}
}

// checkpoint runs a PASSIVE checkpoint on the keeper's connection and
// counts it; the caller holds mu, which it unlocks. Best effort, like
// yield: a checkpoint that fails or finds a reader in the way leaves the
// rest to the next one.
func (w *walKeeper) checkpoint(count *atomic.Int64) {
	defer w.mu.Unlock()
	if w.closed || !w.open() {
		return
	}
	_, _ = w.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
	count.Add(1)
}

// open opens the keeper's connection, under mu.
func (w *walKeeper) open() bool {
	if w.db != nil {
		return true
	}
	db, err := sql.Open("sqlite", dsn(w.path, walCheckpointWait, w.syncMode))
	if err != nil {
		return false
	}
	db.SetMaxOpenConns(1)
	w.db = db
	return true
}

// frames reads how many frames the WAL holds and how many of them a
// checkpoint has copied into the database, from the WAL index in the -shm
// file (https://www.sqlite.org/walformat.html: the header's mxFrame at
// byte 16, the checkpoint information's nBackfill at byte 96, in the
// machine's byte order; SQLite maps the file shared, so a read sees what
// its connections wrote). A hint, read without SQLite's locks: the
// decisions it feeds only choose when to checkpoint.
func (w *walKeeper) frames() (frames, copied uint32, ok bool) {
	// A descriptor SQLite does not know of, held until the database's last
	// handle of the process closes: closing it would drop SQLite's locks.
	fi, err := os.Stat(w.path + "-shm")
	if err != nil {
		return 0, 0, false
	}
	key, isKey := keyOf(fi)
	if !isKey {
		return 0, 0, false
	}
	f, err := holdShm(w.file.key, w.path+"-shm", key)
	if err != nil {
		return 0, 0, false
	}
	var b [100]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0, false
	}
	const walIndexVersion = 3007000
	if binary.NativeEndian.Uint32(b[0:]) != walIndexVersion || b[12] == 0 {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint32(b[16:]), binary.NativeEndian.Uint32(b[96:]), true
}

// yield runs a RESTART checkpoint if the WAL is past JournalSizeLimit. It is
// best effort: a checkpoint that cannot finish in time changes nothing, and
// runs after a commit, which is already durable.
func (w *walKeeper) yield() {
	fi, err := os.Stat(w.path + "-wal")
	if err != nil || fi.Size() <= JournalSizeLimit || time.Now().UnixNano() < w.notBefore.Load() || !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if w.closed || !w.open() {
		return
	}
	var busy, logFrames, copied int
	err = w.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &logFrames, &copied)
	if err != nil || busy != 0 {
		w.notBefore.Store(time.Now().Add(walRetryAfter).UnixNano())
	}
}

// close stops the checkpointer (a checkpoint in progress ends first) and
// closes the keeper's connection. The handle's last connection to close
// checkpoints the WAL as SQLite always does.
func (w *walKeeper) close() {
	w.closeOnce.Do(func() { close(w.quit) })
	<-w.done
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
