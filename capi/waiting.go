// The C exports of revision 1's waiting claims, keep-alive and cancellers.
package main

/*
#include <stdint.h>
*/
import "C"

import (
	"context"
	"errors"
	"time"

	"github.com/libleases/libleases/core"
)

// canceller is a leases_canceller: a context its waits run on, cancelled
// once for good.
type canceller struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errCancelled is the cause a canceller gives the waits it ends.
var errCancelled = errors.New("cancelled by its leases_canceller")

func cancellerOf(id uintptr) (*canceller, error) {
	o, err := lookup(kindCanceller, id)
	if err != nil {
		return nil, err
	}
	return o.(*canceller), nil
}

// waitContext is the context of a wait given canceller handle h: none (0)
// waits unbounded by anyone.
func waitContext(h C.uintptr_t) (context.Context, error) {
	if h == 0 {
		return context.Background(), nil
	}
	c, err := cancellerOf(uintptr(h))
	if err != nil {
		return nil, err
	}
	return c.ctx, nil
}

// waitOf reads a wait or timeout bound in µs.
func waitOf(what string, us C.int64_t) (time.Duration, error) {
	if us < 0 || int64(us) > core.MaxWaitUS {
		return 0, invalid("%s is %d: a wait is 0 .. %d µs (LEASES_MAX_WAIT_US)", what, int64(us), core.MaxWaitUS)
	}
	return time.Duration(us) * time.Microsecond, nil
}

//export leasesgo_canceller_new
func leasesgo_canceller_new(out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	*out = C.uintptr_t(newHandle(kindCanceller, &canceller{ctx: ctx, cancel: cancel}))
	return 0
}

//export leasesgo_canceller_cancel
func leasesgo_canceller_cancel(h C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	c, err := cancellerOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	c.cancel(errCancelled)
	return 0
}

//export leasesgo_canceller_free
func leasesgo_canceller_free(h C.uintptr_t) {
	defer recoverTo(new(C.int))
	// A wait still running holds the context itself and goes on.
	take(kindCanceller, uintptr(h))
}

//export leasesgo_claim_wait
func leasesgo_claim_wait(h C.uintptr_t, production, worker *C.char, dur, wait C.int64_t, ch C.uintptr_t,
	out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	var a *core.Authority
	return claimInto(out, func() (err error) { a, err = authorityOf(uintptr(h)); return }, production, nil, worker, dur, false,
		func(p, _, w string, d time.Duration) (*core.Lease, error) {
			bound, err := waitOf("wait_us", wait)
			if err != nil {
				return nil, err
			}
			ctx, err := waitContext(ch)
			if err != nil {
				return nil, err
			}
			return a.ClaimWait(ctx, p, w, d, bound)
		})
}

//export leasesgo_lease_keep_alive
func leasesgo_lease_keep_alive(h C.uintptr_t, dur, interval C.int64_t) (st C.int) {
	defer recoverTo(&st)
	l, d, err := leaseAndDuration(h, dur)
	if err != nil {
		return status(err)
	}
	var opts []core.KeepAliveOption
	switch {
	case interval < 0:
		return status(&core.Error{Kind: core.KindInvalidDuration, Msg: "interval_us must not be negative (0: a third of the duration)"})
	case interval > 0:
		opts = append(opts, core.KeepAliveInterval(time.Duration(interval)*time.Microsecond))
	}
	return status(l.KeepAlive(d, opts...))
}

//export leasesgo_lease_keep_alive_stop
func leasesgo_lease_keep_alive_stop(h C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	l, err := leaseOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	l.StopKeepAlive()
	return 0
}

// reasonOut reports why a lease is over through *out_reason (and this
// thread's last error), or LEASES_OK in it when it is not.
func reasonOut(out *C.int, why error) C.int {
	if why == nil {
		*out = 0
		return 0
	}
	*out = status(why) // records the message too
	return 0
}

// reasonArgs reads the lease of a call reporting through *out_reason,
// which it clears.
func reasonArgs(h C.uintptr_t, out *C.int) (*core.Lease, error) {
	if out == nil {
		return nil, invalid("out_reason is NULL")
	}
	*out = 0
	return leaseOf(uintptr(h))
}

//export leasesgo_lease_check
func leasesgo_lease_check(h C.uintptr_t, out *C.int) (st C.int) {
	defer recoverTo(&st)
	l, err := reasonArgs(h, out)
	if err != nil {
		return status(err)
	}
	err = l.Check(context.Background())
	switch core.KindOf(err) {
	case 0, core.KindClosed, core.KindClockRegressed, core.KindNotFound, core.KindCancelled, core.KindLeaseLost,
		core.KindWrongState, core.KindExpired:
		return reasonOut(out, err)
	}
	return status(err) // a failure to ask
}

//export leasesgo_lease_wait_lost
func leasesgo_lease_wait_lost(h C.uintptr_t, timeout C.int64_t, ch C.uintptr_t, out *C.int) (st C.int) {
	defer recoverTo(&st)
	l, err := reasonArgs(h, out)
	if err != nil {
		return status(err)
	}
	bound, err := waitOf("timeout_us", timeout)
	if err != nil {
		return status(err)
	}
	ctx, err := waitContext(ch)
	if err != nil {
		return status(err)
	}
	if ctx.Err() != nil { // cancelled already: as promised, at once
		return status(interruptedBy(ctx))
	}
	// A loss already known wins over a timeout that is already due: select
	// picks among ready cases at random, and a wait of 0 must still say.
	select {
	case <-l.Done():
		return reasonOut(out, l.Err())
	default:
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-l.Done():
		return reasonOut(out, l.Err())
	case <-t.C:
		return 0
	case <-ctx.Done():
		return status(interruptedBy(ctx))
	}
}

func interruptedBy(ctx context.Context) error {
	return &core.Error{Kind: core.KindInterrupted, Err: context.Cause(ctx),
		Msg: "the wait was interrupted (" + context.Cause(ctx).Error() + ")"}
}
