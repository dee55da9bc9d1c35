package clockstep

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func counter() (*atomic.Int64, func()) {
	n := new(atomic.Int64)
	return n, func() { n.Add(1) }
}

func TestSubscribersOfOneProcessShareOneWatcherThatStopsWithTheLast(t *testing.T) {
	var subs []*Sub
	for i := 0; i < 8; i++ {
		subs = append(subs, Subscribe(func() {}, i%2 == 0))
	}
	require.Equal(t, int64(1), Running())
	for _, s := range subs {
		s.Cancel()
	}
	require.Equal(t, int64(0), Running())
}

func TestAPollingSubscriberIsToldEveryPeriod(t *testing.T) {
	old := SetPeriod(10 * time.Millisecond)
	t.Cleanup(func() { SetPeriod(old) })
	n, f := counter()
	s := Subscribe(f, true)
	defer s.Cancel()
	require.Eventually(t, func() bool { return n.Load() >= 5 }, 10*time.Second, 5*time.Millisecond)
}

func TestASubscriberThatStartsToPollIsToldWithoutWaitingForAStep(t *testing.T) {
	old := SetPeriod(10 * time.Millisecond)
	t.Cleanup(func() { SetPeriod(old) })
	quiet := Subscribe(func() {}, false) // the watcher sleeps without a deadline (Linux)
	defer quiet.Cancel()
	time.Sleep(20 * time.Millisecond)
	n, f := counter()
	s := Subscribe(f, false)
	defer s.Cancel()
	s.Poll()
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 10*time.Second, 5*time.Millisecond)
}

func TestOnLinuxAWatcherWithoutPollingSubscribersNeverWakes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tells a process that its wall clock was set (a timerfd with TFD_TIMER_CANCEL_ON_SET); " +
			"elsewhere the watcher polls every period, as TestAPollingSubscriberIsToldEveryPeriod checks")
	}
	old := SetPeriod(time.Millisecond)
	t.Cleanup(func() { SetPeriod(old) })
	n, f := counter()
	s := Subscribe(f, false)
	before := Reports()
	time.Sleep(300 * time.Millisecond)
	s.Cancel()
	require.Zero(t, n.Load(), "reported a step though the clock was not set")
	require.Equal(t, before, Reports())
}

func TestNoReportReachesASubscriberOnceItsCancelReturned(t *testing.T) {
	old := SetPeriod(time.Millisecond)
	t.Cleanup(func() { SetPeriod(old) })
	keep := Subscribe(func() {}, true) // the watcher runs on after the cancel below
	defer keep.Cancel()
	for i := 0; i < 20; i++ {
		var cancelled atomic.Bool
		var late atomic.Int64
		s := Subscribe(func() {
			if cancelled.Load() {
				late.Add(1)
			}
		}, true)
		time.Sleep(3 * time.Millisecond)
		s.Cancel()
		cancelled.Store(true)
		time.Sleep(5 * time.Millisecond)
		require.Zero(t, late.Load())
	}
}

func TestOnLinuxOneSubscribersPollIsNotReportedToTheOthers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tells a process that its wall clock was set; elsewhere the watcher polls and tells every " +
			"subscriber each period, as TestAPollingSubscriberIsToldEveryPeriod checks")
	}
	old := SetPeriod(time.Millisecond)
	t.Cleanup(func() { SetPeriod(old) })
	polled, p := counter()
	quiet, q := counter()
	ps := Subscribe(p, true)
	qs := Subscribe(q, false)
	require.Eventually(t, func() bool { return polled.Load() > 10 }, 10*time.Second, 5*time.Millisecond)
	qs.Cancel()
	ps.Cancel()
	require.Zero(t, quiet.Load(), "a subscriber that does not poll was told of another's poll")
}
