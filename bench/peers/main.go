// Command peersbench runs the peer queues' rows of `make bench`: goqite v0.4.0
// (Receive + Delete, two commits per job) and River v0.51.2 with its SQLite
// driver (one job through a started client with a no-op worker), and River
// v0.51.2 with its PostgreSQL driver riverpgxv5 (river-pg.go). It lives in
// its own module so the library's go.mod does not carry the peers.
//
//	peersbench goqite|river -db FILE -n N -mode FULL|NORMAL|defaults
//	peersbench river-pg -db postgres://… -n N -w W -mode bench|defaults
//
// FULL and NORMAL open the file with our pragmas (WAL, that synchronous
// level, busy_timeout, foreign keys, BEGIN IMMEDIATE); "defaults" is a plain
// sql.Open of the file and the peer's own default settings. It prints one
// JSON line like every row of the bench: {"ops":N,"secs":S}.
package main

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"maragu.dev/goqite"
	_ "modernc.org/sqlite"
)

// goqiteSchema is goqite v0.4.0's schema_sqlite.sql (the module ships it as
// a file, not as Go), copied verbatim.
//
//go:embed goqite_schema_sqlite.sql
var goqiteSchema string

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peersbench goqite|river -db FILE -n N -mode FULL|NORMAL|defaults, or river-pg -db URL -n N -w W -mode bench|defaults")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dbPath := fs.String("db", "", "database file (created)")
	n := fs.Int("n", 200, "jobs")
	mode := fs.String("mode", "FULL", "FULL, NORMAL (our pragmas) or defaults")
	w := fs.Int("w", 16, "handlers (river-pg: MaxWorkers)")
	must(fs.Parse(os.Args[2:]))
	if os.Args[1] == "river-pg" {
		secs, serverNS := runRiverPG(*dbPath, *n, *w, *mode)
		b, _ := json.Marshal(map[string]any{"ops": *n, "secs": secs, "cpu_ns": float64(timedCPU) / float64(*n),
			"extra": map[string]float64{"server_cpu_ns": serverNS / float64(*n)}})
		fmt.Println(string(b))
		return
	}
	db := open(*dbPath, *mode)
	defer db.Close()
	var secs float64
	switch os.Args[1] {
	case "goqite":
		secs = runGoqite(db, *n)
	case "river":
		secs = runRiver(db, *n, *mode)
	default:
		fail(fmt.Errorf("unknown peer %q", os.Args[1]))
	}
	b, _ := json.Marshal(map[string]any{"ops": *n, "secs": secs, "cpu_ns": float64(timedCPU) / float64(*n)})
	fmt.Println(string(b))
}

func open(path, mode string) *sql.DB {
	abs, err := filepath.Abs(path)
	must(err)
	dsn := abs
	if mode != "defaults" {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+mode+")")
		q.Add("_pragma", "foreign_keys(1)")
		q.Set("_txlock", "immediate")
		dsn = (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
	}
	db, err := sql.Open("sqlite", dsn)
	must(err)
	// One connection: River's SQLite driver documents it as the way to avoid
	// SQLITE_BUSY; for goqite it is what a single worker uses anyway.
	db.SetMaxOpenConns(1)
	return db
}

func runGoqite(db *sql.DB, n int) float64 {
	ctx := context.Background()
	_, err := db.Exec(goqiteSchema)
	must(err)
	q := goqite.New(goqite.NewOpts{DB: db, Name: "bench", Timeout: time.Hour})
	tx, err := db.Begin()
	must(err)
	for i := 0; i < n; i++ {
		must(q.SendTx(ctx, tx, goqite.Message{Body: []byte("payload-0123456789")}))
	}
	must(tx.Commit())
	cpu0, start := cpuNS(), time.Now()
	for i := 0; i < n; i++ {
		m, err := q.Receive(ctx)
		must(err)
		if m == nil {
			fail(fmt.Errorf("goqite: queue empty after %d of %d", i, n))
		}
		must(q.Delete(ctx, m.ID))
	}
	timedCPU = cpuNS() - cpu0
	return time.Since(start).Seconds()
}

type noopArgs struct {
	Payload string `json:"payload"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (*noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func runRiver(db *sql.DB, n int, mode string) float64 {
	ctx := context.Background()
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, nil)
	must(err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	must(err)
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Workers: workers,
	}
	if mode != "defaults" {
		// SQLite has no LISTEN/NOTIFY, so River polls: at its defaults it
		// fetches at most every 100 ms. Our-pragma rows poll as fast as it allows.
		cfg.FetchCooldown = river.FetchCooldownMin
		cfg.FetchPollInterval = 5 * time.Millisecond
	}
	client, err := river.NewClient(driver, cfg)
	must(err)
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{Payload: "payload-0123456789"}}
	}
	_, err = client.InsertMany(ctx, params)
	must(err)
	events, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	secs := runRiverTimed(ctx, client, events, n, "river")
	stopCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	must(client.Stop(stopCtx))
	return secs
}

// runRiverTimed starts client and waits for n completion events, at most
// ten minutes (then fails, naming who): the seconds from Start to the last
// one. It sets timedCPU to the process CPU time of that span.
func runRiverTimed[TTx any](ctx context.Context, client *river.Client[TTx], events <-chan *river.Event, n int, who string) float64 {
	cpu0, start := cpuNS(), time.Now()
	must(client.Start(ctx))
	timeout := time.After(10 * time.Minute)
	for done := 0; done < n; {
		select {
		case <-events:
			done++
		case <-timeout:
			fail(fmt.Errorf("%s: %d of %d jobs completed in 10 minutes", who, done, n))
		}
	}
	secs := time.Since(start).Seconds()
	timedCPU = cpuNS() - cpu0
	return secs
}

// timedCPU is the process CPU time of the timed loop.
var timedCPU int64

// cpuNS is this process's CPU time (user+sys) so far.
func cpuNS() int64 {
	var ru syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func must(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "peersbench:", err)
	os.Exit(1)
}
