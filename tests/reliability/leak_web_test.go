//go:build leasesworkers

// The status page's part of the leak scan: every page, every JSON endpoint,
// /metrics and /healthz, fetched at each stage of the full scenario into
// the scanned folder (docs/web.md).

package reliability

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/web"
	"github.com/stretchr/testify/require"
)

// webSnapshot serves the database with every action enabled (the most a
// page ever shows) and writes what each view answers under dir/web/stage.
// It returns how many views it fetched.
func webSnapshot(t *testing.T, db, dir, stage string) int {
	t.Helper()
	a, err := leases.Open(db)
	require.NoError(t, err)
	defer a.Close()
	s, err := web.New(web.Config{Authority: a, Listen: "127.0.0.1:0", AllowActions: true})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	out := filepath.Join(dir, "web", stage)
	require.NoError(t, os.MkdirAll(out, 0o700))

	paths := []string{"/", "/api/overview", "/events?limit=1000", "/api/events?limit=1000",
		"/api/events?after=0&limit=1000", "/api/clock", "/metrics", "/healthz"}
	ctx := context.Background()
	q := core.ProductionQuery{Limit: core.MaxPageSize}
	for {
		page, err := a.ListProductions(ctx, q)
		require.NoError(t, err)
		for _, p := range page.Productions {
			name := url.Values{"name": {p.Name}}.Encode()
			paths = append(paths, "/production?"+name+"&limit=1000", "/api/production?"+name+"&limit=1000",
				"/events?"+url.Values{"production": {p.Name}}.Encode())
			err := a.EachJob(ctx, p.Name, core.JobQuery{}, func(j core.Job) error {
				job := url.Values{"production": {p.Name}, "id": {j.ID}}.Encode()
				paths = append(paths, "/job?"+job, "/api/job?"+job, "/events?"+url.Values{"job": {j.ID}}.Encode())
				return nil
			})
			require.NoError(t, err)
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	for i, path := range paths {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
		var head strings.Builder
		resp.Header.Write(&head)
		name := fmt.Sprintf("%03d.txt", i)
		require.NoError(t, os.WriteFile(filepath.Join(out, name), []byte(path+"\n"+head.String()+"\n"+string(b)), 0o600))
	}
	return len(paths)
}
