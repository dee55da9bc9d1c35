package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/pgtest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// readPaths is every GET the server answers, for a production p and job id.
func readPaths(p, id string) []string {
	pq := url.Values{"name": {p}}.Encode()
	return []string{"/", "/?after=", "/production?" + pq, "/production?" + pq + "&state=claimed&state=failed",
		"/production?" + pq + "&q=" + id, "/production?" + pq + "&q=ka", "/production?" + pq + "&limit=1",
		jobPath(p, id), "/events", "/events?" + url.Values{"production": {p}, "kind": {"claimed"}}.Encode(),
		"/events?" + url.Values{"job": {id}}.Encode(), "/events?before=3",
		"/api/overview", "/api/production?" + pq, "/api/job?" + url.Values{"production": {p}, "id": {id}}.Encode(),
		"/api/events", "/api/events?after=0", "/api/events?before=4&limit=2", "/api/clock",
		"/metrics", "/healthz", "/static/app.js", "/static/style.css"}
}

func TestEveryPageAPIAndMetricOnlyReadsNeverBeginningAWriteNorShowingASecret(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{AllowActions: true})
		ids := st.seed("p", 6)
		// A claim exported and imported: its token and secret must appear
		// nowhere, nor the PostgreSQL URL's password.
		l, err := st.writer.ClaimJob("p", ids[3], "exporter", time.Minute)
		require.NoError(t, err)
		tok, err := l.Export()
		require.NoError(t, err)
		_, err = st.writer.Import(tok)
		require.NoError(t, err)
		secret := tokenSecretForms(t, tok)
		events := st.eventCount()
		for round := 0; round < 2; round++ {
			for _, path := range append(readPaths("p", ids[0]), readPaths("p", ids[3])...) {
				r := st.get(path)
				require.Equal(t, http.StatusOK, r.code, "%s: %s", path, r.body)
				var head strings.Builder
				r.header.Write(&head)
				for _, form := range append(secret, pgPassword) {
					require.NotContains(t, head.String()+r.body, form, path)
				}
			}
		}
		require.Zero(t, st.writes.Load(), "a page view began a write transaction (SQLite's writer lock, PostgreSQL row locks)")
		require.Equal(t, events, st.eventCount(), "a page view changed the event log")
	})
}

func TestTheJSONAPIShowsWhatTheListingsShow(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		ids := st.seed("p", 6)
		ctx := context.Background()

		var ov struct {
			Clock       map[string]any   `json:"clock"`
			Productions []map[string]any `json:"productions"`
		}
		st.getJSON("/api/overview", &ov)
		require.Len(t, ov.Productions, 1)
		counts, err := st.writer.Counts(ctx, "p")
		require.NoError(t, err)
		got := ov.Productions[0]["counts"].(map[string]any)
		want := asJSON(t, counts).(map[string]any)
		delete(got, "at_unix_us")
		delete(want, "at_unix_us")
		require.Equal(t, want, got)
		require.EqualValues(t, 1, ov.Productions[0]["completed_last_hour"])
		require.Contains(t, ov.Clock, "high_water_mark_unix_us")
		var busy map[string]any
		for _, w := range ov.Productions[0]["workers"].([]any) {
			if w.(map[string]any)["worker"] == "busy-worker" {
				busy = w.(map[string]any)
			}
		}
		require.NotNil(t, busy, "the worker holding a claim is listed")
		require.EqualValues(t, 1, busy["holding"])
		require.Equal(t, ids[2], busy["holds"].([]any)[0].(map[string]any)["id"])

		var pv struct {
			Jobs []any  `json:"jobs"`
			Next string `json:"next"`
		}
		st.getJSON("/api/production?name=p&limit=2&state=requested&state=claimed", &pv)
		page, err := st.writer.ListJobs(ctx, "p", core.JobQuery{States: []string{"requested", "claimed"}, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, asJSON(t, page.Jobs), asJSON(t, pv.Jobs))
		require.Equal(t, page.Next, pv.Next)
		st.getJSON("/api/production?"+url.Values{"name": {"p"}, "q": {ids[3]}}.Encode(), &pv)
		require.Len(t, pv.Jobs, 1, "the search box finds a job by id")
		st.getJSON("/api/production?name=p&q=kd", &pv)
		require.Len(t, pv.Jobs, 1, "and by key")
		require.Equal(t, ids[3], pv.Jobs[0].(map[string]any)["id"])

		var jv struct {
			Job      map[string]any `json:"job"`
			Preview  *string        `json:"payload_preview"`
			Timeline []any          `json:"timeline"`
		}
		st.getJSON("/api"+jobPath("p", ids[0]), &jv)
		rec, err := st.writer.JobDetail(ctx, "p", ids[0])
		require.NoError(t, err)
		require.Equal(t, asJSON(t, rec), asJSON(t, jv.Job))
		require.Equal(t, "payload", *jv.Preview)
		tl, err := st.writer.RecentEvents(ctx, core.EventQuery{JobID: ids[0]}, 0)
		require.NoError(t, err)
		require.Equal(t, asJSON(t, tl.Events), asJSON(t, jv.Timeline))

		var ev struct {
			Events []any `json:"events"`
			Older  int64 `json:"older"`
		}
		st.getJSON("/api/events?limit=3", &ev)
		recent, err := st.writer.RecentEvents(ctx, core.EventQuery{Limit: 3}, 0)
		require.NoError(t, err)
		require.Equal(t, asJSON(t, recent.Events), asJSON(t, ev.Events))
		require.Equal(t, recent.Older, ev.Older)
		var follow struct {
			Events []any `json:"events"`
			Next   int64 `json:"next"`
			More   bool  `json:"more"`
		}
		st.getJSON("/api/events?after=2&limit=4", &follow)
		list, err := st.writer.ListEvents(ctx, core.EventQuery{After: 2, Limit: 4})
		require.NoError(t, err)
		require.Equal(t, asJSON(t, list.Events), asJSON(t, follow.Events))
		require.Equal(t, list.Next, follow.Next)
		require.True(t, follow.More)
	})
}

func TestJobPagesPreviewOnlySmallUTF8Payloads(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		_, err := st.writer.CreateProduction("p")
		require.NoError(t, err)
		for payload, want := range map[string]string{
			"plain text":                      `"payload_preview": "plain text"`,
			"\xff\xfe binary":                 `"payload_preview_absent": "not valid UTF-8"`,
			strings.Repeat("x", previewMax+1): `"payload_preview_absent": "larger than 4096 bytes"`,
		} {
			id, err := st.writer.RequestJob("p", "", []byte(payload))
			require.NoError(t, err)
			r := st.get("/api" + jobPath("p", id))
			require.Equal(t, http.StatusOK, r.code)
			require.Contains(t, r.body, want)
		}
	})
}

// metricsOf scrapes /metrics and parses it with Prometheus's own parser.
func metricsOf(t *testing.T, st *site) map[string]*dto.MetricFamily {
	t.Helper()
	r := st.get("/metrics")
	require.Equal(t, http.StatusOK, r.code, r.body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(r.body))
	require.NoError(t, err)
	return families
}

// sample is the value of the metric of family name whose labels are all of want.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "no metric %s", name)
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
		return m
	}
	t.Fatalf("no %s with labels %v", name, want)
	return nil
}

func TestMetricsParseBackAndMatchTheListingsAndTheEventLog(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		st.seed("p", 6)
		// q retries at once and allows two attempts: a claim that lapses
		// and is taken again (an expiry), a retried failure, a job that
		// uses up its attempts (dead) and is redriven.
		_, err := st.writer.CreateProductionWithPolicy("q", core.RetryPolicy{MaxAttempts: 2})
		require.NoError(t, err)
		st.seed("q", 5)
		l, err := st.writer.Claim("q", "slow", 50*time.Millisecond)
		require.NoError(t, err)
		time.Sleep(60 * time.Millisecond)
		_, err = st.writer.ClaimJob("q", l.JobID(), "again", time.Minute)
		require.NoError(t, err)
		id := doomed(t, st, "q")
		require.Equal(t, core.StateDead, jobState(t, st, "q", id))
		require.NoError(t, st.writer.RetryJob("q", id))

		check := func() {
			fams := metricsOf(t, st)
			for _, p := range []string{"p", "q"} {
				c, err := st.writer.Counts(context.Background(), p)
				require.NoError(t, err)
				for _, state := range allStates {
					m := sample(t, fams, "leases_jobs", map[string]string{"production": p, "state": state})
					require.EqualValues(t, countOf(c, state), m.GetGauge().GetValue(), "%s %s", p, state)
				}
				// The server started before the first event, so the
				// counters (events since the start) equal the whole log.
				es, err := st.writer.Events(p, 0)
				require.NoError(t, err)
				kinds := map[string]float64{}
				for _, e := range es {
					kinds[e.Kind]++
				}
				for kind, metric := range map[string]string{"claimed": "leases_claims_total", "completed": "leases_completions_total",
					"failed": "leases_failures_total", "claim_expired": "leases_claim_expiries_total",
					"cancelled": "leases_cancels_total", "requested": "leases_requests_total", "retry": "leases_retries_total",
					"dead": "leases_dead_total", "redriven": "leases_redrives_total"} {
					m := sample(t, fams, metric, map[string]string{"production": p})
					require.Equal(t, kinds[kind], m.GetCounter().GetValue(), "%s of %s", metric, p)
				}
				h := sample(t, fams, "leases_claim_to_completion_seconds", map[string]string{"production": p}).GetHistogram()
				require.EqualValues(t, kinds["completed"], h.GetSampleCount())
				require.GreaterOrEqual(t, h.GetSampleSum(), 0.0)
			}
			require.Equal(t, dto.MetricType_COUNTER, fams["leases_claims_total"].GetType())
			require.Equal(t, dto.MetricType_HISTOGRAM, fams["leases_claim_to_completion_seconds"].GetType())
			require.Zero(t, sample(t, fams, "leases_clock_lag_seconds", nil).GetGauge().GetValue())
			require.EqualValues(t, 1, sample(t, fams, "leases_claims_expired", map[string]string{"production": "q"}).GetGauge().GetValue()+
				sample(t, fams, "leases_claim_expiries_total", map[string]string{"production": "q"}).GetCounter().GetValue()-0,
				"the lapsed claim was taken again: an expiry counted, none waiting")
		}
		check()
		// Counters follow the log from where the last scrape stopped.
		l, err = st.writer.Claim("p", "late", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(core.Facts{}))
		check()
		require.Zero(t, st.writes.Load())
	})
}

func TestReadOnlyRefusesEveryOtherMethodAndChangesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		ids := st.seed("p", 4)
		before := st.eventCount()
		r := st.get(jobPath("p", ids[2]))
		require.NotContains(t, r.body, "<form method=\"post\"", "read-only pages have no action form")
		require.NotContains(t, st.get(jobPath("p", ids[2])).header.Get("Set-Cookie"), csrfCookie)
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			for _, path := range append(readPaths("p", ids[2]), "/actions/cancel", "/actions/redrive-job", "/actions/redrive") {
				body := url.Values{"production": {"p"}, "id": {ids[2]}, "csrf": {"x"}}.Encode()
				req, err := http.NewRequest(method, st.srv.URL+path, strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Origin", st.srv.URL)
				r := st.do(req)
				require.Equal(t, http.StatusMethodNotAllowed, r.code, "%s %s", method, path)
				require.Equal(t, "GET, HEAD", r.header.Get("Allow"))
			}
		}
		require.Equal(t, before, st.eventCount(), "a refused request changed the event log")
		require.Equal(t, core.StateClaimed, jobState(t, st, "p", ids[2]))
		require.Zero(t, st.writes.Load())
	})
}

func jobState(t *testing.T, st *site, p, id string) string {
	t.Helper()
	j, err := st.writer.Job(p, id)
	require.NoError(t, err)
	return j.State
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// formOf loads a job page as a browser would and returns its cookie and
// the form's token.
func formOf(t *testing.T, st *site, p, id string) (*http.Cookie, string) {
	t.Helper()
	r := st.get(jobPath(p, id))
	m := csrfField.FindStringSubmatch(r.body)
	require.NotNil(t, m, "the job page has a cancel form with a token")
	resp := http.Response{Header: r.header}
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, csrfCookie, cookies[0].Name)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	return cookies[0], m[1]
}

func TestForgedActionsAreRefusedAndAGenuineCancelWorks(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{AllowActions: true})
		ids := st.seed("p", 5)
		cookie, token := formOf(t, st, "p", ids[2])
		other, otherToken := formOf(t, st, "p", ids[2])
		require.NotEqual(t, cookie.Value, other.Value)
		target := ids[2]
		post := func(cookie *http.Cookie, token, origin, referer string, fetchSite ...string) response {
			body := url.Values{"production": {"p"}, "id": {target}}
			if token != "" {
				body.Set("csrf", token)
			}
			req, err := http.NewRequest(http.MethodPost, st.srv.URL+"/actions/cancel", strings.NewReader(body.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if cookie != nil {
				req.AddCookie(cookie)
			}
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			if referer != "" {
				req.Header.Set("Referer", referer)
			}
			for _, site := range fetchSite {
				req.Header.Set("Sec-Fetch-Site", site)
			}
			return st.do(req)
		}
		before := st.eventCount()
		for name, r := range map[string]response{
			"no token":                                           post(cookie, "", st.srv.URL, ""),
			"wrong token":                                        post(cookie, "AAAA"+token[4:], st.srv.URL, ""),
			"another browser's token":                            post(cookie, otherToken, st.srv.URL, ""),
			"no cookie":                                          post(nil, token, st.srv.URL, ""),
			"another origin":                                     post(cookie, token, "http://evil.example", ""),
			"another origin, same host":                          post(cookie, token, "ftp://"+strings.TrimPrefix(st.srv.URL, "http://"), ""),
			"no origin nor referer":                              post(cookie, token, "", ""),
			"a referer from another site":                        post(cookie, token, "", "http://evil.example/page"),
			"an opaque origin (null)":                            post(cookie, token, "null", ""),
			"an opaque origin and referer":                       post(cookie, token, "null", "http://evil.example/"),
			"an opaque origin, cross-site":                       post(cookie, token, "null", "", "cross-site"),
			"an opaque origin, same-site":                        post(cookie, token, "null", "", "same-site"),
			"an opaque origin, same-site, a same-origin referer": post(cookie, token, "null", st.srv.URL+"/", "same-site"),
			"same-origin fetch, no token":                        post(cookie, "", "null", "", "same-origin"),
			"same-origin fetch, no cookie":                       post(nil, token, "null", "", "same-origin"),
		} {
			require.Equal(t, http.StatusForbidden, r.code, "%s: %s", name, r.body)
			require.NotContains(t, r.body, token, name)
		}
		require.Equal(t, before, st.eventCount(), "a forged request changed the event log")
		require.Equal(t, core.StateClaimed, jobState(t, st, "p", ids[2]))

		// What a browser sends under our Referrer-Policy: no-referrer is
		// Origin: null and Sec-Fetch-Site: same-origin, which suffices; so
		// does a same-origin Referer.
		target = ids[3]
		r := post(cookie, token, "null", "", "same-origin")
		require.Equal(t, http.StatusSeeOther, r.code, r.body)
		require.Equal(t, core.StateCancelled, jobState(t, st, "p", ids[3]))
		target = ids[2]
		r = post(cookie, token, "", st.srv.URL+jobPath("p", ids[2]))
		require.Equal(t, http.StatusSeeOther, r.code, r.body)
		require.NotContains(t, r.header.Get("Location"), token, "the token never goes into a URL")
		require.Equal(t, core.StateCancelled, jobState(t, st, "p", ids[2]))
		after := st.get(r.header.Get("Location"))
		require.Contains(t, after.body, "The job was cancelled.")
		require.NotContains(t, after.body, "cancel-job", "a cancelled job has no cancel form")

		// Core's rules still apply: a completed job cannot be cancelled.
		r = post(cookie, token, st.srv.URL, "")
		require.Equal(t, http.StatusOK, jobStatus(t, st, ids[2]))
		require.Equal(t, http.StatusSeeOther, r.code, "cancelling a cancelled job changes nothing and succeeds")
		body := url.Values{"production": {"p"}, "id": {ids[0]}, "csrf": {token}}
		req, _ := http.NewRequest(http.MethodPost, st.srv.URL+"/actions/cancel", strings.NewReader(body.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", st.srv.URL)
		req.AddCookie(cookie)
		r = st.do(req)
		require.Equal(t, http.StatusConflict, r.code, r.body)
		require.Contains(t, r.body, "wrong_state")
	})
}

func jobStatus(t *testing.T, st *site, id string) int { return st.get(jobPath("p", id)).code }

func TestOnlyLoopbackAddressesAreServedUnlessPublic(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.2:1", "[::1]:8080", "localhost:8080", "LOCALHOST:0"} {
		require.NoError(t, CheckListen(addr, false), addr)
	}
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.168.1.10:8080", "example.com:80", "10.0.0.1:1"} {
		err := CheckListen(addr, false)
		require.Error(t, err, addr)
		require.Contains(t, err.Error(), "--listen-public")
		require.Contains(t, err.Error(), "no authentication")
		require.NoError(t, CheckListen(addr, true), addr)
	}
	for _, addr := range []string{"127.0.0.1", "nonsense", "127.0.0.1:"} {
		require.Error(t, CheckListen(addr, true), addr)
	}
	_, err := New(Config{Authority: &core.Authority{}, Listen: "0.0.0.0:8080"})
	require.ErrorContains(t, err, "not a loopback address")
}

func TestRequestsNamingAnotherHostAreRefusedUnlessPublic(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		for _, public := range []bool{false, true} {
			st := newSite(t, location, Config{Public: public})
			for host, ok := range map[string]bool{"evil.example": public, "evil.example:8080": public,
				"127.0.0.1.nip.io": public, "localhost": true, "localhost:1234": true, "127.0.0.1": true, "[::1]:80": true} {
				req, err := http.NewRequest(http.MethodGet, st.srv.URL+"/api/clock", nil)
				require.NoError(t, err)
				req.Host = host
				r := st.do(req)
				if ok {
					require.Equal(t, http.StatusOK, r.code, "Host %s (public %v)", host, public)
				} else {
					require.Equal(t, http.StatusMisdirectedRequest, r.code, "Host %s", host)
				}
			}
		}
	})
}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		ids := st.seed("p", 4)
		paths := append(readPaths("p", ids[0]), "/nope", "/production?name=none", "/api/job?production=p&id=bad")
		for _, path := range paths {
			r := st.get(path)
			h := r.header
			require.Equal(t, csp, h.Get("Content-Security-Policy"), path)
			require.NotContains(t, csp, "unsafe-inline")
			require.Contains(t, csp, "script-src 'self'")
			require.Contains(t, csp, "frame-ancestors 'none'")
			require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
			require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), path)
			require.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
			require.Equal(t, "no-store", h.Get("Cache-Control"), path)
			if strings.Contains(h.Get("Content-Type"), "html") {
				require.NotRegexp(t, `<script>|<script[^>]*>[^<]|\sstyle=|\son[a-z]+=`, r.body, "inline script or style in %s", path)
			}
		}
	})
}

func TestBadParametersAreClearErrorsOnPagesAndInTheAPI(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		ids := st.seed("p", 4)
		events := st.eventCount()
		for path, want := range map[string]int{
			"/production?name=p&state=sleeping": 400, "/production?name=p&limit=0": 400,
			"/production?name=p&limit=x": 400, "/production?name=p&after=%25%25": 400,
			"/production?name=nope": 404, "/production": 400, "/job?production=p&id=nope": 400,
			"/job?production=p&id=" + otherID(ids[0]): 404, "/job?production=nope&id=" + ids[0]: 404,
			"/events?before=-1": 400, "/events?kind=bogus&production=p": 400, "/events?kind=claimed": 400,
			"/events?production=nope": 404, "/nope": 404,
		} {
			for _, prefix := range []string{"", "/api"} {
				if path == "/nope" && prefix != "" {
					continue
				}
				r := st.get(prefix + path)
				require.Equal(t, want, r.code, "%s%s: %s", prefix, path, r.body)
				if prefix == "/api" {
					var e struct {
						Error struct {
							Message string `json:"message"`
						} `json:"error"`
					}
					require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
					require.NotEmpty(t, e.Error.Message)
				}
			}
		}
		require.Equal(t, http.StatusBadRequest, st.get("/api/events?after=1&before=2").code)
		require.Equal(t, events, st.eventCount())
	})
}

func TestNamesThatLookLikePathsOrMarkupHaveWorkingPages(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		for _, name := range []string{"a/b", "..", ".", "x?y=z&w#f", `"><b>bold</b>`, "nightly 2026", "über"} {
			_, err := st.writer.CreateProduction(name)
			require.NoError(t, err)
			id, err := st.writer.RequestJob(name, name, []byte(name))
			require.NoError(t, err)
			r := st.get("/production?" + url.Values{"name": {name}}.Encode())
			require.Equal(t, http.StatusOK, r.code, name)
			require.Contains(t, r.body, id, name)
			var jv struct {
				Job map[string]any `json:"job"`
			}
			st.getJSON("/api"+jobPath(name, id), &jv)
			require.Equal(t, name, jv.Job["production"])
			require.Equal(t, name, jv.Job["key"])
		}
		r := st.get("/")
		require.NotContains(t, r.body, "<b>bold</b>")
		require.Contains(t, r.body, "&lt;b&gt;bold&lt;/b&gt;")
	})
}

func TestHealthzAnswersOKOr503WithOnlyTheKindOfFailure(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		r := st.get("/healthz")
		require.Equal(t, http.StatusOK, r.code)
		require.Equal(t, "ok\n", r.body)
		if strings.HasPrefix(location, "postgres") {
			// The tables gone: the store answers with a failure naming them.
			u, err := url.Parse(location)
			require.NoError(t, err)
			pgtest.Exec(t, location, `DROP SCHEMA `+u.Query().Get("search_path")+` CASCADE`)
			pgtest.Exec(t, location, `CREATE SCHEMA `+u.Query().Get("search_path"))
			r = st.get("/healthz")
			require.Equal(t, http.StatusServiceUnavailable, r.code)
			require.Equal(t, "unavailable: the store does not answer (storage)\n", r.body)
			m := st.get("/metrics")
			require.Equal(t, http.StatusServiceUnavailable, m.code)
			require.Equal(t, r.body, m.body, "no partial metrics, only the kind of failure")
		}
		require.NoError(t, st.a.Close())
		r = st.get("/healthz")
		require.Equal(t, http.StatusServiceUnavailable, r.code)
		require.Equal(t, "unavailable: the store does not answer (closed)\n", r.body)
		require.NotContains(t, r.body, pgPassword)
		for _, path := range []string{"/", "/api/overview", "/metrics"} {
			r := st.get(path)
			require.Equal(t, http.StatusServiceUnavailable, r.code, path)
			require.NotContains(t, r.body, pgPassword)
		}
	})
}

func TestTheOverviewShowsTheClockAndWarnsWhenItIsBehindTheMark(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		st.seed("p", 4)
		r := st.get("/")
		require.Contains(t, r.body, `id="clock-now"`)
		require.Contains(t, r.body, `id="clock-hwm"`)
		require.NotContains(t, r.body, `id="clock-lag"`)
		hwm, err := st.writer.HighWaterMark()
		require.NoError(t, err)
		require.Contains(t, r.body, hwm.Format("2006-01-02 15:04:05.000 UTC"))
		var c struct {
			Clock struct {
				Now int64 `json:"now_unix_us"`
				HWM int64 `json:"high_water_mark_unix_us"`
				Lag int64 `json:"lag_us"`
			} `json:"clock"`
		}
		st.getJSON("/api/clock", &c)
		require.Equal(t, hwm.UnixMicro(), c.Clock.HWM)
		require.GreaterOrEqual(t, c.Clock.Now, c.Clock.HWM)
		// A clock behind its mark (the mark shown an hour ahead) shows.
		st.ahead.Store(time.Hour.Microseconds())
		r = st.get("/")
		require.Contains(t, r.body, `id="clock-lag"`)
		require.Regexp(t, `(59m \d+s|1h 0m) behind its high-water mark`, r.body)
		fams := metricsOf(t, st)
		lag := sample(t, fams, "leases_clock_lag_seconds", nil).GetGauge().GetValue()
		require.InDelta(t, 3600, lag, 60)
	})
}

// postForm posts an action's fields with this browser's cookie and token
// and a same-origin Origin, as the page's form does.
func (st *site) postForm(cookie *http.Cookie, path string, fields url.Values) response {
	st.t.Helper()
	req, err := http.NewRequest(http.MethodPost, st.srv.URL+path, strings.NewReader(fields.Encode()))
	require.NoError(st.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", st.srv.URL)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return st.do(req)
}

func TestRedriveFormsReturnFailedDeadAndCancelledJobsToTheQueue(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{AllowActions: true})
		_, err := st.writer.CreateProductionWithPolicy("p", core.RetryPolicy{MaxAttempts: 1})
		require.NoError(t, err)
		ids := st.seed("p", 6) // ids[1] failed, ids[5] cancelled
		l, err := st.writer.ClaimJob("p", ids[3], "flaky", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.FailRetry("flaky input", 0))
		require.Equal(t, core.StateDead, jobState(t, st, "p", ids[3]))

		// The dead job's page shows its attempt and offers a redrive; a
		// requested one offers none.
		page := st.get(jobPath("p", ids[3]))
		require.Contains(t, page.body, `id="redrive-job"`)
		require.Regexp(t, `<td class="ending">retry</td><td class="reason">flaky input</td>`, page.body)
		require.NotContains(t, st.get(jobPath("p", ids[4])).body, `id="redrive-job"`)
		prod := st.get("/production?name=p")
		for _, state := range []string{"failed", "dead", "cancelled"} {
			require.Contains(t, prod.body, `id="redrive-`+state+`"`, state)
		}
		cookie, token := formOf(t, st, "p", ids[3])

		// Forged: no token, another origin; nothing changes.
		before := st.eventCount()
		r := st.postForm(cookie, "/actions/redrive-job", url.Values{"production": {"p"}, "id": {ids[3]}})
		require.Equal(t, http.StatusForbidden, r.code)
		req, _ := http.NewRequest(http.MethodPost, st.srv.URL+"/actions/redrive",
			strings.NewReader(url.Values{"production": {"p"}, "state": {"failed"}, "csrf": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		req.AddCookie(cookie)
		require.Equal(t, http.StatusForbidden, st.do(req).code)
		require.Equal(t, before, st.eventCount())

		// One job.
		r = st.postForm(cookie, "/actions/redrive-job", url.Values{"production": {"p"}, "id": {ids[3]}, "csrf": {token}})
		require.Equal(t, http.StatusSeeOther, r.code, r.body)
		require.Equal(t, core.StateRequested, jobState(t, st, "p", ids[3]))
		require.Contains(t, st.get(r.header.Get("Location")).body, "The job was redriven")
		// Core's rules still apply: a requested job is not redriven.
		r = st.postForm(cookie, "/actions/redrive-job", url.Values{"production": {"p"}, "id": {ids[3]}, "csrf": {token}})
		require.Equal(t, http.StatusConflict, r.code, r.body)
		// Every job of a state; a state that cannot be redriven is a clear error.
		r = st.postForm(cookie, "/actions/redrive", url.Values{"production": {"p"}, "state": {"claimed"}, "csrf": {token}})
		require.Equal(t, http.StatusBadRequest, r.code, r.body)
		for _, id := range []string{ids[1], ids[5]} {
			require.NotEqual(t, core.StateRequested, jobState(t, st, "p", id))
		}
		for _, state := range []string{"failed", "cancelled"} {
			r = st.postForm(cookie, "/actions/redrive", url.Values{"production": {"p"}, "state": {state}, "csrf": {token}})
			require.Equal(t, http.StatusSeeOther, r.code, r.body)
			require.Contains(t, st.get(r.header.Get("Location")).body, "those jobs are requested again")
		}
		for _, id := range []string{ids[1], ids[5]} {
			require.Equal(t, core.StateRequested, jobState(t, st, "p", id))
		}
		require.NotContains(t, st.get("/production?name=p").body, `id="redrive-`)
	})
}

func TestTheProductionPageAndAPIShowTheRetentionPolicy(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		st.seed("p", 3)
		require.NoError(t, st.writer.SetRetentionPolicy("p", core.RetentionPolicy{Completed: core.KeepForGood,
			Failed: 36 * time.Hour, Dead: 30 * 24 * time.Hour, Cancelled: 7 * 24 * time.Hour, Events: 3 * 24 * time.Hour}))
		r := st.get("/production?name=p")
		require.Equal(t, 200, r.code)
		require.Contains(t, r.body, `id="retention">Keeps completed jobs forever, failed 36h 0m, dead 30d, cancelled 7d; events 3d.`)
		var v struct {
			Production struct {
				Retention map[string]int64 `json:"retention"`
			} `json:"production"`
		}
		st.getJSON("/api/production?name=p", &v)
		require.Equal(t, map[string]int64{"completed_us": 0, "failed_us": 36 * 3600e6, "dead_us": 30 * 86400e6,
			"cancelled_us": 7 * 86400e6, "events_us": 3 * 86400e6}, v.Production.Retention)
	})
}
