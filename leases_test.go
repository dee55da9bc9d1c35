// The Go API: one import serves a program, core names no concrete store, and
// MustExist opens only an authority that exists, creating nothing.
package leases

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// The rules build without any SQL engine: core imports the storage contract
// only, and this package chooses the store.
func TestCoreImportsNoConcreteStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./core").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"pgstore", "sqlitestore", "core/store/stores", "jackc/pgx", "modernc.org/sqlite"} {
			require.NotContains(t, dep, banned, "core depends on %s", dep)
		}
		require.NotEqual(t, "database/sql", dep)
	}
}

// One import is enough for a Go program: open, request, claim, complete,
// and tell the kinds of failure apart.
func TestOneImportServesAWholeProgram(t *testing.T) {
	auth, err := Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer auth.Close()
	_, err = auth.CreateProduction("nightly")
	require.NoError(t, err)
	_, err = auth.RequestJob("nightly", "k", []byte("x"))
	require.NoError(t, err)
	var lease *Lease
	lease, err = auth.Claim("nightly", "w", 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, LeaseActive, lease.State())
	require.NoError(t, lease.Complete(Facts{}))
	_, err = auth.Claim("nightly", "w", 30*time.Second)
	require.True(t, errors.Is(err, ErrNothingToClaim))
	require.Equal(t, KindNothingToClaim, KindOf(err))
	var e *Error
	require.True(t, errors.As(err, &e))
	_, err = auth.RequestJob("nightly", "k2", []byte("x"))
	require.NoError(t, err)
	lease, err = auth.ClaimWait(context.Background(), "nightly", "w", 30*time.Second, MaxWait)
	require.NoError(t, err)
	require.NoError(t, lease.KeepAlive(30*time.Second, KeepAliveInterval(MinKeepAliveInterval*1000)))
	require.NoError(t, lease.Check(context.Background()))
	require.NoError(t, lease.Complete(Facts{}))
	<-lease.Done()
	require.True(t, errors.Is(lease.Err(), ErrClosed))
	stopped, stop := context.WithCancel(context.Background())
	stop()
	_, err = auth.ClaimWait(stopped, "nightly", "w", 30*time.Second, time.Second)
	require.True(t, errors.Is(err, ErrInterrupted))
	require.Equal(t, KindInterrupted, KindOf(err))
	jobs, err := auth.Jobs("nightly")
	require.NoError(t, err)
	require.Equal(t, StateCompleted, jobs[0].State)
	_, err = ValidateDuration(MaxDuration + time.Microsecond)
	require.True(t, errors.Is(err, ErrInvalidDuration))
}

func TestOneImportServesRetriesAndPriorities(t *testing.T) {
	auth, err := Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer auth.Close()
	p := DefaultRetryPolicy()
	p.MaxAttempts = 1
	_, err = auth.CreateProductionWithPolicy("nightly", p)
	require.NoError(t, err)
	id, err := auth.RequestJobWith("nightly", "", nil, RequestOptions{Priority: MaxPriority})
	require.NoError(t, err)
	lease, err := auth.Claim("nightly", "w", 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, lease.FailRetry("flaky", 0))
	job, err := auth.Job("nightly", id)
	require.NoError(t, err)
	require.Equal(t, StateDead, job.State)
	require.NoError(t, auth.RetryJob("nightly", id))
	_, err = auth.RequestJobWith("nightly", "", nil, RequestOptions{Delay: MaxDelay + time.Microsecond})
	require.True(t, errors.Is(err, ErrInvalidArgument))
}

func TestOneImportReadsAPageOfJobsWithTheirFactsInOneCall(t *testing.T) {
	auth, err := Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer auth.Close()
	_, err = auth.CreateProduction("nightly")
	require.NoError(t, err)
	id, err := auth.RequestJob("nightly", "", nil)
	require.NoError(t, err)
	lease, err := auth.Claim("nightly", "w", 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, lease.Complete(Facts{Metadata: map[string]json.RawMessage{"frames": json.RawMessage(`24`)}}))
	var page JobPage
	page, err = auth.ListJobs(context.Background(), "nightly", JobQuery{Facts: true})
	require.NoError(t, err)
	var rec JobRecord
	rec, err = auth.JobDetail(context.Background(), "nightly", id)
	require.NoError(t, err)
	require.Equal(t, map[string]Facts{id: rec.Facts}, page.Facts)
	require.JSONEq(t, `24`, string(page.Facts[id].Metadata["frames"]))
}

func TestOpenWithRefusesAnOptionOfTheOtherStore(t *testing.T) {
	_, err := OpenWith("postgres://u:SECRETPW@h/x", Options{Synchronous: "NORMAL"})
	require.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
	require.NotContains(t, err.Error(), "SECRETPW")
	_, err = Open("")
	require.True(t, errors.Is(err, ErrInvalidArgument))
}

// dirNames lists a directory's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := []string{}
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// MustExist opens only an authority that exists: a missing or empty file is
// not_found, naming the path, and nothing is created, not even -wal/-shm.
func TestMustExistRefusesAMissingSQLiteAuthorityAndCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "leases.db")
	_, err := OpenWith(missing, Options{MustExist: true})
	require.True(t, errors.Is(err, ErrNotFound), "%v", err)
	require.Contains(t, err.Error(), missing)
	_, err = OpenWith(filepath.Join(dir, "no", "such", "dir.db"), Options{MustExist: true})
	require.True(t, errors.Is(err, ErrNotFound), "%v", err)
	require.Empty(t, dirNames(t, dir), "nothing was created")

	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = OpenWith(empty, Options{MustExist: true})
	require.True(t, errors.Is(err, ErrNotFound), "%v", err)
	st, err := os.Stat(empty)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "no schema was written into the empty file")

	a, err := Open(missing)
	require.NoError(t, err)
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	require.NoError(t, a.Close())
	a, err = OpenWith(missing, Options{MustExist: true})
	require.NoError(t, err, "an existing authority opens")
	ps, err := a.Productions()
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.NoError(t, a.Close())
}

func TestMustExistRefusesASchemaWithoutAnAuthorityAndCreatesNothing(t *testing.T) {
	u := pgtest.FreshSchema(t, false)
	_, err := OpenWith(u, Options{MustExist: true})
	require.True(t, errors.Is(err, ErrNotFound), "%v", err)
	require.Empty(t, pgtest.Tables(t, u), "nothing was created")
	a, err := Open(u)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	a, err = OpenWith(u, Options{MustExist: true})
	require.NoError(t, err, "an existing authority opens")
	require.NoError(t, a.Close())
}

func TestOneImportServesRetentionAndPruning(t *testing.T) {
	auth, err := Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer auth.Close()
	r := DefaultRetentionPolicy()
	r.Completed = KeepForGood
	p, err := auth.CreateProductionWithPolicies("nightly", DefaultRetryPolicy(), r)
	require.NoError(t, err)
	require.Equal(t, r, p.Retention)
	require.NoError(t, auth.SetRetentionPolicy("nightly", RetentionPolicy{Cancelled: time.Microsecond}))
	id, err := auth.RequestJob("nightly", "", nil)
	require.NoError(t, err)
	require.NoError(t, auth.Cancel("nightly", id))
	_, err = auth.RequestJob("nightly", "", nil)
	require.NoError(t, err)
	time.Sleep(time.Millisecond)
	res, err := auth.Prune(context.Background(), PruneOptions{Production: "nightly"})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Jobs)
	_, err = auth.Job("nightly", id)
	require.True(t, errors.Is(err, ErrNotFound))
	auth.SetPruneInterval(DefaultPruneInterval)
}
