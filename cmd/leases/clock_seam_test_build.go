//go:build leasestest

package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/libleases/libleases/core"
)

// clockOffsetEnv names the clock fault of a test build of the CLI: a whole
// number of microseconds (negative: behind) that the authority's clock runs
// ahead of the wall clock, for the whole process. The race's CLI worker
// makes its clock faults with it. Release builds have no such variable.
const clockOffsetEnv = "LEASES_TEST_CLOCK_OFFSET_US"

// clockSeamHook: with LEASES_TEST_CLOCK_OFFSET_US=N the authority reads the
// wall clock plus N µs (core.SetClockForTest). A value that is not a whole
// number is an error, so that a test never runs on a clock it did not ask for.
func clockSeamHook(a *core.Authority) error {
	v, ok := os.LookupEnv(clockOffsetEnv)
	if !ok || v == "" {
		return nil
	}
	off, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%s=%q is not a whole number of microseconds", clockOffsetEnv, v)
	}
	core.SetClockForTest(a, func() int64 { return time.Now().UnixMicro() + off })
	return nil
}
