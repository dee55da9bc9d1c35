package web

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/stores"
	"github.com/libleases/libleases/internal/pgtest"
)

// farmOf5000Productions makes 5,000 productions, 20 of them busy (500
// jobs each, 100 claimed and 50 of those completed), on the store of kind
// ("sqlite" or "postgres") and returns its location.
func farmOf5000Productions(b *testing.B, kind string) string {
	b.Helper()
	const productions, busy, jobs, claimed, completed = 5000, 20, 500, 100, 50
	loc := filepath.Join(b.TempDir(), "leases.db")
	if kind == "postgres" {
		u, err := url.Parse(pgtest.FreshSchema(b, false))
		if err != nil {
			b.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), pgPassword)
		loc = u.String()
	}
	a, err := openStore(loc)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for i := 0; i < productions; i++ {
		p := fmt.Sprintf("p-%04d", i)
		if _, err := a.CreateProduction(p); err != nil {
			b.Fatal(err)
		}
		if i%(productions/busy) != 0 {
			continue
		}
		e, err := a.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < jobs; j++ {
			if _, err := e.RequestJob(p, "", nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.Commit(); err != nil {
			b.Fatal(err)
		}
		e, err = a.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < claimed; j++ {
			l, err := e.Claim(p, "w", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			if j < completed {
				if err := e.Complete(l, core.Facts{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := e.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return loc
}

func openStore(loc string) (*core.Authority, error) {
	return core.OpenStore(loc, stores.Name(loc), func() (store.Backend, error) { return stores.Open(loc, stores.Options{}) })
}

// BenchmarkTheFirstScrapeOf5000Productions times a server's first /metrics
// scrape (the counts of every production, nothing in the event log read
// but its end) on a farm of 5,000 productions; each iteration opens a
// server of its own, untimed. The farms are made by the outer benchmark,
// which runs once, so that they outlive the runs of each store's.
func BenchmarkTheFirstScrapeOf5000Productions(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		loc := farmOf5000Productions(b, kind)
		b.Run(kind, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				a, err := openStore(loc)
				if err != nil {
					b.Fatal(err)
				}
				a.SetPruneInterval(0)
				s, err := New(Config{Authority: a, Listen: "127.0.0.1:0"})
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(s.Handler())
				b.StartTimer()
				resp, err := http.Get(srv.URL + "/metrics")
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("/metrics: %s", resp.Status)
				}
				srv.Close()
				a.Close()
				b.StartTimer()
			}
		})
	}
}
