//go:build leasestest

package core

// SetClockForTest replaces the authority's clock. It exists only in builds
// with the leasestest tag (the test build of libleases); release builds have
// no way to choose the authority's time.
func SetClockForTest(a *Authority, nowUnixUS func() int64) { a.setClock(nowUnixUS) }

// TestSeamPresent marks a test build.
const TestSeamPresent = true
