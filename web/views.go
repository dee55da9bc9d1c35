// The data behind each page, read through core's bounded observations: one
// value per page, rendered by its template or written as its JSON.
package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/libleases/libleases/core"
)

const (
	// recentWindow is how far back "workers seen recently", "claims that
	// expired" and "completed per minute" look. Each read costs the events
	// in it, so it stays an hour.
	recentWindow = time.Hour
	// heldShown is how many claimed jobs the overview reads per production
	// to show what each worker holds.
	heldShown = 100
	// previewMax is the largest payload shown as text on a job's page.
	previewMax = 4096
	// timelineShown is how many of a job's newest events its page shows.
	timelineShown = 100
	// pageSize is the default page of jobs and events.
	pageSize = 50
)

// view is what every page carries besides its own data.
type view struct {
	Clock   core.ClockReading `json:"clock"`
	Title   string            `json:"-"`
	API     string            `json:"-"` // the JSON of this page
	CSRF    string            `json:"-"`
	Actions bool              `json:"-"`
	Refresh int64             `json:"-"` // ms
	Notice  string            `json:"-"`
}

func (v *view) base() *view { return v }

// pageData is a page's value: it embeds view.
type pageData interface{ base() *view }

// ---- overview -------------------------------------------------------------

type overviewView struct {
	view
	Productions []productionSummary `json:"productions"`
	Next        string              `json:"next"`
	Prev        bool                `json:"-"`
}

type productionSummary struct {
	Name   string         `json:"name"`
	ID     string         `json:"id"`
	Counts core.JobCounts `json:"counts"`
	Total  int64          `json:"total"`
	Oldest *time.Duration `json:"-"`
	Rate   []minuteRate   `json:"completed_per_minute"`
	// Completed and Busiest are the hour's completions and its busiest minute.
	Completed int64           `json:"completed_last_hour"`
	Busiest   int64           `json:"busiest_minute"`
	Expire    expirySummary   `json:"claims_expired_last_hour"`
	Work      []workerSummary `json:"workers"`
	// Retention is how long the production keeps finished jobs and events.
	Retention core.RetentionPolicy `json:"retention"`
}

// expirySummary: claims that expired in the last hour. Waiting are those
// still claimed (expired, not yet ended by the authority); Ended those the
// authority ended since (a claim_expired event each: the job went back to
// the queue or dead, or was claimed again).
type expirySummary struct {
	Waiting int64 `json:"waiting"`
	Ended   int64 `json:"ended"`
	Total   int64 `json:"total"`
}

// minuteRate is one minute's bar: X from the window's start, Y and H in a
// 40-high chart scaled to the busiest minute.
type minuteRate struct {
	core.MinuteCount
	X, Y, H int `json:"-"`
}

type workerSummary struct {
	core.WorkerActivity
	Holds []heldJob
}

// MarshalJSON adds what the worker holds to core's form of its activity
// (whose own MarshalJSON would otherwise be the whole answer).
func (w workerSummary) MarshalJSON() ([]byte, error) {
	var out map[string]any
	b, err := json.Marshal(w.WorkerActivity)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return nil, err
	}
	out["holds"] = w.Holds
	return json.Marshal(out)
}

type heldJob struct {
	ID     string    `json:"id"`
	Key    string    `json:"key"`
	Expiry time.Time `json:"-"`
	At     int64     `json:"expiry_unix_us"`
}

func (s *Server) overview(r *http.Request, v *view) (pageData, error) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	page, err := s.a.ListProductions(ctx, core.ProductionQuery{After: after, Limit: pageSize})
	if err != nil {
		return nil, err
	}
	out := &overviewView{view: *v, Next: page.Next, Prev: after != ""}
	out.Title, out.API = "Overview", "/api/overview"+query(r)
	for _, p := range page.Productions {
		sum, err := s.summary(ctx, p, v.Clock)
		if err != nil {
			return nil, err
		}
		out.Productions = append(out.Productions, sum)
	}
	if out.Productions == nil {
		out.Productions = []productionSummary{}
	}
	return out, nil
}

// summary reads a production's summary. Its reads are independent, so
// they run at once: a view waits for the slowest of them (the counts, one
// index range per state), not for their sum. The window ends at the view's
// clock reading.
func (s *Server) summary(ctx context.Context, p core.Production, clock core.ClockReading) (productionSummary, error) {
	sum := productionSummary{Name: p.Name, ID: p.ID, Work: []workerSummary{}, Retention: p.Retention}
	since := clock.Now.Add(-recentWindow)
	var rate, expired []core.MinuteCount
	var ws []core.WorkerActivity
	var held core.JobPage
	err := concurrently(
		func() (err error) { sum.Counts, err = s.a.Counts(ctx, p.Name); return err },
		func() (err error) { rate, err = s.a.EventsPerMinute(ctx, p.Name, "completed", since); return err },
		func() (err error) {
			expired, err = s.a.EventsPerMinute(ctx, p.Name, "claim_expired", since)
			return err
		},
		func() (err error) { ws, err = s.a.Workers(ctx, p.Name, since); return err },
		// What each worker holds: the first claimed jobs in request order,
		// unexpired, grouped by worker (the count is Workers' own).
		func() (err error) {
			held, err = s.a.ListJobs(ctx, p.Name, core.JobQuery{States: []string{core.StateClaimed}, Limit: heldShown})
			return err
		})
	if err != nil {
		return sum, err
	}
	sum.Total = sum.Counts.Total()
	if !sum.Counts.OldestRequested.IsZero() {
		age := max(0, sum.Counts.At.Sub(sum.Counts.OldestRequested))
		sum.Oldest = &age
	}
	sum.Rate, sum.Completed, sum.Busiest = bars(rate, since)
	for _, m := range expired {
		sum.Expire.Ended += m.Count
	}
	sum.Expire.Waiting = sum.Counts.Expired
	sum.Expire.Total = sum.Expire.Waiting + sum.Expire.Ended
	for _, w := range ws {
		ws := workerSummary{WorkerActivity: w, Holds: []heldJob{}}
		for _, j := range held.Jobs {
			if j.Worker == w.Worker && j.Expiry.After(sum.Counts.At) {
				ws.Holds = append(ws.Holds, heldJob{ID: j.ID, Key: j.Key, Expiry: j.Expiry, At: j.Expiry.UnixMicro()})
			}
		}
		sum.Work = append(sum.Work, ws)
	}
	return sum, nil
}

// concurrently runs each read in its own goroutine and returns the first
// error (in argument order) once all have ended.
func concurrently(reads ...func() error) error {
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = read()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// bars lays the last hour's per-minute counts out as a chart.
func bars(ms []core.MinuteCount, since time.Time) ([]minuteRate, int64, int64) {
	out := make([]minuteRate, len(ms))
	var top, total int64 = 0, 0
	for _, m := range ms {
		top, total = max(top, m.Count), total+m.Count
	}
	for i, m := range ms {
		h := int(max(2, m.Count*40/max(top, 1)))
		x := int(max(0, min(59, m.Minute.Sub(since.Truncate(time.Minute))/time.Minute))) * 4
		out[i] = minuteRate{MinuteCount: m, X: x, Y: 40 - h, H: h}
	}
	return out, total, top
}

// ---- one production -----------------------------------------------------------

type productionView struct {
	view
	Summary productionSummary `json:"production"`
	Jobs    []core.Job        `json:"jobs"`
	Next    string            `json:"next"`
	Prev    string            `json:"prev,omitempty"`
	// Times: each listed job's request, first claim and newest ended
	// claim (core.JobTimes), by id, read for the page at once.
	Times  map[string]core.JobTimes `json:"times"`
	Filter jobFilter                `json:"filter"`
	// SearchNotice: why a search found nothing (an ambiguous id prefix);
	// view.Notice is the line an action's redirect shows.
	SearchNotice string        `json:"search_notice,omitempty"`
	States       []stateOption `json:"-"`
	Rows         []jobRow      `json:"-"`
	NextURL      string        `json:"-"`
	PrevURL      string        `json:"-"`
	First        string        `json:"-"`
}

type jobFilter struct {
	States []string `json:"states"`
	Search string   `json:"q"`
	Worker string   `json:"worker,omitempty"`
	After  string   `json:"after"`
	Before string   `json:"before,omitempty"`
}

// jobRow is a listed job with how long it waited and ran, and, once it
// finished, the claim that finished it as history (its expiry no longer
// matters).
type jobRow struct {
	core.Job
	Waited  string
	Ran     string
	Running bool
	Final   *core.Attempt
}

// timed is a job's times for a page: "" for what does not apply.
func timed(j core.Job, t core.JobTimes, now time.Time) jobRow {
	row := jobRow{Job: j}
	if d, ok := t.Waited(); ok {
		row.Waited = span(d)
	}
	if d, running, ok := t.Ran(j, now); ok {
		row.Ran, row.Running = span(d), running
	}
	if c, ok := t.FinalClaim(j); ok {
		row.Final = &c
	}
	return row
}

type stateOption struct {
	Name       string
	Checked    bool
	Count      int64
	Redrivable bool // actions on, some jobs in it, and a state redrive returns to the queue
}

// allStates is every job state in the order pages show them.
var allStates = []string{core.StateRequested, core.StateClaimed, core.StateCompleted, core.StateFailed,
	core.StateDead, core.StateCancelled}

// redrivable are the states a coordinator can return to the queue
// (core.Authority.RetryJob and Redrive).
var redrivable = []string{core.StateFailed, core.StateDead, core.StateCancelled}

func countOf(c core.JobCounts, state string) int64 {
	return map[string]int64{core.StateRequested: c.Requested, core.StateClaimed: c.Claimed,
		core.StateCompleted: c.Completed, core.StateFailed: c.Failed, core.StateDead: c.Dead,
		core.StateCancelled: c.Cancelled}[state]
}

func (s *Server) production(r *http.Request, v *view) (pageData, error) {
	ctx := r.Context()
	q := r.URL.Query()
	name := q.Get("name")
	limit, err := limitOf(q)
	if err != nil {
		return nil, err
	}
	f := jobFilter{States: q["state"], Search: q.Get("q"), Worker: q.Get("worker"), After: q.Get("after"),
		Before: q.Get("before")}
	if f.States == nil {
		f.States = []string{}
	}
	jq := core.JobQuery{States: f.States, Worker: f.Worker, After: f.After, Before: f.Before, Limit: limit}
	// The search box takes a job id or a unique prefix of one of at least 8
	// characters (core.ResolveJobID), or a key prefix: an id-shaped text is
	// looked up as both (a key may look like an id). Otherwise it lists the
	// jobs whose key starts with it, in key order (an exact key is one such
	// prefix); with a worker, whose listing is by claim, the exact key. An
	// ambiguous prefix that is no key says so, with its candidates.
	var jobs core.JobPage
	var notice string
	if f.Search != "" && core.IsJobIDPrefix(f.Search) {
		id, err := s.a.ResolveJobID(ctx, name, f.Search)
		switch core.KindOf(err) {
		case 0:
			byID := jq
			byID.ID = id
			if jobs, err = s.a.ListJobs(ctx, name, byID); err != nil {
				return nil, err
			}
		case core.KindInvalidArgument: // ambiguous: the text is well formed
			notice = err.Error()
		case core.KindNotFound: // no such job, or no such production (below)
		default:
			return nil, err
		}
	}
	if len(jobs.Jobs) == 0 {
		if f.Worker != "" {
			jq.Key = f.Search
		} else {
			jq.KeyPrefix = f.Search
		}
		if jobs, err = s.a.ListJobs(ctx, name, jq); err != nil {
			return nil, err
		}
	}
	if len(jobs.Jobs) > 0 {
		notice = ""
	}
	p, err := s.productionNamed(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &productionView{view: *v, Jobs: jobs.Jobs, Next: jobs.Next, Prev: jobs.Prev, Filter: f, SearchNotice: notice}
	if out.Summary, err = s.summary(ctx, p, v.Clock); err != nil {
		return nil, err
	}
	ids := make([]string, len(jobs.Jobs))
	for i, j := range jobs.Jobs {
		ids[i] = j.ID
	}
	if out.Times, err = s.a.JobTimes(ctx, name, ids); err != nil {
		return nil, err
	}
	for _, j := range jobs.Jobs {
		out.Rows = append(out.Rows, timed(j, out.Times[j.ID], v.Clock.Now))
	}
	out.Title = "Production " + core.DisplayName(name)
	out.API = "/api/production" + query(r)
	for _, st := range allStates {
		n := countOf(out.Summary.Counts, st)
		out.States = append(out.States, stateOption{Name: st, Checked: slices.Contains(f.States, st), Count: n,
			Redrivable: v.Actions && n > 0 && slices.Contains(redrivable, st)})
	}
	// Each link keeps the filter and sets one direction's cursor.
	here := *r.URL
	q.Del("after")
	q.Del("before")
	here.RawQuery = q.Encode()
	if jobs.Next != "" {
		out.NextURL = withParam(&here, "after", jobs.Next)
	}
	if jobs.Prev != "" {
		out.PrevURL = withParam(&here, "before", jobs.Prev)
		out.First = withParam(&here, "after", "")
	}
	return out, nil
}

// productionNamed finds a production by its exact name on the pages of
// productions (few: one or two pages).
func (s *Server) productionNamed(ctx context.Context, name string) (core.Production, error) {
	var found *core.Production
	q := core.ProductionQuery{Limit: core.MaxPageSize}
	for {
		page, err := s.a.ListProductions(ctx, q)
		if err != nil {
			return core.Production{}, err
		}
		for _, p := range page.Productions {
			if p.Name == name {
				found = &p
			}
		}
		if found != nil {
			return *found, nil
		}
		if page.Next == "" {
			// Counts names the missing production the way every call does.
			_, err := s.a.Counts(ctx, name)
			return core.Production{}, err
		}
		q.After = page.Next
	}
}

// ---- one job ------------------------------------------------------------------------

type jobView struct {
	view
	Job       core.JobRecord `json:"job"`
	Times     core.JobTimes  `json:"times"`
	Row       jobRow         `json:"-"`
	Preview   *string        `json:"payload_preview"`
	Why       string         `json:"payload_preview_absent,omitempty"`
	Expired   bool           `json:"claim_expired"`
	Timeline  []core.Event   `json:"timeline"`
	Older     int64          `json:"timeline_older"`
	Metadata  []fact         `json:"-"`
	Prov      []fact         `json:"-"`
	Cancel    bool           `json:"-"`
	Redrive   bool           `json:"-"`
	EventsURL string         `json:"-"`
}

type fact struct{ Key, Value string }

func (s *Server) job(r *http.Request, v *view) (pageData, error) {
	ctx := r.Context()
	q := r.URL.Query()
	production, id := q.Get("production"), q.Get("id")
	rec, err := s.a.JobDetail(ctx, production, id)
	if err != nil {
		return nil, err
	}
	out := &jobView{view: *v, Job: rec}
	times, err := s.a.JobTimes(ctx, production, []string{id})
	if err != nil {
		return nil, err
	}
	out.Times = times[id]
	out.Row = timed(rec.Job, out.Times, v.Clock.Now)
	out.Title = "Job " + id
	out.API = "/api/job" + query(r)
	out.Expired = rec.State == core.StateClaimed && !rec.Expiry.IsZero() && !rec.Expiry.After(v.Clock.Now)
	out.Cancel = v.Actions && (rec.State == core.StateRequested || rec.State == core.StateClaimed)
	out.Redrive = v.Actions && slices.Contains(redrivable, rec.State)
	switch {
	case rec.PayloadSize == 0:
		empty := ""
		out.Preview = &empty
	case rec.PayloadSize > previewMax:
		out.Why = "larger than " + strconv.Itoa(previewMax) + " bytes"
	default:
		b, err := s.a.Payload(production, id)
		if err != nil {
			return nil, err
		}
		if utf8.Valid(b) {
			text := string(b)
			out.Preview = &text
		} else {
			out.Why = "not valid UTF-8"
		}
	}
	out.Metadata, out.Prov = facts(rec.Facts.Metadata), facts(rec.Facts.Provenance)
	tl, err := s.a.RecentEvents(ctx, core.EventQuery{JobID: id, Production: production, Limit: timelineShown}, 0)
	if err != nil {
		return nil, err
	}
	out.Timeline, out.Older = tl.Events, tl.Older
	out.EventsURL = "/events?" + url.Values{"production": {production}, "job": {id}}.Encode()
	return out, nil
}

func facts[V ~[]byte](m map[string]V) []fact {
	out := make([]fact, 0, len(m))
	for k, v := range m {
		out = append(out, fact{Key: k, Value: string(v)})
	}
	slices.SortFunc(out, func(a, b fact) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out
}

// ---- the event log ----------------------------------------------------------------

type eventsView struct {
	view
	Events   []core.Event `json:"events"`
	Older    int64        `json:"older"`
	Newest   int64        `json:"newest"`
	Filter   eventFilter  `json:"filter"`
	Kinds    []string     `json:"-"`
	OlderURL string       `json:"-"`
	Head     string       `json:"-"`
	Live     bool         `json:"-"`
}

type eventFilter struct {
	Production string `json:"production"`
	Job        string `json:"job"`
	Kind       string `json:"kind"`
	Before     int64  `json:"before"`
}

var allKinds = []string{"requested", "claimed", "renewed", "released", "failed", "completed", "cancelled",
	"claim_expired", "retry", "dead", "redriven", "policy_changed", "production_created"}

func (s *Server) eventQuery(r *http.Request) (core.EventQuery, eventFilter, error) {
	q := r.URL.Query()
	f := eventFilter{Production: q.Get("production"), Job: q.Get("job"), Kind: q.Get("kind")}
	var err error
	if f.Before, err = intParam(q, "before"); err != nil {
		return core.EventQuery{}, f, err
	}
	limit, err := limitOf(q)
	if err != nil {
		return core.EventQuery{}, f, err
	}
	eq := core.EventQuery{Production: f.Production, JobID: f.Job, Limit: limit}
	if f.Kind != "" {
		eq.Kinds = []string{f.Kind}
	}
	return eq, f, nil
}

func (s *Server) events(r *http.Request, v *view) (pageData, error) {
	eq, f, err := s.eventQuery(r)
	if err != nil {
		return nil, err
	}
	page, err := s.a.RecentEvents(r.Context(), eq, f.Before)
	if err != nil {
		return nil, err
	}
	out := &eventsView{view: *v, Events: page.Events, Older: page.Older, Newest: page.Newest, Filter: f,
		Kinds: allKinds, Live: f.Before == 0}
	out.Title, out.API = "Event log", "/api/events"+query(r)
	if page.Older != 0 {
		out.OlderURL = withParam(r.URL, "before", strconv.FormatInt(page.Older, 10))
	}
	if f.Before != 0 {
		out.Head = withParam(r.URL, "before", "")
	}
	return out, nil
}

// eventsAPI is the event log's JSON: newest first like the page, or, given
// after=SEQ, the events after it oldest first (a follower's poll).
func (s *Server) eventsAPI(r *http.Request, v *view) (pageData, error) {
	if !r.URL.Query().Has("after") {
		return s.events(r, v)
	}
	eq, f, err := s.eventQuery(r)
	if err != nil {
		return nil, err
	}
	if eq.After, err = intParam(r.URL.Query(), "after"); err != nil {
		return nil, err
	}
	if f.Before != 0 {
		return nil, badRequest("give either after (follow, oldest first) or before (newest first), not both")
	}
	page, err := s.a.ListEvents(r.Context(), eq)
	if err != nil {
		return nil, err
	}
	return &followView{view: *v, EventPage: page}, nil
}

type followView struct {
	view
	core.EventPage
}

// ---- the clock ------------------------------------------------------------------------

func (s *Server) clock(_ *http.Request, v *view) (pageData, error) { return v, nil }

// ---- parameters --------------------------------------------------------------------

func limitOf(q url.Values) (int, error) {
	if !q.Has("limit") {
		return pageSize, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > core.MaxPageSize {
		return 0, badRequest("limit must be a number from 1 to " + strconv.Itoa(core.MaxPageSize))
	}
	return n, nil
}

func intParam(q url.Values, name string) (int64, error) {
	if q.Get(name) == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(q.Get(name), 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(name + " must be a sequence number (0 or more)")
	}
	return n, nil
}

// query is the request's query string with its "?" ("" when none).
func query(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return ""
	}
	return "?" + r.URL.RawQuery
}

// withParam is the request's path and query with one parameter set (or
// removed, when value is "").
func withParam(u *url.URL, name, value string) string {
	q := u.Query()
	q.Del(name)
	if value != "" {
		q.Set(name, value)
	}
	if len(q) == 0 {
		return u.Path
	}
	return u.Path + "?" + q.Encode()
}
