package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/libleases/libleases/core/store/stores"
	"github.com/stretchr/testify/require"
)

// openHeld opens an authority on a SQLite file with the projection of its
// event log's indexes held still (docs/schema.md, "Schema 13").
func openHeld(t *testing.T, path string) (*core.Authority, *sqlitestore.DB) {
	t.Helper()
	var db *sqlitestore.DB
	a, err := core.OpenStore(path, "SQLite", func() (store.Backend, error) {
		b, err := stores.Open(path, stores.Options{})
		if err == nil {
			db = b.(*sqlitestore.DB)
			db.HoldProjection(true)
		}
		return b, err
	})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	a.SetPruneInterval(0)
	return a, db
}

// volatile is what a view shows of the time it was made: the clock, the
// time the counts were read, the oldest job's wait.
var volatile = []*regexp.Regexp{regexp.MustCompile(`("now_unix_us": )\d+`),
	regexp.MustCompile(`("oldest_requested_unix_us": \d+,\s+"at_unix_us": )\d+`),
	regexp.MustCompile(`(?m)^(leases_clock_now_seconds|leases_oldest_waiting_seconds\S*) \S+$`)}

// TestThePageAndMetricsAreExactWhileTheProjectionTrailsTheLog: the status
// page's views, the event listing and /metrics show the same figures with
// none of the log projected, half of it and all of it.
func TestThePageAndMetricsAreExactWhileTheProjectionTrailsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	w, wdb := openHeld(t, path)
	_, err := w.CreateProduction("p")
	require.NoError(t, err)
	var last string
	for i := 0; i < 60; i++ {
		cycle(t, w, "p", []string{"w1", "w2", "w3"}[i%3], 1)
		id, err := w.RequestJob("p", "", nil)
		require.NoError(t, err)
		last = id
	}
	l, err := w.Claim("p", "w4", time.Hour)
	require.NoError(t, err)
	require.NoError(t, l.Renew(time.Hour))
	mark, err := wdb.ProjectionMark(context.Background())
	require.NoError(t, err)
	require.Zero(t, mark, "nothing projected")

	a, db := openHeld(t, path)
	s, err := New(Config{Authority: a, Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	paths := []string{"/api/overview", "/api/production?" + url.Values{"name": {"p"}}.Encode(),
		"/api/job?" + url.Values{"production": {"p"}, "id": {l.JobID()}}.Encode(),
		"/api/job?" + url.Values{"production": {"p"}, "id": {last}}.Encode(),
		"/api/events?" + url.Values{"production": {"p"}}.Encode(),
		"/api/events?" + url.Values{"production": {"p"}, "kind": {"completed"}}.Encode(),
		"/metrics"}
	views := func() map[string]string {
		out := map[string]string{}
		for _, p := range paths {
			resp, err := srv.Client().Get(srv.URL + p)
			require.NoError(t, err)
			b := new(strings.Builder)
			_, err = io.Copy(b, resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p, b)
			body := b.String()
			for _, re := range volatile {
				body = re.ReplaceAllString(body, "$1")
			}
			out[p] = body
		}
		return out
	}
	views() // the server's start: /metrics counts from here
	cycle(t, w, "p", "w5", 30)
	nothing := views()
	top, _, err := db.NewestEvent(context.Background())
	require.NoError(t, err)
	require.NoError(t, db.ProjectTo(context.Background(), top/2))
	half := views()
	_, err = db.Project(context.Background())
	require.NoError(t, err)
	all := views()
	for _, p := range paths {
		require.Equal(t, all[p], nothing[p], "%s with nothing projected", p)
		require.Equal(t, all[p], half[p], "%s with half projected", p)
	}
	require.Contains(t, all["/metrics"], `leases_completions_total{production="p"} 30`)
}
