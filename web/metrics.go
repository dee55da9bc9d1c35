// /metrics: gauges read at each scrape (jobs by production and state from
// CountsByProduction, the clock) and counters of the events committed since the server
// started, kept by following the event log from its end at the start, each
// scrape from where the last one stopped (docs/web.md, Metrics).
package web

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/prometheus/client_golang/prometheus"
)

// followBudget bounds the event-log reading of one scrape: a burst of
// events between two scrapes is read over several rather than timing out.
// A variable for tests.
var followBudget = 5 * time.Second

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
	return prometheus.NewDesc("leases_"+name+"_total", help+" Counted from the event log since the server started.",
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
		"From a claim to the completion of its job, on the authority clock (claims made since the server started).",
		[]string{"production"}, nil)
	lagDesc = prometheus.NewDesc("leases_clock_lag_seconds",
		"How far the authority clock is behind its high-water mark (0 when it is not; more means claims are refused).",
		nil, nil)
	nowDesc = prometheus.NewDesc("leases_clock_now_seconds", "The authority clock (unix seconds).", nil, nil)
	hwmDesc = prometheus.NewDesc("leases_clock_high_water_mark_seconds",
		"The durable high-water mark of the authority clock (unix seconds).", nil, nil)
	seqDesc = prometheus.NewDesc("leases_events_read_seq",
		"The event log read by the counters so far (the last seq; the log's end when the server started, at first).",
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

// add adds o's observations to h.
func (h *histogram) add(o *histogram) {
	for i := range h.counts {
		h.counts[i] += o.counts[i]
	}
	h.count += o.count
	h.sum += o.sum
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
	started bool                        // after is set: the log's end when the server started
	after   int64                       // the last event read
	totals  map[string]map[string]int64 // production → kind → count
	hist    map[string]*histogram       // production → durations
	claimed map[string]time.Time        // job → when its current claim was made

	limit    int              // how many productions are labelled by name
	activity map[string]int64 // production → events read (every kind)
	labelled map[string]bool  // the productions labelled by name (label)
}

func newCollector(a *core.Authority, limit int) *collector {
	return &collector{a: a, totals: map[string]map[string]int64{}, hist: map[string]*histogram{},
		claimed: map[string]time.Time{}, limit: limit, activity: map[string]int64{}, labelled: map[string]bool{}}
}

// start sets the counters' cursor at the log's end, once: the seq of its
// newest event (below the follower-safe horizon on PostgreSQL, so no event
// committing late lies under it), one short read from that end. Nothing
// committed before is counted; everything committed after is. The caller
// holds mu or owns c alone.
func (c *collector) start(ctx context.Context) error {
	if c.started {
		return nil
	}
	page, err := c.a.RecentEvents(ctx, core.EventQuery{Limit: 1}, 0)
	if err != nil {
		return err
	}
	c.after, c.started = page.Newest, true
	return nil
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.start(ctx); err != nil {
		return err
	}
	if err := c.follow(ctx); err != nil {
		return err
	}
	var productions []core.Production
	q := core.ProductionQuery{Limit: core.MaxPageSize}
	for {
		page, err := c.a.ListProductions(ctx, q)
		if err != nil {
			return err
		}
		productions = append(productions, page.Productions...)
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	c.label(productions)
	// Every production's counts in one read, whatever the number of
	// productions: a production with no job is not in it (zeros).
	counts, err := c.a.CountsByProduction(ctx)
	if err != nil {
		return err
	}
	// Gauges: each labelled production's own, the others summed (the age
	// of the oldest waiting job: the oldest of theirs).
	var other struct {
		any     bool
		states  map[string]int64
		expired int64
		oldest  float64
	}
	other.states = map[string]int64{}
	for _, p := range productions {
		n := counts[p.ID]
		oldest := 0.0
		if !n.OldestRequested.IsZero() {
			oldest = max(0, n.At.Sub(n.OldestRequested).Seconds())
		}
		if !c.labelled[p.Name] {
			other.any = true
			for _, st := range allStates {
				other.states[st] += countOf(n, st)
			}
			other.expired += n.Expired
			other.oldest = max(other.oldest, oldest)
			continue
		}
		for _, st := range allStates {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(countOf(n, st)), p.Name, st)
		}
		ch <- prometheus.MustNewConstMetric(expiredDesc, prometheus.GaugeValue, float64(n.Expired), p.Name)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest, p.Name)
	}
	if other.any {
		for _, st := range allStates {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(other.states[st]), OtherProductions, st)
		}
		ch <- prometheus.MustNewConstMetric(expiredDesc, prometheus.GaugeValue, float64(other.expired), OtherProductions)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, other.oldest, OtherProductions)
	}
	// Counters and the histogram: the same labels, the others summed.
	otherTotals, otherAny := map[string]int64{}, false
	for production, kinds := range c.totals {
		if !c.labelled[production] {
			otherAny = true
			for kind := range counted {
				otherTotals[kind] += kinds[kind]
			}
			continue
		}
		for kind, desc := range counted {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(kinds[kind]), production)
		}
	}
	if otherAny {
		for kind, desc := range counted {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(otherTotals[kind]), OtherProductions)
		}
	}
	// Every production with a counter has a histogram, empty until one of
	// its claims made since the start completes.
	otherHist := &histogram{counts: make([]uint64, len(durationBuckets))}
	otherHistAny := false
	for production := range c.totals {
		h := c.hist[production]
		if h == nil {
			h = &histogram{counts: make([]uint64, len(durationBuckets))}
		}
		if !c.labelled[production] {
			otherHistAny = true
			otherHist.add(h)
			continue
		}
		ch <- prometheus.MustNewConstHistogram(durationDesc, h.count, h.sum, h.cumulative(), production)
	}
	if otherHistAny {
		ch <- prometheus.MustNewConstHistogram(durationDesc, otherHist.count, otherHist.sum, otherHist.cumulative(), OtherProductions)
	}
	ch <- prometheus.MustNewConstMetric(seqDesc, prometheus.GaugeValue, float64(c.after))
	return nil
}

// label gives the free label slots (at most limit productions keep their
// own name) to the busiest productions not yet labelled, by the events of
// theirs counted since the server started, ties by name; while every
// production of the store fits, each one, busy or not. A production keeps
// its label while the server runs: were it to move between its own series
// and OtherProductions, both series' counters would go down, which
// Prometheus reads as a counter reset. A production whose name is
// OtherProductions is always summed there, so no two series share a label.
func (c *collector) label(productions []core.Production) {
	if len(c.labelled) >= c.limit {
		return
	}
	var candidates []string
	if len(productions) <= c.limit {
		for _, p := range productions {
			if !c.labelled[p.Name] && p.Name != OtherProductions {
				candidates = append(candidates, p.Name)
			}
		}
	} else {
		for p := range c.activity {
			if !c.labelled[p] && p != OtherProductions {
				candidates = append(candidates, p)
			}
		}
	}
	slices.SortFunc(candidates, func(x, y string) int {
		return cmp.Or(cmp.Compare(c.activity[y], c.activity[x]), strings.Compare(x, y))
	})
	for _, p := range candidates[:min(len(candidates), c.limit-len(c.labelled))] {
		c.labelled[p] = true
	}
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
	c.activity[e.Production]++
	switch e.Kind {
	case "claimed":
		c.claimed[e.JobID] = e.At
	case "completed":
		// Only a claim read here has a known time: the completion of a
		// claim made before the server started is counted, not timed.
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
