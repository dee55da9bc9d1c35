package core

// PostgreSQL faults against the real server: a database made read-only and
// writable again, backends terminated between calls and between the
// statements of a transaction, and a server whose backends are stopped
// (SIGSTOP). They run in the PostgreSQL pass (make test).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

func pgFaultsOnly(t *testing.T) {
	if !testingPostgres() {
		t.Skip("PostgreSQL faults run in the PostgreSQL pass (LEASES_TEST_STORE=postgres)")
	}
}

// withParams is location with query parameters set.
func withParams(t *testing.T, location string, kv ...string) string {
	u, err := url.Parse(location)
	require.NoError(t, err)
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// appName is a fresh application_name, by which the test finds the
// backends serving its authority and no other test's.
func appName() string { return "lt_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16] }

// adminPids runs sql on the test server's own database and returns the
// first column of each row (a process id).
func adminPids(t *testing.T, sql string, args ...any) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pids, err := queryPids(ctx, pgtest.URL(t, true), sql, args...)
	require.NoError(t, err)
	return pids
}

// queryPids is adminPids that returns its error: for goroutines, which must
// not fail the test, and for calls that a stopped backend can block (one
// stopped while it held a lock of the server's shared memory keeps new
// sessions from starting until it continues).
func queryPids(ctx context.Context, url, sql string, args ...any) ([]int, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}

// terminateApp ends every backend of app and waits until they are gone.
func terminateApp(t *testing.T, app string) {
	t.Helper()
	// Not "WHERE application_name = $1 AND pg_terminate_backend(pid)": the
	// server may evaluate the call first, for every session.
	for _, pid := range adminPids(t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app) {
		adminPids(t, `SELECT pid FROM (SELECT $1::int AS pid) p WHERE pg_terminate_backend(p.pid)`, pid)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if len(adminPids(t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)) == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "backends of %s did not end", app)
	}
}

// freshDatabase is a new database on the test server (a database-wide
// setting then concerns this test alone), dropped when the test ends.
func freshDatabase(t *testing.T) (location, name string) {
	t.Helper()
	base := pgtest.URL(t, true)
	name = "ldb_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	pgtest.Exec(t, base, `CREATE DATABASE `+name)
	t.Cleanup(func() { pgtest.Exec(t, base, `DROP DATABASE `+name+` WITH (FORCE)`) })
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String(), name
}

// appAuthority opens an authority on location with busy as its busy
// timeout (0: the default), under a fresh application_name and any further
// URL parameters, with production "p"; it returns the name too.
func appAuthority(t *testing.T, location string, busy time.Duration, params ...string) (*Authority, string, string) {
	t.Helper()
	app := appName()
	u := withParams(t, location, append([]string{"application_name", app}, params...)...)
	a, err := OpenWith(u, Options{BusyTimeout: busy})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	return a, app, u
}

// hammer runs op from n goroutines at once and returns their errors.
func hammer(n int, op func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = op(i)
		}(i)
	}
	wg.Wait()
	return errs
}

func TestAnAuthorityOpenedBeforeItsDatabaseWentReadOnlyRecoversOnceItIsWritable(t *testing.T) {
	pgFaultsOnly(t)
	loc, db := freshDatabase(t)
	busy := 2 * time.Second
	a, app, _ := appAuthority(t, loc, busy)
	// Several pooled connections, opened while the database was writable.
	for _, err := range hammer(6, func(i int) error { _, err := a.RequestJob("p", "", nil); return err }) {
		require.NoError(t, err)
	}

	pgtest.Exec(t, pgtest.URL(t, true), `ALTER DATABASE `+db+` SET default_transaction_read_only = on`)
	terminateApp(t, app)
	// While it is read-only: writes fail with storage, saying why; reads
	// work, and fill the pool with read-only sessions.
	for _, err := range hammer(4, func(i int) error { _, err := a.RequestJob("p", "", nil); return err }) {
		requireKind(t, err, KindStorage)
		require.Contains(t, err.Error(), "read-only")
	}
	for _, err := range hammer(8, func(i int) error { _, err := a.Jobs("p"); return err }) {
		require.NoError(t, err)
	}

	pgtest.Exec(t, pgtest.URL(t, true), `ALTER DATABASE `+db+` SET default_transaction_read_only = off`)
	// Writable again: the sessions opened read-only are discarded as they
	// fail, and every call succeeds at once, transparently.
	start := time.Now()
	for _, err := range hammer(8, func(i int) error {
		if _, err := a.RequestJob("p", fmt.Sprintf("after-%d", i), nil); err != nil {
			return err
		}
		l, err := a.Claim("p", fmt.Sprintf("w%d", i), time.Minute)
		if err != nil {
			return err
		}
		return l.Complete(Facts{})
	}) {
		require.NoError(t, err)
	}
	require.Less(t, time.Since(start), busy, "recovered within the busy timeout")
}

func TestBackendsTerminatedBetweenCallsAreRetriedNotReported(t *testing.T) {
	pgFaultsOnly(t)
	a, app, _ := appAuthority(t, freshSchema(t), 0)
	for i := 0; i < 8; i++ {
		_, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
	}
	// Every call below meets a pool whose connections were all terminated
	// (57P01 on its first statement, the 84 of 170 errors).
	calls := []func() error{
		func() error { _, err := a.RequestJob("p", "", nil); return err },
		func() error {
			l, err := a.Claim("p", "w", time.Minute)
			if err == nil {
				terminateApp(t, app)
				err = l.Renew(2 * time.Minute)
			}
			if err == nil {
				terminateApp(t, app)
				err = l.Complete(Facts{})
			}
			return err
		},
		func() error { _, err := a.Jobs("p"); return err },
		func() error { _, err := a.Events("p", 0); return err },
		func() error { _, err := a.Productions(); return err },
		func() error { _, err := a.HighWaterMark(); return err },
	}
	for round := 0; round < 3; round++ {
		for i, call := range calls {
			terminateApp(t, app)
			require.NoError(t, call(), "round %d call %d", round, i)
		}
	}
}

// terminatingTx ends every backend of its authority once, after the
// transaction's first statement: the next statement meets a dead session.
type terminatingTx struct {
	store.Tx
	t    *testing.T
	app  string
	once *sync.Once
}

func (x *terminatingTx) HWM(ctx context.Context) (int64, error) {
	v, err := x.Tx.HWM(ctx)
	x.once.Do(func() { terminateApp(x.t, x.app) })
	return v, err
}

func (x *terminatingTx) Now(ctx context.Context) (int64, error) { return x.Tx.(store.Clock).Now(ctx) }

func TestABackendTerminatedBetweenTheStatementsOfATransactionIsRetriedOnAFreshConnection(t *testing.T) {
	pgFaultsOnly(t)
	a, app, _ := appAuthority(t, freshSchema(t), 0)
	job, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	once := &sync.Once{}
	wrapTxs(a, func(tx store.Tx) store.Tx { return &terminatingTx{Tx: tx, t: t, app: app, once: once} })
	l, err := a.Claim("p", "w", time.Minute)
	require.NoError(t, err, "the claim ran again on a fresh connection")
	require.Equal(t, job, l.JobID())
	require.Equal(t, 1, countEvents(t, a, "claimed"), "the terminated attempt wrote nothing")
}

// stopper stops (SIGSTOP) every backend of app, including those it starts
// meanwhile, until released; then continues them all (SIGCONT). It stops a
// backend only where it waits for its client (stopWaiting): the server is
// shared with the other tests of a run, and a backend stopped while it held
// a lock of the server's shared memory stalled every session of the server.
type stopper struct {
	once    sync.Once
	count   int
	mu      sync.Mutex
	stopped map[int]bool
	// released: no backend is stopped any more; resume continues those
	// that were.
	released bool
	resume   func()
	first    chan struct{} // closed once the first round has stopped what runs
	done     chan struct{}
	ended    chan struct{}
}

func stopBackends(t *testing.T, app string) *stopper {
	s := &stopper{stopped: map[int]bool{}, first: make(chan struct{}), done: make(chan struct{}), ended: make(chan struct{})}
	resume := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for pid := range s.stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	s.resume = resume
	t.Cleanup(resume) // never leave the test server stopped
	admin := pgtest.URL(t, true)
	go func() {
		defer close(s.ended)
		for round := 0; ; round++ {
			// Bounded, and never failing the test from here: a look that a
			// stopped backend blocks is skipped, and release continues the
			// backends itself rather than waiting for this loop.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			pids, _ := queryPids(ctx, admin, `SELECT pid FROM pg_stat_activity WHERE application_name = $1
				AND wait_event = 'ClientRead'`, app)
			s.mu.Lock()
			if !s.released {
				for _, pid := range stopWaiting(ctx, admin, pids, s.stopped) {
					s.stopped[pid] = true
				}
			}
			s.mu.Unlock()
			cancel()
			if round == 0 {
				close(s.first)
			}
			select {
			case <-s.done:
				resume()
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return s
}

// stopWaiting stops those of pids not stopped already that wait for their
// client, and returns them; it continues the others. A backend waits for
// its client holding no lock of the server's shared memory: stopped there,
// it stalls its own sessions alone. Which ones did is asked once they are
// stopped, when what the server says of them can no longer change.
func stopWaiting(ctx context.Context, admin string, pids []int, stopped map[int]bool) []int {
	var tried []int
	for _, pid := range pids {
		if !stopped[pid] && syscall.Kill(pid, syscall.SIGSTOP) == nil {
			tried = append(tried, pid)
		}
	}
	for _, pid := range tried {
		for deadline := time.Now().Add(time.Second); !processStopped(pid) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	var still []int
	if len(tried) > 0 {
		still, _ = queryPids(ctx, admin, `SELECT pid FROM pg_stat_activity WHERE pid = ANY($1)
			AND wait_event = 'ClientRead'`, tried)
	}
	var out []int
	for _, pid := range tried {
		if slices.Contains(still, pid) && processStopped(pid) {
			out = append(out, pid)
		} else {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	return out
}

// processStopped reports whether the process pid is stopped by a signal
// (state T in /proc/<pid>/stat, whose command name may hold any byte but
// ends at the last ')').
func processStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

// release continues the stopped backends and says how many there were; it
// may be called more than once.
func (s *stopper) release() int {
	s.once.Do(func() {
		s.mu.Lock()
		s.released = true
		s.count = len(s.stopped)
		s.mu.Unlock()
		s.resume()
		close(s.done)
		<-s.ended
		s.resume()
	})
	return s.count
}

func TestAStoppedServerGivesBusyOrStorageWithinTheBoundAndLosesNoAcknowledgedTransition(t *testing.T) {
	pgFaultsOnly(t)
	busy := 300 * time.Millisecond
	a, app, u := appAuthority(t, freshSchema(t), busy, "connect_timeout", "1", "statement_timeout", "500")
	for i := 0; i < 300; i++ {
		_, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
	}
	// The documented bound of one store call: a connection (busy + connect
	// timeout), then one statement cut off (statement_timeout + 1 s). An
	// operation that fails makes one more transaction, to record its clock
	// sample (CLOCK.md): twice that in all.
	bound := 2 * (busy + time.Second + 500*time.Millisecond + time.Second)
	const stall = 10 * time.Second

	type acked struct{ job, worker, kind string }
	var mu sync.Mutex
	var acks []acked
	var failures []error
	var longest time.Duration
	stop := make(chan struct{})
	timed := func(f func() error) error {
		start := time.Now()
		err := f()
		mu.Lock()
		longest = max(longest, time.Since(start))
		if err != nil && !errors.Is(err, ErrNothingToClaim) {
			failures = append(failures, err)
		}
		mu.Unlock()
		return err
	}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(worker string) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var l *Lease
				if timed(func() error { var err error; l, err = a.Claim("p", worker, time.Minute); return err }) != nil {
					continue
				}
				mu.Lock()
				acks = append(acks, acked{l.JobID(), worker, "claimed"})
				mu.Unlock()
				if timed(func() error { return l.Complete(Facts{}) }) == nil {
					mu.Lock()
					acks = append(acks, acked{l.JobID(), worker, "completed"})
					mu.Unlock()
				}
			}
		}(fmt.Sprintf("w%d", w))
	}
	time.Sleep(200 * time.Millisecond)
	s := stopBackends(t, app)
	time.Sleep(stall)
	stoppedCount := s.release()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	require.Positive(t, stoppedCount, "backends were stopped")
	require.Less(t, longest, bound+time.Second, "no call waited out the %s stall", stall)
	require.NotEmpty(t, failures, "the stall was felt")
	for _, err := range failures {
		k := KindOf(err)
		require.True(t, k == KindBusy || k == KindStorage || k == KindOutcomeUnknown, "%v", err)
	}

	// After SIGCONT, every acknowledged transition is in the event log.
	b, err := Open(u)
	require.NoError(t, err)
	defer b.Close()
	evs, err := b.Events("p", 0)
	require.NoError(t, err)
	logged := map[acked]bool{}
	completed := map[string]int{}
	for _, e := range evs {
		logged[acked{e.JobID, e.Worker, e.Kind}] = true
		if e.Kind == "completed" {
			completed[e.JobID]++
		}
	}
	require.NotEmpty(t, acks)
	for _, ack := range acks {
		require.True(t, logged[ack], "acknowledged %+v is in the event log", ack)
	}
	for job, n := range completed {
		require.Equal(t, 1, n, "job %s completed once", job)
	}
}

func TestStoppingOneApplicationsBackendsLeavesTheServerToEveryOtherApplication(t *testing.T) {
	// The stopped-server tests share their server with the other tests of a
	// run (and with other runs): their stall must be the stopped
	// application's alone. A backend stopped while it held a lock of the
	// server's shared memory stalled every session of the server.
	pgFaultsOnly(t)
	a, app, _ := appAuthority(t, freshSchema(t), 300*time.Millisecond, "connect_timeout", "1", "statement_timeout", "500")
	by, _, _ := appAuthority(t, freshSchema(t), 0)
	const stall = 6 * time.Second
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// cycles requests, claims and completes jobs of auth until stop, and
	// records when each cycle committed (UnixNano) in last.
	cycles := func(auth *Authority, worker string, last *atomic.Int64) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := auth.RequestJob("p", "", nil); err != nil {
				continue
			}
			if l, err := auth.Claim("p", worker, time.Minute); err == nil && l.Complete(Facts{}) == nil && last != nil {
				last.Store(time.Now().UnixNano())
			}
		}
	}
	var byLast atomic.Int64
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go cycles(a, fmt.Sprintf("w%d", w), nil)
	}
	wg.Add(1)
	go cycles(by, "bystander", &byLast)
	time.Sleep(200 * time.Millisecond)
	s := stopBackends(t, app)
	time.Sleep(stall)
	// Read before the release: in the stall's second half every backend
	// of the stopped application has long been stopped.
	bystanderLast, stallEnd := time.Unix(0, byLast.Load()), time.Now()
	stopped := s.release()
	close(stop)
	wg.Wait()
	require.Positive(t, stopped, "backends were stopped")
	require.True(t, bystanderLast.After(stallEnd.Add(-stall/2)),
		"another application's transitions stopped with the stopped one's backends (its last commit was %s before the stall ended)",
		stallEnd.Sub(bystanderLast))
}

// stoppingTx stops the transaction's backend just before its COMMIT, and
// lets it go on once COMMIT has returned.
type stoppingTx struct {
	store.Tx
	t       *testing.T
	app     string
	stopped *int
	once    *sync.Once
}

func (x *stoppingTx) Now(ctx context.Context) (int64, error) { return x.Tx.(store.Clock).Now(ctx) }

func (x *stoppingTx) Commit() error {
	var s *stopper
	x.once.Do(func() {
		s = stopBackends(x.t, x.app)
		<-s.first
		time.AfterFunc(15*time.Second, func() { s.release() }) // without a deadline, COMMIT waits for this
	})
	err := x.Tx.Commit()
	if s != nil {
		*x.stopped = s.release()
	}
	return err
}

func TestACommitCutOffByItsDeadlineIsOutcomeUnknown(t *testing.T) {
	pgFaultsOnly(t)
	a, app, _ := appAuthority(t, freshSchema(t), 200*time.Millisecond)
	job, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	stopped := 0
	once := &sync.Once{}
	wrapTxs(a, func(tx store.Tx) store.Tx { return &stoppingTx{Tx: tx, t: t, app: app, stopped: &stopped, once: once} })
	start := time.Now()
	_, err = a.Claim("p", "w", time.Minute)
	took := time.Since(start)
	require.Positive(t, stopped, "the transaction's backend was stopped")
	requireKind(t, err, KindOutcomeUnknown)
	require.Contains(t, err.Error(), job, "the message names the job")
	require.Less(t, took, 10*time.Second, "cut off by the statement bound (3.2 s)")
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, job, e.JobID)
}
