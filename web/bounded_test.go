package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/stores"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// rowCounter is a backend that counts the rows its observations give core:
// the events and jobs listed, the workers seen, the buckets counted, and
// for the counts by state (of one production or of every one), every job
// counted (an index-only count visits each entry it counts). Every observation is one index range from its
// first row (the plan tests of both stores), so what it visits is what it
// gives, give or take the row that ends the range.
type rowCounter struct {
	eventRows // the events listed (metrics_start_test.go)
}

func (b rowCounter) ListJobs(ctx context.Context, f store.JobFilter) ([]store.JobRow, error) {
	js, err := b.Backend.ListJobs(ctx, f)
	b.rows.Add(int64(len(js)))
	return js, err
}

func (b rowCounter) ListWorkerJobs(ctx context.Context, f store.WorkerJobFilter) ([]store.JobRow, error) {
	js, err := b.Backend.ListWorkerJobs(ctx, f)
	b.rows.Add(int64(len(js)))
	return js, err
}

func (b rowCounter) Workers(ctx context.Context, p string, since, now int64, limit int) ([]store.WorkerSeen, error) {
	ws, err := b.Backend.Workers(ctx, p, since, now, limit)
	b.rows.Add(int64(len(ws)))
	return ws, err
}

func (b rowCounter) CountEvents(ctx context.Context, p, kind string, since, width int64) ([]store.Bucket, error) {
	bs, err := b.Backend.CountEvents(ctx, p, kind, since, width)
	for _, x := range bs {
		b.rows.Add(x.Count)
	}
	return bs, err
}

func (b rowCounter) CountJobs(ctx context.Context, p string, now int64) (store.JobCounts, error) {
	c, err := b.Backend.CountJobs(ctx, p, now)
	for _, n := range c.ByState {
		b.rows.Add(n)
	}
	return c, err
}

func (b rowCounter) CountEveryProduction(ctx context.Context, now int64) (map[string]store.JobCounts, error) {
	all, err := b.Backend.CountEveryProduction(ctx, now)
	for _, c := range all {
		for _, n := range c.ByState {
			b.rows.Add(n)
		}
	}
	return all, err
}

// cycle runs n jobs of production p through a claim by worker and a
// completion.
func cycle(t *testing.T, a *core.Authority, p, worker string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := a.RequestJob(p, "", nil)
		require.NoError(t, err)
		l, err := a.Claim(p, worker, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(core.Facts{}))
	}
}

// readsOfAFirstLook opens a server over location whose store counts the
// rows it gives, and returns what its first /metrics scrape, the overview
// and the production's page (counts, the workers seen and holding claims,
// the per-minute counts) each read.
func readsOfAFirstLook(t *testing.T, location, production string) map[string]int64 {
	t.Helper()
	rows := &atomic.Int64{}
	a, err := core.OpenStore(location, stores.Name(location), func() (store.Backend, error) {
		b, err := stores.Open(location, stores.Options{})
		if err != nil {
			return nil, err
		}
		return rowCounter{eventRows{Backend: b, rows: rows}}, nil
	})
	require.NoError(t, err)
	defer a.Close()
	a.SetPruneInterval(0)
	s, err := New(Config{Authority: a, Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	out := map[string]int64{}
	for _, path := range []string{"/metrics", "/", "/production?" + url.Values{"name": {production}}.Encode()} {
		rows.Store(0)
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		out[path] = rows.Load()
	}
	return out
}

func TestAFirstScrapeCountsAndTheWorkersViewReadWhatTheRetentionKeepsNotTheLogsWholeHistory(t *testing.T) {
	const window, history = 10, 150
	eachStore(t, func(t *testing.T, location string) {
		// The farm as it is now: one window of jobs.
		fresh := openCounted(t, location, &atomic.Int64{}, &atomic.Int64{})
		_, err := fresh.CreateProduction("p")
		require.NoError(t, err)
		cycle(t, fresh, "p", "now", window)
		require.NoError(t, fresh.Close())
		want := readsOfAFirstLook(t, location, "p")

		// The same farm after a long history, pruned to the same window.
		aged := anotherLocation(t, location)
		old := openCounted(t, aged, &atomic.Int64{}, &atomic.Int64{})
		_, err = old.CreateProduction("p")
		require.NoError(t, err)
		for w := 0; w < history/10; w++ {
			cycle(t, old, "p", fmt.Sprint("then-", w), 10)
		}
		// The prune's cutoff is the boundary plus however long the prune
		// runs before each batch reads the time: well before the window.
		time.Sleep(20 * time.Millisecond)
		boundary := time.Now()
		time.Sleep(time.Second)
		cycle(t, old, "p", "now", window)
		r, err := old.Prune(context.Background(), core.PruneOptions{OlderThan: time.Since(boundary).Truncate(time.Microsecond)})
		require.NoError(t, err)
		require.EqualValues(t, history, r.Jobs, "the history is pruned, the window kept")
		require.GreaterOrEqual(t, r.Events, int64(3*history))
		require.NoError(t, old.Close())
		got := readsOfAFirstLook(t, aged, "p")

		t.Logf("rows read, fresh: %v; after a pruned history: %v", want, got)
		for path, n := range want {
			require.LessOrEqual(t, got[path], n+2, "%s reads %d rows after a pruned history of %d jobs, %d without it",
				path, got[path], history, n)
		}
		require.Positive(t, want["/metrics"])
	})
}

// anotherLocation is a fresh location of location's store (eachStore).
func anotherLocation(t *testing.T, location string) string {
	t.Helper()
	if !strings.HasPrefix(location, "postgres") {
		return filepath.Join(t.TempDir(), "another.db")
	}
	u, err := url.Parse(pgtest.FreshSchema(t, false))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), pgPassword)
	return u.String()
}
