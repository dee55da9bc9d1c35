// Uniqueness: a caller's duplicate is invalid_argument before anything is
// written, and only two concurrent creators of one production name or job
// key are a conflict worth running a transaction again for.
package core

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/internal/legacyfixture"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// countTxs counts the write transactions a's store begins from now on.
func countTxs(a *Authority) *atomic.Int64 {
	n := new(atomic.Int64)
	wrapTxs(a, func(tx store.Tx) store.Tx { n.Add(1); return tx })
	return n
}

func TestDuplicateOutputPathsAreInvalidArgumentBeforeAnyWrite(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	before := f.snapshot()
	n := countTxs(f.a)
	out := Output{Path: "/out/a", Size: 1, SHA256: "00", Nonce: "n1"}
	dup := Facts{Outputs: []Output{out, {Path: "/out/a", Size: 2, SHA256: "11", Nonce: "n2"}}}
	err := l.Complete(dup)
	requireKind(t, err, KindInvalidArgument)
	require.Contains(t, err.Error(), "/out/a")
	require.Zero(t, n.Load(), "refused before the store was asked")
	require.Equal(t, before, f.snapshot())
	require.Equal(t, LeaseActive, l.State())

	e, err := f.a.Begin()
	require.NoError(t, err)
	requireKind(t, e.Complete(l, dup), KindInvalidArgument)
	require.NoError(t, e.Commit(), "a refused argument leaves the edit usable")
	require.NoError(t, l.Complete(Facts{Outputs: []Output{out}}))
}

// A job migrated from the pre-lease schema may carry facts already (the
// old schema wrote them before completion). A completion publishing a fact
// of the same kind and key is the caller's mistake: refused at once, in the
// transaction's one attempt, not retried into busy.
func TestFactsThatCollideWithTheJobsStoredFactsAreInvalidArgumentAtOnce(t *testing.T) {
	id := uuid.NewString()
	a, err := Open(buildLegacy(t, legacyfixture.Fixture{
		ProductionName: "p",
		Jobs: []legacyfixture.Job{{ID: id, State: "claimed", Worker: "old-w", ClaimID: uuid.NewString(),
			ClaimedAt: 1_700_000_000_000_000}},
		Facts: map[string]map[string]string{id: {"frames": "7"}},
	}))
	require.NoError(t, err)
	defer a.Close()
	l, err := a.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, id, l.JobID())
	n := countTxs(a)
	err = l.Complete(Facts{Metadata: map[string]json.RawMessage{"frames": json.RawMessage("8"), "size": json.RawMessage("1")}})
	requireKind(t, err, KindInvalidArgument)
	require.Contains(t, err.Error(), `"frames"`)
	require.EqualValues(t, 1, n.Load(), "one attempt, not retried")
	j, err := a.Job("p", id)
	require.NoError(t, err)
	require.Equal(t, StateClaimed, j.State)
	facts, err := a.FactsOf("p", id)
	require.NoError(t, err)
	require.Equal(t, map[string]json.RawMessage{"frames": json.RawMessage("7")}, facts.Metadata, "nothing was published")

	require.NoError(t, l.Complete(Facts{Metadata: map[string]json.RawMessage{"size": json.RawMessage("1")}}))
	facts, err = a.FactsOf("p", id)
	require.NoError(t, err)
	require.Len(t, facts.Metadata, 2)
}

// doubleOutputsTx inserts each output twice, so the store's own unique
// index refuses the write: a refusal no concurrent writer explains.
type doubleOutputsTx struct{ store.Tx }

func (t doubleOutputsTx) InsertOutputs(ctx context.Context, outs []store.Output) error {
	if err := t.Tx.InsertOutputs(ctx, outs); err != nil {
		return err
	}
	return t.Tx.InsertOutputs(ctx, outs)
}

func TestAConstraintFailureNoConcurrentWriterExplainsIsNeverRetried(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	before := f.snapshot()
	n := new(atomic.Int64)
	wrapTxs(f.a, func(tx store.Tx) store.Tx { n.Add(1); return doubleOutputsTx{tx} })
	err := l.Complete(Facts{Outputs: []Output{{Path: "/out/a", Size: 1, SHA256: "00", Nonce: "n1"}}})
	requireKind(t, err, KindStorage)
	require.EqualValues(t, 1, n.Load(), "one attempt, not retried")
	require.Equal(t, before, f.snapshot())
	require.Equal(t, LeaseActive, l.State())
}

// Two creators of one job key at once: on PostgreSQL the second insert
// waits on the unique index behind the first's uncommitted row, is refused
// when it commits, and the request runs again and finds the job; on SQLite
// the second waits for the writer lock and finds it at once. Either way one
// job, one id.
func TestTwoConcurrentRequestsOfOneKeyMakeOneJob(t *testing.T) {
	f := newFixture(t)
	e, err := f.a.Begin()
	require.NoError(t, err)
	defer e.Abort()
	first, err := e.RequestJob("p", "k", []byte("x"))
	require.NoError(t, err)
	loc, app := f.path, "dupkey-"+uuid.NewString()
	if testingPostgres() {
		loc += "&application_name=" + app
	}
	other, err := Open(loc)
	require.NoError(t, err)
	defer other.Close()
	other.setClock(f.clk.Now)
	n := countTxs(other)
	type result struct {
		id  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := other.RequestJob("p", "k", []byte("x"))
		done <- result{id, err}
	}()
	if testingPostgres() {
		waitForLockWait(t, f.path, app)
	} else {
		time.Sleep(20 * time.Millisecond) // let it queue for the writer lock
	}
	require.NoError(t, e.Commit())
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, first, r.id)
	if testingPostgres() {
		require.GreaterOrEqual(t, n.Load(), int64(2), "the refused insert was run again")
	}
	js, err := f.a.Jobs("p")
	require.NoError(t, err)
	require.Len(t, js, 1)
}

// waitForLockWait waits until a session named app waits for a lock.
func waitForLockWait(t *testing.T, location, app string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	for deadline := time.Now().Add(testwait.EventuallyBound); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var waiting bool
		require.NoError(t, c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock')`, app).Scan(&waiting))
		if waiting {
			return
		}
	}
	t.Fatalf("no session %s waited for a lock", app)
}
