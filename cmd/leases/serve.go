// leases serve: parses its flags and runs the status page of package web
// (docs/web.md) until SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/libleases/libleases/web"
)

func init() {
	register(&command{name: "serve", args: "[--listen ADDR] [--listen-public] [--allow-actions] [--metrics-productions N]",
		summary: "serve the live status page, its JSON API, /metrics and /healthz",
		detail: `Serves http://ADDR/ over the database (default ` + web.DefaultListen + `): productions with
counts, one production's jobs (filtered, paged), one job's record and timeline, the event log,
the authority's clock and high-water mark; /api/... the same data as JSON; /metrics for
Prometheus; /healthz for a load balancer. Pages update themselves (a pause control stops it).

The page has NO AUTHENTICATION: whoever reaches it reads every job, and with --allow-actions
cancels and redrives them. So it listens on a loopback address only (127.0.0.1, ::1, localhost), and answers
only requests addressed to this host (DNS-rebinding defence). --listen-public allows any
address and any Host: only behind your own authenticating proxy (docs/SECURITY.md).

Read-only unless --allow-actions: then a job's page has a cancel or a redrive form and a
production's page a form to redrive all its failed, dead or cancelled jobs (POST, protected
against cross-site request forgery by a token and an Origin check). Nothing else ever writes.
/metrics labels the N busiest productions by name (--metrics-productions, default 100; busiest:
most events since the server started) and sums the others under production="_other". Its
counters count the events committed since the server started.
No page, API answer or metric ever holds a claim secret or token, or a database password.`,
		examples: []string{"leases serve", "leases --db /srv/jobs.db serve --listen 127.0.0.1:9090",
			"leases serve --allow-actions", "curl -s http://127.0.0.1:8080/api/overview | jq ."},
		run: runServe})
}

func runServe(cc *cmdContext) error {
	listen := cc.fs.String("listen", web.DefaultListen, "serve on `ADDR` (HOST:PORT; a loopback address unless --listen-public)")
	public := cc.fs.Bool("listen-public", false, "allow a non-loopback address and any Host header (no authentication: put it behind your own authenticating proxy)")
	actions := cc.fs.Bool("allow-actions", false, "enable the coordinator actions (cancel, redrive) as CSRF-protected forms; read-only without it")
	metricsProductions := cc.fs.Int("metrics-productions", web.DefaultMetricsProductions,
		"label at most `N` productions by name in /metrics (the busiest); the rest are summed under production=\""+web.OtherProductions+"\"")
	if done, err := parseOnly(cc); done || err != nil {
		return err
	}
	if *metricsProductions < 1 {
		return usagef(cc.cmd.name, "--metrics-productions %d: give at least 1", *metricsProductions)
	}
	if err := web.CheckListen(*listen, *public); err != nil {
		return usagef(cc.cmd.name, "%v", err)
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	// The status page only reads (docs/web.md): it leaves pruning to the
	// workers' processes and to leases prune, and so runs with a database
	// role that may only read.
	a.SetPruneInterval(0)
	s, err := web.New(web.Config{Authority: a, Listen: *listen, Public: *public, AllowActions: *actions,
		MetricsProductions: *metricsProductions})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return s.ListenAndServe(ctx, func(addr net.Addr) {
		mode := "read-only"
		if *actions {
			mode = "coordinator actions enabled"
		}
		fmt.Printf("leases serve: http://%s/ (%s; stop with Ctrl-C)\n", addr, mode)
	})
}
