package pgstore

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// heldKind says which held writes of one flush may be sent as one
// statement: every statement costs the server a bind, an executor start
// (for a write of leases_jobs or leases_events: opening each index and
// preparing each partial index's predicate) and a message, however few
// rows it writes. A worker loop's step holds the completion's update and
// event and the claim's update and event until its pre-commit sample
// (queryRowAhead), and sends them as two statements.
type heldKind int

const (
	heldOther     heldKind = iota
	heldJobUpdate          // UpdateJob: args are jobUpdateArgs
	heldEvent              // InsertEvent: args are eventArgs
	heldRegEvent           // the transaction's first event, which registers it (queries.go)
)

// jobUpdateArgs is how many arguments a held job update has; the last is
// the job's id.
const jobUpdateArgs = 12

// eventArgs is how many arguments a held event insert has.
const eventArgs = 7

// coalesce makes the job updates of ws one statement, at the place of the
// first of them, and its event inserts one statement, at the place of the
// first of them. A flush sends every held write before the statement that
// needs an answer, so what matters is the order of the writes that can see
// each other: an update of leases_jobs reads only its own row (by its key,
// a row this transaction holds locked: it waits for nothing), an event
// insert reads nothing and draws its seq from the sequence, so the events
// keep their order (VALUES rows are inserted in order) and the first
// event still registers the writer before any number is drawn. Two updates
// of one job stay apart (an UPDATE … FROM changes a row once), as does a
// registration that is not the first event.
func coalesce(ws []heldWrite) []heldWrite {
	var ups, evs []int
	ids := map[string]bool{}
	distinct := true
	for i, w := range ws {
		switch w.kind {
		case heldJobUpdate:
			id, _ := w.args[jobUpdateArgs-1].(string)
			distinct = distinct && !ids[id]
			ids[id] = true
			ups = append(ups, i)
		case heldEvent, heldRegEvent:
			if w.kind == heldRegEvent && len(evs) > 0 {
				return ws
			}
			evs = append(evs, i)
		}
	}
	mergeUps, mergeEvs := len(ups) > 1 && distinct, len(evs) > 1
	if !mergeUps && !mergeEvs {
		return ws
	}
	out := make([]heldWrite, 0, len(ws))
	for i, w := range ws {
		switch {
		case w.kind == heldJobUpdate && mergeUps:
			if i == ups[0] {
				out = append(out, mergeJobUpdates(ws, ups))
			}
		case (w.kind == heldEvent || w.kind == heldRegEvent) && mergeEvs:
			if i == evs[0] {
				out = append(out, mergeEvents(ws, evs))
			}
		default:
			out = append(out, w)
		}
	}
	return out
}

// rowsChanged is the check of a write that must change exactly n rows.
func rowsChanged(what string, n int) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != int64(n) {
			return fmt.Errorf("%s changed %d rows, not %d", what, tag.RowsAffected(), n)
		}
		return nil
	}
}

// manyRowsChanged is rowsChanged for a merged write, its name a format of
// the row count: the name is built only when the check fails.
func manyRowsChanged(format string, n int) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != int64(n) {
			return fmt.Errorf(format+" changed %d rows, not %d", n, tag.RowsAffected(), n)
		}
		return nil
	}
}

// builtRows is how many rows of a merged write have their statement's text
// built once, at start: a step merges two or three writes of a kind, the
// flush of a batch a few more, and the same text is then also the same
// entry of each connection's prepared-statement cache.
const builtRows = 16

var (
	jobUpdatesText [builtRows + 1]string
	eventsText     [2][builtRows + 1]string // [reg]
)

func init() {
	for n := 1; n <= builtRows; n++ {
		jobUpdatesText[n] = buildJobUpdatesSQL(n)
		eventsText[0][n] = buildEventsSQL(n, false)
		eventsText[1][n] = buildEventsSQL(n, true)
	}
}

// placeholders is the VALUES rows of n rows of the given column types.
func placeholders(n int, types []string) string {
	rows := make([]string, n)
	for r := range rows {
		cols := make([]string, len(types))
		for c, typ := range types {
			cols[c] = fmt.Sprintf("$%d%s", r*len(types)+c+1, typ)
		}
		rows[r] = "(" + strings.Join(cols, ", ") + ")"
	}
	return strings.Join(rows, ", ")
}

var jobUpdateTypes = []string{"::text", "::bytea", "::text", "::bigint", "::bigint", "::bigint", "::text",
	"::bigint", "::bigint", "::bigint", "::boolean", "::text"}

// jobUpdatesSQL updates n jobs, each as updateJobSQL does.
func jobUpdatesSQL(n int) string {
	if n <= builtRows {
		return jobUpdatesText[n]
	}
	return buildJobUpdatesSQL(n)
}

func buildJobUpdatesSQL(n int) string {
	return `UPDATE leases_jobs j SET state = v.state, claim_hash = v.claim_hash, worker = v.worker,
		claimed_unix_us = v.claimed, expiry_unix_us = v.expiry, attempts = v.attempts, reason = v.reason,
		updated_unix_us = v.updated, claimable_unix_us = v.claimable, ready_unix_us = v.ready, due = v.due
	FROM (VALUES ` + placeholders(n, jobUpdateTypes) + `)
		AS v (state, claim_hash, worker, claimed, expiry, attempts, reason, updated, claimable, ready, due, id)
	WHERE j.id = v.id`
}

func mergeJobUpdates(ws []heldWrite, at []int) heldWrite {
	args := make([]any, 0, len(at)*jobUpdateArgs)
	for _, i := range at {
		args = append(args, ws[i].args...)
	}
	return heldWrite{sql: jobUpdatesSQL(len(at)), args: args, rows: len(at), kind: heldJobUpdate,
		check: manyRowsChanged("the update of %d jobs", len(at))}
}

var eventTypes = []string{"::bigint", "::text", "::text", "::text", "::text", "::bigint", "::text"}

// eventsSQL inserts n events in order, as insertEvent does, registering
// the writer first (reg) as registerAndInsertEvent does: the row of reg
// is read before any row is inserted, so both locks are held before the
// first number is drawn.
func eventsSQL(n int, reg bool) string {
	if n <= builtRows {
		if reg {
			return eventsText[1][n]
		}
		return eventsText[0][n]
	}
	return buildEventsSQL(n, reg)
}

func buildEventsSQL(n int, reg bool) string {
	if !reg {
		return `INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail)
			VALUES ` + placeholders(n, eventTypes)
	}
	return registerEvents + ` INSERT INTO leases_events (at_unix_us, production_id, job_id, kind, worker, expiry_unix_us, detail)
		SELECT v.* FROM reg, (VALUES ` + placeholders(n, eventTypes) + `) AS v`
}

func mergeEvents(ws []heldWrite, at []int) heldWrite {
	args := make([]any, 0, len(at)*eventArgs)
	for _, i := range at {
		args = append(args, ws[i].args...)
	}
	kind := ws[at[0]].kind
	return heldWrite{sql: eventsSQL(len(at), kind == heldRegEvent), args: args, rows: len(at), kind: kind,
		check: manyRowsChanged("the insert of %d events", len(at))}
}
