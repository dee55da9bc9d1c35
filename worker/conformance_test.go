package worker

// The worker loop's conformance suite for Go's face (worker.Run): the
// scenarios, back-off sequence and reason rule of tests/vectors/worker_loop.json,
// which every face checks (docs/workers.md). Both stores.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/libleases/libleases/worker/loop"
	"github.com/stretchr/testify/require"
)

type segment struct {
	Hex   string `json:"hex"`
	Times int    `json:"times"`
}

func text(t *testing.T, segs []segment) string {
	var b strings.Builder
	for _, s := range segs {
		raw, err := hex.DecodeString(s.Hex)
		require.NoError(t, err)
		for range max(s.Times, 1) {
			b.Write(raw)
		}
	}
	return b.String()
}

type scenario struct {
	Name    string `json:"name"`
	Options struct {
		Concurrency    int `json:"concurrency"`
		MaxJobs        int `json:"max_jobs"`
		DrainTimeoutMS int `json:"drain_timeout_ms"`
		IntervalMS     int `json:"interval_ms"`
	} `json:"options"`
	Jobs    []string `json:"jobs"`
	Stop    string   `json:"stop"`
	States  []string `json:"states"`
	End     string   `json:"end"`
	Attempt *struct {
		Ending string `json:"ending"`
		Reason string `json:"reason"`
	} `json:"attempt"`
}

type loopVectors struct {
	BackoffUS []int64 `json:"backoff_us"`
	Reasons   []struct {
		Name   string    `json:"name"`
		Error  []segment `json:"error"`
		Reason []segment `json:"reason"`
	} `json:"reasons"`
	Scenarios []scenario `json:"scenarios"`
}

func readLoopVectors(t *testing.T) loopVectors {
	b, err := os.ReadFile(filepath.Join("..", "tests", "vectors", "worker_loop.json"))
	require.NoError(t, err)
	var v loopVectors
	require.NoError(t, json.Unmarshal(b, &v))
	require.NotEmpty(t, v.Scenarios)
	return v
}

func TestTheBackoffAfterFailedClaimsIsTheSharedSequence(t *testing.T) {
	v := readLoopVectors(t)
	for i, want := range v.BackoffUS {
		require.Equal(t, time.Duration(want)*time.Microsecond, loop.Backoff(i+1), "the pause after failure %d", i+1)
	}
}

func TestAHandlersErrorBecomesTheSharedReasonText(t *testing.T) {
	v := readLoopVectors(t)
	a := authority(t)
	for _, c := range v.Reasons {
		t.Run(c.Name, func(t *testing.T) {
			ids := request(t, a, 1)
			cfg := config()
			cfg.ExitWhenEmpty = true
			errText := text(t, c.Error)
			require.NoError(t, Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
				return core.Facts{}, errors.New(errText)
			}))
			r, err := a.JobDetail(context.Background(), "p", ids[0])
			require.NoError(t, err)
			require.NotEmpty(t, r.History)
			got := r.History[len(r.History)-1]
			require.Equal(t, "retry", got.Ending)
			require.Equal(t, text(t, c.Reason), got.Reason)
			// The job is back after its backoff: end it so the next case claims only its own.
			require.NoError(t, a.Cancel("p", ids[0]))
		})
	}
}

// goAction is the Go handler of a scenario's action. cancel has the test
// cancel the handler's job through the authority, as a coordinator does;
// heard reports the cause with which the cancelled action's context ended
// (nil: it did not end within the bound).
func goAction(action string, stopped <-chan struct{}, cancel func(id string) error, heard func(error)) Handler {
	facts := core.Facts{Metadata: map[string]json.RawMessage{"done": json.RawMessage("true")}}
	return func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		kind, arg, _ := strings.Cut(action, ":")
		switch kind {
		case "complete":
			return facts, nil
		case "error":
			return core.Facts{}, errors.New(arg)
		case "fail":
			return core.Facts{}, l.Fail(arg)
		case "release":
			return core.Facts{}, l.Release()
		case "panic":
			panic(arg)
		case "settle":
			return core.Facts{}, l.Complete(facts)
		case "wait":
			<-stopped
			return facts, nil
		case "hang":
			<-ctx.Done()
			return core.Facts{}, context.Cause(ctx)
		case "cancelled":
			if err := cancel(l.JobID()); err != nil {
				return core.Facts{}, err
			}
			select {
			case <-ctx.Done():
				heard(context.Cause(ctx))
				return core.Facts{}, context.Cause(ctx) // a lost lease's handler returns why
			case <-time.After(testwait.EventuallyBound):
				heard(nil)
				return core.Facts{}, errors.New("the cancel never reached the handler")
			}
		}
		return core.Facts{}, errors.New("unknown action " + action)
	}
}

func TestEveryScenarioOfTheSharedLoopSuiteHoldsForRun(t *testing.T) {
	v := readLoopVectors(t)
	for _, sc := range v.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			a, err := leases.Open(location(t))
			require.NoError(t, err)
			t.Cleanup(func() { a.Close() })
			_, err = a.CreateProduction("p")
			require.NoError(t, err)
			actions := map[string]string{}
			var ids []string
			for _, job := range sc.Jobs {
				id, err := a.RequestJob("p", "", []byte(job))
				require.NoError(t, err)
				ids = append(ids, id)
				actions[id] = job
			}
			cfg := config()
			cfg.Concurrency, cfg.MaxJobs = sc.Options.Concurrency, sc.Options.MaxJobs
			cfg.DrainTimeout = time.Duration(sc.Options.DrainTimeoutMS) * time.Millisecond
			cfg.Interval = time.Duration(sc.Options.IntervalMS) * time.Millisecond
			cfg.ExitWhenEmpty = sc.Stop == ""
			ctx, drain := context.WithCancel(context.Background())
			defer drain()
			giveBack := make(chan struct{})
			cfg.GiveBack = giveBack
			stopped := make(chan struct{})
			var mu sync.Mutex
			started := 0
			out := min(max(sc.Options.Concurrency, 1), len(sc.Jobs))
			allOut := make(chan struct{})
			// The cancelled action's job is cancelled from the test's side, by
			// this goroutine, as a coordinator would, while its handler runs.
			type cancelReq struct {
				id   string
				done chan error
			}
			cancels := make(chan cancelReq)
			defer close(cancels)
			go func() {
				for r := range cancels {
					r.done <- a.Cancel("p", r.id)
				}
			}()
			cancel := func(id string) error {
				done := make(chan error, 1)
				cancels <- cancelReq{id, done}
				return <-done
			}
			var causes []error
			heard := func(cause error) {
				mu.Lock()
				causes = append(causes, cause)
				mu.Unlock()
			}
			res := runAsync(ctx, a, cfg, func(hctx context.Context, l *core.Lease) (core.Facts, error) {
				mu.Lock()
				started++
				if started == out {
					close(allOut)
				}
				mu.Unlock()
				return goAction(actions[l.JobID()], stopped, cancel, heard)(hctx, l)
			})
			if sc.Stop != "" {
				testwait.Receive(t, allOut, testwait.EventuallyBound, "the jobs to be out")
				if sc.Stop == "drain" {
					drain()
				} else {
					close(giveBack)
				}
				time.Sleep(20 * time.Millisecond) // the stop reaches the loop before the jobs end
				close(stopped)
			}
			err = result(t, res)
			switch sc.End {
			case "stopped":
				require.NoError(t, err)
			case "gave_back":
				require.Error(t, err)
				require.True(t, errors.Is(err, ErrDrainTimeout) || errors.Is(err, ErrGivenBack), "%v", err)
			}
			s := states(t, a)
			for i, id := range ids {
				require.Equal(t, sc.States[i], s[id], "job %d (%s)", i, sc.Jobs[i])
			}
			mu.Lock()
			defer mu.Unlock()
			for i, job := range sc.Jobs {
				if job == "cancelled" {
					require.NotEmpty(t, causes, "job %d: its handler never ran", i)
					require.ErrorIs(t, causes[0], core.ErrCancelled, "job %d: the cancel reached the handler", i)
					causes = causes[1:]
				}
			}
			if sc.Attempt != nil {
				r, err := a.JobDetail(context.Background(), "p", ids[0])
				require.NoError(t, err)
				require.NotEmpty(t, r.History)
				got := r.History[len(r.History)-1]
				require.Equal(t, sc.Attempt.Ending, got.Ending)
				if sc.Attempt.Reason != "" {
					require.Equal(t, sc.Attempt.Reason, got.Reason)
				}
			}
		})
	}
}

// holdWrites makes every write to production "p"'s jobs through another
// handle wait until release is called (and fail, past a short busy
// timeout): on SQLite an edit of holder holds the writer lock; on
// PostgreSQL a transaction holds the jobs table in EXCLUSIVE mode, which
// lets a look read the jobs but makes a claim's or a release's row lock
// wait (past its lock_timeout, it fails).
func holdWrites(t *testing.T, holder *core.Authority, where string) (release func()) {
	t.Helper()
	if os.Getenv("LEASES_TEST_STORE") != "postgres" {
		e, err := holder.Begin()
		require.NoError(t, err)
		_, err = e.RequestJob("p", "", nil) // takes the writer lock
		require.NoError(t, err)
		return e.Abort
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, where)
	require.NoError(t, err)
	tx, err := c.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE leases_jobs IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	return func() { // t.Error, not require: it may run on another goroutine
		if err := tx.Rollback(ctx); err != nil {
			t.Error(err)
		}
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
	}
}

// The back-off is observed on a real loop: claims kept failing (the store's
// writer lock held elsewhere, a 1 ms busy timeout) pause by the sequence.
func TestALoopWhoseClaimsFailBacksOffByTheSharedSequence(t *testing.T) {
	v := readLoopVectors(t)
	where := location(t)
	holder, err := leases.Open(where)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.CreateProduction("p")
	require.NoError(t, err)
	_, err = holder.RequestJob("p", "", []byte("x"))
	require.NoError(t, err)
	a, err := leases.OpenWith(where, leases.Options{BusyTimeout: time.Millisecond})
	require.NoError(t, err)
	defer a.Close()
	release := holdWrites(t, holder, where)
	cfg := loop.Config{Production: "p", Worker: "w", Duration: time.Minute, Logger: quietLog}
	w, err := loop.New(a, cfg)
	require.NoError(t, err)
	defer w.Close()
	seen := map[int]int64{}
	for len(seen) < 4 {
		l, err := w.Next(context.Background(), 20*time.Millisecond)
		require.Nil(t, l)
		require.ErrorIs(t, err, loop.ErrSlice)
		st := w.Stats()
		if st.FailedClaims > 0 {
			seen[st.FailedClaims] = st.BackoffUS
		}
	}
	for n, us := range seen {
		require.Equal(t, v.BackoffUS[n-1], us, "the pause after %d failed claims", n)
	}
	release()
	l, err := w.Next(context.Background(), 10*time.Second)
	require.NoError(t, err)
	require.NotNil(t, l, "once the lock is free the loop claims")
	require.Zero(t, w.Stats().BackoffUS, "a claim that succeeds starts the sequence again")
	require.NoError(t, w.Settle(l, loop.Result{Outcome: loop.Release}))
}

// A completion the core refuses (facts with a bad key) changes nothing; the
// loop must not leave the job claimed until its expiry, nor hang: the
// attempt fails for a retry with why.
func TestAHandlersRefusedFactsFailItsAttemptForARetryWithWhy(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 1)
	cfg := config()
	cfg.ExitWhenEmpty = true
	err := result(t, runAsync(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		return core.Facts{Metadata: map[string]json.RawMessage{" padded": json.RawMessage("1")}}, nil
	}))
	require.NoError(t, err)
	r, err := a.JobDetail(context.Background(), "p", ids[0])
	require.NoError(t, err)
	require.NotEmpty(t, r.History)
	got := r.History[len(r.History)-1]
	require.Equal(t, "retry", got.Ending)
	require.Contains(t, got.Reason, "the handler's facts were refused")
}

// The signal rule of every face: the first SIGTERM or SIGINT drains (Run's
// context ends), a second gives the running jobs back at once.
func TestTheFirstSignalDrainsAndASecondGivesTheRunningJobsBackAtOnce(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("concurrency %d", n), func(t *testing.T) {
			a := authority(t)
			ids := request(t, a, n+1)
			var got []int
			var mu sync.Mutex
			ctx, giveBack, stop := NotifySignals(context.Background(), func(n int, s os.Signal) {
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
			})
			defer stop()
			cfg := config()
			cfg.GiveBack = giveBack
			cfg.Concurrency = n
			started := make(chan struct{}, n+1)
			causes := make(chan error, n+1)
			res := runAsync(ctx, a, cfg, func(hctx context.Context, l *core.Lease) (core.Facts, error) {
				started <- struct{}{}
				<-hctx.Done()
				causes <- context.Cause(hctx)
				return core.Facts{}, context.Cause(hctx)
			})
			for i := 0; i < n; i++ {
				testwait.Receive(t, started, testwait.EventuallyBound, "every handler to start")
			}
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
			testwait.Receive(t, ctx.Done(), testwait.EventuallyBound, "the drain")
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
			require.ErrorIs(t, result(t, res), ErrGivenBack)
			for i := 0; i < n; i++ {
				require.ErrorIs(t, testwait.Receive(t, causes, testwait.EventuallyBound, "the handlers' end"), ErrGivenBack)
			}
			for _, id := range ids {
				require.Equal(t, core.StateRequested, states(t, a)[id],
					"given back (a running job) or never claimed (the one the drain left): claimable again at once")
			}
			mu.Lock()
			require.Equal(t, []int{1, 2}, got)
			mu.Unlock()
		})
	}
}

// A first signal lets every running handler of a concurrent loop finish
// and settle its job, and claims nothing more: the drain is the same with
// or without concurrency.
func TestAFirstSignalLetsEveryRunningHandlerOfAConcurrentLoopFinish(t *testing.T) {
	const n = 3
	a := authority(t)
	ids := request(t, a, n+1)
	ctx, giveBack, stop := NotifySignals(context.Background(), nil)
	defer stop()
	cfg := config()
	cfg.GiveBack = giveBack
	cfg.Concurrency = n
	started := make(chan string, n+1)
	finish := make(chan struct{})
	res := runAsync(ctx, a, cfg, func(hctx context.Context, l *core.Lease) (core.Facts, error) {
		started <- l.JobID()
		<-finish
		return core.Facts{}, hctx.Err()
	})
	running := map[string]bool{}
	for i := 0; i < n; i++ {
		running[testwait.Receive(t, started, testwait.EventuallyBound, "every handler to start")] = true
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	testwait.Receive(t, ctx.Done(), testwait.EventuallyBound, "the drain")
	close(finish)
	require.NoError(t, result(t, res))
	s := states(t, a)
	for _, id := range ids {
		if running[id] {
			require.Equal(t, core.StateCompleted, s[id], "a running job finished and was settled")
		} else {
			require.Equal(t, core.StateRequested, s[id], "nothing new was claimed after the drain began")
		}
	}
}
