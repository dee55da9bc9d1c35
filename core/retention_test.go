package core

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

const day = 24 * time.Hour

// short is a retention policy with a different window per state, so that a
// test can tell which one pruning applied.
var short = RetentionPolicy{Completed: time.Hour, Failed: 2 * time.Hour, Dead: 3 * time.Hour,
	Cancelled: 4 * time.Hour, Events: KeepForGood}

func (f *fixture) retention(r RetentionPolicy) {
	f.t.Helper()
	require.NoError(f.t, f.a.SetRetentionPolicy("p", r))
}

// finished requests a job and brings it to state at the fake clock's
// current time: completed (with a fact), failed, dead (its production
// allows one attempt) or cancelled.
func (f *fixture) finished(state string) string {
	f.t.Helper()
	id := f.request(1)[0]
	if state == StateCancelled {
		require.NoError(f.t, f.a.Cancel("p", id))
		return id
	}
	l, err := f.a.ClaimJob("p", id, "w", time.Minute)
	require.NoError(f.t, err)
	switch state {
	case StateCompleted:
		require.NoError(f.t, l.Complete(Facts{Metadata: map[string]json.RawMessage{"score": json.RawMessage("1")}}))
	case StateFailed:
		require.NoError(f.t, l.Fail("broken"))
	case StateDead:
		require.NoError(f.t, l.FailRetry("again", 0))
	}
	require.Equal(f.t, state, f.job(id).State)
	return id
}

func (f *fixture) prune(o PruneOptions) PruneResult {
	f.t.Helper()
	r, err := f.a.Prune(context.Background(), o)
	require.NoError(f.t, err)
	return r
}

func (f *fixture) gone(id string) {
	f.t.Helper()
	_, err := f.a.Job("p", id)
	requireKind(f.t, err, KindNotFound)
}

func TestANewProductionGetsTheDefaultRetentionPolicyAndListingsShowIt(t *testing.T) {
	f := newFixture(t)
	ps, err := f.a.Productions()
	require.NoError(t, err)
	require.Equal(t, DefaultRetentionPolicy(), ps[0].Retention)
	b, err := json.Marshal(ps[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `"retention":{"completed_us":604800000000,"failed_us":2592000000000,`+
		`"dead_us":2592000000000,"cancelled_us":604800000000,"events_us":604800000000}`)

	_, err = f.a.CreateProductionWithPolicies("kept", DefaultRetryPolicy(), RetentionPolicy{Failed: day})
	require.NoError(t, err)
	_, err = f.a.CreateProductionWithPolicies("kept", DefaultRetryPolicy(), RetentionPolicy{})
	requireKind(t, err, KindWrongState)
	requireKind(t, f.a.SetRetentionPolicy("p", RetentionPolicy{Completed: -time.Second}), KindInvalidArgument)
	requireKind(t, f.a.SetRetentionPolicy("p", RetentionPolicy{Events: time.Nanosecond}), KindInvalidArgument)
	requireKind(t, f.a.SetRetentionPolicy("nope", short), KindNotFound)
	f.retention(short)
	f.reopen()
	ps, err = f.a.Productions()
	require.NoError(t, err)
	require.Equal(t, short, ps[1].Retention, "the policy survives a reopen")
	require.Contains(t, f.kinds(""), "retention_changed")
}

func TestAFinishedJobIsPrunedOnceItsStatesRetentionHasPassedAndNotBefore(t *testing.T) {
	f := newFixture(t)
	f.policy(RetryPolicy{MaxAttempts: 1, BackoffCap: time.Hour})
	f.retention(short)
	ids := map[string]string{}
	for _, s := range FinishedStates {
		ids[s] = f.finished(s)
	}
	last := f.request(1)[0] // the production's newest job, requested
	ended := f.clk.now

	// One µs short of each window nothing goes; at the window the job does.
	for _, s := range FinishedStates {
		keep := time.Duration(keepUS(mustCheck(t, short), s)) * time.Microsecond
		f.clk.set(ended + keep.Microseconds() - 1)
		f.prune(PruneOptions{})
		require.Equal(t, s, f.job(ids[s]).State, "%s is kept until its window has passed", s)
		f.clk.set(ended + keep.Microseconds())
		require.EqualValues(t, 1, f.prune(PruneOptions{}).Jobs, s)
		f.gone(ids[s])
	}
	require.Equal(t, StateRequested, f.job(last).State)
}

func mustCheck(t *testing.T, r RetentionPolicy) store.Retention {
	t.Helper()
	sr, err := r.check()
	require.NoError(t, err)
	return sr
}

func TestPruningNeverDeletesARequestedOrClaimedJob(t *testing.T) {
	f := newFixture(t)
	done := f.finished(StateCompleted)
	l, err := f.a.ClaimJob("p", f.request(1)[0], "w", 20*time.Hour)
	require.NoError(t, err)
	waiting := f.request(1)[0]
	delayed := f.requestWith(RequestOptions{Delay: 300 * day})
	f.request(1)
	f.clk.advance(10 * time.Hour)
	r := f.prune(PruneOptions{OlderThan: time.Microsecond})
	require.EqualValues(t, 1, r.Jobs)
	f.gone(done)
	require.Equal(t, StateRequested, f.job(waiting).State)
	require.Equal(t, StateRequested, f.job(delayed).State)
	require.Equal(t, StateClaimed, f.job(l.JobID()).State)
	require.NoError(t, l.Complete(Facts{}), "the claim's holder is not disturbed")
}

func TestAProductionCanKeepCompletedJobsForGood(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: KeepForGood, Failed: time.Hour, Events: time.Hour})
	kept := f.finished(StateCompleted)
	failed := f.finished(StateFailed)
	f.request(1)
	f.clk.advance(3650 * day)
	require.EqualValues(t, 1, f.prune(PruneOptions{}).Jobs)
	f.gone(failed)
	facts, err := f.a.FactsOf("p", kept)
	require.NoError(t, err)
	require.JSONEq(t, "1", string(facts.Metadata["score"]), "a completed job's facts are kept for good")
}

func TestAPrunedJobIsNotFoundEverywhereAndItsTokenIsRefusedAsNotFound(t *testing.T) {
	f := newFixture(t)
	f.retention(short)
	id := f.request(1)[0]
	l, err := f.a.ClaimJob("p", id, "w", time.Minute)
	require.NoError(t, err)
	token, err := l.Export()
	require.NoError(t, err)
	require.NoError(t, l.Complete(Facts{Metadata: map[string]json.RawMessage{"k": json.RawMessage(`"v"`)}}))
	f.request(1)
	f.clk.advance(time.Hour)
	require.EqualValues(t, 1, f.prune(PruneOptions{}).Jobs)

	ctx := context.Background()
	f.gone(id)
	_, err = f.a.JobDetail(ctx, "p", id)
	requireKind(t, err, KindNotFound)
	_, err = f.a.FactsOf("p", id)
	requireKind(t, err, KindNotFound)
	_, err = f.a.Payload("p", id)
	requireKind(t, err, KindNotFound)
	_, err = f.a.ClaimJob("p", id, "w", time.Minute)
	requireKind(t, err, KindNotFound)
	requireKind(t, f.a.Cancel("p", id), KindNotFound)
	requireKind(t, f.a.RetryJob("p", id), KindNotFound)
	_, err = f.a.Import(token)
	requireKind(t, err, KindNotFound)
	page, err := f.a.ListJobs(ctx, "p", JobQuery{ID: id})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	_, err = f.a.ListEvents(ctx, EventQuery{Production: "p", JobID: id})
	requireKind(t, err, KindNotFound)
	// No row of it is left in any table.
	st, err := f.a.b.Facts(ctx, id)
	require.NoError(t, err)
	require.Empty(t, st)
	at, err := f.a.b.Attempts(ctx, id)
	require.NoError(t, err)
	require.Empty(t, at)
}

func TestAnIdempotentRequestKeyMayBeReusedAfterItsJobIsPruned(t *testing.T) {
	f := newFixture(t)
	f.retention(short)
	first, err := f.a.RequestJob("p", "nightly", []byte("a"))
	require.NoError(t, err)
	again, err := f.a.RequestJob("p", "nightly", []byte("a"))
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.NoError(t, f.a.Cancel("p", first))
	f.request(1)
	f.clk.advance(4 * time.Hour)
	require.EqualValues(t, 1, f.prune(PruneOptions{}).Jobs)
	second, err := f.a.RequestJob("p", "nightly", []byte("another payload"))
	require.NoError(t, err)
	require.NotEqual(t, first, second, "the key names a new job")
	require.Equal(t, StateRequested, f.job(second).State)
}

func TestPruningLeavesTheMarkEveryOtherJobAndListingPagesUntouched(t *testing.T) {
	f := newFixture(t)
	f.retention(short)
	var all, kept []string
	for i := 0; i < 30; i++ {
		if i%3 == 0 {
			kept = append(kept, f.request(1)[0])
			all = append(all, kept[len(kept)-1])
			continue
		}
		all = append(all, f.finished(StateCompleted))
	}
	kept = append(kept, f.request(1)[0])
	f.clk.advance(time.Hour)
	mark := f.hwm()

	// A listing paged across the prune lists every job that was kept.
	ctx := context.Background()
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Limit: 4})
	require.NoError(t, err)
	var listed []string
	for _, j := range page.Jobs {
		listed = append(listed, j.ID)
	}
	require.EqualValues(t, 20, f.prune(PruneOptions{}).Jobs)
	require.Equal(t, mark, f.hwm(), "pruning moves no mark")
	for page.Next != "" {
		page, err = f.a.ListJobs(ctx, "p", JobQuery{Limit: 4, After: page.Next})
		require.NoError(t, err)
		for _, j := range page.Jobs {
			listed = append(listed, j.ID)
		}
	}
	var want []string
	for _, id := range all[:4] {
		want = append(want, id)
	}
	for _, id := range kept {
		if !contains(want, id) {
			want = append(want, id)
		}
	}
	require.Equal(t, want, listed)
	// The kept jobs still obey every lease rule.
	l := f.claim("w", time.Minute)
	require.Equal(t, kept[0], l.JobID())
	require.NoError(t, l.Complete(Facts{}))
}

func TestPruningKeepsTheNewestJobAndEventSoTheirNumbersAreNeverReused(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour, Events: time.Hour})
	a := f.finished(StateCompleted)
	b := f.finished(StateCompleted) // the newest job, and its completion the newest event
	f.clk.advance(2 * time.Hour)
	r := f.prune(PruneOptions{})
	require.EqualValues(t, 1, r.Jobs)
	f.gone(a)
	require.Equal(t, StateCompleted, f.job(b).State)
	ctx := context.Background()
	all, err := f.a.b.Events(ctx, "", 0, 0)
	require.NoError(t, err)
	newest := all[len(all)-1]
	require.Equal(t, b, newest.JobID, "the newest event stays")
	before := f.jobSeq(b)

	c := f.request(1)[0]
	require.Greater(t, f.jobSeq(c), before, "the next job gets a new number")
	evs, err := f.a.b.Events(ctx, "", newest.Seq, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs, "the next event gets a number after the newest")
	require.Greater(t, evs[0].Seq, newest.Seq)
	// Once newer ones exist, the kept job goes too.
	f.clk.advance(2 * time.Hour)
	f.prune(PruneOptions{})
	f.gone(b)
}

func (f *fixture) jobSeq(id string) int64 {
	f.t.Helper()
	j, err := f.a.b.JobByID(context.Background(), id)
	require.NoError(f.t, err)
	return j.Seq
}

func TestEventsArePrunedOncePastTheirRetentionAndNotBefore(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Events: time.Hour})
	old := f.request(3)
	f.clk.advance(30 * time.Minute)
	young := f.request(1)[0]
	f.clk.advance(30 * time.Minute)
	r := f.prune(PruneOptions{})
	require.Zero(t, r.Jobs, "no job goes with its events: jobs are pruned by their own retention")
	for _, id := range old {
		require.Empty(t, f.kinds(id))
		require.Equal(t, StateRequested, f.job(id).State)
	}
	require.Equal(t, []string{"requested"}, f.kinds(young))
	require.NotZero(t, r.Events)
}

// countingTx counts what each pruning transaction deletes.
type countingTx struct {
	store.Tx
	jobs, events *int64
}

func (c countingTx) DeleteJob(ctx context.Context, id string) error {
	err := c.Tx.DeleteJob(ctx, id)
	if err == nil {
		*c.jobs++
	}
	return err
}

func (c countingTx) DeleteJobs(ctx context.Context, ids []string) (int64, int64, error) {
	jobs, events, err := c.Tx.DeleteJobs(ctx, ids)
	*c.jobs += jobs
	*c.events += events
	return jobs, events, err
}

func (c countingTx) DeleteFinishedJobs(ctx context.Context, ids []string, state string, by int64) (int64, int64, error) {
	jobs, events, err := c.Tx.DeleteFinishedJobs(ctx, ids, state, by)
	*c.jobs += jobs
	*c.events += events
	return jobs, events, err
}

func (c countingTx) DeleteJobEvents(ctx context.Context, id string, limit int) (int64, error) {
	n, err := c.Tx.DeleteJobEvents(ctx, id, limit)
	*c.events += n
	return n, err
}

func (c countingTx) DeleteEvents(ctx context.Context, p string, seqs []int64) (int64, error) {
	n, err := c.Tx.DeleteEvents(ctx, p, seqs)
	*c.events += n
	return n, err
}

func TestAPruningTransactionDeletesAtMostItsBatchOfJobsAndEvents(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour, Events: time.Hour})
	// 150 completed jobs (three events each), and one job with 2500
	// renewals: its events alone exceed a batch.
	e, err := f.a.Begin()
	require.NoError(t, err)
	var ids []string
	for i := 0; i < 150; i++ {
		id, err := e.RequestJob("p", "", nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.NoError(t, e.Commit())
	for range ids {
		l := f.claim("w", time.Minute)
		require.NoError(t, l.Complete(Facts{}))
	}
	long := f.request(1)[0]
	l, err := f.a.ClaimJob("p", long, "w", time.Minute)
	require.NoError(t, err)
	for i := 0; i < 2500; i++ {
		f.clk.advance(time.Microsecond)
		require.NoError(t, l.Renew(time.Minute))
	}
	require.NoError(t, l.Complete(Facts{}))
	f.request(1)
	f.clk.advance(2 * time.Hour)

	var batches []([2]int64)
	wrapTxs(f.a, func(tx store.Tx) store.Tx {
		batches = append(batches, [2]int64{})
		b := &batches[len(batches)-1]
		return countingTx{Tx: tx, jobs: &b[0], events: &b[1]}
	})
	r := f.prune(PruneOptions{})
	require.EqualValues(t, 151, r.Jobs)
	var jobs, events int64
	for _, b := range batches {
		require.LessOrEqual(t, b[0], int64(PruneJobBatch))
		require.LessOrEqual(t, b[1], int64(PruneEventBatch))
		jobs, events = jobs+b[0], events+b[1]
	}
	require.EqualValues(t, 151, jobs)
	require.Equal(t, r.Events, events)
	require.Greater(t, r.Batches, int64(4))
	f.gone(long)
}

// beforeWrite runs hook once, just before the next write transaction
// begins.
type beforeWrite struct {
	store.Backend
	hook func()
}

func (b *beforeWrite) BeginWrite(ctx context.Context) (store.Tx, error) {
	if h := b.hook; h != nil {
		b.hook = nil
		h()
	}
	return b.Backend.BeginWrite(ctx)
}

// A pruning batch is chosen by reads outside any write, and its write
// deletes only what still qualifies then: a job redriven after it was
// chosen (in another state now), and one redriven and failed again (in the
// same state, changed later), stay with their events, and the rest of the
// batch goes. Inside a write, the job of the store's newest event stays
// too, whatever its state and age.
func TestAPruningBatchKeepsEveryJobThatChangedAfterItWasChosen(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Failed: time.Hour, Events: KeepForGood})
	redriven := f.finished(StateFailed)
	again := f.finished(StateFailed)
	old := f.finished(StateFailed)
	f.request(1) // the newest job, which pruning keeps
	f.clk.advance(2 * time.Hour)
	b := &beforeWrite{Backend: f.a.b}
	b.hook = func() {
		require.NoError(t, f.a.RetryJob("p", redriven))
		require.NoError(t, f.a.RetryJob("p", again))
		l, err := f.a.ClaimJob("p", again, "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Fail("broken again"))
		f.request(1) // the newest event is not again's
	}
	f.a.b = b
	r := f.prune(PruneOptions{})
	require.Nil(t, b.hook, "the prune wrote")
	require.EqualValues(t, 1, r.Jobs)
	f.gone(old)
	require.Equal(t, StateRequested, f.job(redriven).State)
	require.Contains(t, f.kinds(redriven), "redriven")
	require.Equal(t, StateFailed, f.job(again).State)
	require.Contains(t, f.kinds(again), "redriven")

	// The newest event's job, in a write.
	last := f.finished(StateFailed)
	f.clk.advance(2 * time.Hour)
	p, err := f.a.b.ProductionByName(context.Background(), "p")
	require.NoError(t, err)
	sj, err := f.a.b.JobsInState(context.Background(), p.ID, StateFailed, 10)
	require.NoError(t, err)
	var changed int64
	for _, j := range sj {
		if j.ID == again {
			changed = j.UpdatedAt
		}
	}
	require.NotZero(t, changed)
	ctx := context.Background()
	tx, err := f.a.b.BeginWrite(ctx)
	require.NoError(t, err)
	jobs, events, err := tx.DeleteFinishedJobs(ctx, []string{last}, StateFailed, math.MaxInt64)
	require.NoError(t, err)
	require.Zero(t, jobs+events, "the newest event's job stays")
	jobs, _, err = tx.DeleteFinishedJobs(ctx, []string{again}, StateFailed, changed-1)
	require.NoError(t, err)
	require.Zero(t, jobs, "a job changed after updatedBy stays")
	jobs, _, err = tx.DeleteFinishedJobs(ctx, []string{redriven}, StateFailed, math.MaxInt64)
	require.NoError(t, err)
	require.Zero(t, jobs, "a job in another state stays")
	jobs, events, err = tx.DeleteFinishedJobs(ctx, []string{again}, StateFailed, changed)
	require.NoError(t, err)
	require.EqualValues(t, 1, jobs)
	require.NotZero(t, events)
	require.NoError(t, tx.Rollback())
}

// Where a worker's claim waits for the pruning batch in progress (a store
// whose writers take turns: SQLite), the background pruner's batches are a
// quarter of the size; a prune asked for keeps the full batch, and so does
// every prune on a store where a claim waits for no batch (PostgreSQL).
func TestTheBackgroundPrunerDeletesInSmallerBatchesWhereAClaimWaitsForTheBatch(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour, Events: KeepForGood})
	_, serial := f.a.b.(store.SerialWriter)
	require.Equal(t, !testingPostgres(), serial)
	fill := func() {
		for range PruneJobBatch {
			f.finished(StateCompleted)
		}
		f.request(1)
		f.clk.advance(2 * time.Hour)
	}
	fill()
	r := f.prune(PruneOptions{Background: true})
	require.EqualValues(t, PruneJobBatch, r.Jobs)
	if serial {
		require.EqualValues(t, PruneJobBatch/serialBackgroundBatch, r.Batches)
	} else {
		require.EqualValues(t, 1, r.Batches)
	}
	fill()
	r = f.prune(PruneOptions{})
	require.EqualValues(t, PruneJobBatch, r.Jobs)
	require.EqualValues(t, 1, r.Batches)
}

func TestPruningBesideWorkersLosesNoJobAndDeletesOnlyFinishedOnes(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Microsecond, Events: time.Microsecond})
	const n = 120
	ids := f.request(n)
	f.request(1) // the newest, never claimed: the rule keeps it anyway
	var wg sync.WaitGroup
	var completed atomic.Int64
	stop := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for completed.Load() < n {
				l, err := f.a.Claim("p", "w", time.Hour)
				if err != nil {
					var e *Error
					if errors.As(err, &e) && (e.Kind == KindNothingToClaim || e.Kind == KindBusy) {
						continue
					}
					t.Error(err)
					return
				}
				if err := l.Complete(Facts{}); err != nil {
					t.Error(err)
					return
				}
				completed.Add(1)
			}
		}()
	}
	var pruned atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.clk.advance(time.Millisecond)
			r, err := f.a.Prune(context.Background(), PruneOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			pruned.Add(r.Jobs)
		}
	}()
	for completed.Load() < n && !t.Failed() {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// The last completion may be the newest event, which is kept with its
	// job until a newer event exists.
	f.request(1)
	f.clk.advance(time.Second)
	pruned.Add(f.prune(PruneOptions{}).Jobs)
	require.GreaterOrEqual(t, completed.Load(), int64(n))
	require.Equal(t, completed.Load(), pruned.Load(), "every completed job was pruned, once")
	for _, id := range ids {
		f.gone(id)
	}
	js := f.a.mustJobs(t)
	require.Len(t, js, n+2-int(completed.Load()))
	for _, j := range js {
		require.Equal(t, StateRequested, j.State)
	}
}

func TestAnOpenAuthorityPrunesInTheBackgroundByEachPolicy(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour})
	done := f.finished(StateCompleted)
	f.request(1)
	f.clk.advance(2 * time.Hour)
	f.a.SetPruneInterval(20 * time.Millisecond)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := f.a.Job("p", done); err != nil {
			requireKind(t, err, KindNotFound)
			break
		}
		require.True(t, time.Now().Before(deadline), "the background pruner never pruned the job")
	}
	// Stopped, it prunes nothing more.
	f.a.SetPruneInterval(0)
	kept := f.finished(StateCompleted)
	f.request(1)
	f.clk.advance(2 * time.Hour)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, StateCompleted, f.job(kept).State)
	require.NoError(t, f.a.Close(), "Close with the pruner stopped")
}

func TestAPrunePassThatFindsNothingToDeleteTakesNoTurnAtTheWriter(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour, Failed: time.Hour, Dead: time.Hour, Cancelled: time.Hour,
		Events: 2 * time.Hour})
	done := f.finished(StateCompleted)
	f.request(1)
	var begins int
	wrapTxs(f.a, func(tx store.Tx) store.Tx { begins++; return tx })
	f.clk.advance(time.Hour - time.Microsecond)
	require.Zero(t, f.prune(PruneOptions{}).Jobs)
	require.Zero(t, begins, "nothing was past its retention: no write began")
	f.clk.advance(time.Microsecond)
	require.EqualValues(t, 1, f.prune(PruneOptions{}).Jobs)
	require.NotZero(t, begins)
	f.gone(done)
}

// batchPausingTx pauses the first pruning batch of jobs until told, and notes,
// when the second begins deleting, whether the claim had committed.
type batchPausingTx struct {
	store.Tx
	batches         *int
	started, resume chan struct{}
	job             string // the job the claim takes
	claimedBySecond *bool
}

func (p batchPausingTx) DeleteJobs(ctx context.Context, ids []string) (int64, int64, error) {
	p.pause(ctx)
	return p.Tx.DeleteJobs(ctx, ids)
}

func (p batchPausingTx) DeleteFinishedJobs(ctx context.Context, ids []string, state string, by int64) (int64, int64, error) {
	p.pause(ctx)
	return p.Tx.DeleteFinishedJobs(ctx, ids, state, by)
}

// pause holds the first batch until resume, and has the second look at
// the job the claim takes.
func (p batchPausingTx) pause(ctx context.Context) {
	*p.batches++
	switch *p.batches {
	case 1:
		close(p.started)
		<-p.resume
	case 2:
		// The second batch's transaction sees the claim if it committed
		// first (whether its caller has returned yet or not).
		j, err := p.Tx.JobByID(ctx, p.job)
		*p.claimedBySecond = err == nil && j.State == store.StateClaimed
	}
}

func TestAClaimWaitsBehindAtMostOnePruningBatchNotTheWholePass(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour})
	for i := 0; i < 3*PruneJobBatch; i++ {
		f.finished(StateCompleted)
	}
	job := f.request(1)[0]
	f.clk.advance(2 * time.Hour)
	var batches int
	var claimedBySecond bool
	started, resume, claimed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	wrapTxs(f.a, func(tx store.Tx) store.Tx {
		return batchPausingTx{Tx: tx, batches: &batches, started: started, resume: resume, job: job,
			claimedBySecond: &claimedBySecond}
	})
	pruned := make(chan error, 1)
	go func() {
		_, err := f.a.Prune(context.Background(), PruneOptions{})
		pruned <- err
	}()
	<-started
	go func() {
		_, err := f.a.Claim("p", "w", time.Minute)
		claimed <- err
	}()
	// The claim waits for the batch (SQLite: in this process's writer
	// queue; PostgreSQL takes other rows' locks and waits for nothing).
	if q, ok := f.a.b.(txWrapper).Backend.(interface{ WaitingWriters() int }); ok {
		for q.WaitingWriters() == 0 {
			time.Sleep(time.Millisecond)
		}
	} else {
		select {
		case err := <-claimed:
			claimed <- err
		case <-time.After(10 * time.Second):
			t.Fatal("on PostgreSQL the claim waited for the paused batch")
		}
	}
	close(resume)
	require.NoError(t, <-pruned)
	require.Greater(t, batches, 2, "the pass took several batches")
	require.True(t, claimedBySecond, "the claim committed before the pass's next batch")
	require.NoError(t, <-claimed)
}

// redoCounter records, for each write transaction begun, whether it was
// begun redoable (store.Redoable), and counts the jobs and events deleted
// in each kind.
type redoCounter struct {
	store.Backend
	mu                sync.Mutex
	redoable, durable int // write transactions begun
	redoDeleted, kept int // jobs and events deleted in redoable, durable ones
}

type redoCountingTx struct {
	store.Tx
	c    *redoCounter
	redo bool
}

func (c *redoCounter) BeginWrite(ctx context.Context) (store.Tx, error) {
	tx, err := c.Backend.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if store.IsRedoable(ctx) {
		c.redoable++
	} else {
		c.durable++
	}
	return redoCountingTx{Tx: tx, c: c, redo: store.IsRedoable(ctx)}, nil
}

func (t redoCountingTx) deleted(n int64) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.redo {
		t.c.redoDeleted += int(n)
	} else {
		t.c.kept += int(n)
	}
}

func (t redoCountingTx) DeleteJobs(ctx context.Context, ids []string) (int64, int64, error) {
	j, e, err := t.Tx.DeleteJobs(ctx, ids)
	t.deleted(j + e)
	return j, e, err
}

func (t redoCountingTx) DeleteFinishedJobs(ctx context.Context, ids []string, state string, by int64) (int64, int64, error) {
	j, e, err := t.Tx.DeleteFinishedJobs(ctx, ids, state, by)
	t.deleted(j + e)
	return j, e, err
}

func (t redoCountingTx) DeleteJob(ctx context.Context, id string) error {
	err := t.Tx.DeleteJob(ctx, id)
	t.deleted(1)
	return err
}

func (t redoCountingTx) DeleteJobEvents(ctx context.Context, id string, limit int) (int64, error) {
	n, err := t.Tx.DeleteJobEvents(ctx, id, limit)
	t.deleted(n)
	return n, err
}

func (t redoCountingTx) DeleteEvents(ctx context.Context, p string, seqs []int64) (int64, error) {
	n, err := t.Tx.DeleteEvents(ctx, p, seqs)
	t.deleted(n)
	return n, err
}

// Only the background pruner's batches by the policies without an archive
// may be lost at a power cut (they are pruned again by the next pass), and
// so commit without waiting for the flush: a prune with an archive (nothing
// archived twice), one by an age given, and every worker's and
// coordinator's write stay durable.
func TestOnlyTheBackgroundPrunersBatchesByThePoliciesWithoutAnArchiveMayBeLostAtAPowerCut(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour, Events: time.Hour})
	c := &redoCounter{Backend: f.a.b}
	f.a.b = c
	fill := func() {
		for range 3 {
			f.finished(StateCompleted)
		}
		f.request(1)
		f.clk.advance(2 * time.Hour)
	}
	fill()
	require.Zero(t, c.redoable, "no worker's or coordinator's write is redoable")
	r := f.prune(PruneOptions{Background: true})
	require.NotZero(t, r.Jobs)
	require.NotZero(t, c.redoDeleted, "the background pass's batches are redoable")
	require.Zero(t, c.kept, "every batch of the background pass is redoable")

	for _, o := range []PruneOptions{{Archive: t.TempDir() + "/a.jsonl"}, {Background: true, Archive: t.TempDir() + "/b.jsonl"},
		{OlderThan: time.Hour, Background: true}, {}} {
		c.redoDeleted, c.kept = 0, 0
		fill()
		r := f.prune(o)
		require.NotZero(t, r.Jobs, "%+v", o)
		require.NotZero(t, c.kept, "%+v", o)
		require.Zero(t, c.redoDeleted, "a prune with an archive, by an age given, or asked for is durable: %+v", o)
	}
	redo := c.redoable
	f.finished(StateCompleted)
	require.Equal(t, redo, c.redoable, "a worker's writes are durable")
}

// batchTimer records, for each write transaction that deleted jobs, when
// its BeginWrite was called and when its Commit returned.
type batchTimer struct {
	store.Backend
	mu    sync.Mutex
	calls []time.Time // BeginWrite called
	spans [][2]time.Time
}

type batchTimerTx struct {
	store.Tx
	b       *batchTimer
	called  time.Time
	deleted bool
}

func (b *batchTimer) BeginWrite(ctx context.Context) (store.Tx, error) {
	called := time.Now()
	tx, err := b.Backend.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return &batchTimerTx{Tx: tx, b: b, called: called}, nil
}

func (t *batchTimerTx) DeleteJobs(ctx context.Context, ids []string) (int64, int64, error) {
	t.deleted = true
	return t.Tx.DeleteJobs(ctx, ids)
}

func (t *batchTimerTx) DeleteFinishedJobs(ctx context.Context, ids []string, state string, by int64) (int64, int64, error) {
	t.deleted = true
	return t.Tx.DeleteFinishedJobs(ctx, ids, state, by)
}

func (t *batchTimerTx) Commit() error {
	err := t.Tx.Commit()
	if t.deleted {
		t.b.mu.Lock()
		t.b.spans = append(t.b.spans, [2]time.Time{t.called, time.Now()})
		t.b.mu.Unlock()
	}
	return err
}

// gaps is, for each job batch after the first, how long the writer was
// left alone before the pass asked for it again, and how long the batch
// before held it (from its BeginWrite call: the wait for the turn is
// included, which makes the hold look longer, never shorter).
func (b *batchTimer) gaps() (gaps, holds []time.Duration) {
	for i := 1; i < len(b.spans); i++ {
		gaps = append(gaps, b.spans[i][0].Sub(b.spans[i-1][1]))
		holds = append(holds, b.spans[i-1][1].Sub(b.spans[i-1][0]))
	}
	return gaps, holds
}

// The background pruner paces itself: after each batch it leaves the
// writer to the workers for as long as the batch held it, so that workers
// queued behind a pass are never behind batch after batch, and a pass
// holds the writer at most half of its time. A pass asked for does not
// wait between its batches.
func TestTheBackgroundPrunerLeavesTheWriterFreeBetweenBatchesForAsLongAsEachHeldIt(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour})
	fill := func() {
		for range 4*PruneJobBatch + 1 {
			f.finished(StateCompleted)
		}
		f.request(1)
		f.clk.advance(2 * time.Hour)
	}
	fill()
	bt := &batchTimer{Backend: f.a.b}
	f.a.b = bt
	require.EqualValues(t, 4*PruneJobBatch+1, f.prune(PruneOptions{Background: true}).Jobs)
	gaps, holds := bt.gaps()
	require.Len(t, gaps, 4)
	for i, g := range gaps {
		// The pause is the batch's own measure of its hold, which starts
		// once BeginWrite has returned: allow for that part of the turn.
		require.GreaterOrEqual(t, g, holds[i]/2, "batch %d held the writer %v, then left it %v", i, holds[i], g)
	}
	// A pass asked for goes on at once: it never rests between batches (a
	// count, not a time, so that a loaded machine's gaps cannot fail it).
	rest := restAfterBatch
	t.Cleanup(func() { restAfterBatch = rest })
	var rests int
	restAfterBatch = func(ctx context.Context, d time.Duration) { rests++; rest(ctx, d) }
	fill()
	require.EqualValues(t, 4*PruneJobBatch+1, f.prune(PruneOptions{}).Jobs)
	require.Zero(t, rests, "a pass asked for rested between its batches")
	fill()
	require.EqualValues(t, 4*PruneJobBatch+1, f.prune(PruneOptions{Background: true}).Jobs)
	require.Equal(t, 4, rests, "the background pass rests after every batch but its last")
}
