// The C export of the worker loop (leases_worker_*): a thin wrapper over
// package worker/loop, the one policy every face runs on. It keeps the lease
// handles it hands out, so that a settle finds its job by the handle alone.
package main

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/worker/loop"
)

// cworker is a leases_worker: its loop and the lease handles it handed out.
type cworker struct {
	l      *loop.Loop
	mu     sync.Mutex
	leases map[uintptr]*core.Lease
}

// The values of leases_worker_options, leases_worker_settle and
// leases_worker_stop (include/leases.h).
const (
	workerExitWhenEmpty = 1
	knownWorkerFlags    = workerExitWhenEmpty
)

func workerOf(id uintptr) (*cworker, error) {
	o, err := lookup(kindWorker, id)
	if err != nil {
		return nil, err
	}
	return o.(*cworker), nil
}

//export leasesgo_worker_new
func leasesgo_worker_new(h C.uintptr_t, production, worker *C.char, dur C.int64_t, bad C.int, flags, concurrency C.int32_t,
	maxJobs, interval, drain C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if err := optsErr("options", bad); err != nil {
		return status(err)
	}
	p, err := inStr("production", production, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	w, err := inStr("worker", worker, core.MaxNameLen, false)
	if err != nil {
		return status(err)
	}
	d, err := core.ValidateDurationUS(int64(dur))
	if err != nil {
		return status(err)
	}
	if flags&^knownWorkerFlags != 0 {
		return status(invalid("options: flags 0x%x has bits this library does not know (a newer header)",
			uint32(flags&^knownWorkerFlags)))
	}
	if maxJobs < 0 || int64(maxJobs) > int64(^uint(0)>>1) {
		return status(invalid("options: max_jobs %d is negative (0: no limit)", int64(maxJobs)))
	}
	if interval < 0 {
		return status(&core.Error{Kind: core.KindInvalidDuration, Msg: "options: interval_us must not be negative (0: a third of the duration)"})
	}
	bound, err := waitOf("options: drain_timeout_us", drain)
	if err != nil {
		return status(err)
	}
	l, err := loop.New(a, loop.Config{Production: p, Worker: w, Duration: d, Interval: time.Duration(interval) * time.Microsecond,
		Concurrency: int(concurrency), MaxJobs: int(maxJobs), ExitWhenEmpty: flags&workerExitWhenEmpty != 0,
		DrainTimeout: bound, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return status(err)
	}
	*out = C.uintptr_t(newHandle(kindWorker, &cworker{l: l, leases: map[uintptr]*core.Lease{}}))
	return 0
}

//export leasesgo_worker_next
func leasesgo_worker_next(h C.uintptr_t, wait C.int64_t, out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out is NULL"))
	}
	*out = 0
	w, err := workerOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	bound, err := waitOf("wait_us", wait)
	if err != nil {
		return status(err)
	}
	l, err := w.l.Next(context.Background(), bound)
	if err != nil || l == nil {
		return status(err)
	}
	id := newHandle(kindLease, l)
	w.mu.Lock()
	w.leases[id] = l
	w.mu.Unlock()
	*out = C.uintptr_t(id)
	return 0
}

//export leasesgo_worker_settle
func leasesgo_worker_settle(h, lh C.uintptr_t, outcome C.int32_t, text *C.char, n C.size_t) (st C.int) {
	defer recoverTo(&st)
	w, err := workerOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if text == nil && n != 0 {
		return status(invalid("text is NULL but text_len is %d", uint64(n)))
	}
	w.mu.Lock()
	l, ok := w.leases[uintptr(lh)]
	w.mu.Unlock()
	if !ok {
		return status(invalid("the lease was not handed out by this worker, or was settled already"))
	}
	r := loop.Result{Outcome: loop.Outcome(outcome)}
	switch r.Outcome {
	case loop.Complete:
		if uint64(n) > core.MaxFactsLen {
			return status(invalid("facts_json is longer than the limit of %d bytes", core.MaxFactsLen))
		}
		if n > 0 {
			f, err := core.ParseFacts(C.GoStringN(text, C.int(n)))
			if err != nil {
				return status(err)
			}
			r.Facts = f
		}
	case loop.FailRetry, loop.Fail:
		if n > 0 { // any bytes: loop.Reason makes them a reason
			r.Reason = string(unsafe.Slice((*byte)(unsafe.Pointer(text)), int(n)))
		}
	}
	err = w.l.Settle(l, r)
	if core.KindOf(err) == core.KindInvalidArgument {
		return status(err) // nothing changed: still the caller's
	}
	w.mu.Lock()
	delete(w.leases, uintptr(lh))
	w.mu.Unlock()
	take(kindLease, uintptr(lh))
	return status(err)
}

//export leasesgo_worker_stop
func leasesgo_worker_stop(h C.uintptr_t, mode C.int32_t) (st C.int) {
	defer recoverTo(&st)
	w, err := workerOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	switch loop.StopMode(mode) {
	case loop.Drain, loop.GiveBack:
	default:
		return status(invalid("mode %d is not LEASES_STOP_DRAIN (1) or LEASES_STOP_GIVE_BACK (2)", int32(mode)))
	}
	w.l.Stop(loop.StopMode(mode))
	return 0
}

//export leasesgo_worker_wait
func leasesgo_worker_wait(h C.uintptr_t, timeout C.int64_t, ch C.uintptr_t, out *C.int32_t) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out_end is NULL"))
	}
	*out = 0
	w, err := workerOf(uintptr(h))
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
	if ctx.Err() != nil {
		return status(interruptedBy(ctx))
	}
	end, err := w.l.Wait(ctx, bound)
	if core.KindOf(err) == core.KindInterrupted && end == loop.Running {
		return status(interruptedBy(ctx))
	}
	*out = C.int32_t(end)
	return 0
}

//export leasesgo_worker_stats_json
func leasesgo_worker_stats_json(h C.uintptr_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	if out == nil {
		return status(invalid("out_json is NULL"))
	}
	*out = nil
	w, err := workerOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	b, err := json.Marshal(w.l.Stats())
	if err != nil {
		return status(err)
	}
	*out = cBytes(b)
	return 0
}

//export leasesgo_worker_free
func leasesgo_worker_free(h C.uintptr_t) {
	defer recoverTo(new(C.int))
	o, ok := take(kindWorker, uintptr(h))
	if !ok {
		return
	}
	w := o.(*cworker)
	w.l.Close()
	w.mu.Lock()
	for id := range w.leases {
		take(kindLease, id)
	}
	w.leases = nil
	w.mu.Unlock()
}
