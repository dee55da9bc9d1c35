package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/libleases/libleases/worker/loop"
	"github.com/stretchr/testify/require"
)

// Like core's conformance suite, these run on SQLite, and on PostgreSQL with
// LEASES_TEST_STORE=postgres.
func location(t *testing.T) string {
	if os.Getenv("LEASES_TEST_STORE") == "postgres" {
		return pgtest.FreshSchema(t, true)
	}
	return filepath.Join(t.TempDir(), "leases.db")
}

func authority(t *testing.T) *core.Authority {
	t.Helper()
	a, err := leases.Open(location(t))
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	return a
}

func request(t *testing.T, a *core.Authority, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := a.RequestJob("p", "", []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

func states(t *testing.T, a *core.Authority) map[string]string {
	t.Helper()
	js, err := a.Jobs("p")
	require.NoError(t, err)
	out := map[string]string{}
	for _, j := range js {
		out[j.ID] = j.State
	}
	return out
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func config() Config {
	return Config{Production: "p", Worker: "w", Duration: time.Minute, Logger: quietLog}
}

// runAsync runs Run in a goroutine; its result arrives on the channel.
func runAsync(ctx context.Context, a *core.Authority, cfg Config, h Handler) <-chan error {
	out := make(chan error, 1)
	go func() { out <- Run(ctx, a, cfg, h) }()
	return out
}

func result(t *testing.T, c <-chan error) error {
	t.Helper()
	return testwait.Receive(t, c, testwait.EventuallyBound, "Run")
}

func TestRunCompletesEveryJobWithTheFactsItsHandlerReturns(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 20)
	cfg := config()
	cfg.Concurrency, cfg.ExitWhenEmpty = 4, true
	var mu sync.Mutex
	seen := map[string]int{}
	err := Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		p, err := l.Payload()
		if err != nil {
			return core.Facts{}, err
		}
		mu.Lock()
		seen[l.JobID()]++
		mu.Unlock()
		return core.Facts{Metadata: map[string]json.RawMessage{"payload": json.RawMessage(fmt.Sprintf("%q", p))}}, nil
	})
	require.NoError(t, err)
	require.Len(t, seen, len(ids))
	for i, id := range ids {
		require.Equal(t, 1, seen[id])
		require.Equal(t, core.StateCompleted, states(t, a)[id])
		f, err := a.FactsOf("p", id)
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf("%q", fmt.Sprint(i)), string(f.Metadata["payload"]))
	}
}

func TestRunWaitsForJobsAndTakesThemAsTheyCome(t *testing.T) {
	a := authority(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 10)
	done := runAsync(ctx, a, config(), func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		got <- l.JobID()
		return core.Facts{}, nil
	})
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < 3; i++ {
		start := time.Now()
		id := request(t, a, 1)[0]
		select {
		case j := <-got:
			require.Equal(t, id, j)
			// As they come: milliseconds; seconds to spare for a stalled host.
			require.Less(t, time.Since(start), 30*time.Second)
		case <-time.After(testwait.EventuallyBound):
			t.Fatal("the worker did not take the job")
		}
	}
	cancel()
	require.NoError(t, result(t, done))
}

func TestRunKeepsALeaseAliveWhileItsHandlerRuns(t *testing.T) {
	a := authority(t)
	id := request(t, a, 1)[0]
	cfg := config()
	// A real duration: each renewal must commit within it, also on a
	// loaded machine; renewed every third of it, the claim survives a host
	// stalled for over a second.
	cfg.Duration, cfg.ExitWhenEmpty = 2*time.Second, true
	err := Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		select {
		case <-time.After(3 * cfg.Duration): // three durations
			return core.Facts{}, nil
		case <-ctx.Done():
			return core.Facts{}, context.Cause(ctx)
		}
	})
	require.NoError(t, err)
	require.Equal(t, core.StateCompleted, states(t, a)[id])
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	renewed := 0
	for _, e := range evs {
		require.NotEqual(t, "claim_expired", e.Kind)
		if e.Kind == "renewed" {
			renewed++
		}
	}
	require.GreaterOrEqual(t, renewed, 5)
}

func TestACoordinatorsCancelReachesTheRunningHandler(t *testing.T) {
	a := authority(t)
	id := request(t, a, 1)[0]
	cfg := config()
	cfg.Duration, cfg.Interval, cfg.MaxJobs = time.Hour, 50*time.Millisecond, 1
	started := make(chan struct{})
	cause := make(chan error, 1)
	done := runAsync(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return core.Facts{}, context.Cause(ctx)
	})
	<-started
	start := time.Now()
	require.NoError(t, a.Cancel("p", id))
	select {
	case err := <-cause:
		require.ErrorIs(t, err, core.ErrCancelled)
		// One 50 ms interval, with seconds to spare for a stalled host.
		require.Less(t, time.Since(start), 30*time.Second)
	case <-time.After(testwait.EventuallyBound):
		t.Fatal("the handler never heard of the cancel")
	}
	require.NoError(t, result(t, done))
	require.Equal(t, core.StateCancelled, states(t, a)[id])
}

func TestCancellingRunDrainsClaimingNothingNewAndLettingHandlersFinish(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 2)
	cfg := config()
	cfg.Concurrency = 2
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Add(2)
	finish := make(chan struct{})
	done := runAsync(ctx, a, cfg, func(hctx context.Context, l *core.Lease) (core.Facts, error) {
		running.Done()
		<-finish
		return core.Facts{}, hctx.Err() // Run's cancel does not cancel a handler
	})
	running.Wait()
	cancel()
	later := request(t, a, 2)
	time.Sleep(100 * time.Millisecond)
	close(finish)
	require.NoError(t, result(t, done))
	s := states(t, a)
	for _, id := range ids {
		require.Equal(t, core.StateCompleted, s[id])
	}
	for _, id := range later {
		require.Equal(t, core.StateRequested, s[id], "claimed after the drain began")
	}
}

func TestTheDrainTimeoutReleasesJobsStillRunning(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 1)
	cfg := config()
	cfg.DrainTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	cause := make(chan error, 1)
	done := runAsync(ctx, a, cfg, func(hctx context.Context, l *core.Lease) (core.Facts, error) {
		close(started)
		<-hctx.Done()
		cause <- context.Cause(hctx)
		return core.Facts{}, nil
	})
	<-started
	cancel()
	require.ErrorIs(t, result(t, done), ErrDrainTimeout)
	require.ErrorIs(t, <-cause, ErrDrainTimeout)
	j, err := a.Job("p", ids[0])
	require.NoError(t, err)
	require.Equal(t, core.StateRequested, j.State, "released")
	require.Equal(t, int64(1), j.Attempts)
}

// A give-back returns once the jobs out are released, also while the drain
// timeout is releasing them already: a caller that ends (closes the
// authority, exits) when it returns must not cut a release short. The
// release is held back by another handle (holdWrites).
func TestAGiveBackReturnsOnceTheJobsAreReleasedAlsoWhileTheDrainTimeoutReleasesThem(t *testing.T) {
	where := location(t)
	a, err := leases.Open(where)
	require.NoError(t, err)
	defer a.Close()
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	ids := request(t, a, 1)
	holder, err := leases.Open(where)
	require.NoError(t, err)
	defer holder.Close()
	cfg := loop.Config{Production: "p", Worker: "w", Duration: time.Minute, DrainTimeout: time.Millisecond, Logger: quietLog}
	w, err := loop.New(a, cfg)
	require.NoError(t, err)
	defer w.Close()
	l, err := w.Next(context.Background(), 10*time.Second)
	require.NoError(t, err)
	require.NotNil(t, l)
	release := holdWrites(t, holder, where)
	w.Stop(loop.Drain)
	require.Eventually(t, func() bool { return w.GivenBack(l) }, testwait.EventuallyBound, time.Millisecond,
		"the drain timeout gives the job back (its release waits for the lock)")
	j, err := a.Job("p", ids[0])
	require.NoError(t, err)
	require.Equal(t, core.StateClaimed, j.State, "the release waits for the writes held elsewhere")
	released := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond) // the give-back below has begun
		release()
		close(released)
	}()
	w.Stop(loop.GiveBack)
	j, err = a.Job("p", ids[0])
	require.NoError(t, err)
	require.Equal(t, core.StateRequested, j.State, "the job is released when the give-back returns")
	<-released
	end, err := w.Wait(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, loop.EndGaveBack, end)
}

func TestAFailingOrPanickingHandlerFailsItsJobForARetryAndTheLoopGoesOn(t *testing.T) {
	a := authority(t)
	require.NoError(t, a.SetRetryPolicy("p", core.RetryPolicy{MaxAttempts: 5, BackoffBase: time.Hour, BackoffCap: time.Hour}))
	ids := request(t, a, 3)
	cfg := config()
	cfg.MaxJobs = 3
	var calls atomic.Int64
	err := Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		switch calls.Add(1) {
		case 1:
			return core.Facts{}, errors.New("render failed")
		case 2:
			panic("handler bug")
		}
		return core.Facts{}, nil
	})
	require.NoError(t, err)
	s := states(t, a)
	// Each failed job waits out its backoff, so the third claim took the
	// third job.
	require.Equal(t, core.StateRequested, s[ids[0]])
	require.Equal(t, core.StateRequested, s[ids[1]])
	require.Equal(t, core.StateCompleted, s[ids[2]])
	for i, reason := range []string{"render failed", "worker: the handler panicked: handler bug"} {
		r, err := a.JobDetail(context.Background(), "p", ids[i])
		require.NoError(t, err)
		require.Len(t, r.History, 1)
		require.Equal(t, "retry", r.History[0].Ending)
		require.Equal(t, reason, r.History[0].Reason)
		require.Equal(t, r.History[0].EndedAt.Add(time.Hour), r.ClaimableAt, "claimable only after the backoff")
	}
}

func TestAHandlerFailingOnTheLastAttemptLeavesItsJobDead(t *testing.T) {
	a := authority(t)
	require.NoError(t, a.SetRetryPolicy("p", core.RetryPolicy{MaxAttempts: 2}))
	ids := request(t, a, 1)
	cfg := config()
	cfg.MaxJobs = 2
	err := Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		return core.Facts{}, errors.New("poison")
	})
	require.NoError(t, err)
	require.Equal(t, core.StateDead, states(t, a)[ids[0]])
}

func TestAHandlersErrorBecomesAValidReasonWithinTheLimit(t *testing.T) {
	long := strings.Repeat("é", core.MaxReasonLen) // two bytes each: cut inside one
	got := failureReason(errors.New(long))
	require.True(t, utf8.ValidString(got))
	require.LessOrEqual(t, len(got), core.MaxReasonLen)
	require.Greater(t, len(got), core.MaxReasonLen-2)
	require.Equal(t, "a\uFFFDb c", failureReason(errors.New("a\xffb\x00 c")))
}

// The CLI's reference executor completes a job through an execution request
// (registering its output) or fails it: the loop must leave such a job as
// the handler left it, and log nothing about it.
func TestAHandlerThatClosedItsLeaseItselfLeavesTheJobAsItLeftIt(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 2)
	var logged bytes.Buffer
	cfg := config()
	cfg.MaxJobs, cfg.Logger = 2, slog.New(slog.NewTextHandler(&logged, nil))
	var calls atomic.Int64
	err := Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		if calls.Add(1) == 1 {
			require.NoError(t, l.Complete(core.Facts{Metadata: map[string]json.RawMessage{"by": json.RawMessage(`"handler"`)}}))
			return core.Facts{}, nil
		}
		require.NoError(t, l.Fail("the program failed"))
		return core.Facts{}, errors.New("the program failed")
	})
	require.NoError(t, err)
	s := states(t, a)
	require.Equal(t, core.StateCompleted, s[ids[0]])
	require.Equal(t, core.StateFailed, s[ids[1]])
	f, err := a.FactsOf("p", ids[0])
	require.NoError(t, err)
	require.JSONEq(t, `"handler"`, string(f.Metadata["by"]))
	require.Empty(t, logged.String())
}

func TestMaxJobsBoundsTheClaims(t *testing.T) {
	a := authority(t)
	request(t, a, 5)
	cfg := config()
	cfg.Concurrency, cfg.MaxJobs = 3, 2
	var calls atomic.Int64
	require.NoError(t, Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		calls.Add(1)
		return core.Facts{}, nil
	}))
	require.Equal(t, int64(2), calls.Load())
	n := 0
	for _, s := range states(t, a) {
		if s == core.StateCompleted {
			n++
		}
	}
	require.Equal(t, 2, n)
}

func TestRunRejectsABadConfigAndAnUnknownProduction(t *testing.T) {
	a := authority(t)
	h := func(context.Context, *core.Lease) (core.Facts, error) { return core.Facts{}, nil }
	bg := context.Background()
	for name, c := range map[string]struct {
		cfg  func(*Config)
		kind core.Kind
	}{
		"duration":      {func(c *Config) { c.Duration = 0 }, core.KindInvalidDuration},
		"interval":      {func(c *Config) { c.Interval = c.Duration }, core.KindInvalidDuration},
		"concurrency":   {func(c *Config) { c.Concurrency = -1 }, core.KindInvalidArgument},
		"max jobs":      {func(c *Config) { c.MaxJobs = -1 }, core.KindInvalidArgument},
		"drain timeout": {func(c *Config) { c.DrainTimeout = -1 }, core.KindInvalidArgument},
		"worker":        {func(c *Config) { c.Worker = "" }, core.KindInvalidArgument},
		"production":    {func(c *Config) { c.Production = "nope" }, core.KindNotFound},
	} {
		cfg := config()
		c.cfg(&cfg)
		err := Run(bg, a, cfg, h)
		require.Equal(t, c.kind, core.KindOf(err), "%s: %v", name, err)
	}
	require.Equal(t, core.KindInvalidArgument, core.KindOf(Run(bg, a, config(), nil)))
	require.Equal(t, core.KindInvalidArgument, core.KindOf(Run(bg, nil, config(), h)))
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	require.Len(t, evs, 1, "only the production's creation")
}

func TestClosingTheAuthorityEndsRunWithClosed(t *testing.T) {
	a := authority(t)
	done := runAsync(context.Background(), a, config(), func(context.Context, *core.Lease) (core.Facts, error) {
		return core.Facts{}, nil
	})
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, a.Close())
	require.ErrorIs(t, result(t, done), core.ErrClosed)
}

// countCompleteNext counts the loop's complete-and-claim-next calls and the
// leases they returned, until the test ends.
func countCompleteNext(t *testing.T) (calls, claimed *atomic.Int64) {
	calls, claimed = new(atomic.Int64), new(atomic.Int64)
	orig := loop.CompleteNext
	loop.CompleteNext = func(l *core.Lease, f core.Facts, d time.Duration) (*core.Lease, error) {
		calls.Add(1)
		next, err := orig(l, f, d)
		if next != nil {
			claimed.Add(1)
		}
		return next, err
	}
	t.Cleanup(func() { loop.CompleteNext = orig })
	return calls, claimed
}

func TestRunCompletesAndClaimsTheNextJobInOneCommitWhenItWouldClaimAgain(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 5)
	calls, claimed := countCompleteNext(t)
	cfg := config()
	cfg.ExitWhenEmpty = true
	var order []string
	require.NoError(t, Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		order = append(order, l.JobID())
		return core.Facts{Metadata: map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(len(order)))}}, nil
	}))
	require.Equal(t, ids, order, "the next job in claim order, each once")
	require.EqualValues(t, 5, calls.Load(), "every completion claimed the next job in its commit")
	require.EqualValues(t, 4, claimed.Load(), "the last one found nothing left")
	for i, id := range ids {
		require.Equal(t, core.StateCompleted, states(t, a)[id])
		f, err := a.FactsOf("p", id)
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprint(i+1), string(f.Metadata["n"]), "the handler's facts went with the completion")
	}
}

func TestAJobWhoseNextClaimWouldBeBornExpiredIsStillCompleted(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 3)
	orig := loop.CompleteNext
	var refused atomic.Int64
	loop.CompleteNext = func(l *core.Lease, f core.Facts, d time.Duration) (*core.Lease, error) {
		// What the core answers when the next claim would not outlive the
		// commit: nothing written, the lease still held.
		refused.Add(1)
		return nil, &core.Error{Kind: core.KindInvalidDuration, JobID: l.JobID(),
			Msg: "the next claim would expire before its commit"}
	}
	t.Cleanup(func() { loop.CompleteNext = orig })
	cfg := config()
	cfg.ExitWhenEmpty = true
	var handled atomic.Int64
	require.NoError(t, Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		handled.Add(1)
		return core.Facts{}, nil
	}))
	require.Positive(t, refused.Load(), "the loop tried to claim the next job in the completion's commit")
	require.EqualValues(t, 3, handled.Load(), "each job once")
	for _, id := range ids {
		require.Equal(t, core.StateCompleted, states(t, a)[id], "the held job was completed, not left to lapse")
	}
}

func TestRunCompletesWithoutClaimingAtMaxJobs(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 5)
	calls, claimed := countCompleteNext(t)
	cfg := config()
	cfg.MaxJobs = 3
	var handled atomic.Int64
	require.NoError(t, Run(context.Background(), a, cfg, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		handled.Add(1)
		return core.Facts{}, nil
	}))
	require.EqualValues(t, 3, handled.Load())
	require.EqualValues(t, 2, calls.Load(), "the third completion is the last job: it claims nothing")
	require.EqualValues(t, 2, claimed.Load())
	s := states(t, a)
	require.Equal(t, []string{core.StateCompleted, core.StateCompleted, core.StateCompleted, core.StateRequested,
		core.StateRequested}, []string{s[ids[0]], s[ids[1]], s[ids[2]], s[ids[3]], s[ids[4]]})
}

func TestRunCompletesWithoutClaimingWhenDraining(t *testing.T) {
	a := authority(t)
	ids := request(t, a, 2)
	calls, _ := countCompleteNext(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, Run(ctx, a, config(), func(hctx context.Context, l *core.Lease) (core.Facts, error) {
		cancel() // the drain begins while the job runs
		return core.Facts{}, nil
	}))
	require.Zero(t, calls.Load(), "a draining loop claims nothing, not even with its last completion")
	s := states(t, a)
	require.Equal(t, core.StateCompleted, s[ids[0]])
	require.Equal(t, core.StateRequested, s[ids[1]])
}
