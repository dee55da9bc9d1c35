// Change notices of the PostgreSQL store: a commit that may make a job
// claimable sends NOTIFY with it, and a watcher LISTENs on a connection of
// its own for the notices of every host.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/libleases/libleases/core/store"
)

var (
	_ store.Watcher  = (*DB)(nil)
	_ store.Notifier = (*Tx)(nil)
	_ store.Looker   = (*DB)(nil)
)

// channelSQL names the schema's notification channel. NOTIFY reaches every
// session of the database, so each schema (each authority) has a channel of
// its own; a channel name is an identifier of at most 63 bytes, and a schema
// name may be as long, so the channel carries a digest of the schema's name.
const channelSQL = `'leases_' || left(md5(current_schema()), 24)`

// listenApplicationName tells a watcher's session apart in pg_stat_activity.
const listenApplicationName = "libleases-listen"

// The watcher reconnects after a lost connection, waiting longer after each
// failure in a row (jittered), up to listenRetryMax.
const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Claimable records a notice for productionID, sent with the commit.
func (t *Tx) Claimable(ctx context.Context, productionID string) error {
	if !slices.Contains(t.notices, productionID) {
		t.notices = append(t.notices, productionID)
	}
	return nil
}

// commitPipelined sends the held writes, the transaction's notices and
// COMMIT in one round trip: the server delivers the notices when, and only
// if, it commits.
func (t *Tx) commitPipelined(ctx context.Context) (pgconn.CommandTag, error) {
	qs := make([]queued, 0, len(t.notices)+1)
	for _, id := range t.notices {
		qs = append(qs, queued{`SELECT pg_notify(` + channelSQL + `, $1)`, []any{id}})
	}
	qs = append(qs, queued{"COMMIT", nil})
	br, err := t.conn.pipeline(ctx, qs...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer br.Close()
	for range t.notices {
		if _, err := br.Exec(); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				// The server refused the notice, so it skipped the COMMIT
				// after it: nothing was written (releasing the connection
				// inside its aborted transaction discards it).
				return pgconn.CommandTag{}, fmt.Errorf("%w: notify: %v", store.ErrRetry, err)
			}
			return pgconn.CommandTag{}, err
		}
	}
	return br.Exec()
}

// MissesChanges: notices sent while the watcher's connection was down
// (or dying unnoticed) are lost.
func (db *DB) MissesChanges() bool { return true }

// Watch listens for the notices of this schema's channel until stop is
// called, on a connection of its own (never one of the pool's). After every
// (re)connection it reports "": notices sent while nobody listened are lost.
func (db *DB) Watch(changed func(productionID string)) (stop func()) {
	return store.Run(func(ctx context.Context) { db.listen(ctx, changed) })
}

func (db *DB) listen(ctx context.Context, changed func(string)) {
	wait := listenRetryMin
	for {
		if db.listenOnce(ctx, changed) {
			wait = listenRetryMin
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listenOnce connects, listens and reports notices until the connection
// fails or ctx ends. It reports whether it got as far as listening.
func (db *DB) listenOnce(ctx context.Context, changed func(string)) bool {
	cfg := db.listenCfg.Copy()
	cfg.RuntimeParams["application_name"] = listenApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	var channel string
	if err := conn.QueryRow(ctx, `SELECT `+channelSQL).Scan(&channel); err != nil {
		return false
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false
	}
	changed("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		changed(n.Payload)
	}
}
