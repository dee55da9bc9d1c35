package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/worker"
)

// A worker that renders every frame of a production, one at a time, and
// exits when none is left.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "worker-example")
	defer os.RemoveAll(dir)
	auth, err := leases.Open(filepath.Join(dir, "leases.db"))
	if err != nil {
		panic(err)
	}
	defer auth.Close()
	auth.CreateProduction("render")
	for _, frame := range []string{"1", "2", "3"} {
		auth.RequestJob("render", "frame-"+frame, []byte(frame))
	}

	err = worker.Run(context.Background(), auth, worker.Config{
		Production:    "render",
		Worker:        "example",
		Duration:      time.Minute, // renewed every 20 s while a frame renders
		ExitWhenEmpty: true,
	}, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		frame, err := l.Payload()
		if err != nil {
			return core.Facts{}, err // the job is given back
		}
		fmt.Println("rendering frame", string(frame))
		return core.Facts{Metadata: map[string]json.RawMessage{"frame": frame}}, nil
	})
	fmt.Println("done:", err)
	// Output:
	// rendering frame 1
	// rendering frame 2
	// rendering frame 3
	// done: <nil>
}

// A long-running service: four jobs at a time, waiting for new ones without
// polling. SIGTERM or SIGINT stops claiming; running jobs get 30 s to
// finish, then they are released for another worker.
func ExampleRun_service() {
	auth, err := leases.Open("/var/lib/render/leases.db")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer auth.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = worker.Run(ctx, auth, worker.Config{
		Production:   "render",
		Worker:       "render-host-1",
		Duration:     2 * time.Minute,
		Concurrency:  4,
		DrainTimeout: 30 * time.Second,
	}, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		// ctx ends if the coordinator cancels this job (or it is otherwise
		// lost): stop working then; context.Cause(ctx) says why.
		return render(ctx, l)
	})
	if err != nil {
		fmt.Println("worker stopped:", err)
	}
}

func render(ctx context.Context, l *core.Lease) (core.Facts, error) { return core.Facts{}, ctx.Err() }

// A handler learns at once that its job was cancelled: its context ends
// within one renewal interval, with the cancel as its cause.
func ExampleHandler_cancelled() {
	dir, _ := os.MkdirTemp("", "worker-example")
	defer os.RemoveAll(dir)
	auth, _ := leases.Open(filepath.Join(dir, "leases.db"))
	defer auth.Close()
	auth.CreateProduction("render")
	job, _ := auth.RequestJob("render", "", nil)

	var started sync.WaitGroup
	started.Add(1)
	go func() {
		started.Wait()
		auth.Cancel("render", job) // the coordinator changes its mind
	}()
	worker.Run(context.Background(), auth, worker.Config{
		Production: "render", Worker: "example", Duration: time.Minute,
		Interval: 100 * time.Millisecond, MaxJobs: 1,
	}, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		started.Done()
		<-ctx.Done()
		fmt.Println("stopped:", core.KindOf(context.Cause(ctx)))
		return core.Facts{}, context.Cause(ctx)
	})
	// Output:
	// stopped: cancelled
}
