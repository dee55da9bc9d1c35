// The descriptors this process holds of a database's files outside SQLite:
// one per file, shared by the process's handles of the database, closed
// once the last of them has closed.
package sqlitestore

import (
	"os"
	"sync"
	"syscall"
)

// Closing any descriptor of a file drops every POSIX lock this process holds
// on it, and SQLite's locks are such locks: on the database file, the
// shared lock a WAL-mode connection holds while open (the last connection
// to close takes it exclusive and deletes the WAL); on the -shm file, the WAL
// writer, reader and DMS locks. SQLite shares its own descriptors of a file
// among its connections for that reason. The file identity's anchor and the
// watchers' -shm descriptors are descriptors SQLite does not know of, so
// they are held here, per database file, until the last handle of this
// process on it closes, after its SQLite connections: every SQLite
// connection of the process to the database belongs to one of them. A -shm
// descriptor closed while any was open (the watcher's, once the last waiting
// claim left) dropped a writer lock mid-commit: another process wrote beside
// it, and one commit overwrote the other.

// fileKey is a file's identity.
type fileKey struct{ dev, ino uint64 }

func keyOf(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino)}, true
}

type heldFile struct {
	f     *os.File
	extra []*os.File           // opened for a file already held (its path was replaced meanwhile)
	shm   map[fileKey]*os.File // the database's -shm files the watchers read
	users int                  // the process's open handles of the database
}

var held = struct {
	mu    sync.Mutex
	files map[fileKey]*heldFile
}{files: map[fileKey]*heldFile{}}

// holdFile returns a descriptor of the file at path as one more user of it,
// and the file's identity: the one this process holds already, else one
// that open opens. Every successful call is paired with one releaseFile.
func holdFile(path string, open func() (*os.File, error)) (*os.File, fileKey, error) {
	held.mu.Lock()
	defer held.mu.Unlock()
	if fi, err := os.Stat(path); err == nil {
		if k, ok := keyOf(fi); ok && held.files[k] != nil {
			h := held.files[k]
			h.users++
			return h.f, k, nil
		}
	}
	f, err := open()
	if err != nil {
		return nil, fileKey{}, err
	}
	fi, err := f.Stat()
	if err != nil { // fstat of a descriptor just opened: not seen in practice
		f.Close()
		return nil, fileKey{}, err
	}
	k, ok := keyOf(fi)
	if !ok {
		f.Close()
		return nil, fileKey{}, os.ErrInvalid
	}
	if h := held.files[k]; h != nil {
		// The path named this file only after the stat above: keep the new
		// descriptor too (closing it would drop the locks).
		h.extra = append(h.extra, f)
		h.users++
		return h.f, k, nil
	}
	held.files[k] = &heldFile{f: f, users: 1}
	return f, k, nil
}

// releaseFile ends one use of the file k; the last closes its descriptors.
// The user's SQLite connections must be closed first.
func releaseFile(k fileKey) {
	held.mu.Lock()
	defer held.mu.Unlock()
	h := held.files[k]
	if h == nil {
		return
	}
	if h.users--; h.users > 0 {
		return
	}
	delete(held.files, k)
	h.f.Close()
	for _, f := range h.extra {
		f.Close()
	}
	for _, f := range h.shm {
		f.Close()
	}
}

// holdShm returns a descriptor of the -shm file at path, which stat said is
// key, held with the database db until its last handle closes.
func holdShm(db fileKey, path string, key fileKey) (*os.File, error) {
	held.mu.Lock()
	defer held.mu.Unlock()
	h := held.files[db]
	if h == nil {
		return nil, os.ErrClosed
	}
	if f := h.shm[key]; f != nil {
		return f, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// The path may name another file than stat saw by now: file it under
	// the one it opened, and never close it early either way.
	k := key
	if fi, err := f.Stat(); err == nil {
		if got, ok := keyOf(fi); ok {
			k = got
		}
	}
	if h.shm == nil {
		h.shm = map[fileKey]*os.File{}
	}
	if h.shm[k] != nil {
		h.extra = append(h.extra, f)
		return h.shm[k], nil
	}
	h.shm[k] = f
	return f, nil
}
