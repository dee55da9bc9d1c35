// Package testwait holds the waiting helpers of the tests: a value from a
// channel within a bound, and a condition that must come to hold.
package testwait

import (
	"testing"
	"time"
)

// Receive returns the next value of c, failing t if none comes within d.
func Receive[T any](t testing.TB, c <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %s", what, d)
	}
	var zero T
	return zero
}

// EventuallyBound is how long Eventually waits: something that must happen
// eventually takes milliseconds, but a loaded or stalled CI host can hold
// a test up for seconds, and a bound that is hit on a slow day is a flaky
// test, not a caught bug.
const EventuallyBound = 60 * time.Second

// Eventually waits until cond holds, failing t after EventuallyBound.
func Eventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(EventuallyBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
