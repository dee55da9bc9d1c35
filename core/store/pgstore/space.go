// Space of deleted rows: PostgreSQL reuses a deleted row's space only once
// a vacuum has passed over its table. The server's autovacuum looks at each
// database once per autovacuum_naptime (a minute by default, a server-wide
// setting the library does not change), so a store that prunes more often
// than that would grow between its wakes. The store vacuums the tables a
// prune deleted from itself, once enough has gone (docs/postgres.md,
// "Space after pruning").
package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

const (
	// vacuumMinRows and vacuumShare decide when the rows a prune deleted
	// from a table are worth a vacuum: once those deleted since this
	// store's last vacuum of it are at least vacuumMinRows and at least
	// vacuumShare of the rows it holds (pg_class.reltuples, which each
	// vacuum updates). A vacuum reads the table's pages that changed and
	// every index whole, so its cost grows with the table: by the share,
	// each deleted row pays a bounded part of it, and the deleted rows not
	// yet reusable stay a bounded share of the table (as autovacuum's own
	// scale factor does, at the pruner's cadence instead of the naptime's).
	vacuumMinRows = 128
	vacuumShare   = 0.1
)

// jobTables are vacuumed together when a prune's deleted jobs are enough:
// a pruned job takes its facts, outputs and attempts with it.
var jobTables = []string{"leases_jobs", "leases_facts", "leases_outputs", "leases_attempts"}

// deadRows counts the rows this store's prunes deleted since its last
// vacuum of each group of tables.
type deadRows struct {
	mu           sync.Mutex
	jobs, events int64
}

// ReuseDeadSpace (store.DeadSpaceReuser) is told how many jobs and events
// a prune deleted. Once the count since the last vacuum of a table passes
// the share above, it runs a plain VACUUM of it (never FULL: plain VACUUM
// takes a lock that blocks no read or write of rows, only another vacuum or
// a change of the table's definition; SKIP_LOCKED passes over a table whose
// lock another vacuum holds, an autovacuum doing the same work; TRUNCATE
// false keeps it from the one step of a plain vacuum that locks the table
// against everyone, cutting empty pages off its end, which a queue whose
// new rows reuse the freed space has little use for). VACUUM
// needs the role to own the tables (or be a superuser): a role that does
// not vacuums nothing, and note says so; the deleted rows' space is then
// autovacuum's to bring back, within its naptime. It returns how many
// tables it vacuumed. Its error is the vacuum's, and it keeps the counts
// for the next prune.
func (db *DB) ReuseDeadSpace(ctx context.Context, jobs, events int64) (vacuumed int, note string, err error) {
	db.dead.mu.Lock()
	defer db.dead.mu.Unlock()
	db.dead.jobs += jobs
	db.dead.events += events
	if db.dead.jobs < vacuumMinRows && db.dead.events < vacuumMinRows {
		return 0, "", nil
	}
	var relJobs, relEvents float64
	if err := db.pool.QueryRow(ctx, `SELECT
		COALESCE((SELECT reltuples FROM pg_class WHERE oid = to_regclass('leases_jobs')), 0),
		COALESCE((SELECT reltuples FROM pg_class WHERE oid = to_regclass('leases_events')), 0)`).
		Scan(&relJobs, &relEvents); err != nil {
		return 0, "", classify(err)
	}
	var tables []string
	doJobs := db.dead.jobs >= vacuumMinRows && float64(db.dead.jobs) >= vacuumShare*relJobs
	doEvents := db.dead.events >= vacuumMinRows && float64(db.dead.events) >= vacuumShare*relEvents
	if doJobs {
		tables = append(tables, jobTables...)
	}
	if doEvents {
		tables = append(tables, "leases_events")
	}
	if len(tables) == 0 {
		return 0, "", nil
	}
	var notOwned []string
	if err := db.pool.QueryRow(ctx, `SELECT COALESCE(array_agg(c.relname ORDER BY c.relname), '{}')
		FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1)
		AND NOT pg_has_role(c.relowner, 'USAGE')`, tables).Scan(&notOwned); err != nil {
		return 0, "", classify(err)
	}
	if len(notOwned) > 0 {
		// Counted again from nothing: the note comes back once per share
		// of the table, not after every prune.
		db.dead.jobs, db.dead.events = 0, 0
		var user string
		_ = db.pool.QueryRow(ctx, `SELECT current_user`).Scan(&user)
		return 0, fmt.Sprintf("the space of the deleted rows is left to the server's autovacuum: the role %q does not own %s, and VACUUM needs the owner (or a superuser)",
			user, strings.Join(notOwned, ", ")), nil
	}
	if err := db.vacuum(ctx, tables); err != nil {
		return 0, "", err
	}
	if doJobs {
		db.dead.jobs = 0
	}
	if doEvents {
		db.dead.events = 0
	}
	return len(tables), "", nil
}

// vacuumCostDelay is the pause of the store's vacuums, autovacuum's own
// (autovacuum_vacuum_cost_delay's default): each sleeps that long every
// vacuum_cost_limit of cost (a page read, a page dirtied), where a plain
// VACUUM never pauses. Without it a vacuum read the pruned tables and every
// index whole in one burst of the server's CPU, and the workers' claims
// that overlapped it waited for that CPU (docs/PERFORMANCE.md, section 12).
const vacuumCostDelay = "2ms"

// vacuum runs one plain VACUUM of tables on a connection of its own, with
// no statement deadline (a vacuum of a large table may take longer than any
// statement's bound; ctx ends it), pausing as autovacuum does
// (vacuumCostDelay).
func (db *DB) vacuum(ctx context.Context, tables []string) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return classify(err)
	}
	ok := false
	defer func() {
		if !ok {
			// Its session may still carry the setting, or be mid-statement.
			_ = conn.Hijack().Close(context.Background())
			return
		}
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0; SET vacuum_cost_delay = '`+vacuumCostDelay+`'`); err != nil {
		return classify(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM (SKIP_LOCKED, TRUNCATE false) `+strings.Join(tables, ", ")); err != nil {
		return classify(err)
	}
	if _, err := conn.Exec(ctx, `RESET statement_timeout; RESET vacuum_cost_delay`); err != nil {
		return classify(err)
	}
	ok = true
	return nil
}
