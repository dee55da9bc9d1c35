// Execution handles of the reference executor (core.Execution). The handle
// owns C copies of its two paths, which leases_execution_temp_path and
// leases_execution_final_path lend out until finish or abandon.
package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/libleases/libleases/core"
)

type execution struct {
	x           *core.Execution
	temp, final *C.char
}

func (e *execution) freePaths() {
	C.free(unsafe.Pointer(e.temp))
	C.free(unsafe.Pointer(e.final))
	e.temp, e.final = nil, nil
}

//export leasesgo_execution_begin
func leasesgo_execution_begin(lh C.uintptr_t, dir *C.char, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	l, err := leaseOf(uintptr(lh))
	if err != nil {
		return status(err)
	}
	d, err := inStr("output_dir", dir, core.MaxPathLen, false)
	if err != nil {
		return status(err)
	}
	x, err := l.BeginExecution(d)
	if err != nil {
		return status(err)
	}
	e := &execution{x: x, temp: cString(x.TempPath()), final: cString(x.FinalPath())}
	*out = C.uintptr_t(newHandle(kindExecution, e))
	return 0
}

func executionOf(h C.uintptr_t) (*execution, error) {
	o, err := lookup(kindExecution, uintptr(h))
	if err != nil {
		return nil, err
	}
	return o.(*execution), nil
}

//export leasesgo_execution_temp_path
func leasesgo_execution_temp_path(h C.uintptr_t) (p *C.char) {
	defer recoverTo(new(C.int))
	e, err := executionOf(h)
	if err != nil {
		status(err)
		return nil
	}
	return e.temp
}

//export leasesgo_execution_final_path
func leasesgo_execution_final_path(h C.uintptr_t) (p *C.char) {
	defer recoverTo(new(C.int))
	e, err := executionOf(h)
	if err != nil {
		status(err)
		return nil
	}
	return e.final
}

//export leasesgo_execution_finish
func leasesgo_execution_finish(h C.uintptr_t, facts *C.char) (st C.int) {
	defer recoverTo(&st)
	if _, err := executionOf(h); err != nil {
		return status(err)
	}
	// A bad facts_json is refused before the execution is consumed, so the
	// caller can still finish or abandon it.
	f, err := factsOf(facts)
	if err != nil {
		return status(err)
	}
	o, ok := take(kindExecution, uintptr(h))
	if !ok { // consumed by another thread meanwhile
		return status(errHandle(kindExecution, uintptr(h)))
	}
	e := o.(*execution)
	defer e.freePaths()
	return status(e.x.Finish(f))
}

//export leasesgo_execution_abandon
func leasesgo_execution_abandon(h C.uintptr_t) {
	defer recoverTo(new(C.int))
	if o, ok := take(kindExecution, uintptr(h)); ok {
		e := o.(*execution)
		defer e.freePaths()
		e.x.Abandon()
	}
}
