//go:build leasestest

package reliability

import "github.com/libleases/libleases/core"

// In a test build (make test-race sets the leasestest tag) the Go worker
// of the race drives its authority's clock through the seam: clock faults.
func init() { raceSetClock = core.SetClockForTest }
