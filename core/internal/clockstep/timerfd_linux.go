package clockstep

import (
	"errors"
	"math"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var errClosed = errors.New("clockstep: closed")

// timerfd is a CLOCK_REALTIME timer set for the end of time with
// TFD_TIMER_CANCEL_ON_SET: it never expires, and its read fails with
// ECANCELED as soon as the clock is set. Non-blocking, served by the
// runtime's poller, so a deadline bounds a wait and close ends one.
type timerfd struct {
	f    *os.File
	deaf bool // it could not be armed again: poll
}

func newSource() source {
	if t, err := newTimerfd(); err == nil {
		return t
	}
	return newTicker() // an old kernel, or a sandbox without timerfd: poll
}

func newTimerfd() (*timerfd, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t := &timerfd{f: os.NewFile(uintptr(fd), "clockstep-timerfd")}
	if err := t.f.SetReadDeadline(time.Time{}); err != nil { // not served by the poller
		t.f.Close()
		return nil, err
	}
	if err := t.setTimer(); err != nil {
		t.f.Close()
		return nil, err
	}
	return t, nil
}

func (t *timerfd) setTimer() error {
	c, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = c.Control(func(fd uintptr) {
		its := unix.ItimerSpec{Value: unix.Timespec{Sec: math.MaxInt64}}
		serr = unix.TimerfdSettime(int(fd), unix.TFD_TIMER_ABSTIME|unix.TFD_TIMER_CANCEL_ON_SET, &its, nil)
	})
	if err != nil {
		return err
	}
	return serr
}

func (t *timerfd) arm(deadline time.Time) { _ = t.f.SetReadDeadline(deadline) }

func (t *timerfd) wait() (bool, error) {
	var buf [8]byte
	_, err := t.f.Read(buf[:])
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case errors.Is(err, syscall.ECANCELED):
		// The clock was set; the read that said so made the timer listen
		// again, and setting it anew makes sure: a step from here on is
		// reported, one before is this report's.
		if t.setTimer() != nil {
			t.deaf = true
		}
		return true, nil
	case err != nil:
		return false, errClosed
	}
	return true, nil // it expired: the end of time came (as good as a step)
}

func (t *timerfd) interrupt()       { _ = t.f.SetReadDeadline(time.Unix(1, 0)) }
func (t *timerfd) close()           { t.f.Close() }
func (t *timerfd) hearsSteps() bool { return !t.deaf }
