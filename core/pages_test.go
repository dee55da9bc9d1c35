package core

import (
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// walPages is the number of frames in path's WAL (each is one page a commit
// wrote) and the page number of each frame past from.
func walPages(t *testing.T, path string, from int) (int, []uint32) {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	if os.IsNotExist(err) {
		return 0, nil
	}
	require.NoError(t, err)
	if len(b) < 32 {
		return 0, nil
	}
	page := int(binary.BigEndian.Uint32(b[8:12]))
	n := 0
	var pages []uint32
	for off := 32; off+24+page <= len(b); off += 24 + page {
		if n >= from {
			pages = append(pages, binary.BigEndian.Uint32(b[off:off+4]))
		}
		n++
	}
	return n, pages
}

// btreesWritten runs commit on the SQLite file at path and names the
// b-trees (tables and indexes) whose pages it wrote to the WAL. A reader
// holds a snapshot meanwhile, so the WAL only grows (nothing is
// checkpointed); each page is named by dbstat right after the commit. The
// first page (the file's header, which records its size) and the pointer
// maps of incremental auto-vacuum name no b-tree of the schema and are left
// out.
func btreesWritten(t *testing.T, path string, commit func()) []string {
	t.Helper()
	ctx := context.Background()
	hold, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer hold.Close()
	conn, err := hold.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	var n int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n))
	defer conn.ExecContext(ctx, `ROLLBACK`) //nolint:errcheck

	before, _ := walPages(t, path, 0)
	commit()
	_, pages := walPages(t, path, before)
	require.NotEmpty(t, pages, "the commit wrote to the WAL")

	look, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer look.Close()
	seen := map[string]bool{}
	for _, p := range pages {
		var name string
		err := look.QueryRowContext(ctx, `SELECT name FROM dbstat WHERE pageno = ?`, p).Scan(&name)
		if err == sql.ErrNoRows {
			continue // a pointer map page
		}
		require.NoError(t, err)
		if name != "sqlite_schema" {
			seen[name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// cycleBTrees runs claim → complete cycles on a fresh SQLite authority and
// names the b-trees its claim commits and its completion commits wrote.
func cycleBTrees(t *testing.T) (claim, complete []string) {
	t.Helper()
	f := newFixture(t)
	f.request(10)
	claimTrees := map[string]bool{}
	completeTrees := map[string]bool{}
	for i := 0; i < 5; i++ {
		var l *Lease
		f.clk.advance(time.Millisecond) // every commit records a new mark
		for _, name := range btreesWritten(t, f.path, func() { l = f.claim("w", time.Hour) }) {
			claimTrees[name] = true
		}
		f.clk.advance(time.Millisecond)
		for _, name := range btreesWritten(t, f.path, func() { require.NoError(t, l.Complete(Facts{})) }) {
			completeTrees[name] = true
		}
	}
	names := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	return names(claimTrees), names(completeTrees)
}

// TestClaimsAreIndexedOnceSoAClaimAndACompletionWriteOneIndexOfClaims pins
// the b-trees a claim commit and a completion commit write on SQLite: each
// costs at least a page of the commit. The production's claims have one
// index, by the time a lapse returns the job, which also holds each claim's
// expiry and worker for the status page; no second index of claims by
// expiry. The event log's secondary indexes are written by the projection
// that trails the log, not by the commit (docs/schema.md, "Schema 13").
func TestClaimsAreIndexedOnceSoAClaimAndACompletionWriteOneIndexOfClaims(t *testing.T) {
	pagesAreSQLites(t)
	claim, complete := cycleBTrees(t)
	require.Equal(t, []string{
		"events", "jobs", "jobs_claimable", "jobs_claimed_ready", "jobs_due", "meta",
	}, claim, "a claim commit")
	require.Equal(t, []string{
		"attempts", "events", "jobs", "jobs_claimable", "jobs_claimed_ready", "meta",
	}, complete, "a completion commit")
}

// TestAnEventIsIndexedByKindOnceSoNoCommitWritesAnIndexOfEventsByTime: the
// per-minute counts read the index of a kind's events in seq order (its
// in-order events' times never decrease along seq; late ones have a partial
// index of their own), so an event in time order is written into one index
// by kind, not a second one by kind and time; and since the index by kind
// is written by the projection that trails the log (docs/schema.md,
// "Schema 13"), a commit in time order writes no index by kind at all.
func TestAnEventIsIndexedByKindOnceSoNoCommitWritesAnIndexOfEventsByTime(t *testing.T) {
	pagesAreSQLites(t)
	claim, complete := cycleBTrees(t)
	for _, trees := range [][]string{claim, complete} {
		var byKind []string
		for _, name := range trees {
			if strings.HasPrefix(name, "events_by_kind") {
				byKind = append(byKind, name)
			}
		}
		require.Empty(t, byKind, "%v", trees)
	}
}

// TestACommitRecordsItsEventWithoutWritingTheEventLogsIndexes: every
// commit still writes its event into the log, and none of the log's
// secondary indexes (by production, job, kind and worker): the projection
// that trails the log writes those in its own transactions.
func TestACommitRecordsItsEventWithoutWritingTheEventLogsIndexes(t *testing.T) {
	pagesAreSQLites(t)
	claim, complete := cycleBTrees(t)
	for _, trees := range [][]string{claim, complete} {
		require.Contains(t, trees, "events", "the commit records its event")
		for _, name := range trees {
			require.False(t, strings.HasPrefix(name, "events_by_"), "%v", trees)
		}
	}
}

// TestAnAttemptIsWrittenOnceIntoAHistoryOrderedByJob: the attempt history
// is one b-tree keyed by job and the attempt's number within it, so a
// completion writes its attempt once, not into a table and an index by job.
func TestAnAttemptIsWrittenOnceIntoAHistoryOrderedByJob(t *testing.T) {
	pagesAreSQLites(t)
	_, complete := cycleBTrees(t)
	var history []string
	for _, name := range complete {
		if strings.HasPrefix(name, "attempts") {
			history = append(history, name)
		}
	}
	require.Equal(t, []string{"attempts"}, history, "%v", complete)
}

// pagesAreSQLites skips a test of the b-trees and pages a SQLite commit
// writes in the PostgreSQL pass: a PostgreSQL commit writes no pages of a
// file of its own; its statements and round trips per commit are bounded by
// pg_roundtrips_test.go instead.
func pagesAreSQLites(t *testing.T) {
	t.Helper()
	if testingPostgres() {
		t.Skip("pages per commit are a SQLite file's: the PostgreSQL pass bounds its commits' statements and round trips in pg_roundtrips_test.go")
	}
}
