// River on PostgreSQL (riverpgxv5): n no-op jobs inserted before the timer,
// then a started client with MaxWorkers w runs them; timed from Start to
// the last completion event (River completes in batches, after the handler).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// runRiverPG returns the timed seconds and the server CPU (ns) its
// connections spent meanwhile. mode "bench" is River's own benchmark's fetch
// settings (FetchCooldown 2 ms, FetchPollInterval 20 ms); "defaults" leaves
// them at River's defaults (100 ms, 1 s). Both wake on LISTEN/NOTIFY.
func runRiverPG(base string, n, w int, mode string) (float64, float64) {
	ctx := context.Background()
	var b [6]byte
	_, err := rand.Read(b[:])
	must(err)
	schema := "river_" + hex.EncodeToString(b[:])
	app := "peersbench-" + schema
	admin, err := pgx.Connect(ctx, base)
	must(err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	must(err)
	defer admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	u, err := url.Parse(base)
	must(err)
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", app)
	q.Set("pool_max_conns", strconv.Itoa(max(w, 4))) // pgxpool's default is max(4, CPUs)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	must(err)
	defer pool.Close()

	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	must(err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	must(err)
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: w}},
		Workers: workers,
		Schema:  schema,
	}
	switch mode {
	case "bench":
		cfg.FetchCooldown = 2 * time.Millisecond
		cfg.FetchPollInterval = 20 * time.Millisecond
	case "defaults":
	default:
		fail(fmt.Errorf("river-pg: unknown mode %q", mode))
	}
	client, err := river.NewClient(driver, cfg)
	must(err)
	for done := 0; done < n; {
		k := min(1000, n-done)
		params := make([]river.InsertManyParams, k)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{Payload: "payload-0123456789"}}
		}
		_, err = client.InsertMany(ctx, params)
		must(err)
		done += k
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 16, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	srv0 := serverCPU(ctx, admin, app)
	secs := runRiverTimed(ctx, client, events, n, "river-pg")
	var srv int64
	for pid, c := range serverCPU(ctx, admin, app) {
		srv += c - srv0[pid]
	}
	stopCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	must(client.Stop(stopCtx))
	return secs, float64(srv)
}

// serverCPU is the CPU (user+sys, ns) of each server process serving a
// connection named app, from /proc (a server on this host; empty otherwise).
func serverCPU(ctx context.Context, c *pgx.Conn, app string) map[int32]int64 {
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	must(err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(err)
	cpu := map[int32]int64{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cpu[pid] = (ut + st) * int64(time.Second) / 100 // USER_HZ
	}
	return cpu
}
