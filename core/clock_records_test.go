// The clock rules of the times unguarded writes record, on the fake
// authority clock; every test runs on SQLite and
// (LEASES_TEST_STORE=postgres) on PostgreSQL.
package core

import (
	"context"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

const ms = int64(1000) // µs

type recorded struct {
	what string
	at   int64
}

// recordedSince lists every time the store recorded for what happened after
// event seq after: the events' times, and the times of the productions, jobs
// and attempts those events name.
func recordedSince(t *testing.T, f *fixture, after int64) []recorded {
	t.Helper()
	ctx := context.Background()
	es, err := f.a.b.Events(ctx, "", after, 0)
	require.NoError(t, err)
	require.NotEmpty(t, es)
	var out []recorded
	for _, e := range es {
		out = append(out, recorded{"the event " + e.Kind + " " + e.JobID, e.At})
		if e.Kind == "production_created" {
			p, err := f.a.b.ProductionByID(ctx, e.ProductionID)
			require.NoError(t, err)
			out = append(out, recorded{"the creation of production " + p.Name, p.CreatedAt})
		}
		if e.JobID == "" {
			continue
		}
		j, err := f.a.b.JobByID(ctx, e.JobID)
		require.NoError(t, err)
		out = append(out, recorded{"the last change of job " + j.ID, j.UpdatedAt})
		if e.Kind == "requested" {
			out = append(out, recorded{"the request of job " + j.ID, j.RequestedAt})
		}
		if j.State == store.StateRequested {
			out = append(out, recorded{"the claimable time of job " + j.ID, j.ReadyAt},
				recorded{"the place in the claim order of job " + j.ID, j.ClaimableAt})
		}
		as, err := f.a.b.Attempts(ctx, e.JobID)
		require.NoError(t, err)
		for _, x := range as {
			out = append(out, recorded{"the end of an attempt of job " + j.ID, x.EndedAt})
			require.GreaterOrEqual(t, x.EndedAt, x.ClaimedAt, "an attempt never ends before it was claimed")
		}
	}
	return out
}

func TestNoRecordedTimeIsEverEarlierThanTheMark(t *testing.T) {
	f := newFixture(t)
	ids := f.request(3)
	f.claim("w", 2*time.Hour) // ids[0]
	f.clk.set(t0 + hour())
	held := f.claim("w2", time.Hour) // ids[1]; the mark: t0+1h
	mark := f.hwm()
	require.Equal(t, t0+hour(), mark)
	after := lastSeq(t, f)

	// The clock steps an hour back: guarded operations wait for it, and
	// every unguarded one works and records the mark, never its sample.
	f.clk.set(t0)
	_, err := f.a.Claim("p", "w3", time.Minute)
	requireKind(t, err, KindClockRegressed)
	q, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	require.Equal(t, mark, q.CreatedAt.UnixMicro())
	now := f.request(1)[0]
	delayed := f.requestWith(RequestOptions{Delay: 30 * time.Minute})
	runAt := f.requestWith(RequestOptions{RunAt: time.UnixMicro(t0 + 30*60_000_000).UTC()})
	e, err := f.a.Begin()
	require.NoError(t, err)
	inEdit, err := e.RequestJob("p", "", nil)
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	require.NoError(t, f.a.Cancel("p", held.JobID())) // ends its attempt
	require.NoError(t, f.a.SetRetryPolicy("p", fixed(3, 0)))
	require.NoError(t, f.a.RetryJob("p", held.JobID()))
	require.NoError(t, f.a.Cancel("p", ids[2]))
	n, err := f.a.Redrive("p", StateCancelled)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, mark, f.hwm(), "unguarded writes do not move the mark")

	for _, r := range recordedSince(t, f, after) {
		require.GreaterOrEqual(t, r.at, mark, "%s is recorded at %s, before the mark %s", r.what, describeUS(r.at), describeUS(mark))
	}
	for _, id := range []string{now, inEdit, ids[2], held.JobID()} {
		require.Equal(t, mark, f.job(id).ClaimableAt.UnixMicro(), "claimable at once is claimable at the mark")
	}
	require.Equal(t, mark+30*60_000_000, f.job(delayed).ClaimableAt.UnixMicro(), "a delay counts from the mark")
	require.Equal(t, mark, f.job(runAt).ClaimableAt.UnixMicro(), "a run-at before the mark means the mark")

	// Once the clock is back at the mark, the delayed job waits its whole delay.
	f.clk.set(mark + 30*60_000_000 - 1)
	_, err = f.a.ClaimJob("p", delayed, "w3", time.Minute)
	requireKind(t, err, KindWrongState)
	f.clk.advance(time.Microsecond)
	l, err := f.a.ClaimJob("p", delayed, "w3", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Complete(Facts{}))
}
