// The SQLite store's watcher: it notices commits made by any connection of
// any process on the same file, without writing and without the writer lock.
package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libleases/libleases/core/store"
)

var _ store.Watcher = (*DB)(nil)

// A commit is seen in the WAL-index header at the start of the database's
// -shm file: in WAL mode every commit rewrites it (its frame count and
// checksums; after a checkpoint restarts the WAL, its salts), and the
// connections of every process share that file. Its first walIndexHeaderLen
// bytes are the header's first copy: when they differ from the last
// reading, something committed (a checkpoint may also change them: a false
// alarm, which is allowed). Reading them with pread takes no lock and writes
// nothing, and a torn reading can only look like a change. pread rather than
// a mapping of the file: a mapping that outlives a truncation of the file
// faults (SIGBUS) when read, and the host process must never die of us.
//
// When to read it: a commit first writes its frames to the -wal file with
// write(2), then (after syncing them) updates the header through the shared
// mapping, which the kernel does not report. So the watcher waits, at no
// cost, for the kernel's inotify report of a write to the -wal file, and
// from then on reads the header every pollFast, slowing to pollSlow, until
// activeFor after the last write: the header changes within the commit's
// sync. An idle database costs nothing. Without inotify (not Linux, or its
// limits reached) the header is read in the same rhythm all the time.
const walIndexHeaderLen = 48

const (
	pollFast  = time.Millisecond
	pollSlow  = 16 * time.Millisecond
	quietFast = 50 * time.Millisecond // poll fast this long after a change or a write
	activeFor = 5 * time.Second       // poll this long after the last write to the -wal file
	statEvery = time.Second           // how often the -shm file's identity is checked while polling
)

// pollInterval is the wait before the next reading, after quiet without a
// change or a write.
func pollInterval(quiet time.Duration) time.Duration {
	if quiet < quietFast {
		return pollFast
	}
	return min(pollSlow, max(pollFast, quiet/8))
}

// foreignEvery is how often, at most, the watcher reads the header after
// writes to the -wal file once it hears doorbells (bells.go): the commits
// that ring reach their production's waiters at once through their bells,
// so the WAL is left only the commits that ring nothing (claims,
// completions, other writers' transactions), and those wake a process at
// most this often, however busy the file is.
var foreignEvery = time.Second

// MissesChanges: every commit rewrites the header, and every commit's
// write to the -wal file is reported (or, without inotify, the header is
// polled all the time). A commit whose sync outlasts activeFor is the one
// case left to core's safety poll.
func (s *DB) MissesChanges() bool { return false }

// Watch watches for commits until stop is called. A commit that rang a
// production's doorbell (bells.go) is reported as that production's; any
// other commit as "" (any production), at most every foreignEvery while
// doorbells are heard.
func (s *DB) Watch(changed func(productionID string)) (stop func()) {
	return store.Run(func(ctx context.Context) { s.watch(ctx, changed) })
}

func (s *DB) watch(ctx context.Context, changed func(string)) {
	// A connection of our own stays open while we watch, with the WAL index
	// opened by a read: SQLite removes or truncates the -wal and -shm files
	// only when the database's last connection closes. Should they still be
	// replaced, the identity check below finds the new -shm file.
	if conn, err := s.db.Conn(ctx); err == nil {
		defer conn.Close()
		var v int64
		_ = conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	}
	// Events first, then the first reading: a commit in between is both.
	// From the first reading on, every commit is seen: "" says so.
	deaf, stopBells := s.hearBells(ctx, changed)
	defer stopBells()
	ev, err := watchWrites(s.path)
	r := shmReader{path: s.path + "-shm", db: s.file.key}
	defer r.close()
	r.read(time.Now())
	changed("")
	if err != nil {
		poll(ctx, &r, changed)
		return
	}
	stop := context.AfterFunc(ctx, ev.close)
	defer stop()
	defer ev.close()
	if !deaf.Load() && !unrung(ctx, ev, &r, changed, deaf) {
		return
	}
	// No doorbells are heard: every write is followed at once.
	var lastWrite, lastChange time.Time
	for {
		now := time.Now()
		var deadline time.Time // none: wait for a write
		if now.Sub(lastWrite) < activeFor {
			deadline = now.Add(pollInterval(now.Sub(later(lastWrite, lastChange))))
		}
		wrote, err := ev.wait(deadline)
		if err != nil {
			if ctx.Err() == nil {
				poll(ctx, &r, changed) // inotify gave up on us: poll instead
			}
			return
		}
		now = time.Now()
		if wrote {
			lastWrite = now
		}
		if r.read(now) {
			changed("")
			lastChange = now
		}
	}
}

// hearBells reports the productions whose doorbells ring (bells.go), on a
// goroutine of its own, until stop is called. It makes the doorbells'
// directory if it is missing. When it cannot (or cannot watch it), or the
// directory goes away and cannot be watched again, deaf becomes true: the
// watcher then follows every write to the WAL at once, as it did before
// there were doorbells.
func (s *DB) hearBells(ctx context.Context, changed func(string)) (deaf *atomic.Bool, stop func()) {
	deaf = new(atomic.Bool)
	listen := func() (bellEvents, error) {
		if err := makeBells(s.path); err != nil {
			return nil, err
		}
		return watchBells(bellsDir(s.path))
	}
	b, err := listen()
	if err != nil {
		deaf.Store(true)
		return deaf, func() {}
	}
	var mu sync.Mutex // guards b against stop while it is replaced
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			mu.Lock()
			cur := b
			mu.Unlock()
			names, err := cur.next()
			for _, n := range names {
				changed(n)
			}
			if err == nil {
				continue
			}
			cur.close()
			if ctx.Err() != nil {
				return
			}
			nb, lerr := listen() // the directory was removed or moved: hear the new one
			mu.Lock()
			if lerr != nil || ctx.Err() != nil {
				deaf.Store(true)
				mu.Unlock()
				if nb != nil {
					nb.close()
				}
				changed("") // whatever rang meanwhile is any production's
				return
			}
			b = nb
			mu.Unlock()
			changed("") // what rang before the new watch began is any production's
		}
	}()
	return deaf, func() {
		cancel()
		mu.Lock()
		b.close()
		mu.Unlock()
		<-done
	}
}

// unrung reads the header after writes to the -wal file, at most every
// foreignEvery, and reports a change as any production's: the commits that
// rang their doorbells were reported already; this finds the others. A
// write wakes it; it then waits foreignEvery (writes meanwhile are
// gathered, not each a wake-up), and reads the header. A write whose header
// change it has not yet seen (the commit still syncing) makes it look again
// a foreignEvery later, for up to activeFor. It returns true when the
// doorbells went deaf (the caller then follows every write at once), false
// when ctx ended or the events failed (it polled instead until ctx ended).
func unrung(ctx context.Context, ev writeEvents, r *shmReader, changed func(string), deaf *atomic.Bool) bool {
	pending := false
	var lastWrite time.Time
	for {
		if !pending {
			wrote, err := ev.wait(time.Time{})
			if err != nil {
				if ctx.Err() == nil {
					poll(ctx, r, changed) // inotify gave up on us: poll instead
				}
				return false
			}
			if !wrote {
				continue
			}
			lastWrite = time.Now()
		}
		if deaf.Load() {
			return true
		}
		slept := time.Now()
		t := time.NewTimer(foreignEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		// The writes reported meanwhile, as they stand: waiting a moment
		// for more would be a second wake-up of the process.
		wrote, err := ev.drain()
		if err != nil {
			if ctx.Err() == nil {
				poll(ctx, r, changed)
			}
			return false
		}
		if wrote {
			lastWrite = time.Now()
		}
		now := time.Now()
		if r.read(now) {
			changed("")
			pending = lastWrite.After(slept) // a commit of those may still be syncing
		} else {
			pending = now.Sub(lastWrite) < activeFor
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// poll reads the header in the watcher's rhythm until ctx ends, as if a
// write had just been reported each time it finds a change.
func poll(ctx context.Context, r *shmReader, changed func(string)) {
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
		if r.read(now) {
			changed("")
			lastChange = now
		}
		t.Reset(pollInterval(now.Sub(lastChange)))
	}
}

// bellEvents reports rung doorbells (bells.go).
type bellEvents interface {
	next() ([]string, error)
	close()
}

// writeEvents reports writes to a database's -wal file, and anything else
// that may concern the database's files.
type writeEvents interface {
	// wait returns when something may have happened to the database's
	// files (true), at deadline (false; zero: none), or with an error once
	// closed or broken.
	wait(deadline time.Time) (bool, error)
	// drain takes the events reported so far, without waiting for more,
	// and says whether any was one that wait reports as true.
	drain() (bool, error)
	close()
}

// watchedNames are the files of the database whose events matter: writes
// to the WAL, and the -shm file being replaced.
func watchedNames(path string) (dir string, names map[string]bool) {
	base := filepath.Base(path)
	return filepath.Dir(path), map[string]bool{base + "-wal": true, base + "-shm": true}
}

// shmReader reads the WAL-index header and remembers the last reading.
type shmReader struct {
	path     string
	db       fileKey // the database, whose handles hold the descriptors it reads (holdShm)
	f        *os.File
	key      fileKey
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
	if n, _ := r.f.ReadAt(cur[:], 0); n != len(cur) {
		// Not set up yet (a new file is empty until a connection
		// initializes it), or unreadable: look again at the next reading.
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
	key, ok := keyOf(fi)
	if !ok {
		return false
	}
	if r.f != nil && key == r.key {
		return false
	}
	hadFile := r.f != nil
	r.close()
	f, err := holdShm(r.db, r.path, key)
	if err != nil {
		return hadFile
	}
	r.f, r.key = f, key
	return hadFile
}

// close stops reading the file. Its descriptor stays open until the
// database's last handle in this process closes (holdShm).
func (r *shmReader) close() {
	r.f = nil
	r.have = false
}
