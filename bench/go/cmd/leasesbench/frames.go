// The frames row: WAL frames (pages) written per claim commit and per
// completion commit, for the core and the floor (docs/PERFORMANCE.md
// section 1). Not timed: it counts what each commit writes.
package main

import (
	"context"
	"database/sql"
	"flag"
	"os"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/libleases/libleases/core/store/stores"
)

// holdSnapshot opens a reader on path and keeps a snapshot until the
// returned handle is closed: no writer can start the WAL over meanwhile, so
// mxFrame (walFrames) grows by every frame a commit writes.
func holdSnapshot(path string) *sql.DB {
	r, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	must(err)
	r.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := r.Conn(ctx)
	must(err)
	_, err = conn.ExecContext(ctx, `BEGIN`)
	must(err)
	var n int
	must(conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n))
	return r
}

// openCoreHeld opens the core on a SQLite file with opts and the
// projection of its event log held (sqlitestore.DB.HoldProjection): its
// caller projects.
func openCoreHeld(path string, opts stores.Options) (*core.Authority, *sqlitestore.DB) {
	var s *sqlitestore.DB
	a, err := core.OpenStore(path, "SQLite", func() (store.Backend, error) {
		b, err := stores.Open(path, opts)
		if err == nil {
			s = b.(*sqlitestore.DB)
			s.HoldProjection(true)
		}
		return b, err
	})
	must(err)
	return a, s
}

func must1[T any](_ T, err error) { must(err) }

// framesOf runs commit and returns the WAL frames it wrote.
func framesOf(db string, commit func()) int64 {
	before := walFrames(db)
	commit()
	return walFrames(db) - before
}

func cmdFrames(args []string) {
	fs := flag.NewFlagSet("frames", flag.ExitOnError)
	db := fs.String("db", "", "database file (created)")
	floor := fs.Bool("floor", false, "count the floor's commits instead of the core's")
	n := fs.Int("n", 100, "cycles (at most a few hundred: the WAL cannot start over meanwhile)")
	walCopy := fs.String("wal-copy", "", "copy the core's WAL here at the end (its frames name their pages: map them to b-trees with dbstat)")
	must(fs.Parse(args))
	var claims, completions, projected, projEvents int64
	if *floor {
		d := openFloor(*db, "NORMAL", *n)
		defer d.Close()
		defer holdSnapshot(*db).Close()
		for i := 0; i < *n; i++ {
			var id string
			var claim []byte
			claims += framesOf(*db, func() { id, claim = floorClaim(d) })
			completions += framesOf(*db, func() { floorComplete(d, id, claim) })
		}
	} else {
		fillCore(*db, *n)
		a, s := openCoreHeld(*db, stores.Options{Synchronous: "NORMAL"})
		defer a.Close()
		must1(s.Project(context.Background()))
		defer holdSnapshot(*db).Close()
		// The projection of the event log's indexes runs in its own
		// transactions (docs/schema.md, "Schema 13"): held here, so each
		// window holds one commit alone, and run by hand once as many
		// events as wake it were recorded, in a window of its own.
		for i := 0; i < *n; i++ {
			var l *core.Lease
			claims += framesOf(*db, func() {
				var err error
				l, err = a.Claim(prod, worker, leaseFor)
				must(err)
			})
			completions += framesOf(*db, func() { must(l.Complete(core.Facts{})) })
			if (2*(i+1))%sqlitestore.ProjectAfter == 0 || i == *n-1 {
				projected += framesOf(*db, func() {
					k, err := s.Project(context.Background())
					must(err)
					projEvents += k
				})
			}
		}
		if *walCopy != "" {
			b, err := os.ReadFile(*db + "-wal")
			must(err)
			must(os.WriteFile(*walCopy, b, 0o644))
		}
	}
	extra := map[string]float64{
		"claim_frames":    float64(claims) / float64(*n),
		"complete_frames": float64(completions) / float64(*n),
	}
	if projEvents > 0 {
		extra["projector_frames_per_event"] = float64(projected) / float64(projEvents)
	}
	emit(result{Ops: *n, Extra: extra})
}
