// /metrics: gauges read at each scrape (jobs by production and state from
// Counts, the clock) and counters kept from the event log, which each
// scrape follows from where the last one stopped (docs/web.md, Metrics).
package web

import (
	"context"
	"sync"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/prometheus/client_golang/prometheus"
)

// followBudget bounds the event-log reading of one scrape: a first scrape
// of a long history reads it over several scrapes rather than timing out.
const followBudget = 5 * time.Second

// counted maps the event kinds kept as counters to their metrics.
var counted = map[string]*prometheus.Desc{
	"claimed":       counterDesc("claims", "Claims committed (a claim_expired claim taken again counts again)."),
	"completed":     counterDesc("completions", "Jobs completed."),
	"failed":        counterDesc("failures", "Jobs failed by their claimant."),
	"claim_expired": counterDesc("claim_expiries", "Claims that expired, counted when the authority ended them (the job back in the queue, dead, or claimed again)."),
	"cancelled":     counterDesc("cancels", "Jobs cancelled by a coordinator."),
	"released":      counterDesc("releases", "Claims released (the job became requested again)."),
	"requested":     counterDesc("requests", "Jobs requested."),
	"retry":         counterDesc("retries", "Attempts that ended to be retried (a retryable failure, a release or a lapse with attempts left)."),
	"dead":          counterDesc("dead", "Jobs that used up their attempts (went dead)."),
	"redriven":      counterDesc("redrives", "Failed, dead or cancelled jobs a coordinator returned to the queue."),
}

func counterDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("leases_"+name+"_total", help+" Counted from the event log since its start.",
		[]string{"production"}, nil)
}

var (
	jobsDesc = prometheus.NewDesc("leases_jobs", "Jobs by production and state (from the index of jobs by state).",
		[]string{"production", "state"}, nil)
	expiredDesc = prometheus.NewDesc("leases_claims_expired",
		"Claimed jobs whose claim has expired and that nobody has claimed again (claimable).", []string{"production"}, nil)
	oldestDesc = prometheus.NewDesc("leases_oldest_waiting_seconds",
		"Age of the first requested job in request order (0 when none waits).", []string{"production"}, nil)
	durationDesc = prometheus.NewDesc("leases_claim_to_completion_seconds",
		"From a claim to the completion of its job, on the authority clock.", []string{"production"}, nil)
	lagDesc = prometheus.NewDesc("leases_clock_lag_seconds",
		"How far the authority clock is behind its high-water mark (0 when it is not; more means claims are refused).",
		nil, nil)
	nowDesc = prometheus.NewDesc("leases_clock_now_seconds", "The authority clock (unix seconds).", nil, nil)
	hwmDesc = prometheus.NewDesc("leases_clock_high_water_mark_seconds",
		"The durable high-water mark of the authority clock (unix seconds).", nil, nil)
	seqDesc = prometheus.NewDesc("leases_events_read_seq",
		"The event log read by the counters so far (the last seq); below the log's end while a first scrape catches up.",
		nil, nil)
)

// durationBuckets span quick jobs to long renders.
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600}

// histogram is one production's claim-to-completion observations.
type histogram struct {
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

func (h *histogram) observe(v float64) {
	for i, b := range durationBuckets {
		if v <= b {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += v
}

func (h *histogram) cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(durationBuckets))
	var n uint64
	for i, b := range durationBuckets {
		n += h.counts[i]
		out[b] = n
	}
	return out
}

// collector is the server's Prometheus collector.
type collector struct {
	a *core.Authority

	mu      sync.Mutex
	after   int64                       // the last event read
	totals  map[string]map[string]int64 // production → kind → count
	hist    map[string]*histogram       // production → durations
	claimed map[string]time.Time        // job → when its current claim was made
}

func newCollector(a *core.Authority) *collector {
	return &collector{a: a, totals: map[string]map[string]int64{}, hist: map[string]*histogram{},
		claimed: map[string]time.Time{}}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range counted {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{jobsDesc, expiredDesc, oldestDesc, durationDesc, lagDesc, nowDesc, hwmDesc, seqDesc} {
		ch <- d
	}
}

// Collect reads the gauges and follows the event log. A store failure is
// reported as one invalid metric, so the scrape fails (HTTP 500) rather
// than showing zeros.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), followBudget+5*time.Second)
	defer cancel()
	if err := c.collect(ctx, ch); err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, scrapeError{core.KindOf(err)})
	}
}

// scrapeError names the kind of failure only, as /healthz does.
type scrapeError struct{ kind core.Kind }

func (e scrapeError) Error() string { return "the store does not answer (" + e.kind.String() + ")" }

func (c *collector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	clock, err := c.a.ReadClock(ctx)
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, clock.Lag().Seconds())
	ch <- prometheus.MustNewConstMetric(nowDesc, prometheus.GaugeValue, seconds(clock.Now))
	ch <- prometheus.MustNewConstMetric(hwmDesc, prometheus.GaugeValue, seconds(clock.HighWaterMark))
	q := core.ProductionQuery{Limit: core.MaxPageSize}
	for {
		page, err := c.a.ListProductions(ctx, q)
		if err != nil {
			return err
		}
		for _, p := range page.Productions {
			n, err := c.a.Counts(ctx, p.Name)
			if err != nil {
				return err
			}
			for _, st := range allStates {
				ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(countOf(n, st)), p.Name, st)
			}
			ch <- prometheus.MustNewConstMetric(expiredDesc, prometheus.GaugeValue, float64(n.Expired), p.Name)
			oldest := 0.0
			if !n.OldestRequested.IsZero() {
				oldest = max(0, n.At.Sub(n.OldestRequested).Seconds())
			}
			ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest, p.Name)
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.follow(ctx); err != nil {
		return err
	}
	for production, kinds := range c.totals {
		for kind, desc := range counted {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(kinds[kind]), production)
		}
	}
	for production, h := range c.hist {
		ch <- prometheus.MustNewConstHistogram(durationDesc, h.count, h.sum, h.cumulative(), production)
	}
	ch <- prometheus.MustNewConstMetric(seqDesc, prometheus.GaugeValue, float64(c.after))
	return nil
}

// follow reads the event log from where it stopped, page by page, for at
// most followBudget, counting events and pairing claims with completions.
// Counters only grow: the log is append-only and read once, in order.
func (c *collector) follow(ctx context.Context) error {
	deadline := time.Now().Add(followBudget)
	for time.Now().Before(deadline) {
		page, err := c.a.ListEvents(ctx, core.EventQuery{After: c.after, Limit: core.MaxPageSize})
		if err != nil {
			return err
		}
		for _, e := range page.Events {
			c.count(e)
		}
		c.after = page.Next
		if !page.More {
			return nil
		}
	}
	return nil
}

func (c *collector) count(e core.Event) {
	kinds := c.totals[e.Production]
	if kinds == nil {
		kinds = map[string]int64{}
		c.totals[e.Production] = kinds
	}
	kinds[e.Kind]++
	switch e.Kind {
	case "claimed":
		c.claimed[e.JobID] = e.At
	case "completed":
		if at, ok := c.claimed[e.JobID]; ok {
			h := c.hist[e.Production]
			if h == nil {
				h = &histogram{counts: make([]uint64, len(durationBuckets))}
				c.hist[e.Production] = h
			}
			h.observe(max(0, e.At.Sub(at).Seconds()))
		}
		delete(c.claimed, e.JobID)
	case "failed", "released", "cancelled", "retry", "dead":
		// The claim ended without a completion; a new claim replaces the
		// entry, so a lapsed claim needs no removal of its own.
		delete(c.claimed, e.JobID)
	}
}

func seconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
