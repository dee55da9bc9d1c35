// The Go exports of retries, run-at and priorities (include/leases.h, since
// revision 1). The shim reads the options structs by their size and passes
// their fields; it reports a size it refused as optsBad.
package main

/*
#include <stdint.h>
*/
import "C"

import (
	"time"

	"github.com/libleases/libleases/core"
)

func policyOf(maxAttempts, jitter C.int32_t, base, capUS C.int64_t) core.RetryPolicy {
	return core.RetryPolicy{MaxAttempts: int(maxAttempts), JitterPercent: int(jitter),
		BackoffBase: time.Duration(base) * time.Microsecond, BackoffCap: time.Duration(capUS) * time.Microsecond}
}

// authorityProduction reads the two leading arguments of most exports: the
// authority handle and the production name.
func authorityProduction(h C.uintptr_t, production *C.char) (*core.Authority, string, error) {
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return nil, "", err
	}
	p, err := inStr("production", production, core.MaxNameLen, false)
	return a, p, err
}

// usDuration is a count of µs as a duration, refused when it would overflow.
func usDuration(what string, us C.int64_t, max time.Duration) (time.Duration, error) {
	if us < 0 || int64(us) > max.Microseconds() {
		return 0, invalid("%s must be within 0..%dus, got %dus", what, max.Microseconds(), int64(us))
	}
	return time.Duration(us) * time.Microsecond, nil
}

//export leasesgo_job_request_v2
func leasesgo_job_request_v2(h C.uintptr_t, production, key *C.char, payload *C.uint8_t, n C.size_t,
	bad C.int, priority C.int32_t, runAt, delay C.int64_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return requestJob(h, production, key, payload, n, out, func() (core.RequestOptions, error) {
		if err := optsErr("options", bad); err != nil {
			return core.RequestOptions{}, err
		}
		o := core.RequestOptions{Priority: int(priority)}
		var err error
		if o.Delay, err = usDuration("delay_us", delay, core.MaxDelay); err != nil {
			return o, err
		}
		if runAt != 0 {
			o.RunAt = time.UnixMicro(int64(runAt))
		}
		return o, nil
	})
}

//export leasesgo_production_create_v2
func leasesgo_production_create_v2(h C.uintptr_t, name *C.char, given, bad C.int,
	maxAttempts, jitter C.int32_t, base, capUS C.int64_t) (st C.int) {
	defer recoverTo(&st)
	a, n, err := authorityProduction(h, name)
	if err != nil {
		return status(err)
	}
	if err := optsErr("policy", bad); err != nil {
		return status(err)
	}
	if given == 0 {
		_, err = a.CreateProduction(n)
	} else {
		_, err = a.CreateProductionWithPolicy(n, policyOf(maxAttempts, jitter, base, capUS))
	}
	return status(err)
}

//export leasesgo_production_set_policy
func leasesgo_production_set_policy(h C.uintptr_t, production *C.char, bad C.int,
	maxAttempts, jitter C.int32_t, base, capUS C.int64_t) (st C.int) {
	defer recoverTo(&st)
	a, p, err := authorityProduction(h, production)
	if err != nil {
		return status(err)
	}
	if err := optsErr("policy", bad); err != nil {
		return status(err)
	}
	return status(a.SetRetryPolicy(p, policyOf(maxAttempts, jitter, base, capUS)))
}

//export leasesgo_lease_fail_retry
func leasesgo_lease_fail_retry(h C.uintptr_t, reason *C.char, delay C.int64_t) (st C.int) {
	defer recoverTo(&st)
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	r, err := inStr("reason", reason, core.MaxReasonLen, true)
	if err != nil {
		return status(err)
	}
	d, err := usDuration("delay_us", delay, core.MaxDelay)
	if err != nil {
		return status(err)
	}
	return status(l.FailRetry(r, d))
}

//export leasesgo_job_retry
func leasesgo_job_retry(h C.uintptr_t, production, jobID *C.char) (st C.int) {
	defer recoverTo(&st)
	a, p, err := authorityProduction(h, production)
	if err != nil {
		return status(err)
	}
	j, err := inStr("job_id", jobID, maxIDLen, false)
	if err != nil {
		return status(err)
	}
	return status(a.RetryJob(p, j))
}

//export leasesgo_production_redrive
func leasesgo_production_redrive(h C.uintptr_t, production, state *C.char, out *C.int64_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out_count is NULL"))
	}
	*out = 0
	a, p, err := authorityProduction(h, production)
	if err != nil {
		return status(err)
	}
	s, err := inStr("state", state, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	n, err := a.Redrive(p, s)
	if err != nil {
		return status(err)
	}
	*out = C.int64_t(n)
	return 0
}
