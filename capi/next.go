// The C export of completing a lease and claiming the next job in one
// commit (leases_lease_complete_and_claim_next).
package main

// #include <stdint.h>
import "C"

import "github.com/libleases/libleases/core"

//export leasesgo_lease_complete_and_claim_next
func leasesgo_lease_complete_and_claim_next(h C.uintptr_t, facts *C.char, dur C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	f, err := factsOf(facts)
	if err != nil {
		return status(err)
	}
	d, err := core.ValidateDurationUS(int64(dur))
	if err != nil {
		return status(err)
	}
	next, err := l.CompleteAndClaimNext(f, d)
	if next == nil { // refused, or nothing to claim (*out stays NULL)
		return status(err)
	}
	return outLease(out, next, err)
}
