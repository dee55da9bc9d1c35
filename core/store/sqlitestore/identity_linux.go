// The claim on a database's name that a second opener sees (Linux: an open
// file description lock on the directory).
package sqlitestore

import (
	"hash/fnv"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// dirClaim is a shared lock on one byte of the database's directory, at an
// offset drawn from the file's name, held by every open handle. It belongs
// to the directory, which survives `rm` of all three files, so an opener
// that finds no file can still see that a handle has the removed one open.
// An open file description lock (not a POSIX one) is not dropped when this
// process closes some other descriptor of the directory, and conflicts with
// handles of this process too.
type dirClaim struct{ f *os.File }

// nameOffset is where in the directory the file's name is claimed: far past
// any real directory size, one byte per name (a collision of two names in
// one directory, one in 2^62, would only refuse to create a file).
func nameOffset(abs string) int64 {
	h := fnv.New64a()
	h.Write([]byte(filepath.Base(abs)))
	return int64(h.Sum64()>>2) | 1<<40
}

func dirLock(typ int16, abs string) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: 0, Start: nameOffset(abs), Len: 1}
}

// claimName takes the claim; nil where the directory cannot be locked (not
// readable, or a filesystem without such locks): the check is then not made.
func claimName(abs string) *dirClaim {
	f, err := os.Open(filepath.Dir(abs))
	if err != nil {
		return nil
	}
	lk := dirLock(unix.F_RDLCK, abs)
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		return nil
	}
	return &dirClaim{f: f}
}

func (c *dirClaim) close() {
	if c != nil {
		c.f.Close()
	}
}

// heldByAnother reports whether some handle claims abs's name.
func heldByAnother(abs string) bool {
	f, err := os.Open(filepath.Dir(abs))
	if err != nil {
		return false
	}
	defer f.Close()
	lk := dirLock(unix.F_WRLCK, abs)
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}
