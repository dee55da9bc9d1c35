// A poison job: its program kills the worker (kill -9) every time a worker
// claims it. Real worker processes (this test binary run again) keep
// claiming; the job must end dead after exactly max_attempts claims, with
// one claimed and one claim_expired event per attempt, while the other jobs
// keep flowing. On SQLite and on PostgreSQL.
package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

const (
	poisonProduction = "poison"
	poisonAttempts   = 4
)

// poisonWorkerMain claims until nothing is left to do; a job whose payload
// is "poison" makes it kill itself with SIGKILL while it holds the claim.
func poisonWorkerMain(name string) int {
	a, err := leases.Open(os.Getenv("LEASES_POISON_DB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer a.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		l, err := a.Claim(poisonProduction, name, 500*time.Millisecond)
		if err != nil {
			if core.KindOf(err) != core.KindNothingToClaim {
				fmt.Fprintln(os.Stderr, "claim:", err)
				return 2
			}
			c, err := a.Counts(context.Background(), poisonProduction)
			if err != nil {
				fmt.Fprintln(os.Stderr, "counts:", err)
				return 2
			}
			if c.Requested+c.Claimed == 0 {
				return 0
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		p, err := a.Payload(poisonProduction, l.JobID())
		if err != nil {
			fmt.Fprintln(os.Stderr, "payload:", err)
			return 2
		}
		if string(p) == "poison" {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if err := l.Complete(core.Facts{}); err != nil {
			switch core.KindOf(err) {
			case core.KindExpired, core.KindLeaseLost: // a slow machine: the job is claimed again
			default:
				fmt.Fprintln(os.Stderr, "complete:", err)
				return 2
			}
		}
	}
	return 3
}

func TestAPoisonJobThatKillsItsWorkerEndsDeadAfterExactlyMaxAttemptsClaims(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { poisonRun(t, filepath.Join(t.TempDir(), "poison.db")) })
	t.Run("postgres", func(t *testing.T) { poisonRun(t, pgtest.FreshSchema(t, false)) })
}

func poisonRun(t *testing.T, db string) {
	a, err := leases.Open(db)
	require.NoError(t, err)
	defer a.Close()
	// A short backoff, so the lapses also wait theirs out.
	_, err = a.CreateProductionWithPolicy(poisonProduction, core.RetryPolicy{MaxAttempts: poisonAttempts,
		BackoffBase: 50 * time.Millisecond, BackoffCap: time.Second, JitterPercent: 20})
	require.NoError(t, err)
	poison, err := a.RequestJob(poisonProduction, "", []byte("poison"))
	require.NoError(t, err)
	var others []string
	for i := 0; i < 30; i++ {
		id, err := a.RequestJob(poisonProduction, "", []byte("job-"+strconv.Itoa(i)))
		require.NoError(t, err)
		others = append(others, id)
	}

	// Two worker processes at a time; each one the poison job kills is
	// replaced, until a worker finds nothing left to do.
	exited := make(chan error, 64)
	start := func(n int) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LEASES_POISON_WORKER=w"+strconv.Itoa(n), "LEASES_POISON_DB="+db)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		go func() { exited <- cmd.Wait() }()
	}
	started, kills, running := 0, 0, 0
	for ; running < 2; running++ {
		start(started)
		started++
	}
	deadline := time.After(90 * time.Second)
	for running > 0 {
		select {
		case err := <-exited:
			running--
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
				kills++
				require.LessOrEqual(t, kills, poisonAttempts, "the poison job was claimed more often than its attempts")
				start(started)
				started++
				running++
			default:
				t.Fatalf("a worker failed: %v", err)
			}
		case <-deadline:
			t.Fatal("the workers did not finish within 90 s")
		}
	}

	require.Equal(t, poisonAttempts, kills, "every attempt killed its worker")
	j, err := a.Job(poisonProduction, poison)
	require.NoError(t, err)
	require.Equal(t, core.StateDead, j.State)
	require.EqualValues(t, poisonAttempts, j.Attempts)
	counts := map[string]int{}
	page, err := a.ListEvents(context.Background(), core.EventQuery{Production: poisonProduction, JobID: poison, Limit: core.MaxPageSize})
	require.NoError(t, err)
	for _, e := range page.Events {
		counts[e.Kind]++
	}
	require.Equal(t, map[string]int{"requested": 1, "claimed": poisonAttempts, "claim_expired": poisonAttempts, "dead": 1}, counts)
	rec, err := a.JobDetail(context.Background(), poisonProduction, poison)
	require.NoError(t, err)
	require.Len(t, rec.History, poisonAttempts)
	for i, h := range rec.History {
		require.EqualValues(t, i+1, h.Number)
		require.Equal(t, "expired", h.Ending)
	}
	for _, id := range others {
		o, err := a.Job(poisonProduction, id)
		require.NoError(t, err)
		require.Equal(t, core.StateCompleted, o.State, "the other jobs kept flowing")
	}
	t.Logf("poison job dead after %d claims, each killing its worker (%d workers started); %d other jobs completed",
		poisonAttempts, started, len(others))
}
