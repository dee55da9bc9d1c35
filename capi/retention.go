// The Go exports of retention and pruning (include/leases.h, since revision
// 1). The shim reads the options structs by their size and passes their
// fields; it reports a size it refused as optsBad.
package main

/*
#include <stdint.h>
*/
import "C"

import (
	"context"
	"time"
	"unsafe"

	"github.com/libleases/libleases/core"
)

func retentionOf(completed, failed, dead, cancelled, events C.int64_t) (core.RetentionPolicy, error) {
	var r core.RetentionPolicy
	for _, f := range []struct {
		what string
		us   C.int64_t
		to   *time.Duration
	}{{"keep_completed_us", completed, &r.Completed}, {"keep_failed_us", failed, &r.Failed},
		{"keep_dead_us", dead, &r.Dead}, {"keep_cancelled_us", cancelled, &r.Cancelled},
		{"keep_events_us", events, &r.Events}} {
		d, err := usDuration(f.what, f.us, core.MaxRetention)
		if err != nil {
			return r, err
		}
		*f.to = d
	}
	return r, nil
}

//export leasesgo_production_set_retention
func leasesgo_production_set_retention(h C.uintptr_t, production *C.char, bad C.int,
	completed, failed, dead, cancelled, events C.int64_t) (st C.int) {
	defer recoverTo(&st)
	a, p, err := authorityProduction(h, production)
	if err != nil {
		return status(err)
	}
	if err := optsErr("policy", bad); err != nil {
		return status(err)
	}
	r, err := retentionOf(completed, failed, dead, cancelled, events)
	if err != nil {
		return status(err)
	}
	return status(a.SetRetentionPolicy(p, r))
}

//export leasesgo_production_retention
func leasesgo_production_retention(h C.uintptr_t, production *C.char, bad C.int, out *C.int64_t) (st C.int) {
	defer recoverTo(&st)
	if bad == 4 {
		return status(invalid("out is NULL"))
	}
	if err := optsErr("out", bad); err != nil {
		return status(err)
	}
	a, p, err := authorityProduction(h, production)
	if err != nil {
		return status(err)
	}
	q := core.ProductionQuery{Limit: core.MaxPageSize}
	for {
		page, err := a.ListProductions(context.Background(), q)
		if err != nil {
			return status(err)
		}
		for _, pr := range page.Productions {
			if pr.Name == p {
				v := unsafe.Slice(out, 5)
				r := pr.Retention
				for i, d := range []time.Duration{r.Completed, r.Failed, r.Dead, r.Cancelled, r.Events} {
					v[i] = C.int64_t(d.Microseconds())
				}
				return 0
			}
		}
		if page.Next == "" {
			return status(&core.Error{Kind: core.KindNotFound, Msg: "production " + core.DisplayName(p) + " does not exist"})
		}
		q.After = page.Next
	}
}

// The flags of leases_prune_options (include/leases.h).
const pruneDryRun = 1

//export leasesgo_prune
func leasesgo_prune(h C.uintptr_t, bad C.int, flags C.int32_t, older C.int64_t, production, archive *C.char,
	outJobs, outEvents *C.int64_t) (st C.int) {
	defer recoverTo(&st)
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	if err := optsErr("options", bad); err != nil {
		return status(err)
	}
	if flags&^pruneDryRun != 0 {
		return status(invalid("options: unknown flags %#x", int32(flags)))
	}
	o := core.PruneOptions{DryRun: flags&pruneDryRun != 0}
	if o.Production, err = inStr("production", production, core.MaxNameLen, true); err != nil {
		return status(err)
	}
	if o.Archive, err = inStr("archive_path", archive, core.MaxPathLen, true); err != nil {
		return status(err)
	}
	if o.OlderThan, err = usDuration("older_than_us", older, core.MaxRetention); err != nil {
		return status(err)
	}
	r, err := a.Prune(context.Background(), o)
	*outJobs, *outEvents = C.int64_t(r.Jobs), C.int64_t(r.Events)
	return status(err)
}
