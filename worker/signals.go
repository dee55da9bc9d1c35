package worker

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// NotifySignals is the signal rule every face of the loop follows: the
// first SIGINT or SIGTERM drains (ctx ends: pass it to Run), a second one
// gives the running jobs back at once (giveBack closes: pass it as
// Config.GiveBack). onSignal, when not nil, is told of each (n is 1 or 2),
// before it takes effect. stop ends the watching and restores the signals'
// default handling.
func NotifySignals(parent context.Context, onSignal func(n int, s os.Signal)) (ctx context.Context, giveBack <-chan struct{}, stop func()) {
	ctx, drain := context.WithCancel(parent)
	back := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for n := 1; n <= 2; n++ {
			select {
			case s := <-sigs:
				if onSignal != nil {
					onSignal(n, s)
				}
				if n == 1 {
					drain()
				} else {
					close(back)
				}
			case <-quit:
				return
			}
		}
	}()
	stopped := false
	return ctx, back, func() {
		if stopped {
			return
		}
		stopped = true
		signal.Stop(sigs)
		close(quit)
		<-finished
		drain()
	}
}
