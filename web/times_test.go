package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/stretchr/testify/require"
)

// TestAFinishedJobShowsItsClaimAsHistoryWithHowLongItWaitedAndRan: a
// completed job's page and row show who held its claim, from when to when
// it ended and how, never its expiry as if it still mattered; every job
// shows how long it waited (request to first claim) and ran (claim to end,
// or so far while claimed), from the JSON's times.
func TestAFinishedJobShowsItsClaimAsHistoryWithHowLongItWaitedAndRan(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		_, err := st.writer.CreateProduction("p")
		require.NoError(t, err)
		done, err := st.writer.RequestJob("p", "done", nil)
		require.NoError(t, err)
		busy, err := st.writer.RequestJob("p", "busy", nil)
		require.NoError(t, err)
		waiting, err := st.writer.RequestJob("p", "waiting", nil)
		require.NoError(t, err)
		time.Sleep(30 * time.Millisecond)
		l, err := st.writer.ClaimJob("p", done, "<b>render-7</b>", time.Minute)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, l.Complete(core.Facts{}))
		_, err = st.writer.ClaimJob("p", busy, "busy-worker", time.Minute)
		require.NoError(t, err)

		var api struct {
			Jobs  []core.Job `json:"jobs"`
			Times map[string]struct {
				Requested    int64  `json:"requested_at_unix_us"`
				FirstClaimed *int64 `json:"first_claimed_at_unix_us"`
				Last         *struct {
					Worker  string `json:"worker"`
					Claimed int64  `json:"claimed_at_unix_us"`
					Ended   int64  `json:"ended_at_unix_us"`
					Ending  string `json:"ending"`
				} `json:"last_ended_claim"`
			} `json:"times"`
		}
		st.getJSON("/api/production?name=p", &api)
		require.Len(t, api.Times, 3, "every listed job has its times")
		dt := api.Times[done]
		require.NotNil(t, dt.FirstClaimed)
		require.NotNil(t, dt.Last)
		require.Equal(t, "completed", dt.Last.Ending)
		waited := span(time.Duration(*dt.FirstClaimed-dt.Requested) * time.Microsecond)
		ran := span(time.Duration(dt.Last.Ended-dt.Last.Claimed) * time.Microsecond)
		require.Nil(t, api.Times[waiting].FirstClaimed)
		require.Nil(t, api.Times[waiting].Last)

		// The job's page: its claim as history, no expiry.
		page := st.get(jobPath("p", done))
		require.Equal(t, http.StatusOK, page.code)
		require.Contains(t, page.body, `id="final-claim"`)
		require.Contains(t, page.body, `&lt;b&gt;render-7&lt;/b&gt;`, "the worker, escaped")
		require.NotContains(t, page.body, `<b>render-7</b>`)
		require.Regexp(t, `ended: <span class="ending">completed</span>`, page.body)
		require.NotContains(t, page.body, `<dt>expiry</dt>`, "a finished job's expiry no longer matters")
		require.Regexp(t, `id="job-waited">`+regexp.QuoteMeta(waited)+` `, page.body)
		require.Regexp(t, `id="job-ran">`+regexp.QuoteMeta(ran)+` <small>\(claim to its end\)`, page.body)
		// A claimed job still shows its expiry, and runs so far.
		page = st.get(jobPath("p", busy))
		require.Contains(t, page.body, `<dt>expiry</dt>`)
		require.NotContains(t, page.body, `id="final-claim"`)
		require.Regexp(t, `id="job-ran">[^<]+ <small>so far`, page.body)
		page = st.get(jobPath("p", waiting))
		require.Contains(t, page.body, `id="job-waited">—</dd>`)
		require.Contains(t, page.body, `id="job-ran">—</dd>`)

		// The production's rows: waited and ran columns, the end instead
		// of the expiry for the finished job.
		list := st.get("/production?name=p").body
		row := func(id string) string {
			i := strings.Index(list, `data-job="`+id+`"`)
			require.GreaterOrEqual(t, i, 0, id)
			return list[i : i+strings.Index(list[i:], "</tr>")]
		}
		r := row(done)
		require.Contains(t, r, `<td class="ended"><span title=`)
		require.Contains(t, r, `>completed `)
		require.NotContains(t, r, `class="expiry"`)
		require.Contains(t, r, `<td class="waited">`+waited+`</td>`)
		require.Contains(t, r, `<td class="ran">`+ran+`</td>`)
		r = row(busy)
		require.Contains(t, r, `class="expiry"`)
		require.Regexp(t, `<td class="ran">[^<]+ <small>so far</small>`, r)
		r = row(waiting)
		require.Contains(t, r, `<td class="waited"></td>`)
		require.Contains(t, r, `<td class="ran"></td>`)
	})
}

// TestAProductionsJobsPageBackwardsAsWellAsForwards: the page's "previous
// page" link leads back through the pages "next page" led through, keeping
// the filter, and the JSON carries prev.
func TestAProductionsJobsPageBackwardsAsWellAsForwards(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		st.seed("p", 14) // 14 jobs: 11 requested, one each completed, failed, claimed, and one cancelled
		link := regexp.MustCompile(`<a href="([^"]+)" id="(next|prev|first)-page">`)
		links := func(body string) map[string]string {
			out := map[string]string{}
			for _, m := range link.FindAllStringSubmatch(body, -1) {
				out[m[2]] = strings.ReplaceAll(m[1], "&amp;", "&")
			}
			return out
		}
		ids := func(body string) []string {
			var out []string
			for _, m := range regexp.MustCompile(`data-job="([^"]+)"`).FindAllStringSubmatch(body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		start := "/production?" + url.Values{"name": {"p"}, "limit": {"4"}, "state": {"requested", "cancelled"}}.Encode()
		var bodies []string
		path := start
		for {
			r := st.get(path)
			require.Equal(t, http.StatusOK, r.code, r.body)
			bodies = append(bodies, r.body)
			next, ok := links(r.body)["next"]
			if !ok {
				break
			}
			path = next
			require.Less(t, len(bodies), 10)
		}
		require.Len(t, bodies, 3, "12 jobs requested or cancelled, 4 a page")
		_, hasPrev := links(bodies[0])["prev"]
		require.False(t, hasPrev, "the first page has no previous page")
		for i := len(bodies) - 1; i > 0; i-- {
			prev, ok := links(bodies[i])["prev"]
			require.True(t, ok, "page %d links to the one before", i)
			require.Contains(t, prev, "state=cancelled", "the filter is kept")
			require.NotContains(t, prev, "after=")
			back := st.get(prev)
			require.Equal(t, ids(bodies[i-1]), ids(back.body), "back from page %d", i)
		}
		var api struct {
			Next string `json:"next"`
			Prev string `json:"prev"`
		}
		st.getJSON(strings.Replace(links(bodies[1])["next"], "/production", "/api/production", 1), &api)
		require.NotEmpty(t, api.Prev)
		require.Empty(t, api.Next)
		r := st.get("/api/production?name=p&before=" + url.QueryEscape(api.Prev) + "&after=" + url.QueryEscape(api.Prev))
		require.Equal(t, http.StatusBadRequest, r.code, r.body)
	})
}

// TestAProductionsJobsFilterByWorker: the worker box (and each worker name
// in the rows, a link) lists the jobs whose claim that worker holds or last
// held, the name shown as text.
func TestAProductionsJobsFilterByWorker(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		ids := st.seed("p", 6)
		hostile := `<img src=x onerror=alert(1)>`
		l, err := st.writer.ClaimJob("p", ids[4], hostile, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(core.Facts{}))
		rows := regexp.MustCompile(`data-job="([^"]+)"`)
		jobsOf := func(body string) []string {
			var out []string
			for _, m := range rows.FindAllStringSubmatch(body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		page := st.get("/production?" + url.Values{"name": {"p"}, "worker": {hostile}}.Encode())
		require.Equal(t, http.StatusOK, page.code, page.body)
		require.Equal(t, []string{ids[4]}, jobsOf(page.body))
		require.NotContains(t, page.body, hostile)
		require.Contains(t, page.body, `id="filter-worker">&lt;img src=x onerror=alert(1)&gt;</span>`)
		// Each row's worker links to its filter.
		all := st.get("/production?name=p").body
		link := `href="/production?name=p&amp;worker=done-worker"`
		require.Contains(t, all, link)
		done := st.get("/production?name=p&worker=done-worker").body
		require.Len(t, jobsOf(done), 1)
		require.Contains(t, done, `<td class="state">completed</td>`)
		var api struct {
			Jobs   []core.Job `json:"jobs"`
			Filter struct {
				Worker string `json:"worker"`
			} `json:"filter"`
		}
		st.getJSON("/api/production?name=p&worker=busy-worker&state=claimed", &api)
		require.Equal(t, "busy-worker", api.Filter.Worker)
		require.Len(t, api.Jobs, 1)
		require.Equal(t, "busy-worker", api.Jobs[0].Worker)
		st.getJSON("/api/production?name=p&worker=busy-worker&state=completed", &api)
		require.Empty(t, api.Jobs)
	})
}
