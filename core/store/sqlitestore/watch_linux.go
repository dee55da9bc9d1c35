// inotify reports of writes to a database's files (Linux).
package sqlitestore

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"syscall"
	"time"
)

// inotifyEvents watches the database's directory (a watch on the -wal file
// itself would not see it replaced) and filters events by name.
type inotifyEvents struct {
	f     *os.File
	names map[string]bool
	buf   []byte
}

const inotifyMask = syscall.IN_MODIFY | syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM |
	syscall.IN_MOVED_TO | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF

func watchWrites(path string) (writeEvents, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	dir, names := watchedNames(path)
	if _, err := syscall.InotifyAddWatch(fd, dir, inotifyMask); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// Non-blocking: the runtime's poller serves it, so a deadline bounds a
	// wait and closing the file ends one.
	f := os.NewFile(uintptr(fd), "inotify")
	return &inotifyEvents{f: f, names: names, buf: make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))}, nil
}

func (e *inotifyEvents) wait(deadline time.Time) (bool, error) {
	if err := e.f.SetReadDeadline(deadline); err != nil {
		return false, err
	}
	n, err := e.f.Read(e.buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return e.parse(n)
}

// drain reads the events queued on the (non-blocking) descriptor until
// none is left, without arming the poller or a timer.
func (e *inotifyEvents) drain() (bool, error) {
	rc, err := e.f.SyscallConn()
	if err != nil {
		return false, err
	}
	ours := false
	for {
		var n int
		var rerr error
		if err := rc.Control(func(fd uintptr) { n, rerr = syscall.Read(int(fd), e.buf) }); err != nil {
			return ours, err // closed
		}
		switch {
		case rerr == syscall.EINTR:
			continue
		case rerr == syscall.EAGAIN:
			return ours, nil
		case rerr != nil:
			return ours, rerr
		case n == 0:
			return ours, errors.New("the inotify descriptor reported end of file")
		}
		got, err := e.parse(n)
		ours = ours || got
		if err != nil {
			return ours, err
		}
	}
}

// parse reads the first n bytes of buf: whether an event concerns the
// database's files, or says that the directory is no longer watched.
func (e *inotifyEvents) parse(n int) (bool, error) {
	ours := false
	for off := 0; off+syscall.SizeofInotifyEvent <= n; {
		mask := binary.NativeEndian.Uint32(e.buf[off+4:])
		nameLen := int(binary.NativeEndian.Uint32(e.buf[off+12:]))
		name := strings.TrimRight(string(e.buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+nameLen]), "\x00")
		off += syscall.SizeofInotifyEvent + nameLen
		switch {
		case mask&syscall.IN_IGNORED != 0, mask&(syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0 && name == "":
			// The directory went away or moved: this watch sees no more.
			return true, errors.New("the database's directory is no longer watched")
		case mask&syscall.IN_Q_OVERFLOW != 0, e.names[name]:
			ours = true
		}
	}
	return ours, nil
}

func (e *inotifyEvents) close() { e.f.Close() }

// inotifyBells reports the doorbells rung in a database's doorbells
// directory (bells.go): the names of the files closed there.
type inotifyBells struct {
	f   *os.File
	buf []byte
}

func watchBells(dir string) (bellEvents, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CLOSE_NOWRITE|syscall.IN_CLOSE_WRITE|syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "inotify-bells")
	return &inotifyBells{f: f, buf: make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))}, nil
}

// next blocks until doorbells ring and returns their names (those of one
// read: a ring rung twice before it is read may be named twice); an
// overflow of the kernel's queue is reported as the name "" (any
// production). An error once closed, or once the directory went away.
func (b *inotifyBells) next() ([]string, error) {
	n, err := b.f.Read(b.buf)
	if err != nil {
		return nil, err
	}
	var names []string
	for off := 0; off+syscall.SizeofInotifyEvent <= n; {
		mask := binary.NativeEndian.Uint32(b.buf[off+4:])
		nameLen := int(binary.NativeEndian.Uint32(b.buf[off+12:]))
		name := strings.TrimRight(string(b.buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+nameLen]), "\x00")
		off += syscall.SizeofInotifyEvent + nameLen
		switch {
		case mask&syscall.IN_IGNORED != 0, mask&(syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0:
			return names, errors.New("the doorbells' directory is no longer watched")
		case mask&syscall.IN_Q_OVERFLOW != 0:
			names = append(names, "")
		case mask&(syscall.IN_CLOSE_NOWRITE|syscall.IN_CLOSE_WRITE) != 0 && name != "":
			names = append(names, name)
		}
	}
	return names, nil
}

func (b *inotifyBells) close() { b.f.Close() }
