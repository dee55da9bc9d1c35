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

// eventRows is a backend that counts the events it gives core.
type eventRows struct {
	store.Backend
	rows *atomic.Int64
}

func (b eventRows) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	es, err := b.Backend.ListEvents(ctx, f)
	b.rows.Add(int64(len(es)))
	return es, err
}

func (b eventRows) Events(ctx context.Context, p string, after int64, limit int) ([]store.Event, error) {
	es, err := b.Backend.Events(ctx, p, after, limit)
	b.rows.Add(int64(len(es)))
	return es, err
}

// logEnd is the seq of the newest event of the log.
func logEnd(t *testing.T, a *core.Authority) int64 {
	t.Helper()
	page, err := a.RecentEvents(context.Background(), core.EventQuery{Limit: 1}, 0)
	require.NoError(t, err)
	return page.Newest
}

func TestTheFirstScrapeReadsNoEventCommittedBeforeTheServerStarted(t *testing.T) {
	const history = 200
	eachStore(t, func(t *testing.T, location string) {
		writer := openCounted(t, location, &atomic.Int64{}, &atomic.Int64{})
		_, err := writer.CreateProduction("p")
		require.NoError(t, err)
		cycle(t, writer, "p", "then", history)
		end := logEnd(t, writer)
		require.Greater(t, end, int64(3*history))

		rows := &atomic.Int64{}
		a, err := core.OpenStore(location, stores.Name(location), func() (store.Backend, error) {
			b, err := stores.Open(location, stores.Options{})
			if err != nil {
				return nil, err
			}
			return eventRows{Backend: b, rows: rows}, nil
		})
		require.NoError(t, err)
		defer a.Close()
		a.SetPruneInterval(0)
		s, err := New(Config{Authority: a, Listen: "127.0.0.1:0"})
		require.NoError(t, err)
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		st := &site{t: t, a: a, writer: writer, srv: srv, s: s, loc: location}
		fams := metricsOf(t, st)

		// Finding the log's end reads its newest event (and the page's one
		// more), whatever the history.
		require.LessOrEqual(t, rows.Load(), int64(2),
			"the server's start and its first scrape read %d events of a log ending at seq %d", rows.Load(), end)
		require.EqualValues(t, end, sample(t, fams, "leases_events_read_seq", nil).GetGauge().GetValue(),
			"the counters start at the log's end")
		for _, metric := range []string{"leases_requests_total", "leases_claims_total", "leases_completions_total",
			"leases_claim_to_completion_seconds"} {
			if f, ok := fams[metric]; ok {
				require.Zero(t, sumWhere(f, nil), "%s counts nothing committed before the server started", metric)
			}
		}
		// The gauges still count every job.
		require.EqualValues(t, history, sample(t, fams, "leases_jobs",
			map[string]string{"production": "p", "state": core.StateCompleted}).GetGauge().GetValue())
	})
}

// eventsAfter counts the events after seq by production and kind, and the
// completions after seq whose claim is after seq too.
func eventsAfter(t *testing.T, a *core.Authority, seq int64) (map[string]map[string]float64, map[string]float64) {
	t.Helper()
	es, err := a.Events("", seq)
	require.NoError(t, err)
	kinds, timed := map[string]map[string]float64{}, map[string]float64{}
	claimed := map[string]bool{}
	for _, e := range es {
		require.Greater(t, e.Seq, seq)
		if kinds[e.Production] == nil {
			kinds[e.Production] = map[string]float64{}
		}
		kinds[e.Production][e.Kind]++
		switch e.Kind {
		case "claimed":
			claimed[e.JobID] = true
		case "completed":
			if claimed[e.JobID] {
				timed[e.Production]++
			}
		}
	}
	return kinds, timed
}

var counterOf = map[string]string{"claimed": "leases_claims_total", "completed": "leases_completions_total",
	"failed": "leases_failures_total", "claim_expired": "leases_claim_expiries_total",
	"cancelled": "leases_cancels_total", "requested": "leases_requests_total", "retry": "leases_retries_total",
	"dead": "leases_dead_total", "redriven": "leases_redrives_total", "released": "leases_releases_total"}

func TestCountersCountEveryEventCommittedAfterTheServerStarted(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		// Before the server starts: a history, and a claim still held.
		before := openCounted(t, location, &atomic.Int64{}, &atomic.Int64{})
		_, err := before.CreateProduction("p")
		require.NoError(t, err)
		cycle(t, before, "p", "then", 7)
		_, err = before.RequestJob("p", "", nil)
		require.NoError(t, err)
		held, err := before.Claim("p", "then", time.Minute)
		require.NoError(t, err)
		start := logEnd(t, before)

		st := newSite(t, location, Config{})
		// After it started, before its first scrape: the held claim
		// completes (a completion counted, its duration not: its claim
		// came before), and more of every kind.
		require.NoError(t, held.Complete(core.Facts{}))
		st.seed("p2", 6)
		_, err = st.writer.CreateProductionWithPolicy("q", core.RetryPolicy{MaxAttempts: 2})
		require.NoError(t, err)
		id := doomed(t, st, "q")
		require.NoError(t, st.writer.RetryJob("q", id))
		l, err := st.writer.ClaimJob("q", id, "slow", 50*time.Millisecond)
		require.NoError(t, err)
		time.Sleep(60 * time.Millisecond)
		l, err = st.writer.ClaimJob("q", id, "again", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release())

		check := func() (map[string]map[string]float64, map[string]float64) {
			t.Helper()
			fams := metricsOf(t, st)
			kinds, timed := eventsAfter(t, st.writer, start)
			require.Subset(t, []string{"p", "p2", "q"}, keys(kinds))
			for _, p := range []string{"p", "p2", "q"} {
				for kind, metric := range counterOf {
					m := sample(t, fams, metric, map[string]string{"production": p})
					require.Equal(t, kinds[p][kind], m.GetCounter().GetValue(), "%s of %s", metric, p)
				}
				h := sample(t, fams, "leases_claim_to_completion_seconds", map[string]string{"production": p}).GetHistogram()
				require.EqualValues(t, timed[p], h.GetSampleCount(), "the completions of %s claimed after the start", p)
			}
			return kinds, timed
		}
		kinds, timed := check()
		require.EqualValues(t, 1, kinds["p"]["completed"], "the held claim's completion, and only it, in p")
		require.Zero(t, timed["p"], "the held claim was made before the start: not timed")
		for kind := range counterOf {
			require.Positive(t, kinds["p2"][kind]+kinds["q"][kind], "the test commits a %s event", kind)
		}
		// Between scrapes, in a production the first scrape knew and in p.
		cycle(t, st.writer, "q", "later", 3)
		cycle(t, st.writer, "p", "later", 2)
		check()
		require.Zero(t, st.writes.Load())
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTheJobGaugesCountJobsWhoseEventsTheServerNeverRead(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		// p's jobs were requested before the server started and their
		// events are pruned; q's are kept and newer.
		before := openCounted(t, location, &atomic.Int64{}, &atomic.Int64{})
		for _, p := range []string{"p", "q"} {
			_, err := before.CreateProduction(p)
			require.NoError(t, err)
		}
		for i := 0; i < 3; i++ {
			_, err := before.RequestJob("p", fmt.Sprint("k", i), nil)
			require.NoError(t, err)
		}
		time.Sleep(20 * time.Millisecond)
		_, err := before.RequestJob("q", "", nil)
		require.NoError(t, err)
		r, err := before.Prune(context.Background(), core.PruneOptions{Production: "p", OlderThan: 10 * time.Millisecond})
		require.NoError(t, err)
		require.GreaterOrEqual(t, r.Events, int64(4), "p's events are pruned")
		es, err := before.Events("p", 0)
		require.NoError(t, err)
		require.Empty(t, es)

		st := newSite(t, location, Config{})
		for round := 0; round < 2; round++ {
			fams := metricsOf(t, st)
			require.EqualValues(t, 4, sumWhere(fams["leases_jobs"], map[string]string{"state": core.StateRequested}),
				"every requested job counted, round %d", round)
			// With no more productions than labels, each keeps its name.
			require.EqualValues(t, 3, sample(t, fams, "leases_jobs",
				map[string]string{"production": "p", "state": core.StateRequested}).GetGauge().GetValue(),
				"round %d", round)
			require.EqualValues(t, 1, sample(t, fams, "leases_jobs",
				map[string]string{"production": "q", "state": core.StateRequested}).GetGauge().GetValue())
			require.Positive(t, sample(t, fams, "leases_oldest_waiting_seconds",
				map[string]string{"production": "p"}).GetGauge().GetValue())
		}
		// A production with no job counts zeros, and its first job shows.
		_, err = st.writer.CreateProduction("empty")
		require.NoError(t, err)
		fams := metricsOf(t, st)
		require.Zero(t, sumWhere(fams["leases_jobs"], map[string]string{"production": "empty"}))
		_, err = st.writer.RequestJob("empty", "", nil)
		require.NoError(t, err)
		fams = metricsOf(t, st)
		require.EqualValues(t, 1, sample(t, fams, "leases_jobs",
			map[string]string{"production": "empty", "state": core.StateRequested}).GetGauge().GetValue())
		// A job whose request the counters have not read yet (a burst
		// longer than one scrape's reading) shows all the same.
		_, err = st.writer.CreateProduction("late")
		require.NoError(t, err)
		metricsOf(t, st) // counts none: "late" has no job
		budget := followBudget
		followBudget = 0 // this scrape reads no event
		defer func() { followBudget = budget }()
		_, err = st.writer.RequestJob("late", "", nil)
		require.NoError(t, err)
		fams = metricsOf(t, st)
		require.EqualValues(t, 1, sample(t, fams, "leases_jobs",
			map[string]string{"production": "late", "state": core.StateRequested}).GetGauge().GetValue())
	})
}
