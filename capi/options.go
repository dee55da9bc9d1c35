// The Go export of opening with options (include/leases.h, "opening with
// options"). The shim reads leases_open_options by its size and passes the
// fields; a size it refused arrives as bad (optsErr).
package main

/*
#include <stdint.h>
*/
import "C"

import (
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

// optsErr is the refusal of an options struct the shim could not read
// (codes of leasesshim_opts_check in shim.c); nil for 0.
func optsErr(what string, bad C.int) error {
	switch bad {
	case 0:
		return nil
	case 1:
		return invalid("%s: size is smaller than its size member", what)
	case 2:
		return invalid("%s: size is over 4096 bytes", what)
	default:
		return invalid("%s: it sets fields this library does not know (a newer header); they must be zero", what)
	}
}

// The values of leases_open_options (include/leases.h).
const (
	openMustExist  = 1
	knownOpenFlags = openMustExist
)

// synchronousLevels are SQLite's PRAGMA synchronous numbers the options may
// name; 0 is the default ("" to the store: FULL).
var synchronousLevels = map[C.int32_t]string{0: "", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

// openOptions turns the fields of leases_open_options into the Go options,
// refusing what the header does not allow. The location decides whether
// synchronous may be set at all.
func openOptions(location string, flags, synchronous C.int32_t, busyUS C.int64_t) (leases.Options, error) {
	var o leases.Options
	if flags&^knownOpenFlags != 0 {
		return o, invalid("options: flags 0x%x has bits this library does not know (a newer header)",
			uint32(flags&^knownOpenFlags))
	}
	o.MustExist = flags&openMustExist != 0
	level, ok := synchronousLevels[synchronous]
	if !ok {
		return o, invalid("options: synchronous %d is not a LEASES_SYNCHRONOUS_* value (0 .. 3)", int32(synchronous))
	}
	if level != "" && leases.IsPostgres(location) {
		return o, invalid("options: synchronous is a SQLite setting; PostgreSQL commits durably (leave it 0)")
	}
	o.Synchronous = level
	if busyUS < 0 || int64(busyUS) > core.MaxDurationUS {
		return o, invalid("options: busy_timeout_us must be 0 (the default, 10 s) or 1 .. %d, got %d",
			core.MaxDurationUS, int64(busyUS))
	}
	// The stores wait at millisecond resolution: round up, so a short
	// timeout never becomes "do not wait at all".
	o.BusyTimeout = (time.Duration(busyUS)*time.Microsecond + time.Millisecond - 1).Truncate(time.Millisecond)
	return o, nil
}

//export leasesgo_authority_open_v2
func leasesgo_authority_open_v2(path *C.char, bad C.int, flags, synchronous C.int32_t, busyUS C.int64_t,
	out *C.uintptr_t) (st C.int) {
	defer recoverTo(&st)
	return openInto(out, "location", path, func(location string) (leases.Options, error) {
		if err := optsErr("options", bad); err != nil {
			return leases.Options{}, err
		}
		return openOptions(location, flags, synchronous, busyUS)
	})
}
