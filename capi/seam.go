//go:build leasestest

// Test-only exports, present only in the leasestest build
// (build/test/libleases.so) and declared in include/leases_testing.h.
// The release library has no way to choose the authority's time.
package main

/*
#include <stddef.h>
#include <stdint.h>
void leasesshim_testing_undefined(const void *p, size_t n);
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

//export leasesgo_testing_set_clock
func leasesgo_testing_set_clock(h C.uintptr_t, now C.int64_t) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if now < 0 {
		return status(invalid("now_unix_us must not be negative"))
	}
	if now == 0 {
		core.SetClockForTest(a, func() int64 { return time.Now().UnixMicro() })
		return 0
	}
	v := int64(now)
	core.SetClockForTest(a, func() int64 { return v })
	return 0
}

//export leasesgo_testing_set_clock_sequence
func leasesgo_testing_set_clock_sequence(h C.uintptr_t, samples *C.int64_t, count C.size_t) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if samples == nil || count == 0 || count > 1<<16 {
		return status(invalid("samples_unix_us must hold 1 .. 65536 samples"))
	}
	seq := append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(samples)), int(count))...)
	for _, v := range seq {
		if v <= 0 {
			return status(invalid("every sample must be positive"))
		}
	}
	var mu sync.Mutex
	next := 0
	core.SetClockForTest(a, func() int64 {
		mu.Lock()
		defer mu.Unlock()
		v := seq[min(next, len(seq)-1)]
		next++
		return v
	})
	return 0
}

//export leasesgo_testing_set_safety_poll
func leasesgo_testing_set_safety_poll(h C.uintptr_t, pollUS C.int64_t) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if pollUS <= 0 {
		return status(invalid("poll_us must be positive"))
	}
	core.SetSafetyPollForTest(a, time.Duration(pollUS)*time.Microsecond)
	return 0
}

//export leasesgo_testing_open
func leasesgo_testing_open(path *C.char, busyUS C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	return openInto(out, "path", path, func(string) (leases.Options, error) {
		if busyUS <= 0 {
			return leases.Options{}, invalid("busy_timeout_us must be positive")
		}
		return leases.Options{BusyTimeout: time.Duration(busyUS) * time.Microsecond}, nil
	})
}

//export leasesgo_testing_pragma
func leasesgo_testing_pragma(h C.uintptr_t, name *C.char, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return authorityInto(h, out, "out_value", func(a *core.Authority) (string, error) {
		n, err := inStr("name", name, core.MaxNameLen, false)
		if err != nil {
			return "", err
		}
		switch n {
		case "synchronous", "busy_timeout", "journal_mode":
		default:
			return "", invalid("pragma %q is not one the tests read", n)
		}
		return core.PragmaForTest(a, n)
	})
}

//export leasesgo_testing_lose_commit_acks
func leasesgo_testing_lose_commit_acks(h C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	core.FailCommitsForTest(a, errLostAck{})
	return 0
}

// errLostAck is the injected failure of leases_testing_lose_commit_acks.
type errLostAck struct{}

func (errLostAck) Error() string { return "injected: the commit's acknowledgement was lost" }

//export leasesgo_testing_panic
func leasesgo_testing_panic() (st C.int) {
	defer recoverTo(&st)
	var m map[string]int
	m["boom"] = 1 // a runtime error: assignment to entry in nil map
	return 0
}

//export leasesgo_testing_lost_track
func leasesgo_testing_lost_track(text *C.char, asError C.uint32_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out_copy is NULL"))
	}
	*out = nil
	t, err := inStr("text", text, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	b := []byte(t)
	if len(b) > 0 {
		C.leasesshim_testing_undefined(unsafe.Pointer(&b[0]), C.size_t(len(b)))
	}
	// Go's writes make the buffer defined again before the GC can reuse it.
	defer clear(b)
	if asError != 0 {
		setError(unsafe.String(unsafe.SliceData(b), len(b)))
		return C.int(core.KindInvalidArgument)
	}
	*out = cBytes(b)
	return 0
}
