// Signals held over the windows that must not be cut short: between
// reserving a file and settling what it holds (claim's token file, exec's
// output). A SIGINT or SIGTERM that arrives there waits; the command
// finishes what it began (a claim under way commits and its token is
// written and its receipt printed; nothing else starts), and the signal
// then takes its usual effect once the command has reported.
package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

type signalHold struct {
	ch  chan os.Signal
	mu  sync.Mutex // got: interrupted and a context's watcher both take a signal
	got os.Signal
}

// held is the process's one hold; main delivers what it kept at exit.
var held = &signalHold{}

// start holds SIGINT and SIGTERM from now until the process exits.
func (h *signalHold) start() {
	if h.ch == nil {
		h.ch = make(chan os.Signal, 4)
		signal.Notify(h.ch, os.Interrupt, syscall.SIGTERM)
	}
}

// signals is the channel held signals arrive on, for a command that acts
// on them itself (exec forwards them to its program); a signal read from
// it is the command's, and is not delivered again at exit.
func (h *signalHold) signals() <-chan os.Signal { return h.ch }

// interrupted reports the first held signal, if one has arrived.
func (h *signalHold) interrupted() os.Signal {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.got == nil && h.ch != nil {
		select {
		case s := <-h.ch:
			h.got = s
		default:
		}
	}
	return h.got
}

// context ends when a held signal arrives, for a step that may be cut short
// (claim's wait); the signal stays the hold's, delivered at exit. stop ends
// the watching.
func (h *signalHold) context() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	quit := make(chan struct{})
	go func() {
		defer cancel()
		select {
		case s := <-h.ch:
			h.mu.Lock()
			if h.got == nil {
				h.got = s
			}
			h.mu.Unlock()
		case <-quit:
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(quit) }) }
}

// deliver gives a held signal its usual effect: the process ends by it, as
// it would have without the hold (so a shell sees an interrupted command).
func (h *signalHold) deliver() {
	s := h.interrupted()
	if h.ch == nil {
		return
	}
	signal.Stop(h.ch)
	if s == nil {
		return
	}
	signal.Reset(s)
	syscall.Kill(os.Getpid(), s.(syscall.Signal))
	select {} // the signal ends the process
}
