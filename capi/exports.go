// The Go exports behind include/leases.h. The C shim (shim.c) defines the
// public leases_* names, checks for a forked process, and forwards here.
// Handles are ids from handles.go; outputs are C memory.
package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"time"
	"unsafe"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

const maxIDLen = 64 // longer than any UUID; core then rejects the spelling

// openInto is the body of every open export: *out cleared, the location
// (named what) read, the options judged before anything is opened, then the
// authority opened and handed to C as a handle.
func openInto(out *C.uintptr_t, what string, path *C.char, options func(location string) (leases.Options, error)) C.int {
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	p, err := inStr(what, path, core.MaxPathLen, false)
	if err != nil {
		return status(err)
	}
	o, err := options(p)
	if err != nil {
		return status(err)
	}
	a, err := leases.OpenWith(p, o)
	if err != nil {
		return status(err)
	}
	*out = C.uintptr_t(newHandle(kindAuthority, a))
	return 0
}

//export leasesgo_authority_open
func leasesgo_authority_open(path *C.char, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	return openInto(out, "path", path, func(string) (leases.Options, error) { return leases.Options{}, nil })
}

//export leasesgo_authority_close
func leasesgo_authority_close(h C.uintptr_t) {
	defer recoverTo(new(C.int))
	if o, ok := take(kindAuthority, uintptr(h)); ok {
		_ = o.(*core.Authority).Close()
	}
}

//export leasesgo_production_create
func leasesgo_production_create(h C.uintptr_t, name *C.char) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	n, err := inStr("name", name, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	_, err = a.CreateProduction(n)
	return status(err)
}

func payloadOf(payload *C.uint8_t, n C.size_t) ([]byte, error) {
	if payload == nil && n != 0 {
		return nil, invalid("payload is NULL but payload_len is %d", uint64(n))
	}
	if uint64(n) > core.MaxPayloadLen {
		return nil, invalid("payload is %d bytes, the limit is %d", uint64(n), core.MaxPayloadLen)
	}
	if n == 0 {
		return []byte{}, nil
	}
	return C.GoBytes(unsafe.Pointer(payload), C.int(n)), nil
}

//export leasesgo_job_request
func leasesgo_job_request(h C.uintptr_t, production, key *C.char, payload *C.uint8_t, n C.size_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return requestJob(h, production, key, payload, n, out, func() (core.RequestOptions, error) { return core.RequestOptions{}, nil })
}

// requestJob is leases_job_request and _v2: options reads the request's
// options once the other arguments passed their checks.
func requestJob(h C.uintptr_t, production, key *C.char, payload *C.uint8_t, n C.size_t, out **C.char,
	options func() (core.RequestOptions, error)) C.int {
	if out == nil {
		return status(invalid("out_job_id is NULL"))
	}
	*out = nil
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	p, err := inStr("production", production, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	k, err := inStr("key", key, core.MaxNameLen, true)
	if err != nil {
		return status(err)
	}
	b, err := payloadOf(payload, n)
	if err != nil {
		return status(err)
	}
	o, err := options()
	if err != nil {
		return status(err)
	}
	id, err := a.RequestJobWith(p, k, b, o)
	if err != nil {
		return status(err)
	}
	*out = cString(id)
	return 0
}

// claimArgs reads the common arguments of every claim, in rejection order.
func claimArgs(production, jobID, worker *C.char, dur C.int64_t, wantJob bool) (p, j, w string, d time.Duration, err error) {
	if d, err = core.ValidateDurationUS(int64(dur)); err != nil {
		return
	}
	if p, err = inStr("production", production, core.MaxNameLen, false); err != nil {
		return
	}
	if wantJob {
		if j, err = inStr("job_id", jobID, maxIDLen, false); err != nil {
			return
		}
	}
	w, err = inStr("worker", worker, core.MaxNameLen, false)
	return
}

// claimInto is the body of every claim export (claim, claim_job, edit_claim):
// *out cleared, the handle resolved, the arguments read in rejection order,
// then the claim, whose lease becomes a new handle.
func claimInto(out *C.uintptr_t, resolve func() error, production, jobID, worker *C.char, dur C.int64_t,
	wantJob bool, claim func(p, j, w string, d time.Duration) (*core.Lease, error)) C.int {
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	if err := resolve(); err != nil {
		return status(err)
	}
	p, j, w, d, err := claimArgs(production, jobID, worker, dur, wantJob)
	if err != nil {
		return status(err)
	}
	l, err := claim(p, j, w, d)
	return outLease(out, l, err)
}

// outLease hands a new lease to C as a handle, or reports err.
func outLease(out *C.uintptr_t, l *core.Lease, err error) C.int {
	if err != nil {
		return status(err)
	}
	*out = C.uintptr_t(newHandle(kindLease, l))
	return 0
}

//export leasesgo_claim
func leasesgo_claim(h C.uintptr_t, production, worker *C.char, dur C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	var a *core.Authority
	return claimInto(out, func() (err error) { a, err = authorityOf(uintptr(h)); return }, production, nil, worker, dur, false,
		func(p, _, w string, d time.Duration) (*core.Lease, error) { return a.Claim(p, w, d) })
}

//export leasesgo_claim_job
func leasesgo_claim_job(h C.uintptr_t, production, jobID, worker *C.char, dur C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	var a *core.Authority
	return claimInto(out, func() (err error) { a, err = authorityOf(uintptr(h)); return }, production, jobID, worker, dur, true,
		func(p, j, w string, d time.Duration) (*core.Lease, error) { return a.ClaimJob(p, j, w, d) })
}

//export leasesgo_cancel
func leasesgo_cancel(h C.uintptr_t, production, jobID *C.char) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	p, err := inStr("production", production, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	j, err := inStr("job_id", jobID, maxIDLen, false)
	if err != nil {
		return status(err)
	}
	return status(a.Cancel(p, j))
}

// ---- leases ----------------------------------------------------------------

// leaseAndDuration reads a lease handle and a duration, in rejection order.
func leaseAndDuration(h C.uintptr_t, dur C.int64_t) (*core.Lease, time.Duration, error) {
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return nil, 0, err
	}
	d, err := core.ValidateDurationUS(int64(dur))
	return l, d, err
}

//export leasesgo_lease_renew
func leasesgo_lease_renew(h C.uintptr_t, dur C.int64_t) (st C.int) {
	defer recoverTo(&st)
	l, d, err := leaseAndDuration(h, dur)
	if err != nil {
		return status(err)
	}
	return status(l.Renew(d))
}

//export leasesgo_lease_release
func leasesgo_lease_release(h C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	return status(l.Release())
}

//export leasesgo_lease_fail
func leasesgo_lease_fail(h C.uintptr_t, reason *C.char) (st C.int) {
	defer recoverTo(&st)
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	r, err := inStr("reason", reason, core.MaxReasonLen, false)
	if err != nil {
		return status(err)
	}
	return status(l.Fail(r))
}

func factsOf(facts *C.char) (core.Facts, error) {
	s, err := inStr("facts_json", facts, core.MaxFactsLen, true)
	if err != nil {
		return core.Facts{}, err
	}
	return core.ParseFacts(s)
}

//export leasesgo_lease_complete
func leasesgo_lease_complete(h C.uintptr_t, facts *C.char) (st C.int) {
	defer recoverTo(&st)
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	f, err := factsOf(facts)
	if err != nil {
		return status(err)
	}
	return status(l.Complete(f))
}

//export leasesgo_lease_expiry
func leasesgo_lease_expiry(h C.uintptr_t, out *C.int64_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out_expiry_unix_us is NULL"))
	}
	*out = 0
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	*out = C.int64_t(l.ExpiryUnixUS())
	return 0
}

// leaseString reads one local attribute of a lease into C memory.
func leaseString(h C.uintptr_t, out **C.char, what string, get func(*core.Lease) (string, error)) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("%s is NULL", what))
	}
	*out = nil
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	s, err := get(l)
	if err != nil {
		return status(err)
	}
	*out = cString(s)
	return 0
}

//export leasesgo_lease_job_id
func leasesgo_lease_job_id(h C.uintptr_t, out **C.char) C.int {
	return leaseString(h, out, "out_job_id", func(l *core.Lease) (string, error) { return l.JobID(), nil })
}

//export leasesgo_lease_payload
func leasesgo_lease_payload(h C.uintptr_t, out **C.uint8_t, outLen *C.size_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out_payload is NULL"))
	}
	*out = nil
	if outLen == nil {
		return status(invalid("out_payload_len is NULL"))
	}
	*outLen = 0
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	b, err := l.Payload()
	if err != nil {
		return status(err)
	}
	// Always a fresh allocation, even for an empty payload, so the caller
	// frees one pointer with leases_free in every success case.
	*out = (*C.uint8_t)(unsafe.Pointer(cBytes(b)))
	*outLen = C.size_t(len(b))
	return 0
}

//export leasesgo_lease_production
func leasesgo_lease_production(h C.uintptr_t, out **C.char) C.int {
	return leaseString(h, out, "out_production", func(l *core.Lease) (string, error) { return l.Production(), nil })
}

//export leasesgo_lease_worker
func leasesgo_lease_worker(h C.uintptr_t, out **C.char) C.int {
	return leaseString(h, out, "out_worker", func(l *core.Lease) (string, error) { return l.Worker(), nil })
}

//export leasesgo_lease_export
func leasesgo_lease_export(h C.uintptr_t, out **C.char) C.int {
	return leaseString(h, out, "out_token", (*core.Lease).Export)
}

//export leasesgo_lease_import
func leasesgo_lease_import(h C.uintptr_t, token *C.char, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if token == nil {
		return status(invalid("token is NULL"))
	}
	// Read one byte past the limit so that core reports an overlong token as
	// a bad token; core also judges every other malformation.
	n := int(C.strnlen(token, C.size_t(core.MaxTokenLen+1)))
	l, err := a.Import(C.GoStringN(token, C.int(n)))
	return outLease(out, l, err)
}

//export leasesgo_lease_free
func leasesgo_lease_free(h C.uintptr_t) {
	defer recoverTo(new(C.int))
	// Local memory only: never writes. A keep-alive stops first, so that
	// no renewal is written once free returns.
	if o, ok := take(kindLease, uintptr(h)); ok {
		o.(*core.Lease).StopKeepAlive()
	}
}

// ---- edits -----------------------------------------------------------------

//export leasesgo_edit_begin
func leasesgo_edit_begin(h C.uintptr_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	e, err := a.Begin()
	if err != nil {
		return status(err)
	}
	*out = C.uintptr_t(newHandle(kindEdit, e))
	return 0
}

//export leasesgo_edit_claim
func leasesgo_edit_claim(h C.uintptr_t, production, worker *C.char, dur C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	var e *core.Edit
	return claimInto(out, func() (err error) { e, err = editOf(uintptr(h)); return }, production, nil, worker, dur, false,
		func(p, _, w string, d time.Duration) (*core.Lease, error) { return e.Claim(p, w, d) })
}

//export leasesgo_edit_complete
func leasesgo_edit_complete(h, lh C.uintptr_t, facts *C.char) (st C.int) {
	defer recoverTo(&st)
	e, err := editOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	l, err := leaseOf(uintptr(lh))
	if err != nil {
		return status(err)
	}
	f, err := factsOf(facts)
	if err != nil {
		return status(err)
	}
	return status(e.Complete(l, f))
}

//export leasesgo_edit_commit
func leasesgo_edit_commit(h C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	o, ok := take(kindEdit, uintptr(h))
	if !ok {
		return status(errHandle(kindEdit, uintptr(h)))
	}
	return status(o.(*core.Edit).Commit())
}

//export leasesgo_edit_abort
func leasesgo_edit_abort(h C.uintptr_t) {
	defer recoverTo(new(C.int))
	if o, ok := take(kindEdit, uintptr(h)); ok {
		o.(*core.Edit).Abort()
	}
}

// ---- observations ----------------------------------------------------------

// The unbounded listings of revision 0; capi/observe.go has the pages.

//export leasesgo_jobs_json
func leasesgo_jobs_json(h C.uintptr_t, production *C.char, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		p, err := inStr("production", production, core.MaxNameLen, false)
		if err != nil {
			return nil, err
		}
		js, err := a.Jobs(p)
		if js == nil {
			js = []core.Job{}
		}
		return js, err
	})
}

//export leasesgo_events_json
func leasesgo_events_json(h C.uintptr_t, production *C.char, after C.int64_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		p, err := inStr("production", production, core.MaxNameLen, true)
		if err != nil {
			return nil, err
		}
		if after < 0 {
			return nil, invalid("after_seq must not be negative")
		}
		es, err := a.Events(p, int64(after))
		if es == nil {
			es = []core.Event{}
		}
		return es, err
	})
}
