// Waiting claims: every wake source wakes a waiter long before the safety
// poll, one waiter per change, nothing is written while waiting, and no
// wake-up is lost in a race of requests and waiters.
package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/internal/clockstep"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

// longSafetyPoll makes the safety poll of authorities opened from now on an
// hour long, so that a waiter woken within seconds was woken by the source
// under test, never by the poll.
func longSafetyPoll(t *testing.T) {
	t.Helper()
	old := safetyPoll
	safetyPoll = time.Hour
	t.Cleanup(func() { safetyPoll = old })
}

// wakeBound is how soon a wake must arrive: generous by orders of magnitude
// over the milliseconds it takes (a stalled CI host may hold a test up for
// seconds), and still far below the hour-long safety poll.
const wakeBound = 30 * time.Second

type waitResult struct {
	l   *Lease
	err error
	at  time.Time
}

// startWaiting runs ClaimWait in a goroutine and waits until it has joined
// the production's queue.
func startWaiting(t *testing.T, ctx context.Context, a *Authority, worker string, d, wait time.Duration) <-chan waitResult {
	t.Helper()
	before := a.waits.hub.Waiting()
	out := make(chan waitResult, 1)
	go func() {
		l, err := a.ClaimWait(ctx, "p", worker, d, wait)
		out <- waitResult{l, err, time.Now()}
	}()
	waitersReady(t, a, before+1)
	return out
}

func waitersReady(t *testing.T, a *Authority, n int) {
	t.Helper()
	testwait.Eventually(t, func() bool { return a.waits.hub.Waiting() >= n })
	time.Sleep(5 * time.Millisecond) // let the first look finish
}

func receive(t *testing.T, c <-chan waitResult) waitResult {
	t.Helper()
	return testwait.Receive(t, c, 30*time.Second, "the waiting claim")
}

// requireWokenBy checks that a waiter got a lease on job within wakeBound of
// since.
func requireWokenBy(t *testing.T, c <-chan waitResult, job string, since time.Time) *Lease {
	t.Helper()
	r := receive(t, c)
	require.NoError(t, r.err)
	require.Equal(t, job, r.l.JobID())
	require.Less(t, r.at.Sub(since), wakeBound, "the waiter was not woken by the change")
	return r.l
}

// countingBackend counts write transactions, and hands out the store's own.
type countingBackend struct {
	store.Backend
	begun atomic.Int64
}

func (b *countingBackend) BeginWrite(ctx context.Context) (store.Tx, error) {
	b.begun.Add(1)
	return b.Backend.BeginWrite(ctx)
}

func countWrites(a *Authority) *countingBackend {
	b := &countingBackend{Backend: a.b}
	a.b = b
	return b
}

// noWatcher leaves a's waiters only this authority's own commits and timers.
func noWatcher(a *Authority) { a.waits = newWaitroom(nil) }

// ownCommitsOnly is a fixture whose waiters only its own commits and timers
// can wake, never the safety poll.
func ownCommitsOnly(t *testing.T) *fixture {
	t.Helper()
	longSafetyPoll(t)
	f := newFixture(t)
	noWatcher(f.a)
	return f
}

func TestClaimWaitWithZeroWaitIsAClaim(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 0)
	requireKind(t, err, KindNothingToClaim)
	ids := f.request(1)
	l, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 0)
	require.NoError(t, err)
	require.Equal(t, ids[0], l.JobID())
	require.Equal(t, StateClaimed, f.job(ids[0]).State)
}

func TestClaimWaitClaimsAJobThatIsAlreadyThereWithoutWaiting(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	ids := f.request(2)
	start := time.Now()
	l, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, time.Hour)
	require.NoError(t, err)
	require.Equal(t, ids[0], l.JobID(), "first in request order, as Claim")
	require.Less(t, time.Since(start), wakeBound)
}

func TestClaimWaitReturnsNothingToClaimWhenItsWaitPassesAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot()
	writes := countWrites(f.a)
	start := time.Now()
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 150*time.Millisecond)
	requireKind(t, err, KindNothingToClaim)
	require.ErrorIs(t, err, ErrNothingToClaim)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	require.Zero(t, writes.begun.Load(), "a wait that finds nothing takes no writer lock")
	require.Equal(t, before, f.snapshot())
}

func TestClaimWaitRejectsBadInputBeforeWaiting(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot()
	bg := context.Background()
	for name, c := range map[string]struct {
		err  error
		kind Kind
	}{
		"nil context":   {func() error { _, err := f.a.ClaimWait(nil, "p", "w", time.Minute, time.Hour); return err }(), KindInvalidArgument}, //nolint:staticcheck // the nil context is the input under test
		"negative wait": {func() error { _, err := f.a.ClaimWait(bg, "p", "w", time.Minute, -1); return err }(), KindInvalidArgument},
		"wait too long": {func() error { _, err := f.a.ClaimWait(bg, "p", "w", time.Minute, MaxWait+1); return err }(), KindInvalidArgument},
		"bad duration":  {func() error { _, err := f.a.ClaimWait(bg, "p", "w", 0, time.Hour); return err }(), KindInvalidDuration},
		"empty worker":  {func() error { _, err := f.a.ClaimWait(bg, "p", "", time.Minute, time.Hour); return err }(), KindInvalidArgument},
		"unknown production": {func() error {
			_, err := f.a.ClaimWait(bg, "nope", "w", time.Minute, time.Hour)
			return err
		}(), KindNotFound},
	} {
		requireKind(t, c.err, c.kind)
		require.Equal(t, before, f.snapshot(), name)
	}
	var nilAuthority *Authority
	_, err := nilAuthority.ClaimWait(bg, "p", "w", time.Minute, time.Second)
	requireKind(t, err, KindInvalidArgument)
}

func TestARequestCommittedThroughTheSameAuthorityWakesAWaiterAtOnce(t *testing.T) {
	f := ownCommitsOnly(t)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	id := f.request(1)[0]
	requireWokenBy(t, c, id, start)
}

func TestAReleaseWakesAWaiter(t *testing.T) {
	f := ownCommitsOnly(t)
	id := f.request(1)[0]
	held := f.claim("holder", time.Hour)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	require.NoError(t, held.Release())
	requireWokenBy(t, c, id, start)
}

func TestAnEditsRequestWakesAWaiterWhenTheEditCommitsAndNotBefore(t *testing.T) {
	f := ownCommitsOnly(t)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	e, err := f.a.Begin()
	require.NoError(t, err)
	id, err := e.RequestJob("p", "", []byte("x"))
	require.NoError(t, err)
	select {
	case r := <-c:
		t.Fatalf("woken before the edit committed: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	require.NoError(t, e.Commit())
	requireWokenBy(t, c, id, start)
}

func TestAnAbortedEditWakesNobodyAndAWaiterKeepsWaiting(t *testing.T) {
	f := ownCommitsOnly(t)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, 300*time.Millisecond)
	e, err := f.a.Begin()
	require.NoError(t, err)
	_, err = e.RequestJob("p", "", nil)
	require.NoError(t, err)
	e.Abort()
	r := receive(t, c)
	requireKind(t, r.err, KindNothingToClaim)
}

func TestACommitThroughAnotherHandleWakesAWaiter(t *testing.T) {
	// SQLite: the other handle's commit reaches this one through the file
	// (the -shm watcher); PostgreSQL: through NOTIFY and LISTEN.
	longSafetyPoll(t)
	f := newFixture(t)
	other, err := Open(f.path)
	require.NoError(t, err)
	defer other.Close()
	other.setClock(f.clk.Now) // one authority clock: a job is claimable from its request on
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	id, err := other.RequestJob("p", "", nil)
	require.NoError(t, err)
	requireWokenBy(t, c, id, start)
}

func TestAClaimExpiringOnTheAuthoritysClockWakesAWaiter(t *testing.T) {
	// Nothing is written when a claim expires: the waiter's timer, set at
	// the production's earliest expiry, wakes it.
	longSafetyPoll(t)
	location := newLocation(t, "leases.db")
	a, err := Open(location)
	require.NoError(t, err)
	defer a.Close()
	noWatcher(a)
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	id, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	// A real claim must commit within d, also on a loaded machine; start is
	// taken before the claim, so a slow commit cannot make the waiter look
	// woken early.
	const d = 2 * time.Second
	start := time.Now()
	_, err = a.Claim("p", "crashed", d)
	require.NoError(t, err)
	c := startWaiting(t, context.Background(), a, "w", time.Minute, time.Hour)
	l := requireWokenBy(t, c, id, start)
	require.GreaterOrEqual(t, time.Since(start), d/2, "not before the claim expired")
	j, err := a.Job("p", id)
	require.NoError(t, err)
	require.Equal(t, "w", j.Worker)
	require.Equal(t, int64(2), j.Attempts)
	_ = l
}

func TestMovingTheClockSeamPastAnExpiryWakesAWaiter(t *testing.T) {
	f := ownCommitsOnly(t)
	id := f.request(1)[0]
	f.claim("crashed", time.Hour)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	select {
	case r := <-c:
		t.Fatalf("woken before the expiry: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	start := time.Now()
	f.clk.advance(2 * time.Hour)
	f.a.setClock(f.clk.Now)
	requireWokenBy(t, c, id, start)
}

func TestSixteenWaitersAndOneRequestCostOneClaimTransaction(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	writes := countWrites(f.a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan waitResult, 16)
	for i := 0; i < 16; i++ {
		go func() {
			l, err := f.a.ClaimWait(ctx, "p", fmt.Sprintf("w%d", i), time.Minute, time.Hour)
			results <- waitResult{l, err, time.Now()}
		}()
	}
	waitersReady(t, f.a, 16)
	require.Zero(t, writes.begun.Load(), "waiting takes no writer lock")
	id := f.request(1)[0]
	first := receive(t, results)
	require.NoError(t, first.err)
	require.Equal(t, id, first.l.JobID())
	// The next waiter in line looks (a read) and finds nothing; give every
	// other a chance to misbehave.
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, int64(2), writes.begun.Load(), "one request and one claim transaction, no more")
	require.Equal(t, 15, f.a.waits.hub.Waiting())
	cancel()
	for i := 0; i < 15; i++ {
		r := receive(t, results)
		requireKind(t, r.err, KindInterrupted)
	}
}

// waiterTag marks a waiting claim's context with its worker, so that a
// hookedBackend can tell whose look or claim it is.
type waiterTag struct{}

func tagged(ctx context.Context, worker string) context.Context {
	return context.WithValue(ctx, waiterTag{}, worker)
}

func tagOf(ctx context.Context) string {
	w, _ := ctx.Value(waiterTag{}).(string)
	return w
}

// hookedBackend counts write transactions, like countingBackend, and lets a
// test hold a tagged waiter's look (its read of whether a job is claimable)
// and its claim. The hooks are set before it is installed.
type hookedBackend struct {
	store.Backend
	begun       atomic.Int64
	beforeLook  func(worker string) // may block
	afterLook   func(worker string, found bool)
	beforeClaim func(worker string) // may block; the write is counted already
}

func (b *hookedBackend) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	w := tagOf(ctx)
	if w != "" && b.beforeLook != nil {
		b.beforeLook(w)
	}
	found, err := b.Backend.HasClaimable(ctx, productionID, now)
	if w != "" && b.afterLook != nil {
		b.afterLook(w, found)
	}
	return found, err
}

func (b *hookedBackend) BeginWrite(ctx context.Context) (store.Tx, error) {
	b.begun.Add(1)
	if w := tagOf(ctx); w != "" && b.beforeClaim != nil {
		b.beforeClaim(w)
	}
	return b.Backend.BeginWrite(ctx)
}

// startTagged runs a tagged ClaimWait of an hour in a goroutine.
func startTagged(ctx context.Context, a *Authority, worker string) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		l, err := a.ClaimWait(tagged(ctx, worker), "p", worker, time.Minute, time.Hour)
		out <- waitResult{l, err, time.Now()}
	}()
	return out
}

// until waits, outside the test's goroutine, until cond holds (false: it
// never did within testwait.EventuallyBound).
func until(cond func() bool) bool {
	deadline := time.Now().Add(testwait.EventuallyBound)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func TestOneRequestCostsOneClaimTransactionWhenAWaiterJoinsWhileTheFirstLooks(t *testing.T) {
	// The first waiter's first look is held before it reads; a second waiter
	// joins meanwhile, when no look has found nothing yet; the request
	// commits; then every held look reads, and no claim starts before every
	// look that was let through has its answer. A second waiter that looked
	// by itself would find the job too, and claim it in vain.
	longSafetyPoll(t)
	f := newFixture(t)
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	open := false               // held looks may read
	arrived := map[string]int{} // looks that reached the hook, per waiter
	pending := 0                // looks that reached the hook and have no answer yet
	b := &hookedBackend{Backend: f.a.b}
	b.beforeLook = func(w string) {
		mu.Lock()
		defer mu.Unlock()
		arrived[w]++
		pending++
		cond.Broadcast()
		for !open {
			cond.Wait()
		}
	}
	b.afterLook = func(string, bool) {
		mu.Lock()
		defer mu.Unlock()
		pending--
		cond.Broadcast()
	}
	b.beforeClaim = func(string) {
		mu.Lock()
		defer mu.Unlock()
		for pending > 0 {
			cond.Wait()
		}
	}
	f.a.b = b
	arrivals := func(w string) int {
		mu.Lock()
		defer mu.Unlock()
		return arrived[w]
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := startTagged(ctx, f.a, "first")
	testwait.Eventually(t, func() bool { return arrivals("first") == 1 })
	before := f.a.waits.handedOver.Load()
	second := startTagged(ctx, f.a, "second")
	// It either looks (held like the first) or leaves its look to the first.
	testwait.Eventually(t, func() bool { return arrivals("second") > 0 || f.a.waits.handedOver.Load() > before })
	id := f.request(1)[0]
	mu.Lock()
	open = true
	cond.Broadcast()
	mu.Unlock()
	r, other := firstOfTwo(t, first, second)
	// Let the other look once (the claimer's departure wakes it), then end it.
	testwait.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return arrived["second"] > 0 && pending == 0
	})
	theFirstClaimedItAlone(t, b, id, r, cancel, other)
}

// theFirstClaimedItAlone ends the other waiter (cancel) and requires that
// one request and one claim transaction began, that the waiter "first"
// claimed job id (r), and that the other was interrupted.
func theFirstClaimedItAlone(t *testing.T, b *hookedBackend, id string, r waitResult, cancel context.CancelFunc, other <-chan waitResult) {
	t.Helper()
	cancel()
	o := receive(t, other)
	require.Equal(t, int64(2), b.begun.Load(), "one request and one claim transaction, no more")
	require.NoError(t, r.err)
	require.Equal(t, id, r.l.JobID())
	require.Equal(t, "first", r.l.Worker(), "the first waiter claims the job")
	requireKind(t, o.err, KindInterrupted)
}

// firstOfTwo receives the result of whichever of two waiting claims returns
// first, and the other's channel.
func firstOfTwo(t *testing.T, a, b <-chan waitResult) (waitResult, <-chan waitResult) {
	t.Helper()
	select {
	case r := <-a:
		return r, b
	case r := <-b:
		return r, a
	case <-time.After(30 * time.Second):
		t.Fatal("nobody claimed the job")
	}
	return waitResult{}, nil
}

func TestOneRequestCostsOneClaimTransactionWhenTheWaitersCheckTheClockDuringTheClaim(t *testing.T) {
	// The test's clock seam makes every waiter check the clock every
	// period. The first waiter's look finds the job (which forgets the last
	// quiet look: a clock check then cannot tell that nothing changed), and
	// its claim is held until the second waiter either found the job too,
	// in a look of its own after a check, or left that look to the first.
	longSafetyPoll(t)
	old := clockstep.SetPeriod(5 * time.Millisecond)
	t.Cleanup(func() { clockstep.SetPeriod(old) })
	f := newFixture(t)
	var looked, found sync.Map // worker → struct{}: it looked; it found a job
	b := &hookedBackend{Backend: f.a.b}
	b.afterLook = func(w string, has bool) {
		looked.Store(w, struct{}{})
		if has {
			found.Store(w, struct{}{})
		}
	}
	var handedOver atomic.Int64 // looks left to the first waiter when the request commits
	var hold atomic.Bool
	b.beforeClaim = func(w string) {
		if w == "first" && hold.Load() {
			until(func() bool {
				_, ok := found.Load("second")
				return ok || f.a.waits.handedOver.Load() > handedOver.Load()
			})
		}
	}
	f.a.b = b
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := startTagged(ctx, f.a, "first")
	testwait.Eventually(t, func() bool { _, ok := looked.Load("first"); return ok })
	second := startTagged(ctx, f.a, "second")
	waitersReady(t, f.a, 2)
	handedOver.Store(f.a.waits.handedOver.Load())
	hold.Store(true)
	id := f.request(1)[0]
	r, other := firstOfTwo(t, first, second)
	theFirstClaimedItAlone(t, b, id, r, cancel, other)
}

// thiefBackend lets another claimer take the job a waiter's look found,
// between the look and the waiter's claim.
type thiefBackend struct {
	store.Backend
	thief *Authority
	once  sync.Once
}

func (b *thiefBackend) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	has, err := b.Backend.HasClaimable(ctx, productionID, now)
	if has {
		b.once.Do(func() {
			if _, err := b.thief.Claim("p", "thief", time.Hour); err != nil {
				panic(err)
			}
		})
	}
	return has, err
}

func TestAWaiterThatLosesTheRaceForAJobKeepsWaitingWithinItsBound(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	thief, err := Open(f.path)
	require.NoError(t, err)
	defer thief.Close()
	thief.setClock(f.clk.Now)
	f.a.b = &thiefBackend{Backend: f.a.b, thief: thief}
	first := f.request(1)[0]
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	testwait.Eventually(t, func() bool { return f.job(first).Worker == "thief" })
	select {
	case r := <-c:
		t.Fatalf("the waiter gave up after losing the race: %v", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	second := f.request(1)[0]
	requireWokenBy(t, c, second, start)
}

func TestAWaiterThatClaimsAsItsWaitEndsWakesTheNext(t *testing.T) {
	// Two jobs become claimable by the clock alone, which writes nothing and
	// wakes nobody; the first waiter's wait then passes, and its last look
	// claims one. More may be there: the next waiter must be woken, as after
	// any claim, since no timer or clock check of this test wakes it.
	f := ownCommitsOnly(t)
	testwait.Eventually(t, func() bool { return clockWatchersRunning() == 0 })
	old := clockstep.SetPeriod(time.Hour) // the watcher starts with it: no clock check comes
	t.Cleanup(func() { clockstep.SetPeriod(old) })
	ids := make([]string, 2)
	for i := range ids {
		id, err := f.a.RequestJobWith("p", "", nil, RequestOptions{Delay: time.Hour})
		require.NoError(t, err)
		ids[i] = id
	}
	ctx := context.Background()
	first := startWaiting(t, ctx, f.a, "first", time.Minute, 300*time.Millisecond)
	second := startWaiting(t, ctx, f.a, "second", time.Minute, time.Hour)
	f.clk.advance(2 * time.Hour) // not setClock, which wakes every waiter
	r := receive(t, first)
	require.NoError(t, r.err)
	require.Equal(t, ids[0], r.l.JobID())
	requireWokenBy(t, second, ids[1], r.at)
}

func TestCancellingTheContextInterruptsAWait(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	res := startWaiting(t, ctx, f.a, "w", time.Minute, time.Hour)
	start := time.Now()
	cancel()
	r := receive(t, res)
	requireKind(t, r.err, KindInterrupted)
	require.ErrorIs(t, r.err, context.Canceled)
	require.ErrorIs(t, r.err, ErrInterrupted)
	require.Less(t, r.at.Sub(start), wakeBound)

	// A deadline: the wait ends with it. The deadline runs from before the
	// call, so a stalled host may pass it before the waiter joins the queue;
	// the call must then end the same way, so this waits for either.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	out := make(chan waitResult, 1)
	go func() {
		l, err := f.a.ClaimWait(ctx, "p", "w", time.Minute, time.Hour)
		out <- waitResult{l, err, time.Now()}
	}()
	r = receive(t, out)
	requireKind(t, r.err, KindInterrupted)
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	require.ErrorIs(t, r.err, ErrInterrupted)
	deadline, _ := ctx.Deadline()
	require.Less(t, r.at.Sub(deadline), wakeBound)
	// A context that ended before the call: interrupted, and nothing claimed.
	f.request(1)
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	for _, wait := range []time.Duration{0, time.Hour} {
		_, err := f.a.ClaimWait(ctx, "p", "w", time.Minute, wait)
		requireKind(t, err, KindInterrupted)
		require.ErrorIs(t, err, context.Canceled)
	}
	require.Equal(t, StateRequested, f.a.mustJobs(t)[0].State)
}

func (a *Authority) mustJobs(t *testing.T) []Job {
	t.Helper()
	js, err := a.Jobs("p")
	require.NoError(t, err)
	return js
}

func TestClosingTheAuthorityEndsEveryWaitAsClosed(t *testing.T) {
	f := newFixture(t)
	var cs []<-chan waitResult
	for i := 0; i < 3; i++ {
		cs = append(cs, startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour))
	}
	start := time.Now()
	require.NoError(t, f.a.Close())
	for _, c := range cs {
		r := receive(t, c)
		requireKind(t, r.err, KindClosed)
		require.Less(t, r.at.Sub(start), wakeBound)
	}
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, time.Hour)
	requireKind(t, err, KindClosed)
	require.False(t, f.a.waits.watching(), "the watcher stops with the authority")
}

func TestTheWatcherRunsOnlyWhileSomeoneWaits(t *testing.T) {
	old := watchLinger
	watchLinger = 20 * time.Millisecond
	defer func() { watchLinger = old }()
	f := newFixture(t)
	require.False(t, f.a.waits.watching())
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 30*time.Millisecond)
	requireKind(t, err, KindNothingToClaim)
	testwait.Eventually(t, func() bool { return !f.a.waits.watching() })
}

// ---- other processes --------------------------------------------------------

// roleProcess runs one helper process of the waiting tests (TestMain):
// "request" requests one job and prints when it committed; "waiter" claims
// and completes jobs with ClaimWait until the stop file appears.
func roleProcess(role string) int {
	a, err := Open(os.Getenv("LEASES_TEST_DB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer a.Close()
	switch role {
	case "request":
		if _, err := a.RequestJob("p", "", nil); err != nil {
			fmt.Fprintln(os.Stderr, "request:", err)
			return 1
		}
		fmt.Println(time.Now().UnixNano())
		return 0
	case "redrive":
		if _, err := a.Redrive("p", StateFailed); err != nil {
			fmt.Fprintln(os.Stderr, "redrive:", err)
			return 1
		}
		fmt.Println(time.Now().UnixNano())
		return 0
	case "waiter":
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopFile := os.Getenv("LEASES_TEST_STOP")
		go func() {
			for {
				if _, err := os.Stat(stopFile); err == nil {
					cancel()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		if err := waitLoop(ctx, a, os.Getenv("LEASES_TEST_NAME")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	return 2
}

// waitLoop completes jobs as they come, until ctx ends. Its waits are long:
// a wake-up that is lost leaves a job waiting.
func waitLoop(ctx context.Context, a *Authority, name string) error {
	for {
		l, err := a.ClaimWait(ctx, "p", name, time.Minute, time.Hour)
		if errors.Is(err, ErrInterrupted) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: claim: %w", name, err)
		}
		f := Facts{Metadata: map[string]json.RawMessage{"by": json.RawMessage(strconv.Quote(name))}}
		if err := l.Complete(f); err != nil {
			return fmt.Errorf("%s: complete: %w", name, err)
		}
	}
}

func helperProcess(t *testing.T, location, role string, env ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(os.Environ(), "LEASES_TEST_ROLE="+role, "LEASES_TEST_DB="+location,
		"LEASES_TEST_SAFETY_POLL=1h"), env...)
	require.NoError(t, cmd.Start())
	return cmd, out
}

func TestARequestCommittedByAnotherProcessWakesAWaiter(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	f.a.setClock(systemClock) // the other process uses the real clock
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	requireWokenByAnotherProcess(t, c, f.path, "request")
}

// requireWokenByAnotherProcess runs the helper process in role, which
// commits and prints when (unix ns), and checks that the waiter c got a
// lease within wakeBound of that commit.
func requireWokenByAnotherProcess(t *testing.T, c <-chan waitResult, location, role string) *Lease {
	t.Helper()
	cmd, out := helperProcess(t, location, role)
	require.NoError(t, cmd.Wait(), out.String())
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	require.NoError(t, err, out.String())
	r := receive(t, c)
	require.NoError(t, r.err)
	require.Less(t, r.at.Sub(time.Unix(0, ns)), wakeBound, "woken by the other process's commit")
	return r.l
}

func TestNoWakeUpIsLostInARaceOfRequestsAndWaiters(t *testing.T) {
	// Waiter goroutines and waiter processes, all with hour-long waits and
	// an hour-long safety poll; rounds of concurrent requests, each round
	// followed by a check that every job is claimed within the bound. A
	// lost wake-up strands the round's last jobs and fails the round.
	longSafetyPoll(t)
	f := newFixture(t)
	f.a.setClock(systemClock)
	stop := filepath.Join(t.TempDir(), "stop")
	var procs []*exec.Cmd
	var outs []*lockedBuffer
	for i := 0; i < 2; i++ {
		cmd, out := helperProcess(t, f.path, "waiter", "LEASES_TEST_STOP="+stop, "LEASES_TEST_NAME=proc"+strconv.Itoa(i))
		procs, outs = append(procs, cmd), append(outs, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- waitLoop(ctx, f.a, "g"+strconv.Itoa(i)) }()
	}
	var ids []string
	var mu sync.Mutex
	for round := 0; round < 25; round++ {
		n := 1 + round%7
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := f.a.RequestJob("p", "", nil)
				require.NoError(t, err)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}()
		}
		wg.Wait()
		deadline := time.Now().Add(wakeBound)
		for {
			left := 0
			for _, j := range f.a.mustJobs(t) {
				if j.State != StateCompleted {
					left++
				}
			}
			if left == 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "round %d: %d jobs left waiting while waiters wait", round, left)
			time.Sleep(2 * time.Millisecond)
		}
	}
	require.NoError(t, os.WriteFile(stop, nil, 0o600))
	cancel()
	for i := 0; i < 4; i++ {
		require.NoError(t, <-errs)
	}
	for i, cmd := range procs {
		require.NoError(t, cmd.Wait(), outs[i].String())
	}
	checkExactlyOnce(t, f.a, ids)
	evs, err := f.a.Events("p", 0)
	require.NoError(t, err)
	workers := map[string]bool{}
	for _, e := range evs {
		if e.Kind == "claimed" {
			workers[e.Worker] = true
		}
	}
	require.GreaterOrEqual(t, len(workers), 2, "the race was real")
}

// lookCounter counts a waiting claim's looks.
type lookCounter struct {
	store.Backend
	looks atomic.Int64
}

func (b *lookCounter) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	b.looks.Add(1)
	return b.Backend.HasClaimable(ctx, productionID, now)
}

// waitInSlices waits n times for 5 ms on the empty production "p", as the
// bindings wait in slices, each finding nothing to claim.
func waitInSlices(t *testing.T, f *fixture, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 5*time.Millisecond)
		requireKind(t, err, KindNothingToClaim)
	}
}

// sliceClaimsAJobRequestedNow requests a job and requires the next slice
// to claim it: the slices still see a commit.
func sliceClaimsAJobRequestedNow(t *testing.T, f *fixture) {
	t.Helper()
	id := f.request(1)[0]
	l, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 5*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, id, l.JobID())
}

func TestWaitingInShortSlicesLooksOnlyWhenSomethingHappened(t *testing.T) {
	// The bindings wait in slices of at most 100 ms (so that Ctrl-C is
	// noticed): a slice after a quiet one costs no read.
	longSafetyPoll(t)
	f := newFixture(t)
	looks := &lookCounter{Backend: f.a.b}
	f.a.b = looks
	waitInSlices(t, f, 20)
	require.LessOrEqual(t, looks.looks.Load(), int64(3), "the first slice looks, and the watcher's start may ask once more")
	sliceClaimsAJobRequestedNow(t, f) // a commit: the next slice looks, and claims
}

func TestTheSafetyPollLooksAgainWhenNothingWokeAWaiter(t *testing.T) {
	old := safetyPoll
	safetyPoll = 20 * time.Millisecond
	defer func() { safetyPoll = old }()
	f := newFixture(t)
	noWatcher(f.a) // without a watcher the poll is the only source left
	looks := &lookCounter{Backend: f.a.b}
	f.a.b = looks
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, 300*time.Millisecond)
	requireKind(t, err, KindNothingToClaim)
	require.GreaterOrEqual(t, looks.looks.Load(), int64(5))
}

// closingBackend closes the authority as a waiter's look reads the store,
// which the look then finds closed under it.
type closingBackend struct {
	store.Backend
	a    *Authority
	once sync.Once
}

func (b *closingBackend) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	b.once.Do(func() { _ = b.a.Close() })
	return b.Backend.HasClaimable(ctx, productionID, now)
}

func TestClosingTheAuthorityDuringAWaitersLookEndsTheWaitAsClosed(t *testing.T) {
	// A slow host makes this race likely: Close lands while a waiter reads.
	// The read fails on the closed store; the wait still ends as closed.
	f := newFixture(t)
	f.a.b = &closingBackend{Backend: f.a.b, a: f.a}
	_, err := f.a.ClaimWait(context.Background(), "p", "w", time.Minute, time.Hour)
	requireKind(t, err, KindClosed)
	require.ErrorIs(t, err, ErrClosed)
}

// A waiter is woken by what may make its own production's jobs claimable,
// not by every commit to the store: claims, completions and requests of
// another production, committed through another handle (another process on
// the same SQLite file), cost the waiter no look.
func TestAWaiterIsNotWokenByCommitsToAnotherProduction(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	_, err := f.a.CreateProduction("busy")
	require.NoError(t, err)
	other, err := Open(f.path)
	require.NoError(t, err)
	defer other.Close()
	other.setClock(f.clk.Now)
	looks := &lookCounter{Backend: f.a.b}
	f.a.b = looks
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.a.ClaimWait(ctx, "p", "w", time.Minute, time.Hour)
		done <- err
	}()
	require.Eventually(t, func() bool { return looks.looks.Load() > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the watcher's start has been reported
	settled := looks.looks.Load()
	began := time.Now()
	const commits = 20
	for i := 0; i < commits; i++ {
		_, err := other.RequestJob("busy", "", nil)
		require.NoError(t, err)
		l, err := other.Claim("busy", "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(Facts{}))
	}
	time.Sleep(200 * time.Millisecond) // a wake on the way is counted
	cancel()
	requireKind(t, <-done, KindInterrupted)
	// SQLite reads the WAL for the commits that ring no production's
	// doorbell at most once a second: each such reading may cost a look.
	allowed := 1 + int64(time.Since(began)/time.Second)
	require.LessOrEqual(t, looks.looks.Load()-settled, allowed,
		"looks of a waiter of p while another handle made %d commits of each kind to production busy", commits)
}

// readCounter counts a waiter's reads of the store: the mark, and what a
// look reads after its clock sample.
type readCounter struct {
	store.Backend
	marks, reads atomic.Int64
}

func (b *readCounter) HWM(ctx context.Context) (int64, error) {
	b.marks.Add(1)
	b.reads.Add(1)
	return b.Backend.HWM(ctx)
}

func (b *readCounter) HasClaimable(ctx context.Context, productionID string, now int64) (bool, error) {
	b.reads.Add(1)
	return b.Backend.HasClaimable(ctx, productionID, now)
}

func (b *readCounter) NextWakeAt(ctx context.Context, productionID string) (int64, bool, error) {
	b.reads.Add(1)
	return b.Backend.NextWakeAt(ctx, productionID)
}

func (b *readCounter) LookAt(ctx context.Context, productionID string, now int64) (bool, int64, bool, error) {
	b.reads.Add(1)
	return b.Backend.(interface {
		LookAt(context.Context, string, int64) (bool, int64, bool, error)
	}).LookAt(ctx, productionID, now)
}

// A look on a clock read on this host (SQLite) is two reads of the store:
// the mark, and, after the clock sample, whether a job is claimable at that
// time together with the next time one becomes claimable by itself. An
// idle SQLite waiter looks after every commit that rang no doorbell (at
// most once a second), so each read it saves is saved every second.
func TestALookOnAClockReadOnThisHostIsTwoReadsOfTheStore(t *testing.T) {
	longSafetyPoll(t)
	a, err := Open(filepath.Join(t.TempDir(), "leases.db"))
	require.NoError(t, err)
	defer a.Close()
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	reads := &readCounter{Backend: a.b}
	a.b = reads
	for i := 0; i < 3; i++ {
		a.waits.hub.Invalidate() // each wait looks
		_, err := a.ClaimWait(context.Background(), "p", "w", time.Minute, 5*time.Millisecond)
		requireKind(t, err, KindNothingToClaim)
	}
	looks, n := reads.marks.Load(), reads.reads.Load()
	require.GreaterOrEqual(t, looks, int64(3), "every wait looked")
	require.Equal(t, 2*looks, n, "%d looks read the store %d times", looks, n)
}

// lookupCounter counts the lookups of a production by name.
type lookupCounter struct {
	store.Backend
	lookups atomic.Int64
}

func (b *lookupCounter) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	b.lookups.Add(1)
	return b.Backend.ProductionByName(ctx, name)
}

// A caller that waits in slices (the bindings, 100 ms; Python's worker
// loop, 1 s) keeps its production's id between them: a slice costs no
// lookup by name (on PostgreSQL a round trip each), only what a long wait
// costs. A production deleted meanwhile is still found out by the next look
// (TestAWaitEndsNotFoundWhenItsProductionIsDeletedWhileItWaits).
func TestWaitingInSlicesLooksUpTheProductionOnce(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	lookups := &lookupCounter{Backend: f.a.b}
	f.a.b = lookups
	waitInSlices(t, f, 20)
	require.EqualValues(t, 1, lookups.lookups.Load(), "20 slices looked the production up")
	sliceClaimsAJobRequestedNow(t, f) // the slices still see a commit, and claim
}

// A look that no longer finds its production (deleted, through any handle
// or process) hands over to the claim, which answers not_found: a waiter,
// or a caller waiting in slices, learns it as it learns of any change.
func TestAWaitEndsNotFoundWhenItsProductionIsDeletedWhileItWaits(t *testing.T) {
	for _, sliced := range []bool{false, true} {
		t.Run(map[bool]string{false: "one wait", true: "slices"}[sliced], func(t *testing.T) {
			location := newLocation(t, "leases.db")
			a, err := Open(location)
			require.NoError(t, err)
			defer a.Close()
			_, err = a.CreateProduction("gone")
			require.NoError(t, err)
			done := make(chan error, 1)
			waiting := make(chan struct{})
			go func() {
				if !sliced {
					close(waiting)
					_, err := a.ClaimWait(context.Background(), "gone", "w", time.Minute, time.Hour)
					done <- err
					return
				}
				for i := 0; ; i++ {
					_, err := a.ClaimWait(context.Background(), "gone", "w", time.Minute, 100*time.Millisecond)
					if i == 0 {
						close(waiting)
					}
					if KindOf(err) != KindNothingToClaim {
						done <- err
						return
					}
				}
			}()
			<-waiting
			time.Sleep(200 * time.Millisecond)
			other, err := Open(location) // another handle deletes it: nothing rings
			require.NoError(t, err)
			defer other.Close()
			_, err = other.DeleteProduction(context.Background(), "gone", "")
			require.NoError(t, err)
			select {
			case err := <-done:
				requireKind(t, err, KindNotFound)
			case <-time.After(wakeBound):
				t.Fatal("the waiter did not learn that its production was deleted")
			}
		})
	}
}

// A production's deletion is a change its waiters are woken by, from any
// handle or process, as by a request: their look no longer finds it and
// the claim answers not_found, with no wait for the safety poll (an hour
// here).
func TestAWaiterIsWokenByItsProductionsDeletionThroughAnotherHandle(t *testing.T) {
	longSafetyPoll(t)
	f := newFixture(t)
	c := startWaiting(t, context.Background(), f.a, "w", time.Minute, time.Hour)
	other, err := Open(f.path) // another handle: only the store can tell
	require.NoError(t, err)
	defer other.Close()
	start := time.Now()
	_, err = other.DeleteProduction(context.Background(), "p", "")
	require.NoError(t, err)
	r := receive(t, c)
	requireKind(t, r.err, KindNotFound)
	require.Less(t, r.at.Sub(start), wakeBound, "the waiter was not woken by the deletion")
}
