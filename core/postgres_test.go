package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// Rules about choosing the store, the store's clock and conflict retries.
// The PostgreSQL-only tests need LEASES_TEST_PG_URL (see stores_test.go) and
// run in both passes; the rest use wrapped backends and run everywhere.

func TestAPasswordInTheURLNeverAppearsInErrors(t *testing.T) {
	for loc, kind := range map[string]Kind{
		"postgres://u:SECRETPW@127.0.0.1:1/x?connect_timeout=2":            KindStorage, // nothing listens
		"postgresql://u@127.0.0.1:1/x?password=SECRETPW&connect_timeout=2": KindStorage,
		"postgres://u:SECRETPW@[::1/x":                                     KindInvalidArgument, // unparsable
		"postgres://u:SECRETPW@h/x?sslmode=bogus":                          KindInvalidArgument, // refused by the driver's parser
	} {
		_, err := Open(loc)
		requireKind(t, err, kind)
		require.NotContains(t, err.Error(), "SECRETPW", loc)
		require.NotContains(t, fmt.Sprintf("%+v %#v", err, err), "SECRETPW", loc)
	}
	_, err := OpenWith("postgres://u:SECRETPW@h/x", Options{Synchronous: "NORMAL"})
	requireKind(t, err, KindInvalidArgument)
	require.NotContains(t, err.Error(), "SECRETPW")
}

func TestPostgresRefusesForeignLeasesTablesButSharesADatabase(t *testing.T) {
	u := freshSchema(t)
	// An application's own tables do not stop the authority…
	pgExec(t, u, `CREATE TABLE jobs (id int PRIMARY KEY)`)
	a, err := Open(u)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	// …but leases_ tables that are not ours do.
	v := freshSchema(t)
	pgExec(t, v, `CREATE TABLE leases_jobs (id int PRIMARY KEY)`)
	_, err = Open(v)
	requireKind(t, err, KindStorage)
	require.Contains(t, err.Error(), "not a libleases")
}

func TestConcurrentOpensOfAnEmptyPostgresDatabaseCreateTheSchemaOnce(t *testing.T) {
	u := freshSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a, err := Open(u)
			if err == nil {
				_, err = a.CreateProduction("p")
				a.Close()
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	a, err := Open(u)
	require.NoError(t, err)
	defer a.Close()
	ps, err := a.Productions()
	require.NoError(t, err)
	require.Len(t, ps, 1, "concurrent idempotent creates made one production")
}

func TestClaimsFromManyHostsDoNotQueueOnOneRow(t *testing.T) {
	a, u := pgAuthority(t)
	const holders = 6
	for i := 0; i < holders+1; i++ {
		_, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
	}
	// Each edit is a host midway through a claim: it holds its job's row and
	// has not committed. A further claimer with a 50 ms busy timeout takes the
	// one job left at once: nothing it needs is held.
	for i := 0; i < holders; i++ {
		e, err := a.Begin()
		require.NoError(t, err)
		defer e.Abort()
		_, err = e.Claim("p", fmt.Sprintf("host%d", i), time.Minute)
		require.NoError(t, err)
	}
	other, err := OpenWith(u, Options{BusyTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	defer other.Close()
	l, err := other.Claim("p", "late-host", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Complete(Facts{}))
	_, err = other.Claim("p", "late-host", time.Minute)
	requireKind(t, err, KindNothingToClaim)
}

// pgAuthority opens an authority on a fresh schema of the test server, with
// production "p"; it returns its URL too. It is closed when the test ends.
func pgAuthority(t *testing.T) (*Authority, string) {
	t.Helper()
	u := freshSchema(t)
	a, err := Open(u)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	return a, u
}

// ---- the store's clock ------------------------------------------------------

// clockBackend gives a SQLite backend's transactions a server clock, to check that the rules
// take every sample from the store when it has one.
type clockBackend struct {
	now   atomic.Int64
	asked atomic.Int64
}

type clockTx struct {
	store.Tx
	b *clockBackend
}

func (t *clockTx) Now(context.Context) (int64, error) {
	t.b.asked.Add(1)
	return t.b.now.Load(), nil
}

func TestAStoreWithAServerClockSuppliesEverySample(t *testing.T) {
	a, err := Open(newLocation(t, "leases.db"))
	require.NoError(t, err)
	defer a.Close()
	cb := &clockBackend{}
	server := int64(2_000_000_000_000_000) // 2033: far from this host's clock
	cb.now.Store(server)
	wrapTxs(a, func(tx store.Tx) store.Tx { return &clockTx{Tx: tx, b: cb} })
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	_, err = a.RequestJob("p", "", nil)
	require.NoError(t, err)
	l, err := a.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, server, l.claimedAt, "the claim time is the server's")
	require.Equal(t, server+time.Minute.Microseconds(), l.ExpiryUnixUS())
	hwm, err := a.HighWaterMark()
	require.NoError(t, err)
	require.Equal(t, server, hwm.UnixMicro(), "the mark records the server's samples")
	// The server's clock going back is a regression, whatever this host's
	// clock says.
	cb.now.Store(server - 1)
	requireKind(t, l.Renew(time.Hour), KindClockRegressed)
	// In test builds the seam replaces the server's sample; the server is
	// still asked, so clock tests run the same path.
	asked := cb.asked.Load()
	a.setClock(func() int64 { return server + 10 })
	require.NoError(t, l.Renew(time.Hour))
	require.Equal(t, server+10+time.Hour.Microseconds(), l.ExpiryUnixUS())
	require.Equal(t, asked+3, cb.asked.Load(), "every sample of the renewal asked the server: at the start, once it held the row, before commit")
}

// ---- conflicts --------------------------------------------------------------

// conflictBackend aborts the first n commits as a server does on a
// serialization failure or deadlock: nothing is written, ErrRetry returned.
type conflictBackend struct {
	left    atomic.Int64 // commits still to abort; <0 means every one
	commits atomic.Int64
}

type conflictTx struct {
	store.Tx
	b *conflictBackend
}

func (t *conflictTx) Commit() error {
	t.b.commits.Add(1)
	if t.b.left.Load() != 0 {
		t.b.left.Add(-1)
		t.Tx.Rollback()
		return fmt.Errorf("%w: deadlock detected (SQLSTATE 40P01)", store.ErrRetry)
	}
	return t.Tx.Commit()
}

func TestConflictedTransactionsAreRetriedThenReportedBusy(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	cb := &conflictBackend{}
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return &conflictTx{Tx: tx, b: cb} })
	// A few conflicts: the library runs the claim again and it succeeds once.
	cb.left.Store(3)
	l := f.claim("w", time.Minute)
	// Each aborted guarded commit is followed by its mark being recorded
	// (rollback-then-record), which is a commit too.
	require.GreaterOrEqual(t, cb.commits.Load(), int64(4))
	require.Equal(t, 1, countEvents(t, f.a, "claimed"), "the retried claim committed exactly once")
	// Unending conflicts: after the bound, Busy, with nothing written.
	before := f.snapshot()
	cb.left.Store(-1)
	cb.commits.Store(0)
	err := l.Complete(Facts{})
	requireKind(t, err, KindBusy)
	require.Contains(t, err.Error(), "conflicted")
	require.GreaterOrEqual(t, cb.commits.Load(), int64(maxAttempts))
	after := f.snapshot()
	after.hwm = before.hwm // rollback-then-record may advance the mark alone
	require.Equal(t, before, after)
	require.Equal(t, LeaseActive, l.State())
	// Unguarded writes are retried the same way.
	cb.left.Store(2)
	_, err = f.a.RequestJob("p", "k", nil)
	require.NoError(t, err)
	cb.left.Store(0)
	require.NoError(t, l.Complete(Facts{}))
}

func TestAFollowerNeverMissesAnEventThatCommitsLate(t *testing.T) {
	a, _ := pgAuthority(t)
	seen, err := a.Events("p", 0)
	require.NoError(t, err)
	after := seen[len(seen)-1].Seq
	// A host's edit writes an event first but commits last.
	slow, err := a.Begin()
	require.NoError(t, err)
	defer slow.Abort()
	slowJob, err := slow.RequestJob("p", "slow", nil)
	require.NoError(t, err)
	// The store sends a transaction's event with its next round trip: the
	// next request's look for its key sends this one's (and draws its seq).
	slowNext, err := slow.RequestJob("p", "slow-next", nil)
	require.NoError(t, err)
	fastJob, err := a.RequestJob("p", "fast", nil)
	require.NoError(t, err)
	// While the older writer runs, the later event is held back: listing it
	// would move a follower past the slow one's event.
	es, err := a.Events("p", after)
	require.NoError(t, err)
	require.Empty(t, es, "nothing is listed past a transaction still running")
	require.NoError(t, slow.Commit())
	es, err = a.Events("p", after)
	require.NoError(t, err)
	require.Len(t, es, 3)
	require.Equal(t, []string{slowJob, fastJob, slowNext}, []string{es[0].JobID, es[1].JobID, es[2].JobID},
		"events are listed in a follower-safe order")
	require.Less(t, es[0].Seq, es[1].Seq)
	require.Less(t, es[1].Seq, es[2].Seq)
}

func TestAWriterOfAnotherSchemaDoesNotHoldBackEvents(t *testing.T) {
	open := func() *Authority {
		a, _ := pgAuthority(t)
		return a
	}
	other, mine := open(), open()
	busy, err := other.Begin()
	require.NoError(t, err)
	defer busy.Abort()
	_, err = busy.RequestJob("p", "", nil) // holds a transaction id, uncommitted
	require.NoError(t, err)
	id, err := mine.RequestJob("p", "", nil)
	require.NoError(t, err)
	es, err := mine.Events("p", 0)
	require.NoError(t, err)
	require.Equal(t, id, es[len(es)-1].JobID, "a process reads its own committed event at once")
}

func TestATransactionThatHasWrittenNoEventDoesNotHoldBackEventsAndListsAfterThem(t *testing.T) {
	a, _ := pgAuthority(t)
	late, err := a.Begin()
	require.NoError(t, err)
	defer late.Abort()
	early, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	es, err := a.Events("p", 0)
	require.NoError(t, err)
	require.Equal(t, early, es[len(es)-1].JobID)
	after := es[len(es)-1].Seq
	lateJob, err := late.RequestJob("p", "", nil)
	require.NoError(t, err)
	require.NoError(t, late.Commit())
	es, err = a.Events("p", after)
	require.NoError(t, err)
	require.Len(t, es, 1, "the late writer's event follows what was already listed")
	require.Equal(t, lateJob, es[0].JobID)
}

func TestTheEventsOfOneJobAreInTheOrderTheyHappened(t *testing.T) {
	a, _ := pgAuthority(t)
	x, err := a.RequestJob("p", "x", nil)
	require.NoError(t, err)
	j, err := a.RequestJob("p", "j", nil)
	require.NoError(t, err)
	held, err := a.ClaimJob("p", j, "host-a", time.Minute)
	require.NoError(t, err)
	// An edit writes its first event, then a release commits elsewhere, then
	// the edit claims the released job: its claim follows the release.
	e, err := a.Begin()
	require.NoError(t, err)
	defer e.Abort()
	_, err = e.ClaimJob("p", x, "host-b", time.Minute)
	require.NoError(t, err)
	require.NoError(t, held.Release())
	_, err = e.ClaimJob("p", j, "host-b", time.Minute)
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	var kinds []string
	for _, ev := range evs {
		if ev.JobID == j {
			kinds = append(kinds, ev.Kind+":"+ev.Worker)
		}
	}
	require.Equal(t, []string{"requested:", "claimed:host-a", "released:host-a", "claimed:host-b"}, kinds)
}

// pausingBackend holds a transaction after its first clock sample, before
// it reads the job, until released.
type pausingBackend struct {
	paused, resume chan struct{}
}

type pausingTx struct {
	store.Tx
	b *pausingBackend
}

func (t *pausingTx) Now(ctx context.Context) (int64, error) { return t.Tx.(store.Clock).Now(ctx) }

func (t *pausingTx) JobByID(ctx context.Context, id string) (store.Job, error) {
	close(t.b.paused)
	<-t.b.resume
	return t.Tx.JobByID(ctx, id)
}

// claimAcrossARelease: host A claims a new job; host B's claim (claim) runs
// in a transaction that wrap pauses (closing pb.paused); meanwhile
// beforeRelease runs and A releases the job; then B goes on. It returns A,
// the job and what B's claim returned.
func claimAcrossARelease(t *testing.T, wrap func(*pausingBackend) func(store.Tx) store.Tx,
	claim func(b *Authority, j string) (*Lease, error), beforeRelease func(a *Authority)) (*Authority, string, *Lease, error) {
	t.Helper()
	a, u := pgAuthority(t)
	j, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	held, err := a.ClaimJob("p", j, "host-a", time.Minute)
	require.NoError(t, err)
	b, err := Open(u)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	pb := &pausingBackend{paused: make(chan struct{}), resume: make(chan struct{})}
	wrapTxs(b, wrap(pb))
	var claimed *Lease
	var claimErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		claimed, claimErr = claim(b, j)
	}()
	<-pb.paused
	beforeRelease(a)
	require.NoError(t, held.Release())
	close(pb.resume)
	<-done
	return a, j, claimed, claimErr
}

func TestAClaimIsNeverTimedBeforeTheReleaseItFollows(t *testing.T) {
	// Host B starts claiming the job (its first sample is taken) and is held
	// before it reads the row; host A then releases; then B goes on.
	a, j, claimed, claimErr := claimAcrossARelease(t,
		func(pb *pausingBackend) func(store.Tx) store.Tx {
			return func(tx store.Tx) store.Tx { return &pausingTx{Tx: tx, b: pb} }
		},
		func(b *Authority, j string) (*Lease, error) { return b.ClaimJob("p", j, "host-b", time.Minute) },
		func(*Authority) { time.Sleep(2 * time.Millisecond) })
	require.NoError(t, claimErr)
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	var released Event
	for _, e := range evs {
		if e.JobID == j && e.Kind == "released" {
			released = e
		}
	}
	require.Equal(t, "host-a", released.Worker)
	require.GreaterOrEqual(t, claimed.claimedAt, released.At.UnixMicro(),
		"the claim is timed once it holds the row, after the release it follows")
}

func TestAReadOnlyPostgresSessionGetsAStorageErrorAndChangesNothing(t *testing.T) {
	a, u := pgAuthority(t)
	_, err := a.RequestJob("p", "", nil)
	require.NoError(t, err)
	before, err := a.Jobs("p")
	require.NoError(t, err)
	// A hot standby, or a role whose transactions are read-only.
	ro, err := Open(u + "&default_transaction_read_only=on")
	require.NoError(t, err, "opening an up-to-date database writes nothing")
	defer ro.Close()
	_, err = ro.Claim("p", "w", time.Minute)
	requireKind(t, err, KindStorage)
	require.Contains(t, err.Error(), "read-only")
	_, err = ro.RequestJob("p", "", nil)
	requireKind(t, err, KindStorage)
	after, err := a.Jobs("p")
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// countEvents counts production "p"'s events of one kind.
func countEvents(t *testing.T, a *Authority, kind string) int {
	t.Helper()
	evs, err := a.Events("p", 0)
	require.NoError(t, err)
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// pausingClockTx pauses its transaction once, after its first clock sample.
type pausingClockTx struct {
	store.Tx
	b    *pausingBackend
	once *sync.Once
}

func (t *pausingClockTx) Now(ctx context.Context) (int64, error) {
	v, err := t.Tx.(store.Clock).Now(ctx)
	t.once.Do(func() {
		close(t.b.paused)
		<-t.b.resume
	})
	return v, err
}

// A transition is never timed before the one it follows, even when the
// clock it reads is behind the time of that one: a claim whose first sample
// was taken (not behind the mark) before a release of its job committed at
// a later time (the releasing host's clock ran ahead, or the server's stepped
// back) is clock_regressed, as it would be had it started after the release;
// it is never timed before the release.
func TestATransitionIsNeverTimedBeforeTheOneItFollowsOnAClockBehindIt(t *testing.T) {
	for _, byID := range []bool{true, false} {
		t.Run(map[bool]string{true: "by id", false: "next"}[byID], func(t *testing.T) {
			a, _, claimed, claimErr := claimAcrossARelease(t,
				func(pb *pausingBackend) func(store.Tx) store.Tx {
					var once sync.Once
					return func(tx store.Tx) store.Tx { return &pausingClockTx{Tx: tx, b: pb, once: &once} }
				},
				func(b *Authority, j string) (*Lease, error) {
					if byID {
						return b.ClaimJob("p", j, "host-b", time.Minute)
					}
					return b.Claim("p", "host-b", time.Minute)
				},
				func(a *Authority) {
					// Host A's clock runs 10 s ahead of B's when it releases.
					a.setClock(func() int64 { return systemClock() + (10 * time.Second).Microseconds() })
				})
			requireKind(t, claimErr, KindClockRegressed)
			require.Nil(t, claimed)
			js, err := a.Jobs("p")
			require.NoError(t, err)
			require.Equal(t, StateRequested, js[0].State, "the claim committed nothing")
		})
	}
}
