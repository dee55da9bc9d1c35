// Handle table of the C ABI: C receives opaque ids, never Go pointers.
package main

import (
	"fmt"
	"sync"

	"github.com/libleases/libleases/core"
)

type handleKind uint8

const (
	kindAuthority handleKind = iota + 1
	kindEdit
	kindLease
	kindExecution
	kindCanceller
	kindWorker
)

func (k handleKind) String() string {
	switch k {
	case kindAuthority:
		return "leases_authority"
	case kindEdit:
		return "leases_edit"
	case kindLease:
		return "leases_lease"
	case kindExecution:
		return "leases_execution"
	case kindCanceller:
		return "leases_canceller"
	case kindWorker:
		return "leases_worker"
	}
	return "handle"
}

// firstHandle is far from small integers and from typical heap addresses'
// low bits, so a stray 0, 1 or -1 is never a live handle. Ids are never
// reused, so a freed handle stays invalid forever.
const firstHandle uintptr = 0x1ea5e5_000000

type entry struct {
	kind handleKind
	obj  any
}

var handles = struct {
	sync.Mutex
	next uintptr
	m    map[uintptr]entry
}{next: firstHandle, m: map[uintptr]entry{}}

func newHandle(kind handleKind, obj any) uintptr {
	handles.Lock()
	defer handles.Unlock()
	id := handles.next
	handles.next++
	handles.m[id] = entry{kind, obj}
	return id
}

func errHandle(kind handleKind, id uintptr) error {
	if id == 0 {
		return &core.Error{Kind: core.KindInvalidArgument, Msg: kind.String() + " handle is NULL"}
	}
	return &core.Error{Kind: core.KindInvalidArgument,
		Msg: fmt.Sprintf("%s handle is not live (unknown, freed, consumed, or another handle type)", kind)}
}

func lookup(kind handleKind, id uintptr) (any, error) {
	handles.Lock()
	e, ok := handles.m[id]
	handles.Unlock()
	if !ok || e.kind != kind {
		return nil, errHandle(kind, id)
	}
	return e.obj, nil
}

// take removes a handle and returns its object; ok is false for unknown or
// wrong-type ids, which are left alone.
func take(kind handleKind, id uintptr) (any, bool) {
	handles.Lock()
	defer handles.Unlock()
	e, ok := handles.m[id]
	if !ok || e.kind != kind {
		return nil, false
	}
	delete(handles.m, id)
	return e.obj, true
}

func authorityOf(id uintptr) (*core.Authority, error) {
	o, err := lookup(kindAuthority, id)
	if err != nil {
		return nil, err
	}
	return o.(*core.Authority), nil
}

func editOf(id uintptr) (*core.Edit, error) {
	o, err := lookup(kindEdit, id)
	if err != nil {
		return nil, err
	}
	return o.(*core.Edit), nil
}

func leaseOf(id uintptr) (*core.Lease, error) {
	o, err := lookup(kindLease, id)
	if err != nil {
		return nil, err
	}
	return o.(*core.Lease), nil
}
