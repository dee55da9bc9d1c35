package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/stores"
	"github.com/stretchr/testify/require"
)

// countingReads is a backend that counts its reads that count jobs (of
// one production or of every one) and its look-ups of a production by
// name.
type countingReads struct {
	store.Backend
	counts, lookups *atomic.Int64
}

func (b countingReads) CountJobs(ctx context.Context, p string, now int64) (store.JobCounts, error) {
	b.counts.Add(1)
	return b.Backend.CountJobs(ctx, p, now)
}

func (b countingReads) CountEveryProduction(ctx context.Context, now int64) (map[string]store.JobCounts, error) {
	b.counts.Add(1)
	return b.Backend.CountEveryProduction(ctx, now)
}

func (b countingReads) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	b.lookups.Add(1)
	return b.Backend.ProductionByName(ctx, name)
}

func TestTheFirstMetricsScrapeCountsEveryProductionInOneRead(t *testing.T) {
	const productions, busy = 250, 5
	eachStore(t, func(t *testing.T, location string) {
		writer := openCounted(t, location, &atomic.Int64{}, &atomic.Int64{})
		// busy-i has i+1 requested jobs, one of them claimed and one
		// more completed; the others have none.
		var withJobs []string
		for i := 0; i < busy; i++ {
			p := fmt.Sprintf("busy-%d", i)
			withJobs = append(withJobs, p)
			_, err := writer.CreateProduction(p)
			require.NoError(t, err)
			for j := 0; j < i+2; j++ {
				_, err := writer.RequestJob(p, "", nil)
				require.NoError(t, err)
			}
			l, err := writer.Claim(p, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Complete(core.Facts{}))
			_, err = writer.Claim(p, "w", time.Minute)
			require.NoError(t, err)
		}
		for i := busy; i < productions; i++ {
			_, err := writer.CreateProduction(fmt.Sprintf("quiet-%03d", i))
			require.NoError(t, err)
		}

		counts, lookups := &atomic.Int64{}, &atomic.Int64{}
		a, err := core.OpenStore(location, stores.Name(location), func() (store.Backend, error) {
			b, err := stores.Open(location, stores.Options{})
			if err != nil {
				return nil, err
			}
			return countingReads{Backend: b, counts: counts, lookups: lookups}, nil
		})
		require.NoError(t, err)
		defer a.Close()
		a.SetPruneInterval(0)
		s, err := New(Config{Authority: a, Listen: "127.0.0.1:0", MetricsProductions: 3})
		require.NoError(t, err)
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		st := &site{t: t, a: a, writer: writer, srv: srv, s: s, loc: location}

		scrape := func(what string) {
			t.Helper()
			counts.Store(0)
			lookups.Store(0)
			fams := metricsOf(t, st)
			require.EqualValues(t, 1, counts.Load(), "%s of %d productions counts their jobs in one read", what, productions)
			require.Zero(t, lookups.Load(), "%s looks no production up by name", what)
			// The counts are every production's, all the same.
			var requested, claimed, completed int64
			for _, p := range withJobs {
				c, err := writer.Counts(context.Background(), p)
				require.NoError(t, err)
				requested, claimed, completed = requested+c.Requested, claimed+c.Claimed, completed+c.Completed
			}
			jobs := fams["leases_jobs"]
			require.EqualValues(t, requested, sumWhere(jobs, map[string]string{"state": core.StateRequested}), what)
			require.EqualValues(t, claimed, sumWhere(jobs, map[string]string{"state": core.StateClaimed}), what)
			require.EqualValues(t, completed, sumWhere(jobs, map[string]string{"state": core.StateCompleted}), what)
		}
		scrape("the first scrape")
		// A later scrape after a job of a quiet production, too.
		withJobs = append(withJobs, fmt.Sprintf("quiet-%03d", productions-1))
		_, err = writer.RequestJob(withJobs[busy], "", nil)
		require.NoError(t, err)
		scrape("a later scrape")
	})
}
