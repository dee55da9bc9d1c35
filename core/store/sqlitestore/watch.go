// The SQLite store's watcher: it notices commits made by any connection of
// any process on the same file, without writing and without the writer lock.
package sqlitestore

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/libleases/libleases/core/store"
)

var _ store.Watcher = (*DB)(nil)

// In WAL mode every commit rewrites the WAL-index header at the start of the
// database's -shm file (its frame count and checksums; after a checkpoint
// restarts the WAL, its salts), which the connections of every process share.
// Its first walIndexHeaderLen bytes are the header's first copy: when they
// differ from the last reading, something committed (a checkpoint may also
// change them: a false alarm, which is allowed). Reading them with pread
// takes no lock and writes nothing, and a torn reading can only look like a
// change. pread rather than a mapping of the file: a mapping that outlives a
// truncation of the file faults (SIGBUS) when read, and the host process
// must never die of us.
const walIndexHeaderLen = 48

// The poll is fast just after a change (a burst of commits is usually
// followed by more), and slows down as the file stays quiet.
const (
	pollFast  = time.Millisecond
	pollSlow  = 16 * time.Millisecond
	quietFast = 50 * time.Millisecond // poll fast this long after a change
	statEvery = time.Second           // how often the -shm file's identity is checked
)

// pollInterval is the wait before the next reading, after quiet without a change.
func pollInterval(quiet time.Duration) time.Duration {
	if quiet < quietFast {
		return pollFast
	}
	return min(pollSlow, max(pollFast, quiet/8))
}

// Watch polls the WAL-index header until stop is called. The production of a
// change is unknown: changed gets "".
func (s *DB) Watch(changed func(productionID string)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watch(ctx, changed)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (s *DB) watch(ctx context.Context, changed func(string)) {
	// A connection of our own stays open while we watch, with the WAL index
	// opened by a read: SQLite removes or truncates the -shm file only when
	// the database's last connection closes. Should the file still be
	// replaced, the identity check below finds the new one.
	if conn, err := s.db.Conn(ctx); err == nil {
		defer conn.Close()
		var v int64
		_ = conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	}
	w := shmReader{path: s.path + "-shm"}
	defer w.close()
	t := time.NewTimer(0)
	defer t.Stop()
	lastChange := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if w.read(now) {
			changed("")
			lastChange = now
		}
		t.Reset(pollInterval(now.Sub(lastChange)))
	}
}

// shmReader reads the WAL-index header and remembers the last reading.
type shmReader struct {
	path     string
	f        *os.File
	ino, dev uint64
	nextStat time.Time
	last     [walIndexHeaderLen]byte
	have     bool
}

// read reports whether the header changed since the last reading (or the
// file was replaced, or appeared).
func (r *shmReader) read(now time.Time) bool {
	replaced := false
	if r.f == nil || !now.Before(r.nextStat) {
		replaced = r.reopenIfReplaced()
		r.nextStat = now.Add(statEvery)
	}
	if r.f == nil {
		return replaced
	}
	var cur [walIndexHeaderLen]byte
	if n, err := r.f.ReadAt(cur[:], 0); n != len(cur) {
		// Not initialized yet (a new file is empty until a connection sets it
		// up), or unreadable: look again at the next poll.
		_ = err
		r.have = false
		return replaced
	}
	changed := r.have && cur != r.last
	r.last, r.have = cur, true
	return changed || replaced
}

// reopenIfReplaced opens the -shm file if it is not open or if the path now
// names another file. It reports whether it moved to another file.
func (r *shmReader) reopenIfReplaced() bool {
	fi, err := os.Stat(r.path)
	if err != nil {
		if r.f != nil {
			r.close()
			return true
		}
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if r.f != nil && st.Ino == r.ino && st.Dev == r.dev {
		return false
	}
	hadFile := r.f != nil
	r.close()
	f, err := os.Open(r.path)
	if err != nil {
		return hadFile
	}
	r.f, r.ino, r.dev = f, st.Ino, st.Dev
	return hadFile
}

func (r *shmReader) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.have = false
}
