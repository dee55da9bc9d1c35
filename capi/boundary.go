// The C boundary: status and last-error reporting, panic recovery, and
// copying strings across without ever handing Go pointers to C.
package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
void leasesshim_set_error(const char *msg, size_t len);
void leasesshim_set_error_job(const char *id, size_t len);
char *leasesshim_copy_out(const char *p, size_t n);
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unicode/utf8"
	"unsafe"

	"github.com/libleases/libleases/core"
)

// main is required by -buildmode=c-shared; it never runs.
func main() {}

func invalid(format string, args ...any) error {
	return &core.Error{Kind: core.KindInvalidArgument, Msg: fmt.Sprintf(format, args...)}
}

// setError stores msg in the calling thread's last-error buffer (kept by the
// C shim). Go runs an export on the caller's thread, so the C call made here
// lands in that thread's buffer. Messages come from core, which never puts a
// secret in one.
func setError(msg string) {
	if msg == "" {
		msg = "unknown error"
	}
	C.leasesshim_set_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// status turns err into the C status, recording the message on failure.
func status(err error) C.int {
	if err == nil {
		return 0
	}
	setError(err.Error())
	if id := errorJob(err); id != "" {
		C.leasesshim_set_error_job((*C.char)(unsafe.Pointer(unsafe.StringData(id))), C.size_t(len(id)))
	}
	return C.int(core.KindOf(err))
}

// errorJob is the job id leases_last_error_job_id reports for err: the job
// an outcome-unknown claim chose, else the job the failed call acted on.
func errorJob(err error) string {
	var e *core.Error
	if !errors.As(err, &e) {
		return ""
	}
	if e.ClaimedJobID != "" {
		return e.ClaimedJobID
	}
	return e.JobID
}

// recoverTo is deferred by every export: a panic becomes LEASES_INTERNAL and
// the host process carries on. Only runtime errors are described (their text
// is ours, never caller data); other panic values are withheld.
func recoverTo(st *C.int) {
	r := recover()
	if r == nil {
		return
	}
	detail := "panic value withheld"
	if re, ok := r.(runtime.Error); ok {
		detail = re.Error()
	}
	setError("internal: the library recovered from a panic (" + detail + "); please report it")
	*st = C.int(core.KindInternal)
}

// inStr copies a borrowed C string, reading at most max+1 bytes so that an
// unterminated or huge input is refused without scanning all of it.
// optional lets NULL mean "".
func inStr(what string, p *C.char, max int, optional bool) (string, error) {
	if p == nil {
		if optional {
			return "", nil
		}
		return "", invalid("%s is NULL", what)
	}
	n := int(C.strnlen(p, C.size_t(max+1)))
	if n > max {
		return "", invalid("%s is longer than the limit of %d bytes", what, max)
	}
	s := C.GoStringN(p, C.int(n))
	if !utf8.ValidString(s) {
		return "", invalid("%s is not valid UTF-8", what)
	}
	return s, nil
}

// cString hands out a NUL-terminated copy in C memory; the caller frees it
// with leases_free. The shim makes the copy (not C.CString) so that valgrind
// sees its bytes defined (capi/shim.c says why).
func cString(s string) *C.char {
	return copyOut(unsafe.StringData(s), len(s))
}

// cBytes is cString for a byte buffer: n bytes and a NUL.
func cBytes(b []byte) *C.char {
	return copyOut(unsafe.SliceData(b), len(b))
}

func copyOut(p *byte, n int) *C.char {
	s := C.leasesshim_copy_out((*C.char)(unsafe.Pointer(p)), C.size_t(n))
	if s == nil {
		panic(errOutOfMemory{})
	}
	return s
}

// errOutOfMemory is the panic of a failed malloc (C.CString would abort the
// host instead); recoverTo turns it into LEASES_INTERNAL with this text.
type errOutOfMemory struct{}

func (errOutOfMemory) Error() string { return "out of memory for the result" }
func (errOutOfMemory) RuntimeError() {}

func durationOf(us C.int64_t) (int64, error) {
	if _, err := core.ValidateDurationUS(int64(us)); err != nil {
		return 0, err
	}
	return int64(us), nil
}
