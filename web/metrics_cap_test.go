package web

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// labelValues is the set of production label values of a family.
func labelValues(f *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "production" {
				out[l.GetValue()] = true
			}
		}
	}
	return out
}

// sumWhere sums a family's gauge or counter values (a histogram's count)
// over the series whose labels include want.
func sumWhere(f *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestMetricsLabelAtMostTheBusiestNProductionsAndSumTheRestUnderOther(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short only: it creates 5,000 productions on each store (make test runs it)")
	}
	const n, productions, busy = 10, 5000, 20
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{MetricsProductions: n})
		// busy-00 … busy-19: busy-i has i+2 jobs, one completed, so the
		// busiest by events are busy-10 … busy-19. A production named
		// like the aggregate label is among the quiet ones.
		for i := 0; i < busy; i++ {
			p := fmt.Sprintf("busy-%02d", i)
			_, err := st.writer.CreateProduction(p)
			require.NoError(t, err)
			for j := 0; j < i+2; j++ {
				_, err := st.writer.RequestJob(p, "", nil)
				require.NoError(t, err)
			}
			l, err := st.writer.Claim(p, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Complete(core.Facts{}))
		}
		_, err := st.writer.CreateProduction(OtherProductions)
		require.NoError(t, err)
		_, err = st.writer.RequestJob(OtherProductions, "", nil)
		require.NoError(t, err)
		for i := busy + 1; i < productions; i++ {
			_, err := st.writer.CreateProduction(fmt.Sprintf("quiet-%04d", i))
			require.NoError(t, err)
		}

		fams := metricsOf(t, st)
		var want []string
		for i := busy - n; i < busy; i++ {
			want = append(want, fmt.Sprintf("busy-%02d", i))
		}
		want = append(want, OtherProductions)
		slices.Sort(want)
		families := 0
		for name, f := range fams {
			vals := labelValues(f)
			if len(vals) == 0 {
				continue
			}
			families++
			got := make([]string, 0, len(vals))
			for v := range vals {
				got = append(got, v)
			}
			slices.Sort(got)
			require.LessOrEqual(t, len(got), n+1, "%s has %d production label values", name, len(got))
			require.Equal(t, want, got, "%s labels the %d busiest productions and %s", name, n, OtherProductions)
		}
		require.GreaterOrEqual(t, families, 14, "every production family is there")

		// The sums agree with the totals: the jobs by state, and each
		// counter with the event log (all of it committed after the
		// server started, so all of it counted).
		var requested, completed float64
		for i := 0; i < busy; i++ {
			requested += float64(i + 2)
			completed++
		}
		requested++ // the one in the production named like the label
		jobs := fams["leases_jobs"]
		require.EqualValues(t, requested-completed, sumWhere(jobs, map[string]string{"state": core.StateRequested}))
		require.EqualValues(t, completed, sumWhere(jobs, map[string]string{"state": core.StateCompleted}))
		require.EqualValues(t, 0, sumWhere(jobs, map[string]string{"state": core.StateClaimed}))
		es, err := st.writer.Events("", 0)
		require.NoError(t, err)
		kinds := map[string]float64{}
		for _, e := range es {
			kinds[e.Kind]++
		}
		for kind, metric := range map[string]string{"requested": "leases_requests_total", "claimed": "leases_claims_total",
			"completed": "leases_completions_total"} {
			require.EqualValues(t, kinds[kind], sumWhere(fams[metric], nil), metric)
		}
		require.EqualValues(t, completed, sumWhere(fams["leases_claim_to_completion_seconds"], nil))
		// One production's own series are its own: busy-19's requests.
		require.EqualValues(t, busy+1, sample(t, fams, "leases_requests_total",
			map[string]string{"production": fmt.Sprintf("busy-%02d", busy-1)}).GetCounter().GetValue())
	})
}
