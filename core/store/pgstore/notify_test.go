package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// watch starts db's watcher and waits for its first report, which says it
// listens.
func watch(t *testing.T, db *DB) <-chan string {
	t.Helper()
	changes := make(chan string, 100)
	stop := db.Watch(func(id string) { changes <- id })
	t.Cleanup(stop)
	require.Equal(t, "", next(t, changes), "the watcher reports \"\" once it listens")
	return changes
}

func next(t *testing.T, c <-chan string) string {
	t.Helper()
	return testwait.Receive(t, c, testwait.EventuallyBound, "the watcher")
}

func quiet(t *testing.T, c <-chan string) {
	t.Helper()
	select {
	case id := <-c:
		t.Fatalf("unexpected report %q", id)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestANoticeIsSentWithItsCommitAndNeverWithoutIt(t *testing.T) {
	db, _ := open(t, 0)
	changes := watch(t, db)
	tx := begin(t, db)
	require.NoError(t, tx.Claimable(ctx, "prod-1"))
	require.NoError(t, tx.Claimable(ctx, "prod-1"))
	_, err := tx.HWM(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	quiet(t, changes)

	tx = begin(t, db)
	_, err = tx.HWM(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Claimable(ctx, "prod-1"))
	require.NoError(t, tx.Claimable(ctx, "prod-2"))
	quiet(t, changes) // not before the commit
	require.NoError(t, tx.Commit())
	got := map[string]bool{next(t, changes): true, next(t, changes): true}
	require.Equal(t, map[string]bool{"prod-1": true, "prod-2": true}, got)
	quiet(t, changes) // once each
}

func TestNoticesStayInTheirSchema(t *testing.T) {
	db, _ := open(t, 0)
	other, _ := open(t, 0)
	changes := watch(t, db)
	tx := begin(t, other)
	_, err := tx.HWM(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Claimable(ctx, "elsewhere"))
	require.NoError(t, tx.Commit())
	quiet(t, changes)
}

func TestTheWatcherReconnectsAfterItsConnectionIsLost(t *testing.T) {
	db, u := open(t, 0)
	changes := watch(t, db)
	terminateWatcher(t, u)
	require.Equal(t, "", next(t, changes), "listening again, it reports that notices may have been lost")
	tx := begin(t, db)
	_, err := tx.HWM(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Claimable(ctx, "prod-1"))
	require.NoError(t, tx.Commit())
	require.Equal(t, "prod-1", next(t, changes))
}

func TestTheStoresClockIsTheServersOutsideATransaction(t *testing.T) {
	db, _ := open(t, 0)
	before := time.Now().Add(-time.Minute).UnixMicro()
	v, err := db.Now(ctx)
	require.NoError(t, err)
	require.Greater(t, v, before)
}

func TestALookInOneRoundTripAgreesWithItsParts(t *testing.T) {
	db, _ := open(t, 0)
	pid, ids := seed(t, db, 3)
	check := func(wantClaimable bool, wantWake int64) {
		t.Helper()
		now, mark, claimable, at, ok, err := db.Look(ctx, pid)
		require.NoError(t, err)
		hwm, err := db.HWM(ctx)
		require.NoError(t, err)
		require.Equal(t, hwm, mark)
		has, err := db.HasClaimable(ctx, pid, now)
		require.NoError(t, err)
		require.Equal(t, has, claimable)
		require.Equal(t, wantClaimable, claimable)
		next, nextOK, err := db.NextWakeAt(ctx, pid)
		require.NoError(t, err)
		require.Equal(t, nextOK, ok)
		require.Equal(t, next, at)
		require.Equal(t, wantWake, at)
	}
	check(true, 0)
	now, err := db.Now(ctx)
	require.NoError(t, err)
	// A claim is claimable again at its ready time (its expiry here: no
	// backoff), a delayed job at its own.
	update := func(id, state string, ready int64) {
		tx := begin(t, db)
		j, err := tx.JobByID(ctx, id)
		require.NoError(t, err)
		j.State, j.ReadyAt, j.Due = state, ready, false
		if state == store.StateClaimed {
			j.Expiry = ready
		}
		require.NoError(t, tx.UpdateJob(ctx, j))
		require.NoError(t, tx.Commit())
	}
	update(ids[0], store.StateClaimed, now+time.Hour.Microseconds())
	update(ids[1], store.StateClaimed, now+time.Minute.Microseconds())
	update(ids[2], store.StateRequested, now+time.Minute.Microseconds()+1)
	check(false, now+time.Minute.Microseconds())
	update(ids[2], store.StateRequested, now+time.Second.Microseconds()) // a run-at or backoff sooner
	check(false, now+time.Second.Microseconds())
	update(ids[1], store.StateClaimed, now-1) // expired: claimable again
	check(true, now-1)
}

// terminateWatcher ends the session of the watcher of u's store: the one
// whose last statement listens on its schema's channel (every store's
// watcher has the same application name).
func terminateWatcher(t *testing.T, u string) {
	t.Helper()
	pgtest.Exec(t, strings.TrimSuffix(u, "&pool_max_conns=80"), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()
		AND query = 'LISTEN "' || `+channelSQL+` || '"'`, listenApplicationName)
}

func TestEndingOneStoresWatcherLeavesTheWatchersOfOtherStoresListening(t *testing.T) {
	// Every schema's store listens in the same database, and the tests of a
	// run share the server: ending one test's watcher must not end the
	// watchers of the others, whose "" report wakes every waiter.
	db, u := open(t, 0)
	other, _ := open(t, 0)
	changes := watch(t, db)
	others := watch(t, other)
	terminateWatcher(t, u)
	require.Equal(t, "", next(t, changes), "the ended watcher listens again")
	quiet(t, others)
}
