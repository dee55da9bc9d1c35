// The clock rules of claim-next and of the times unguarded writes record,
// on the fake authority clock; every test runs on SQLite and
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

// aheadOfTheClaims leaves the fixture with the mark at t0 (a claim of the
// first job, whose lease it returns), a job requested while the clock read
// t0+10ms (a request does not move the mark), and the clock stepped back to
// t0+5ms: behind that job's time, still not behind the mark.
func aheadOfTheClaims(f *fixture) (l *Lease, ahead string) {
	f.t.Helper()
	f.request(1)
	l = f.claim("w", time.Hour)
	require.Equal(f.t, t0, f.hwm())
	f.clk.set(t0 + 10*ms)
	ahead = f.request(1)[0]
	require.Equal(f.t, t0, f.hwm(), "a request does not move the mark")
	f.clk.set(t0 + 5*ms)
	return l, ahead
}

func TestAClaimOfTheNextJobNeverFailsBecauseOfAJobItMayNotTake(t *testing.T) {
	t.Run("a job requested just before a small step back", func(t *testing.T) {
		f := newFixture(t)
		_, ahead := aheadOfTheClaims(f)
		f.nothing()
		e, err := f.a.Begin()
		require.NoError(t, err)
		_, err = e.Claim("p", "w", time.Minute)
		requireKind(t, err, KindNothingToClaim)
		e.Abort()
		_, err = f.a.ClaimJob("p", ahead, "w", time.Minute)
		requireKind(t, err, KindWrongState) // by id, before its time: as documented
		// Once the clock reaches the job's time, it is claimed.
		f.clk.set(t0 + 10*ms)
		require.Equal(t, ahead, f.claim("w2", time.Minute).JobID())
	})
	t.Run("a higher-priority job requested while the clock ran a day ahead", func(t *testing.T) {
		f := newFixture(t)
		f.request(1)
		f.claim("w", time.Hour) // the mark: t0
		f.clk.set(t0 + 24*hour())
		high := f.requestWith(RequestOptions{Priority: 5})
		f.clk.set(t0 + 5*ms)
		low := f.requestWith(RequestOptions{})
		require.Equal(t, low, f.claim("w2", time.Minute).JobID(), "the claimable job is taken")
		f.nothing()
		// A delayed job whose time comes is promoted past it, and the job
		// requested ahead is claimable at its own time.
		delayed := f.requestWith(RequestOptions{Delay: time.Second})
		f.clk.advance(time.Second)
		require.Equal(t, delayed, f.claim("w3", time.Minute).JobID())
		f.clk.set(t0 + 24*hour())
		require.Equal(t, high, f.claim("w4", time.Minute).JobID())
	})
}

func TestAClaimOfTheNextJobTakesAClaimableJobBehindMoreJobsItMayNotTakeThanOneTransactionSetsBack(t *testing.T) {
	for _, via := range []string{"claim", "edit", "complete and claim next"} {
		t.Run(via, func(t *testing.T) {
			f := newFixture(t)
			f.request(1)
			l := f.claim("w", time.Hour) // the mark: t0
			f.clk.set(t0 + hour())
			ahead := map[string]bool{}
			for range demoteBatch + 3 {
				ahead[f.requestWith(RequestOptions{Priority: 5})] = true
			}
			f.clk.set(t0 + 5*ms)
			low := f.requestWith(RequestOptions{})
			var got *Lease
			switch via {
			case "claim":
				got = f.claim("w2", time.Minute)
			case "edit":
				e, err := f.a.Begin()
				require.NoError(t, err)
				got, err = e.Claim("p", "w2", time.Minute)
				require.NoError(t, err)
				require.NoError(t, e.Commit())
			case "complete and claim next":
				var err error
				got, err = l.CompleteAndClaimNext(Facts{}, time.Minute)
				require.NoError(t, err)
				require.NotNil(t, got)
			}
			require.Equal(t, low, got.JobID())
			f.nothing()
			f.clk.set(t0 + hour())
			for range ahead {
				require.True(t, ahead[f.claim("w3", time.Minute).JobID()], "each job is claimable at its own time")
			}
		})
	}
}

func TestCompleteAndClaimNextNeverFailsBecauseOfAJobItMayNotTake(t *testing.T) {
	f := newFixture(t)
	l, ahead := aheadOfTheClaims(f)
	next, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
	require.NoError(t, err)
	require.Nil(t, next, "nothing is claimable at the claim's time")
	require.Equal(t, StateCompleted, f.job(l.JobID()).State, "the completion committed")
	require.Equal(t, StateRequested, f.job(ahead).State)
}

func TestAWaitingClaimWaitsForAJobItMayNotTakeYet(t *testing.T) {
	f := ownCommitsOnly(t)
	_, ahead := aheadOfTheClaims(f)
	c := make(chan waitResult, 1)
	go func() {
		l, err := f.a.ClaimWait(context.Background(), "p", "w2", time.Minute, time.Hour)
		c <- waitResult{l, err, time.Now()}
	}()
	select {
	case r := <-c:
		t.Fatalf("the waiting claim returned before the job's time: %v, %v", r.l, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	f.clk.set(t0 + 10*ms)
	f.a.setClock(f.clk.Now) // wakes every waiter, as a moved clock does
	requireWokenBy(t, c, ahead, start)
}

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

func TestACoordinatorsWriteToAJobIsNeverTimedBeforeTheJobsLastChange(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	f.claim("w", time.Hour) // the mark: t0
	// Requested while the clock ran two hours ahead (a request does not move
	// the mark), then cancelled and redriven after it stepped back.
	f.clk.set(t0 + 2*hour())
	id := f.request(1)[0]
	f.clk.set(t0 + 1)
	require.NoError(t, f.a.Cancel("p", id))
	require.NoError(t, f.a.RetryJob("p", id))
	require.NoError(t, f.a.Cancel("p", id))
	n, err := f.a.Redrive("p", StateCancelled)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	es, err := f.a.b.Events(context.Background(), "", 0, 0)
	require.NoError(t, err)
	var times []int64
	for _, e := range es {
		if e.JobID == id {
			times = append(times, e.At)
		}
	}
	require.Equal(t, []int64{t0 + 2*hour(), t0 + 2*hour(), t0 + 2*hour(), t0 + 2*hour(), t0 + 2*hour()}, times,
		"requested, cancelled, redriven, cancelled, redriven: never before the request")
	require.Equal(t, t0+2*hour(), f.job(id).ClaimableAt.UnixMicro())
}
