package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// t0 is an arbitrary fixed start for the fake clock (2026-01-01T00:00:00Z).
const t0 = int64(1_767_225_600_000_000)

// fakeClock is the test clock. Samples queued with then() are returned first,
// one per reading, so a test can place a jump between the two samples of one
// operation; otherwise it returns the current setting.
type fakeClock struct {
	mu     sync.Mutex
	now    int64
	queued []int64
	reads  int
}

func (c *fakeClock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	if len(c.queued) > 0 {
		v := c.queued[0]
		c.queued = c.queued[1:]
		return v
	}
	return c.now
}

func (c *fakeClock) set(us int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = us
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now += d.Microseconds()
}

// operation queues the samples of one guarded operation: its first sample
// and its pre-commit sample. On PostgreSQL an operation also samples once it
// holds the job's row (guard.locked); that sample repeats the first.
func (c *fakeClock) operation(first, preCommit int64) {
	if testingPostgres() {
		c.then(first, first, preCommit)
		return
	}
	c.then(first, preCommit)
}

// then queues exact samples for the next readings.
func (c *fakeClock) then(samples ...int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued = append(c.queued, samples...)
}

type fixture struct {
	t    *testing.T
	path string
	a    *Authority
	clk  *fakeClock
}

// newFixture opens a fresh authority with a fake clock and one production "p".
func newFixture(t *testing.T) *fixture {
	t.Helper()
	path := newLocation(t, "leases.db")
	f := &fixture{t: t, path: path, clk: &fakeClock{now: t0}}
	f.a = f.open()
	_, err := f.a.CreateProductionWithPolicy("p", noBackoff)
	require.NoError(t, err)
	return f
}

// noBackoff is the fixture's policy: a lapsed claim is claimable again at
// its expiry instant, so the rules of claims and expiry are tested apart
// from backoff (retry_test.go tests the default policy).
var noBackoff = RetryPolicy{MaxAttempts: 25, BackoffCap: time.Hour}

func (f *fixture) open() *Authority {
	f.t.Helper()
	a, err := Open(f.path)
	require.NoError(f.t, err)
	a.setClock(f.clk.Now)
	f.t.Cleanup(func() { a.Close() })
	return a
}

func (f *fixture) reopen() {
	f.t.Helper()
	require.NoError(f.t, f.a.Close())
	f.a = f.open()
}

func (f *fixture) request(n int) []string {
	f.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := f.a.RequestJob("p", "", []byte{byte(i)})
		require.NoError(f.t, err)
		ids[i] = id
	}
	return ids
}

func (f *fixture) claim(worker string, d time.Duration) *Lease {
	f.t.Helper()
	l, err := f.a.Claim("p", worker, d)
	require.NoError(f.t, err)
	return l
}

func (f *fixture) job(id string) Job {
	f.t.Helper()
	j, err := f.a.Job("p", id)
	require.NoError(f.t, err)
	return j
}

func (f *fixture) hwm() int64 {
	f.t.Helper()
	v, err := f.a.b.HWM(context.Background())
	require.NoError(f.t, err)
	return v
}

// snapshot captures everything observable in the store, to prove that a
// rejection changed nothing.
type snapshot struct {
	prods  []store.Production
	jobs   []store.Job
	events int
	hwm    int64
	facts  int
	tries  int
}

func (f *fixture) snapshot() snapshot {
	f.t.Helper()
	ctx := context.Background()
	p, err := f.a.b.ProductionByName(ctx, "p")
	require.NoError(f.t, err)
	js, err := f.a.b.Jobs(ctx, p.ID)
	require.NoError(f.t, err)
	es, err := f.a.b.Events(ctx, "", 0, 0)
	require.NoError(f.t, err)
	n, tries := 0, 0
	for _, j := range js {
		fs, err := f.a.b.Facts(ctx, j.ID)
		require.NoError(f.t, err)
		n += len(fs)
		as, err := f.a.b.Attempts(ctx, j.ID)
		require.NoError(f.t, err)
		tries += len(as)
	}
	ps, err := f.a.b.Productions(ctx)
	require.NoError(f.t, err)
	return snapshot{prods: ps, jobs: js, events: len(es), hwm: f.hwm(), facts: n, tries: tries}
}

func requireKind(t *testing.T, err error, want Kind) {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "error %v is not a *core.Error", err)
	require.Equal(t, want.String(), e.Kind.String(), "error: %v", err)
}

// txWrapper is a backend whose write transactions come wrapped, for tests
// that change one step of a transaction (a fault, a clock, a pause).
type txWrapper struct {
	store.Backend
	wrap func(store.Tx) store.Tx
}

func (b txWrapper) BeginWrite(ctx context.Context) (store.Tx, error) {
	tx, err := b.Backend.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return b.wrap(tx), nil
}

// wrapTxs makes a's write transactions come wrapped by wrap.
func wrapTxs(a *Authority, wrap func(store.Tx) store.Tx) { a.b = txWrapper{Backend: a.b, wrap: wrap} }
