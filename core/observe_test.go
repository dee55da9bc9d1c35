package core

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// The bounded observations (observe.go), on the store under test.

var ctx = context.Background()

// allJobPages follows Next from q to the end and returns every page.
func allJobPages(t *testing.T, a *Authority, production string, q JobQuery) [][]Job {
	t.Helper()
	var pages [][]Job
	for {
		page, err := a.ListJobs(ctx, production, q)
		require.NoError(t, err)
		pages = append(pages, page.Jobs)
		if page.Next == "" {
			return pages
		}
		require.Len(t, page.Jobs, max(q.Limit, 1), "only the last page is short")
		q.After = page.Next
		require.Less(t, len(pages), 10_000, "paging must end")
	}
}

func idsOfJobs(js []Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func flatten(pages [][]Job) []Job {
	var out []Job
	for _, p := range pages {
		out = append(out, p...)
	}
	return out
}

func TestJobPagesListEveryJobOnceInRequestOrder(t *testing.T) {
	f := newFixture(t)
	ids := f.request(25)
	pages := allJobPages(t, f.a, "p", JobQuery{Limit: 7})
	require.Len(t, pages, 4)
	require.Len(t, pages[3], 4)
	require.Equal(t, ids, idsOfJobs(flatten(pages)))
	// A limit that divides the count exactly ends without an empty page.
	pages = allJobPages(t, f.a, "p", JobQuery{Limit: 5})
	require.Len(t, pages, 5)
	require.Equal(t, ids, idsOfJobs(flatten(pages)))
	// The listing form is the one Jobs always had.
	all, err := f.a.Jobs("p")
	require.NoError(t, err)
	require.Equal(t, all, flatten(pages))
	// An empty production is one empty page, never nil.
	_, err = f.a.CreateProduction("empty")
	require.NoError(t, err)
	page, err := f.a.ListJobs(ctx, "empty", JobQuery{})
	require.NoError(t, err)
	require.NotNil(t, page.Jobs)
	require.Empty(t, page.Jobs)
	require.Empty(t, page.Next)
	require.Equal(t, `{"jobs":[],"next":""}`, mustJSON(t, page))
}

func TestPagingListsEveryJobExactlyOnceWhileStatesChange(t *testing.T) {
	f := newFixture(t)
	ids := f.request(40)
	seen := map[string]int{}
	q := JobQuery{Limit: 6}
	var added []string
	for round := 0; ; round++ {
		page, err := f.a.ListJobs(ctx, "p", q)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			seen[j.ID]++
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
		// Between pages, jobs already listed and jobs still ahead change
		// state, and new jobs are requested.
		l := f.claim(fmt.Sprintf("w%d", round), time.Minute)
		switch round % 4 {
		case 0:
			require.NoError(t, l.Complete(Facts{}))
		case 1:
			require.NoError(t, l.Release())
		case 2:
			require.NoError(t, f.a.Cancel("p", l.JobID()))
		case 3:
			require.NoError(t, l.Fail("boom"))
		}
		require.NoError(t, f.a.Cancel("p", ids[len(ids)-1-round]))
		id, err := f.a.RequestJob("p", "", nil)
		require.NoError(t, err)
		added = append(added, id)
	}
	for _, id := range ids {
		require.Equal(t, 1, seen[id], "job %s is listed exactly once", id)
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "job %s", id)
	}
	// Jobs requested while paging are requested after every listed job, so
	// the pages reach them too (SQLite numbers them in commit order; on
	// PostgreSQL nothing else is writing here).
	for _, id := range added {
		require.Equal(t, 1, seen[id], "job %s requested while paging", id)
	}
}

func TestJobPagesFilterByStatesKeyAndID(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := 0; i < 12; i++ {
		id, err := f.a.RequestJob("p", fmt.Sprintf("k%02d", i), []byte{byte(i)})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	want := map[string][]string{}
	for i, id := range ids {
		var state string
		switch i % 4 {
		case 0:
			state = StateRequested
		case 1:
			l, err := f.a.ClaimJob("p", id, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Complete(Facts{}))
			state = StateCompleted
		case 2:
			l, err := f.a.ClaimJob("p", id, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Fail("no"))
			state = StateFailed
		case 3:
			_, err := f.a.ClaimJob("p", id, "w", time.Minute)
			require.NoError(t, err)
			state = StateClaimed
		}
		want[state] = append(want[state], id)
	}
	// Several states are merged in request order, across pages.
	for _, limit := range []int{1, 2, 4, 100} {
		got := flatten(allJobPages(t, f.a, "p", JobQuery{States: []string{StateFailed, StateCompleted}, Limit: limit}))
		var exp []string
		for i, id := range ids {
			if i%4 == 1 || i%4 == 2 {
				exp = append(exp, id)
			}
		}
		require.Equal(t, exp, idsOfJobs(got), "limit %d", limit)
	}
	for state, exp := range want {
		got := flatten(allJobPages(t, f.a, "p", JobQuery{States: []string{state, state}, Limit: 2}))
		require.Equal(t, exp, idsOfJobs(got), state)
		for _, j := range got {
			require.Equal(t, state, j.State)
		}
	}
	// Every state is no filter at all.
	every := flatten(allJobPages(t, f.a, "p", JobQuery{States: jobStates, Limit: 5}))
	require.Equal(t, ids, idsOfJobs(every))
	// A key and an id are exact, and combine with a state.
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Key: "k03"})
	require.NoError(t, err)
	require.Equal(t, []string{ids[3]}, idsOfJobs(page.Jobs))
	require.Equal(t, "w", page.Jobs[0].Worker)
	page, err = f.a.ListJobs(ctx, "p", JobQuery{Key: "k0"})
	require.NoError(t, err)
	require.Empty(t, page.Jobs, "a key is matched exactly, not as a prefix")
	page, err = f.a.ListJobs(ctx, "p", JobQuery{ID: ids[5], States: []string{StateCompleted}})
	require.NoError(t, err)
	require.Equal(t, []string{ids[5]}, idsOfJobs(page.Jobs))
	page, err = f.a.ListJobs(ctx, "p", JobQuery{ID: ids[5], States: []string{StateRequested}})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	// Another production's job is not this production's.
	_, err = f.a.CreateProduction("q")
	require.NoError(t, err)
	page, err = f.a.ListJobs(ctx, "q", JobQuery{ID: ids[0]})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
}

func TestBadListingArgumentsAreInvalidAndChangeNothing(t *testing.T) {
	f := newFixture(t)
	f.request(3)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		_, err = f.a.RequestJob("q", "", nil)
		require.NoError(t, err)
	}
	before := f.snapshot()
	qPage, err := f.a.ListJobs(ctx, "q", JobQuery{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, qPage.Next)
	prodPage, err := f.a.ListProductions(ctx, ProductionQuery{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, prodPage.Next)
	pPage, err := f.a.ListJobs(ctx, "p", JobQuery{Limit: 1})
	require.NoError(t, err)
	p, err := f.a.b.ProductionByName(ctx, "p")
	require.NoError(t, err)
	for name, q := range map[string]JobQuery{
		"garbage":                      {After: "not a cursor!"},
		"not base64 of a cursor":       {After: base64.RawURLEncoding.EncodeToString([]byte("hello"))},
		"another production's":         {After: qPage.Next},
		"a productions cursor":         {After: prodPage.Next},
		"a cursor whose seq is text":   {After: encodeCursor("jobs", p.ID, "x")},
		"a cursor with a negative seq": {After: encodeCursor("jobs", p.ID, "-1")},
		"a cursor of events":           {After: encodeCursor("events", p.ID, "1")},
		"padded":                       {After: pPage.Next + "=="},
		"a cursor over MaxCursorLen":   {After: strings.Repeat("A", MaxCursorLen+1)},
		"unknown state":                {States: []string{"running"}},
		"state in upper case":          {States: []string{"CLAIMED"}},
		"negative limit":               {Limit: -1},
		"limit over the maximum":       {Limit: MaxPageSize + 1},
		"an id in upper case":          {ID: strings.ToUpper(uuid.NewString())},
		"a key with a NUL":             {Key: "a\x00b"},
		"a key too long":               {Key: strings.Repeat("k", MaxNameLen+1)},
	} {
		_, err := f.a.ListJobs(ctx, "p", q)
		requireKind(t, err, KindInvalidArgument)
		require.NotContains(t, err.Error(), "\x00", name)
		err = f.a.EachJob(ctx, "p", q, func(Job) error { return nil })
		requireKind(t, err, KindInvalidArgument)
	}
	_, err = f.a.ListJobs(ctx, "", JobQuery{})
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.ListJobs(ctx, "nope", JobQuery{})
	requireKind(t, err, KindNotFound)
	_, err = f.a.ListProductions(ctx, ProductionQuery{After: pPage.Next})
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.ListProductions(ctx, ProductionQuery{Limit: MaxPageSize + 1})
	requireKind(t, err, KindInvalidArgument)
	// The cursor of this production still works, after all that.
	page, err := f.a.ListJobs(ctx, "p", JobQuery{After: pPage.Next, Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, before, f.snapshot())
}

func TestEveryCursorFitsMaxCursorLen(t *testing.T) {
	// The longest cursors: a production's of the longest name, a job's of
	// the largest seq. C callers and bindings may size buffers by the bound.
	longest := strings.Repeat("\U0001F600", MaxNameLen/4) // 4 bytes each
	require.LessOrEqual(t, len(encodeCursor("productions", "", longest)), MaxCursorLen)
	require.LessOrEqual(t, len(jobCursor(uuid.NewString(), math.MaxInt64)), MaxCursorLen)
	f := newFixture(t)
	for _, n := range []string{longest, "\U0001F601"} { // the longest name sorts first
		_, err := f.a.CreateProduction(n)
		require.NoError(t, err)
	}
	page, err := f.a.ListProductions(ctx, ProductionQuery{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	require.LessOrEqual(t, len(page.Next), MaxCursorLen)
	// A cursor at the bound is decoded (and refused for what it is, not
	// for its length); one byte over is refused by its length.
	_, err = f.a.ListProductions(ctx, ProductionQuery{After: strings.Repeat("A", MaxCursorLen)})
	requireKind(t, err, KindInvalidArgument)
	require.NotContains(t, err.Error(), "limit")
	_, err = f.a.ListProductions(ctx, ProductionQuery{After: strings.Repeat("A", MaxCursorLen+1)})
	requireKind(t, err, KindInvalidArgument)
	require.Contains(t, err.Error(), "the limit is 1024")
}

func TestPageSizeDefaultsTo100AndIsAtMost1000(t *testing.T) {
	f := newFixture(t)
	bulkRequest(t, f.a, "p", MaxPageSize+1)
	page, err := f.a.ListJobs(ctx, "p", JobQuery{})
	require.NoError(t, err)
	require.Len(t, page.Jobs, DefaultPageSize)
	require.NotEmpty(t, page.Next)
	page, err = f.a.ListJobs(ctx, "p", JobQuery{Limit: MaxPageSize})
	require.NoError(t, err)
	require.Len(t, page.Jobs, MaxPageSize)
	page, err = f.a.ListJobs(ctx, "p", JobQuery{Limit: MaxPageSize, After: page.Next})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Empty(t, page.Next)
	js, err := f.a.Jobs("p")
	require.NoError(t, err)
	require.Len(t, js, MaxPageSize+1, "Jobs reads every page")
}

func TestEachJobStreamsEveryJobAndStopsWhenAsked(t *testing.T) {
	f := newFixture(t)
	ids := f.request(23)
	var got []string
	require.NoError(t, f.a.EachJob(ctx, "p", JobQuery{Limit: 5}, func(j Job) error {
		got = append(got, j.ID)
		return nil
	}))
	require.Equal(t, ids, got)
	// From a cursor, with a filter.
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Limit: 20})
	require.NoError(t, err)
	got = nil
	require.NoError(t, f.a.EachJob(ctx, "p", JobQuery{After: page.Next, States: []string{StateRequested}}, func(j Job) error {
		got = append(got, j.ID)
		return nil
	}))
	require.Equal(t, ids[20:], got)
	// The callback's error stops the stream and comes back as it is.
	stop := errors.New("enough")
	n := 0
	err = f.a.EachJob(ctx, "p", JobQuery{Limit: 5}, func(Job) error {
		if n++; n == 7 {
			return stop
		}
		return nil
	})
	require.Same(t, stop, err)
	require.Equal(t, 7, n)
	// So does the context's.
	cctx, cancel := context.WithCancel(ctx)
	n = 0
	err = f.a.EachJob(cctx, "p", JobQuery{Limit: 5}, func(Job) error {
		if n++; n == 5 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 5, n, "no page is read after the context ends")
	// A closed authority says so.
	require.NoError(t, f.a.Close())
	requireKind(t, f.a.EachJob(ctx, "p", JobQuery{}, func(Job) error { return nil }), KindClosed)
}

func TestProductionsArePagedByName(t *testing.T) {
	a, err := Open(newLocation(t, "leases.db"))
	require.NoError(t, err)
	defer a.Close()
	names := []string{"a", "B", "b", "é", "z", "zz", "Z"}
	for _, n := range names {
		_, err := a.CreateProduction(n)
		require.NoError(t, err)
	}
	var got []string
	q := ProductionQuery{Limit: 2}
	for pages := 0; ; pages++ {
		page, err := a.ListProductions(ctx, q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Productions), 2)
		for _, p := range page.Productions {
			got = append(got, p.Name)
		}
		if page.Next == "" {
			require.Equal(t, 3, pages)
			break
		}
		q.After = page.Next
	}
	// Byte order of the names, on both stores.
	require.Equal(t, []string{"B", "Z", "a", "b", "z", "zz", "é"}, got)
	ps, err := a.Productions()
	require.NoError(t, err)
	require.Len(t, ps, len(names))
	require.Equal(t, "B", ps[0].Name)
}

func TestJobDetailHasTheSizesTimesAndFactsButNeverASecret(t *testing.T) {
	f := newFixture(t)
	payload := []byte(strings.Repeat("x", 3000))
	id, err := f.a.RequestJob("p", "big", payload)
	require.NoError(t, err)
	f.clk.advance(time.Second)
	l := f.claim("w1", time.Minute)
	require.Equal(t, id, l.JobID())
	tok, err := l.Export()
	require.NoError(t, err)
	sb := l.secret.Bytes()
	secret := hex.EncodeToString(sb[:])
	rec, err := f.a.JobDetail(ctx, "p", id)
	require.NoError(t, err)
	require.Equal(t, f.job(id), rec.Job)
	require.EqualValues(t, len(payload), rec.PayloadSize)
	require.Equal(t, t0, rec.RequestedAt.UnixMicro())
	require.Equal(t, t0+time.Second.Microseconds(), rec.UpdatedAt.UnixMicro())
	require.Empty(t, rec.Facts.Metadata, "no facts before the completion")
	f.clk.advance(time.Second)
	require.NoError(t, l.Complete(Facts{
		Metadata:   map[string]json.RawMessage{"frames": json.RawMessage(`7`)},
		Provenance: map[string]json.RawMessage{"tool": json.RawMessage(`"render"`)},
		Outputs:    []Output{{Path: "/out/a", Size: 12, SHA256: strings.Repeat("ab", 32), Nonce: "n1"}},
	}))
	rec, err = f.a.JobDetail(ctx, "p", id)
	require.NoError(t, err)
	require.Equal(t, StateCompleted, rec.State)
	require.Equal(t, "w1", rec.Worker)
	require.Equal(t, t0+2*time.Second.Microseconds(), rec.UpdatedAt.UnixMicro())
	facts, err := f.a.FactsOf("p", id)
	require.NoError(t, err)
	require.Equal(t, facts, rec.Facts)
	require.Equal(t, []Output{{Path: "/out/a", Size: 12, SHA256: strings.Repeat("ab", 32), Nonce: "n1"}}, rec.Facts.Outputs)
	text := mustJSON(t, rec) + fmt.Sprintf("%v %+v %#v", rec, rec, rec)
	require.Contains(t, text, `"payload_size":3000`)
	require.Contains(t, text, `"frames":7`)
	require.NotContains(t, text, "xxxx", "the payload itself is not read")
	require.NotContains(t, text, secret)
	require.NotContains(t, text, tok)
	require.NotContains(t, text, uuid.UUID(l.secret.Bytes()).String())
	var back map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, rec)), &back))
	require.Equal(t, "big", back["key"])
	require.EqualValues(t, t0, back["requested_at_unix_us"])

	_, err = f.a.JobDetail(ctx, "p", uuid.NewString())
	requireKind(t, err, KindNotFound)
	_, err = f.a.JobDetail(ctx, "p", "nope")
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.CreateProduction("q")
	require.NoError(t, err)
	_, err = f.a.JobDetail(ctx, "q", id)
	requireKind(t, err, KindNotFound)
}

// eventsOf lists every event of q by following Next.
func eventsOf(t *testing.T, a *Authority, q EventQuery) []Event {
	t.Helper()
	var out []Event
	for {
		page, err := a.ListEvents(ctx, q)
		require.NoError(t, err)
		out = append(out, page.Events...)
		if !page.More {
			return out
		}
		require.Len(t, page.Events, q.Limit)
		q.After = page.Next
	}
}

// eventHistory is the history the event listings are read from: three jobs
// of p and one of q (returned as other); w1 claims, renews and releases
// p's first job, w2 claims and completes it, p's third is cancelled.
func (f *fixture) eventHistory() (ids []string, other string) {
	t := f.t
	ids = f.request(3)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	other, err = f.a.RequestJob("q", "", nil)
	require.NoError(t, err)
	l := f.claim("w1", time.Minute)
	require.NoError(t, l.Renew(2*time.Minute))
	require.NoError(t, l.Release())
	l = f.claim("w2", time.Minute)
	require.NoError(t, l.Complete(Facts{}))
	require.NoError(t, f.a.Cancel("p", ids[2]))
	return ids, other
}

// badEventQueries are event queries every event listing refuses as
// invalid_argument, by what is wrong with them.
var badEventQueries = map[string]EventQuery{
	"kind without a production or job": {Kinds: []string{"claimed"}},
	"unknown kind":                     {Production: "p", Kinds: []string{"claim"}},
	"negative after":                   {After: -1},
	"bad job id":                       {JobID: "x"},
	"limit over the maximum":           {Limit: MaxPageSize + 1},
	"bad production name":              {Production: "bad\xff"},
}

func kindsOf(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Kind+":"+e.Worker)
	}
	return out
}

func TestEventPagesFilterByProductionJobAndKind(t *testing.T) {
	f := newFixture(t)
	ids, other := f.eventHistory()

	all, err := f.a.Events("", 0)
	require.NoError(t, err)
	for _, limit := range []int{1, 3, 1000} {
		require.Equal(t, all, eventsOf(t, f.a, EventQuery{Limit: limit}), "every production, limit %d", limit)
	}
	ofP, err := f.a.Events("p", 0)
	require.NoError(t, err)
	require.Equal(t, ofP, eventsOf(t, f.a, EventQuery{Production: "p", Limit: 2}))
	for _, e := range ofP {
		require.Equal(t, "p", e.Production)
	}
	// One job's timeline, with or without its production.
	timeline := []string{"requested:", "claimed:w1", "renewed:w1", "released:w1", "claimed:w2", "completed:w2"}
	require.Equal(t, timeline, kindsOf(eventsOf(t, f.a, EventQuery{JobID: ids[0], Limit: 2})))
	require.Equal(t, timeline, kindsOf(eventsOf(t, f.a, EventQuery{Production: "p", JobID: ids[0], Limit: 5})))
	require.Equal(t, []string{"claimed:w1", "claimed:w2"},
		kindsOf(eventsOf(t, f.a, EventQuery{JobID: ids[0], Kinds: []string{"claimed"}, Limit: 1})))
	// Several kinds merge in seq order, across pages.
	got := eventsOf(t, f.a, EventQuery{Production: "p", Kinds: []string{"cancelled", "claimed", "requested"}, Limit: 2})
	require.Equal(t, []string{"requested:", "requested:", "requested:", "claimed:w1", "claimed:w2", "cancelled:"}, kindsOf(got))
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].Seq, got[i].Seq)
	}
	require.Equal(t, ids[2], got[5].JobID)
	// From a seq on.
	rest := eventsOf(t, f.a, EventQuery{Production: "p", After: ofP[3].Seq, Limit: 2})
	require.Equal(t, ofP[4:], rest)
	// Next on an empty page is the query's After: a follower keeps its place.
	last := all[len(all)-1].Seq
	page, err := f.a.ListEvents(ctx, EventQuery{After: last})
	require.NoError(t, err)
	require.Empty(t, page.Events)
	require.NotNil(t, page.Events)
	require.False(t, page.More)
	require.Equal(t, last, page.Next)
	next, err := f.a.EachEvent(ctx, EventQuery{After: 0, Limit: 2}, func(Event) error { return nil })
	require.NoError(t, err)
	require.Equal(t, last, next)

	for name, q := range badEventQueries {
		_, err := f.a.ListEvents(ctx, q)
		requireKind(t, err, KindInvalidArgument)
		_, err = f.a.EachEvent(ctx, q, func(Event) error { return nil })
		requireKind(t, err, KindInvalidArgument)
		_ = name
	}
	_, err = f.a.ListEvents(ctx, EventQuery{Production: "p", JobID: other})
	requireKind(t, err, KindNotFound)
	_, err = f.a.ListEvents(ctx, EventQuery{JobID: uuid.NewString()})
	requireKind(t, err, KindNotFound)
	_, err = f.a.ListEvents(ctx, EventQuery{Production: "nope"})
	requireKind(t, err, KindNotFound)
}

func TestCountsAreByStateWithExpiredClaimsAndTheOldestWaitingJob(t *testing.T) {
	f := newFixture(t)
	c, err := f.a.Counts(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, JobCounts{At: time.UnixMicro(t0).UTC()}, c)
	ids := f.request(2)
	f.clk.advance(time.Second)
	later := f.request(6)
	short := f.claim("w", time.Minute) // ids[0]
	f.claim("w", time.Hour)            // ids[1]
	l := f.claim("w", time.Hour)
	require.NoError(t, l.Complete(Facts{}))
	l = f.claim("w", time.Hour)
	require.NoError(t, l.Fail("x"))
	require.NoError(t, f.a.Cancel("p", later[3]))
	c, err = f.a.Counts(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, JobCounts{Requested: 3, Claimed: 2, Completed: 1, Failed: 1, Cancelled: 1,
		OldestRequested: time.UnixMicro(t0 + time.Second.Microseconds()).UTC(), At: time.UnixMicro(t0 + time.Second.Microseconds()).UTC()}, c)
	require.EqualValues(t, 8, c.Total())
	// At its expiry instant the short claim is over.
	f.clk.set(short.ExpiryUnixUS())
	c, err = f.a.Counts(ctx, "p")
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Expired)
	require.EqualValues(t, 2, c.Claimed, "an expired claim is still a claimed job until it is claimed again")
	f.clk.set(short.ExpiryUnixUS() - 1)
	c, err = f.a.Counts(ctx, "p")
	require.NoError(t, err)
	require.Zero(t, c.Expired)
	require.Equal(t, ids[0], short.JobID())
	// Counts are per production.
	_, err = f.a.CreateProduction("q")
	require.NoError(t, err)
	c, err = f.a.Counts(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, c.Total())
	require.True(t, c.OldestRequested.IsZero())
	require.Contains(t, mustJSON(t, c), `"oldest_requested_unix_us":null`)
	_, err = f.a.Counts(ctx, "nope")
	requireKind(t, err, KindNotFound)
}

func TestEventsPerMinuteCountsOneKindPerMinuteOfTheAuthorityClock(t *testing.T) {
	f := newFixture(t)
	f.request(6)
	start := time.UnixMicro(t0).UTC()
	// Completions: two in the first minute, none in the second, three in
	// the third (one of them on its first microsecond).
	for i, at := range []time.Duration{0, 59 * time.Second, 2 * time.Minute, 2*time.Minute + 30*time.Second, 2*time.Minute + 59*time.Second} {
		f.clk.set(t0 + at.Microseconds())
		l := f.claim("w", time.Hour)
		if i == 4 {
			require.NoError(t, l.Fail("x"))
			continue
		}
		require.NoError(t, l.Complete(Facts{}))
	}
	f.clk.set(t0 + (10 * time.Minute).Microseconds())
	got, err := f.a.EventsPerMinute(ctx, "p", "completed", start)
	require.NoError(t, err)
	require.Equal(t, []MinuteCount{{start, 2}, {start.Add(2 * time.Minute), 2}}, got)
	got, err = f.a.EventsPerMinute(ctx, "p", "claimed", start.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, []MinuteCount{{start, 1}, {start.Add(2 * time.Minute), 3}}, got, "the first minute counts from since")
	got, err = f.a.EventsPerMinute(ctx, "p", "requested", start.Add(time.Minute))
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Empty(t, got)
	require.Contains(t, mustJSON(t, MinuteCount{start, 2}), `"minute_unix_us":1767225600000000`)
	// At most a day back, by the authority's clock; a known kind.
	_, err = f.a.EventsPerMinute(ctx, "p", "completed", start.Add(10*time.Minute-MaxObservedWindow-time.Microsecond))
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.EventsPerMinute(ctx, "p", "completed", start.Add(10*time.Minute-MaxObservedWindow))
	require.NoError(t, err)
	_, err = f.a.EventsPerMinute(ctx, "p", "completed", time.Time{})
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.EventsPerMinute(ctx, "p", "done", start)
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.EventsPerMinute(ctx, "nope", "completed", start)
	requireKind(t, err, KindNotFound)
}

// A clock that ran ahead and came back (never behind the mark) records
// requests out of time order: counts per minute count each event in the
// minute of its time, and a kind's listing stays in seq order both ways.
func TestPerMinuteCountsAndAKindsListingStayExactWhenTimesDoNotFollowSeq(t *testing.T) {
	f := newFixture(t)
	start := time.UnixMicro(t0).UTC()
	var ids []string
	for _, at := range []time.Duration{10 * time.Minute, time.Minute, time.Minute + 30*time.Second,
		11 * time.Minute, 2 * time.Minute, 11*time.Minute + time.Second} {
		f.clk.set(t0 + at.Microseconds())
		ids = append(ids, f.request(1)[0])
	}
	f.clk.set(t0 + (12 * time.Minute).Microseconds())
	got, err := f.a.EventsPerMinute(ctx, "p", "requested", start)
	require.NoError(t, err)
	require.Equal(t, []MinuteCount{{start.Add(time.Minute), 2}, {start.Add(2 * time.Minute), 1},
		{start.Add(10 * time.Minute), 1}, {start.Add(11 * time.Minute), 2}}, got)
	got, err = f.a.EventsPerMinute(ctx, "p", "requested", start.Add(time.Minute+10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []MinuteCount{{start.Add(time.Minute), 1}, {start.Add(2 * time.Minute), 1},
		{start.Add(10 * time.Minute), 1}, {start.Add(11 * time.Minute), 2}}, got, "the first minute counts from since")
	got, err = f.a.EventsPerMinute(ctx, "p", "requested", start.Add(10*time.Minute+time.Second))
	require.NoError(t, err)
	require.Equal(t, []MinuteCount{{start.Add(11 * time.Minute), 2}}, got)

	// The kind's listing: request order, page by page, and newest first.
	var listed []string
	after := int64(0)
	for {
		page, err := f.a.ListEvents(ctx, EventQuery{Production: "p", Kinds: []string{"requested"}, After: after, Limit: 4})
		require.NoError(t, err)
		for _, e := range page.Events {
			listed = append(listed, e.JobID)
		}
		after = page.Next
		if !page.More {
			break
		}
	}
	require.Equal(t, ids, listed)
	recent, err := f.a.RecentEvents(ctx, EventQuery{Production: "p", Kinds: []string{"requested"}, Limit: 4}, 0)
	require.NoError(t, err)
	var newest []string
	for _, e := range recent.Events {
		newest = append(newest, e.JobID)
	}
	require.Equal(t, []string{ids[5], ids[4], ids[3], ids[2]}, newest)
}

func TestWorkersAreThoseSeenRecentlyAndThoseHoldingClaims(t *testing.T) {
	f := newFixture(t)
	f.request(6)
	start := time.UnixMicro(t0).UTC()
	old := f.claim("old", time.Hour) // held, but not seen since the window opens
	f.clk.advance(time.Minute)
	l := f.claim("done", time.Minute)
	require.NoError(t, l.Complete(Facts{}))
	f.clk.advance(time.Minute)
	f.claim("busy", time.Minute)
	f.claim("busy", time.Hour)
	f.claim("lapsed", time.Second)
	f.clk.advance(2 * time.Second)
	ws, err := f.a.Workers(ctx, "p", start.Add(30*time.Second))
	require.NoError(t, err)
	seen := func(d time.Duration) time.Time { return start.Add(d) }
	require.Equal(t, []WorkerActivity{
		{Worker: "busy", LastSeen: seen(2 * time.Minute), Holding: 2},
		{Worker: "lapsed", LastSeen: seen(2 * time.Minute), Holding: 0},
		{Worker: "done", LastSeen: seen(time.Minute), Holding: 0},
		{Worker: "old", Holding: 1},
	}, ws)
	require.NoError(t, old.Renew(time.Hour))
	ws, err = f.a.Workers(ctx, "p", start.Add(2*time.Minute+time.Second))
	require.NoError(t, err)
	require.Equal(t, "old", ws[0].Worker, "a renewal is a sighting")
	require.Contains(t, mustJSON(t, ws[len(ws)-1]), `"last_seen_unix_us":null`)
	_, err = f.a.Workers(ctx, "p", start.Add(-MaxObservedWindow))
	requireKind(t, err, KindInvalidArgument)
}

// TestWorkersSeenAreEveryWorkerByItsOwnEventsInItsProduction: the store
// walks from one worker to the next (docs/schema.md, schema 5); no worker
// is skipped, whatever its name, a lapse recorded under a worker's name is
// no sighting of it, and another production's workers are not this one's.
func TestWorkersSeenAreEveryWorkerByItsOwnEventsInItsProduction(t *testing.T) {
	f := newFixture(t)
	f.request(8)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	_, err = f.a.RequestJob("q", "", nil)
	require.NoError(t, err)
	_, err = f.a.Claim("q", "elsewhere", time.Hour)
	require.NoError(t, err)
	start := time.UnixMicro(t0).UTC()
	f.claim("lapsing", time.Second)
	names := []string{"a", "a\u00e9", "a b", "B", "b", "\u00e9"}
	for _, w := range names {
		f.clk.advance(time.Second)
		require.NoError(t, f.claim(w, time.Hour).Release())
	}
	// A claim ten minutes on ends the lapsed claim: a claim_expired event
	// naming "lapsing", at that time.
	f.clk.advance(10 * time.Minute)
	f.claim("taker", time.Hour)
	evs, err := f.a.ListEvents(ctx, EventQuery{Production: "p", Kinds: []string{"claim_expired"}})
	require.NoError(t, err)
	require.Len(t, evs.Events, 1)
	require.Equal(t, "lapsing", evs.Events[0].Worker)

	ws, err := f.a.Workers(ctx, "p", start)
	require.NoError(t, err)
	want := []WorkerActivity{{Worker: "taker", LastSeen: time.UnixMicro(f.clk.Now()).UTC(), Holding: 1}}
	for i := len(names) - 1; i >= 0; i-- {
		want = append(want, WorkerActivity{Worker: names[i], LastSeen: start.Add(time.Duration(i+1) * time.Second)})
	}
	want = append(want, WorkerActivity{Worker: "lapsing", LastSeen: start})
	require.Equal(t, want, ws)
	// Seen before the window opens: not listed.
	ws, err = f.a.Workers(ctx, "p", start.Add(3*time.Second))
	require.NoError(t, err)
	require.Len(t, ws, 1+len(names)-2)
}

func TestBadObservationArgumentsAreReportedBeforeNotFoundAndClosed(t *testing.T) {
	f := newFixture(t)
	start := time.UnixMicro(t0)
	bad := func() []error {
		var errs []error
		_, err := f.a.ListJobs(ctx, "nope", JobQuery{States: []string{"x"}})
		errs = append(errs, err)
		_, err = f.a.ListJobs(ctx, "nope", JobQuery{After: "%%%"})
		errs = append(errs, err)
		_, err = f.a.JobDetail(ctx, "nope", "not-an-id")
		errs = append(errs, err)
		_, err = f.a.ListEvents(ctx, EventQuery{Production: "nope", Kinds: []string{"x"}})
		errs = append(errs, err)
		_, err = f.a.EventsPerMinute(ctx, "nope", "", start)
		errs = append(errs, err)
		_, err = f.a.ListProductions(ctx, ProductionQuery{Limit: -5})
		errs = append(errs, err)
		return errs
	}
	for _, err := range bad() {
		requireKind(t, err, KindInvalidArgument)
	}
	require.NoError(t, f.a.Close())
	for _, err := range bad() {
		requireKind(t, err, KindInvalidArgument)
	}
	_, err := f.a.ListJobs(ctx, "p", JobQuery{})
	requireKind(t, err, KindClosed)
	_, err = f.a.Counts(ctx, "p")
	requireKind(t, err, KindClosed)
	_, err = f.a.ListEvents(ctx, EventQuery{})
	requireKind(t, err, KindClosed)
	_, err = f.a.ListProductions(ctx, ProductionQuery{})
	requireKind(t, err, KindClosed)
}

// TestJobPagesPageBackwardsAsWellAsForwards: Prev leads back through the
// same pages Next led through, each in request order, with or without a
// filter; the first page has no Prev and the last no Next.
func TestJobPagesPageBackwardsAsWellAsForwards(t *testing.T) {
	f := newFixture(t)
	ids := f.request(25)
	for i := 0; i < 9; i++ { // every other of the first 18 is completed
		l, err := f.a.ClaimJob("p", ids[2*i], "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(Facts{}))
	}
	for _, q := range []JobQuery{{Limit: 7}, {Limit: 5}, {Limit: 3, States: []string{StateCompleted}},
		{Limit: 4, States: []string{StateRequested, StateCancelled}}} {
		var forward []JobPage
		page, err := f.a.ListJobs(ctx, "p", q)
		require.NoError(t, err)
		require.Empty(t, page.Prev, "the first page has none before it")
		forward = append(forward, page)
		for page.Next != "" {
			fq := q
			fq.After = page.Next
			page, err = f.a.ListJobs(ctx, "p", fq)
			require.NoError(t, err)
			require.NotEmpty(t, page.Prev, "page %d has one before it", len(forward))
			forward = append(forward, page)
		}
		require.Greater(t, len(forward), 2, "%+v", q)
		// Back from the last page, through every page to the first.
		for i := len(forward) - 1; i > 0; i-- {
			bq := q
			bq.Before = forward[i].Prev
			back, err := f.a.ListJobs(ctx, "p", bq)
			require.NoError(t, err)
			require.Equal(t, idsOfJobs(forward[i-1].Jobs), idsOfJobs(back.Jobs), "page %d, back from %d (%+v)", i-1, i, q)
			require.Equal(t, forward[i-1].Prev == "", back.Prev == "", "page %d has a page before it exactly when it had", i-1)
			require.NotEmpty(t, back.Next, "a page reached backwards has one after it")
			// And forward again from the page reached backwards.
			fq := q
			fq.After = back.Next
			again, err := f.a.ListJobs(ctx, "p", fq)
			require.NoError(t, err)
			require.Equal(t, idsOfJobs(forward[i].Jobs), idsOfJobs(again.Jobs))
		}
	}
	// Not both directions at once; a cursor of another production is not one of this.
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Limit: 5})
	require.NoError(t, err)
	_, err = f.a.ListJobs(ctx, "p", JobQuery{After: page.Next, Before: page.Next})
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.CreateProduction("other")
	require.NoError(t, err)
	_, err = f.a.ListJobs(ctx, "other", JobQuery{Before: page.Next})
	requireKind(t, err, KindInvalidArgument)
}

// TestAJobWaitedFromItsRequestToItsFirstClaimAndRanFromItsClaimToItsEnd:
// the times of a page of jobs, read in one call: a job's wait ends at its
// first claim ever, its run is the claim that finished it (or the one that
// holds it now), and a finished job's claim is history, not a live expiry.
func TestAJobWaitedFromItsRequestToItsFirstClaimAndRanFromItsClaimToItsEnd(t *testing.T) {
	f := newFixture(t)
	ids := f.request(5) // all at t0
	done, waiting, running, failed, cancelled := ids[0], ids[1], ids[2], ids[3], ids[4]
	f.clk.advance(10 * time.Second)
	l, err := f.a.ClaimJob("p", done, "first", time.Minute) // t0+10s: done's first claim
	require.NoError(t, err)
	f.clk.advance(2 * time.Second)
	require.NoError(t, l.Release())
	l, err = f.a.ClaimJob("p", cancelled, "w", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release())
	require.NoError(t, f.a.Cancel("p", cancelled)) // cancelled while it waited again
	f.clk.advance(3 * time.Second)
	l, err = f.a.ClaimJob("p", done, "second", time.Minute) // t0+15s
	require.NoError(t, err)
	lf, err := f.a.ClaimJob("p", failed, "w", time.Minute)
	require.NoError(t, err)
	f.clk.advance(5 * time.Second)
	require.NoError(t, l.Complete(Facts{})) // t0+20s: ran 5s
	_, err = f.a.ClaimJob("p", running, "busy", time.Minute)
	require.NoError(t, err)
	f.clk.advance(7 * time.Second)
	require.NoError(t, lf.Fail("broken")) // ran 12s
	_, err = f.a.CreateProduction("other")
	require.NoError(t, err)
	elsewhere, err := f.a.RequestJob("other", "", nil)
	require.NoError(t, err)

	times, err := f.a.JobTimes(ctx, "p", append(slices.Clone(ids), elsewhere))
	require.NoError(t, err)
	require.Len(t, times, 5, "a job of another production is left out")
	at := func(d time.Duration) time.Time { return time.UnixMicro(t0).UTC().Add(d) }
	now := at(30 * time.Second)

	d := times[done]
	require.Equal(t, at(0), d.RequestedAt)
	w, ok := d.Waited()
	require.True(t, ok)
	require.Equal(t, 10*time.Second, w, "waited until its first claim, not its last")
	ran, live, ok := d.Ran(f.job(done), now)
	require.True(t, ok)
	require.False(t, live)
	require.Equal(t, 5*time.Second, ran)
	c, ok := d.FinalClaim(f.job(done))
	require.True(t, ok)
	require.Equal(t, "second", c.Worker)
	require.Equal(t, "completed", c.Ending)
	require.Equal(t, at(20*time.Second), c.EndedAt)

	_, ok = times[waiting].Waited()
	require.False(t, ok, "never claimed")
	_, _, ok = times[waiting].Ran(f.job(waiting), now)
	require.False(t, ok)

	ran, live, ok = times[running].Ran(f.job(running), now)
	require.True(t, ok)
	require.True(t, live)
	require.Equal(t, 10*time.Second, ran, "claimed at t0+20s, running at t0+30s")
	_, ok = times[running].FinalClaim(f.job(running))
	require.False(t, ok, "a claim that holds the job is not history")

	ran, _, ok = times[failed].Ran(f.job(failed), now)
	require.True(t, ok)
	require.Equal(t, 12*time.Second, ran)
	c, ok = times[failed].FinalClaim(f.job(failed))
	require.True(t, ok)
	require.Equal(t, "broken", c.Reason)

	_, ok = times[cancelled].FinalClaim(f.job(cancelled))
	require.False(t, ok, "cancelled while it waited: no claim ended it")
	w, ok = times[cancelled].Waited()
	require.True(t, ok)
	require.Equal(t, 12*time.Second, w)

	// A page of ids at once, checked before any read.
	_, err = f.a.JobTimes(ctx, "p", []string{"nope"})
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.JobTimes(ctx, "p", make([]string, MaxPageSize+1))
	requireKind(t, err, KindInvalidArgument)
	empty, err := f.a.JobTimes(ctx, "p", nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

// TestAWorkersJobsAreThoseItsClaimHoldsOrLastHeldNewestClaimFirst: the
// worker filter lists each job whose claim the worker holds or last held,
// once, newest claim first (ties by id), with the other filters, paged both
// ways; a job it released or lost to another worker is not its own.
func TestAWorkersJobsAreThoseItsClaimHoldsOrLastHeldNewestClaimFirst(t *testing.T) {
	f := newFixture(t)
	ids := f.request(10)
	claim := func(i int, worker string) *Lease {
		f.clk.advance(time.Second)
		l, err := f.a.ClaimJob("p", ids[i], worker, time.Minute)
		require.NoError(t, err)
		return l
	}
	require.NoError(t, claim(0, "a").Complete(Facts{}))
	require.NoError(t, claim(1, "a").Fail("broken"))
	require.NoError(t, claim(2, "a").Release()) // back in the queue: no longer a's
	claim(3, "a")                               // lapses, then b takes it
	f.clk.advance(2 * time.Minute)
	claim(3, "b")
	claim(4, "a") // held now
	l := claim(5, "a")
	require.NoError(t, l.Complete(Facts{}))
	claim(6, "b")
	// Two claims at the same instant: ordered by id.
	f.clk.advance(time.Second)
	for _, i := range []int{7, 8} {
		_, err := f.a.ClaimJob("p", ids[i], "a", time.Minute)
		require.NoError(t, err)
	}
	// a claims job 9 twice: it is listed once, at its newest claim.
	require.NoError(t, claim(9, "a").Release())
	claim(9, "a")

	ties := []string{ids[7], ids[8]}
	slices.Sort(ties)
	want := []string{ids[9], ties[1], ties[0], ids[5], ids[4], ids[1], ids[0]}
	for _, limit := range []int{2, 3, 7, 100} {
		var pages []JobPage
		q := JobQuery{Worker: "a", Limit: limit}
		for {
			page, err := f.a.ListJobs(ctx, "p", q)
			require.NoError(t, err)
			pages = append(pages, page)
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
		var got []string
		for _, p := range pages {
			got = append(got, idsOfJobs(p.Jobs)...)
		}
		require.Equal(t, want, got, "limit %d", limit)
		require.Empty(t, pages[0].Prev)
		for i := len(pages) - 1; i > 0; i-- {
			back, err := f.a.ListJobs(ctx, "p", JobQuery{Worker: "a", Limit: limit, Before: pages[i].Prev})
			require.NoError(t, err)
			require.Equal(t, idsOfJobs(pages[i-1].Jobs), idsOfJobs(back.Jobs), "limit %d, back from page %d", limit, i)
			require.Equal(t, pages[i-1].Prev == "", back.Prev == "")
			require.NotEmpty(t, back.Next)
		}
	}
	for _, j := range mustList(t, f.a, JobQuery{Worker: "a"}) {
		require.Equal(t, "a", j.Worker)
	}
	done := mustList(t, f.a, JobQuery{Worker: "a", States: []string{StateCompleted}})
	require.Equal(t, []string{ids[5], ids[0]}, idsOfJobs(done))
	require.Equal(t, []string{ids[6], ids[3]}, idsOfJobs(mustList(t, f.a, JobQuery{Worker: "b"})))
	require.Equal(t, []string{ids[4]}, idsOfJobs(mustList(t, f.a, JobQuery{Worker: "a", ID: ids[4]})))
	require.Empty(t, mustList(t, f.a, JobQuery{Worker: "nobody"}))
	// A worker's cursor is not a request-order cursor, nor the other way.
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Worker: "a", Limit: 2})
	require.NoError(t, err)
	_, err = f.a.ListJobs(ctx, "p", JobQuery{After: page.Next})
	requireKind(t, err, KindInvalidArgument)
	plain, err := f.a.ListJobs(ctx, "p", JobQuery{Limit: 2})
	require.NoError(t, err)
	_, err = f.a.ListJobs(ctx, "p", JobQuery{Worker: "a", After: plain.Next})
	requireKind(t, err, KindInvalidArgument)
}

func mustList(t *testing.T, a *Authority, q JobQuery) []Job {
	t.Helper()
	page, err := a.ListJobs(ctx, "p", q)
	require.NoError(t, err)
	return page.Jobs
}
