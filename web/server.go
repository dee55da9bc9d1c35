// Package web is the status page of an authority (docs/web.md): server-
// rendered pages, the JSON API behind each, /metrics and /healthz, and the
// coordinator actions when allowed. It reads through core's bounded
// observations only; it holds no SQL and no secret.
package web

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// DefaultListen is where the server listens unless told otherwise: this
// host only, since the page has no authentication.
const DefaultListen = "127.0.0.1:8080"

// DefaultMetricsProductions is how many productions /metrics labels by
// name unless told otherwise.
const DefaultMetricsProductions = 100

// OtherProductions is the production label under which /metrics sums the
// productions it does not label by name.
const OtherProductions = "_other"

// Config says what to serve and how.
type Config struct {
	// Authority is the opened authority; the server never closes it.
	Authority *core.Authority
	// Listen is the address served (host:port); it also decides which Host
	// headers are accepted unless Public.
	Listen string
	// Public allows a non-loopback Listen address and any Host header.
	Public bool
	// AllowActions enables the coordinator actions (cancel, redrive a job,
	// redrive a production's failed, dead or cancelled jobs) as
	// POST forms protected against cross-site request forgery. Without it
	// every POST is refused and nothing is ever written.
	AllowActions bool
	// MetricsProductions is how many productions /metrics labels by name
	// (0: DefaultMetricsProductions); the others are summed under the
	// production label OtherProductions (docs/web.md, "/metrics").
	MetricsProductions int
	// Refresh is how often open pages update themselves (0: 2 s).
	Refresh time.Duration
	// Log receives one line per failed request (never a secret); nil: stderr.
	Log *log.Logger
}

// Server serves one authority's status page.
type Server struct {
	cfg     Config
	a       *core.Authority
	pages   map[string]*template.Template
	csrfKey [32]byte
	metrics *collector
	mux     *http.ServeMux
	log     *log.Logger
}

// CheckListen refuses an address the server must not listen on: anything
// but a loopback address (127.0.0.0/8, ::1, localhost) unless public. The
// page has no authentication, so on any other address anyone who can reach
// it reads every job and, with actions allowed, cancels them.
func CheckListen(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("listen address %q is not HOST:PORT (e.g. %s)", addr, DefaultListen)
	}
	if public || loopbackHost(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("refusing to listen on %s (%s): not a loopback address. The status page has no "+
		"authentication; to serve it beyond this host, put it behind your own authenticating proxy and "+
		"pass --listen-public", addr, shown)
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// New builds the server. It reads one thing: the event log's end, where
// the counters of /metrics start (they count what commits after it). When
// the store does not answer then, the first scrape that reaches it reads
// the end instead, and New still succeeds: /healthz says what is wrong.
func New(cfg Config) (*Server, error) {
	if cfg.Authority == nil {
		return nil, errors.New("web: no authority")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if err := CheckListen(cfg.Listen, cfg.Public); err != nil {
		return nil, err
	}
	if cfg.MetricsProductions < 0 {
		return nil, fmt.Errorf("web: metrics productions %d is negative", cfg.MetricsProductions)
	}
	if cfg.MetricsProductions == 0 {
		cfg.MetricsProductions = DefaultMetricsProductions
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 2 * time.Second
	}
	s := &Server{cfg: cfg, a: cfg.Authority, log: cfg.Log, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = log.New(os.Stderr, "leases serve: ", log.LstdFlags)
	}
	// The CSRF key lives only in this process: a restart invalidates every
	// form, which costs a reload.
	if _, err := rand.Read(s.csrfKey[:]); err != nil {
		return nil, err
	}
	var err error
	if s.pages, err = parseTemplates(); err != nil {
		return nil, err
	}
	s.metrics = newCollector(s.a, cfg.MetricsProductions)
	ctx, cancel := context.WithTimeout(context.Background(), followBudget)
	_ = s.metrics.start(ctx) // a failure is retried by the first scrape
	cancel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.metrics)
	s.routes(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError,
		ErrorLog: s.log}))
	return s, nil
}

func (s *Server) routes(metrics http.Handler) {
	static, _ := fs.Sub(staticFiles, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.page("overview", s.overview))
	s.mux.HandleFunc("GET /production", s.page("production", s.production))
	s.mux.HandleFunc("GET /job", s.page("job", s.job))
	s.mux.HandleFunc("GET /events", s.page("events", s.events))
	s.mux.HandleFunc("GET /api/overview", s.api(s.overview))
	s.mux.HandleFunc("GET /api/production", s.api(s.production))
	s.mux.HandleFunc("GET /api/job", s.api(s.job))
	s.mux.HandleFunc("GET /api/events", s.api(s.eventsAPI))
	s.mux.HandleFunc("GET /api/clock", s.api(s.clock))
	s.mux.Handle("GET /metrics", s.unavailable(metrics))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	if s.cfg.AllowActions {
		s.mux.HandleFunc("POST /actions/cancel", s.action(s.cancel))
		s.mux.HandleFunc("POST /actions/redrive-job", s.action(s.redriveJob))
		s.mux.HandleFunc("POST /actions/redrive", s.action(s.redrive))
	}
}

// Handler is the whole server: every request passes the guard first.
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Serve serves on l until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: s.log}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(shut)
	<-done
	return err
}

// ListenAndServe listens on the configured address and serves until ctx
// ends. ready, if not nil, is called with the address once listening.
func (s *Server) ListenAndServe(ctx context.Context, ready func(addr net.Addr)) error {
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(l.Addr())
	}
	return s.Serve(ctx, l)
}
