package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Helper processes are this test binary started again with LEASES_TEST_WORKER
// set: they run workLoop against the shared file and exit. With
// LEASES_TEST_ROLE they play a part in a waiting test (roleProcess).
func TestMain(m *testing.M) {
	if d, err := time.ParseDuration(os.Getenv("LEASES_TEST_SAFETY_POLL")); err == nil {
		safetyPoll = d
	}
	if role := os.Getenv("LEASES_TEST_ROLE"); role != "" {
		os.Exit(roleProcess(role))
	}
	if path := os.Getenv("LEASES_TEST_FILE_WRITER"); path != "" {
		os.Exit(fileWriterProcess(path))
	}
	if name := os.Getenv("LEASES_TEST_OPENER"); name != "" {
		os.Exit(openerProcess(os.Getenv("LEASES_TEST_DB"), os.Getenv("LEASES_TEST_GO"), name))
	}
	if loc := os.Getenv("LEASES_TEST_PRUNER"); loc != "" {
		os.Exit(prunerProcess(loc))
	}
	if name := os.Getenv("LEASES_TEST_WORKER"); name != "" {
		os.Exit(workerProcess(name, os.Getenv("LEASES_TEST_DB"), os.Getenv("LEASES_TEST_GO")))
	}
	os.Exit(m.Run())
}

func workerProcess(name, path, goFile string) int {
	a, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer a.Close()
	// Start together, so that the processes really race.
	if !awaitStart(goFile, time.Millisecond) {
		return 2
	}
	seed, _ := strconv.ParseUint(os.Getenv("LEASES_TEST_SEED"), 10, 64)
	if err := workLoop(a, name, seed); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	return 0
}

// awaitStart waits, polling every pause, until the test creates goFile, the
// start signal of helper processes that must race; false after 20 s.
func awaitStart(goFile string, pause time.Duration) bool {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(pause) {
		if _, err := os.Stat(goFile); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "no start signal")
			return false
		}
	}
}

// workLoop claims until nothing is left; it releases about one claim in five
// (so jobs change hands) and completes the rest, tagging the facts with its
// name. Any error, Busy included, is a failure: waits stay within the busy
// timeout.
func workLoop(a *Authority, name string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	for {
		l, err := a.Claim("p", name, 30*time.Second)
		if errors.Is(err, ErrNothingToClaim) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // the work
		if rng.IntN(5) == 0 {
			if err := l.Release(); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			continue
		}
		f := Facts{Metadata: map[string]json.RawMessage{"by": json.RawMessage(strconv.Quote(name))}}
		if err := l.Complete(f); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
	}
}

// checkExactlyOnce verifies the invariants from the event log: every job is
// completed exactly once, by the claim that held it; and no job ever had two
// live ownerships (a claim is followed by its release or completion before
// the next claim, as no claim here lives long enough to expire).
func checkExactlyOnce(t *testing.T, a *Authority, ids []string) {
	t.Helper()
	js, err := a.Jobs("p")
	require.NoError(t, err)
	require.Len(t, js, len(ids))
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	holder := map[string]string{}
	completedBy := map[string]string{}
	for _, e := range evs {
		switch e.Kind {
		case "claimed":
			require.Empty(t, holder[e.JobID], "job %s claimed by %s while %s held it", e.JobID, e.Worker, holder[e.JobID])
			holder[e.JobID] = e.Worker
		case "released":
			require.Equal(t, holder[e.JobID], e.Worker)
			holder[e.JobID] = ""
		case "completed":
			require.Equal(t, holder[e.JobID], e.Worker, "completion came from the current holder")
			require.Empty(t, completedBy[e.JobID], "job %s completed twice", e.JobID)
			completedBy[e.JobID] = e.Worker
			holder[e.JobID] = ""
		case "claim_expired":
			t.Fatalf("no claim should have expired in this test")
		}
	}
	for _, j := range js {
		require.Equal(t, StateCompleted, j.State, j.ID)
		f, err := a.FactsOf("p", j.ID)
		require.NoError(t, err)
		require.JSONEq(t, strconv.Quote(completedBy[j.ID]), string(f.Metadata["by"]), "facts come from the completing lease")
	}
	require.Len(t, completedBy, len(ids))
}

// sharedQueue opens a fresh file with production "p" holding n jobs.
func sharedQueue(t *testing.T, n int) (string, *Authority, []string) {
	t.Helper()
	path := newLocation(t, "leases.db")
	a, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	var ids []string
	for i := 0; i < n; i++ {
		id, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return path, a, ids
}

func TestConcurrentGoroutinesCompleteEveryJobExactlyOnce(t *testing.T) {
	_, a, ids := sharedQueue(t, 80)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			errs <- workLoop(a, fmt.Sprintf("g%d", g), uint64(g))
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	checkExactlyOnce(t, a, ids)
}

func TestProcessesRacingOnOneStoreCompleteEveryJobExactlyOnce(t *testing.T) {
	path, a, ids := sharedQueue(t, 60)
	goFile := filepath.Join(t.TempDir(), "go")
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]*lockedBuffer, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		outs[i] = &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		cmd.Env = append(os.Environ(), "LEASES_TEST_WORKER=proc"+strconv.Itoa(i), "LEASES_TEST_DB="+path, "LEASES_TEST_GO="+goFile,
			"LEASES_TEST_SEED="+strconv.Itoa(i))
		require.NoError(t, cmd.Start())
		cmds[i] = cmd
	}
	require.NoError(t, os.WriteFile(goFile, nil, 0o600))
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "worker %d: %s", i, outs[i].String())
	}
	checkExactlyOnce(t, a, ids)
	// Every process took part (the race was real).
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Kind == "claimed" {
			seen[e.Worker] = true
		}
	}
	require.GreaterOrEqual(t, len(seen), 2)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Goroutines sharing one authority (on SQLite, writers of one handle that
// queue behind each other share a transaction and its COMMIT) each get their
// own outcome: a renewal the rules refuse (a shorter duration is not an
// extension) rolls back only itself, between claims and completions of the
// other goroutines that all commit.
func TestGoroutinesOfOneAuthorityEachGetTheirOwnOutcome(t *testing.T) {
	_, a, ids := sharedQueue(t, 96)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	var refused atomic.Int64
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("g%d", g)
			for {
				l, err := a.Claim("p", name, time.Minute)
				if errors.Is(err, ErrNothingToClaim) {
					errs <- nil
					return
				}
				if err != nil {
					errs <- fmt.Errorf("claim: %w", err)
					return
				}
				if err := l.Renew(time.Second); !errors.Is(err, ErrNotExtended) {
					errs <- fmt.Errorf("a shorter renewal was not refused as not extended: %v", err)
					return
				}
				refused.Add(1)
				f := Facts{Metadata: map[string]json.RawMessage{"by": json.RawMessage(strconv.Quote(name))}}
				if err := l.Complete(f); err != nil {
					errs <- fmt.Errorf("complete: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, len(ids), refused.Load())
	checkExactlyOnce(t, a, ids)
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	for _, e := range evs {
		require.NotEqual(t, "renewed", e.Kind, "a refused renewal of job %s was recorded", e.JobID)
	}
}
