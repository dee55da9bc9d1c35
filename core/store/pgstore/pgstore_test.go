package pgstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

func open(t *testing.T, busy time.Duration) (*DB, string) {
	t.Helper()
	// More connections than mark rows, so one test can hold every row.
	u := pgtest.FreshSchema(t, false) + "&pool_max_conns=80"
	db, err := Open(u, Options{BusyTimeout: busy})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, u
}

func begin(t *testing.T, db *DB) *Tx {
	t.Helper()
	tx, err := db.BeginWrite(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback() })
	return tx.(*Tx)
}

// seed adds a production with n requested jobs and returns their ids.
func seed(t *testing.T, db *DB, n int) (string, []string) {
	t.Helper()
	tx := begin(t, db)
	p := store.Production{ID: uuid.NewString(), Name: "p", CreatedAt: 1}
	require.NoError(t, tx.InsertProduction(ctx, p))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		require.NoError(t, tx.InsertJob(ctx, store.Job{ID: ids[i], ProductionID: p.ID, Payload: []byte{},
			State: store.StateRequested, RequestedAt: 1, UpdatedAt: 1, ClaimableAt: 1, ReadyAt: 1, Due: true}))
	}
	require.NoError(t, tx.Commit())
	return p.ID, ids
}

func TestTheClockIsTheServersAndAdvancesWithinATransaction(t *testing.T) {
	db, _ := open(t, 0)
	tx := begin(t, db)
	var server int64
	require.NoError(t, tx.conn.c.QueryRow(ctx, `SELECT (extract(epoch FROM statement_timestamp()) * 1000000)::bigint`).Scan(&server))
	first, err := tx.Now(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, first, server, "the sample is the server's clock")
	time.Sleep(5 * time.Millisecond)
	second, err := tx.Now(ctx)
	require.NoError(t, err)
	// now() would repeat the transaction's start time: the pre-commit sample
	// must be a fresh reading.
	require.GreaterOrEqual(t, second-first, int64(5000))
}

func TestCommitsAdvanceDifferentMarkRowsWithoutWaiting(t *testing.T) {
	db, _ := open(t, 50*time.Millisecond)
	// Every transaction but one holds a mark row: the last still advances
	// one without waiting; only when all are held does a writer wait.
	// SetHWM is held until the transaction's next round trip (a read, or
	// COMMIT): the read after it sends it.
	var held []*Tx
	for i := 0; i < hwmShards; i++ {
		tx := begin(t, db)
		require.NoError(t, tx.SetHWM(ctx, int64(100+i)), "writer %d", i)
		_, err := tx.HWM(ctx)
		require.NoError(t, err, "writer %d", i)
		held = append(held, tx)
	}
	late := begin(t, db)
	require.NoError(t, late.SetHWM(ctx, 5000))
	err := late.Commit()
	require.ErrorIs(t, err, store.ErrBusy, "every row held: the writer waited the busy timeout")
	require.ErrorIs(t, err, store.ErrNotCommitted, "refused with its COMMIT: nothing was written")
	for _, tx := range held {
		require.NoError(t, tx.Commit())
	}
	v, err := db.HWM(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 100+hwmShards-1, v, "the mark is the greatest row")
	tx := begin(t, db)
	require.NoError(t, tx.SetHWM(ctx, 7))
	require.NoError(t, tx.Commit())
	v, err = db.HWM(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 100+hwmShards-1, v, "the mark never goes back")
}

func TestConcurrentClaimersTakeDifferentJobs(t *testing.T) {
	db, _ := open(t, 50*time.Millisecond)
	pid, ids := seed(t, db, 3)
	a, b := begin(t, db), begin(t, db)
	ja, err := a.NextClaimable(ctx, pid, 10)
	require.NoError(t, err)
	jb, err := b.NextClaimable(ctx, pid, 10)
	require.NoError(t, err, "the second claimer does not wait for the first")
	require.Equal(t, ids[0], ja.ID)
	require.Equal(t, ids[1], jb.ID)
	// A read outside a transaction locks nothing and sees the first job.
	j, err := db.NextClaimable(ctx, pid, 10)
	require.NoError(t, err)
	require.Equal(t, ids[0], j.ID)
}

func TestLapsedClaimsAreFoundOnlyOnceTheirBackoffHasPassed(t *testing.T) {
	db, _ := open(t, 0)
	pid, ids := seed(t, db, 3)
	tx := begin(t, db)
	for i, id := range ids[:2] {
		j, err := tx.JobByID(ctx, id)
		require.NoError(t, err)
		j.State, j.Expiry, j.ReadyAt, j.Due = store.StateClaimed, 100, int64(200-i), false
		require.NoError(t, tx.UpdateJob(ctx, j))
	}
	require.NoError(t, tx.Commit())
	j, err := db.NextClaimable(ctx, pid, 99)
	require.NoError(t, err)
	require.Equal(t, ids[2], j.ID, "claims are not in the claim order")
	tx = begin(t, db)
	defer tx.Rollback()
	js, err := tx.LapsedClaims(ctx, pid, 198, 10)
	require.NoError(t, err)
	require.Empty(t, js, "not before the end of the backoff")
	js, err = tx.LapsedClaims(ctx, pid, 200, 10)
	require.NoError(t, err)
	require.Len(t, js, 2)
	require.Equal(t, []string{ids[1], ids[0]}, []string{js[0].ID, js[1].ID}, "earliest first")
	// Another transaction passes over the rows this one holds.
	other := begin(t, db)
	defer other.Rollback()
	js, err = other.LapsedClaims(ctx, pid, 200, 10)
	require.NoError(t, err)
	require.Empty(t, js)
}

func TestADeadlockIsReportedAsRetry(t *testing.T) {
	db, _ := open(t, 10*time.Second)
	_, ids := seed(t, db, 2)
	a, b := begin(t, db), begin(t, db)
	_, err := a.JobByID(ctx, ids[0])
	require.NoError(t, err)
	_, err = b.JobByID(ctx, ids[1])
	require.NoError(t, err)
	var wg sync.WaitGroup
	var errA error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errA = a.JobByID(ctx, ids[1]) // waits for b
	}()
	time.Sleep(100 * time.Millisecond)
	_, errB := b.JobByID(ctx, ids[0]) // closes the cycle
	if errB == nil {
		b.Rollback() // b won: release a
	} else {
		a.Rollback()
	}
	wg.Wait()
	victim := errA
	if errB != nil {
		victim = errB
	}
	require.ErrorIs(t, victim, store.ErrRetry, "the server broke the deadlock; the library may run it again")
	require.False(t, errA != nil && errB != nil, "only one transaction is the victim")
}

func TestAUniqueRaceIsAConflict(t *testing.T) {
	db, _ := open(t, 0)
	p := store.Production{ID: uuid.NewString(), Name: "same", CreatedAt: 1}
	a := begin(t, db)
	require.NoError(t, a.InsertProduction(ctx, p))
	require.NoError(t, a.Commit())
	b := begin(t, db)
	p.ID = uuid.NewString()
	require.ErrorIs(t, b.InsertProduction(ctx, p), store.ErrConflict)
}

func TestMissingRowsAreErrNoRow(t *testing.T) {
	db, _ := open(t, 0)
	_, err := db.JobByID(ctx, uuid.NewString())
	require.True(t, errors.Is(err, store.ErrNoRow))
	_, err = db.ProductionByName(ctx, "nope")
	require.True(t, errors.Is(err, store.ErrNoRow))
	ps, err := db.Productions(ctx)
	require.NoError(t, err)
	require.NotNil(t, ps)
	require.Empty(t, ps)
}

func TestRedactRemovesEveryPassword(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5/db":                  "postgres://u:xxxxx@h:5/db",
		"postgres://u@h/db?password=pw&sslmode=x": "postgres://u@h/db?password=xxxxx&sslmode=x",
		"postgresql://h/db":                       "postgresql://h/db",
		"postgres://u:pw@[::1/db":                 "postgres://(unparsable URL)",
		"postgres://u@h/db?PassWord=pw":           "postgres://u@h/db?PassWord=xxxxx",
	} {
		require.Equal(t, want, Redact(in), in)
	}
}

// Only a refused production name or job key can be a concurrent creator's
// race (worth running the transaction again); any other refusal is final.
func TestOnlyAProductionNameOrJobKeyRefusalIsAConflict(t *testing.T) {
	db, _ := open(t, 0)
	pid, ids := seed(t, db, 1)
	jobWith := func(id, production, key string) store.Job {
		return store.Job{ID: id, ProductionID: production, Key: key, HasKey: true, Payload: []byte{},
			State: store.StateRequested, RequestedAt: 1, UpdatedAt: 1}
	}
	keyed := jobWith(uuid.NewString(), pid, "k")
	fact := []store.Fact{{JobID: ids[0], Kind: "metadata", Key: "k", Value: "1"}}
	out := []store.Output{{JobID: ids[0], Path: "/o", SHA256: "00", Nonce: "n"}}
	write := func(fn func(tx *Tx) error) error {
		tx := begin(t, db)
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	require.NoError(t, write(func(tx *Tx) error { return tx.InsertJob(ctx, keyed) }))
	require.NoError(t, write(func(tx *Tx) error { return tx.InsertFacts(ctx, fact) }))
	require.NoError(t, write(func(tx *Tx) error { return tx.InsertOutputs(ctx, out) }))

	err := write(func(tx *Tx) error {
		return tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "p", CreatedAt: 1})
	})
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorIs(t, write(func(tx *Tx) error { return tx.InsertJob(ctx, jobWith(uuid.NewString(), pid, "k")) }), store.ErrConflict)
	for name, fn := range map[string]func(tx *Tx) error{
		"fact":               func(tx *Tx) error { return tx.InsertFacts(ctx, fact) },
		"output":             func(tx *Tx) error { return tx.InsertOutputs(ctx, out) },
		"job id":             func(tx *Tx) error { return tx.InsertJob(ctx, jobWith(ids[0], pid, "other")) },
		"missing production": func(tx *Tx) error { return tx.InsertJob(ctx, jobWith(uuid.NewString(), "none", "other")) },
	} {
		err := write(fn)
		require.ErrorIs(t, err, store.ErrConstraint, name)
		require.NotErrorIs(t, err, store.ErrConflict, name)
	}
}

// Advancing the mark, in every commit, finds its shard by the primary key:
// it never reads and sorts every shard row (a table whose dead row versions
// pile up between vacuums).
func TestAdvancingTheMarkFindsOneShardByItsKeyWithoutReadingEveryShard(t *testing.T) {
	_, u := open(t, time.Second)
	c := connect(t, strings.Replace(u, "&pool_max_conns=80", "", 1)) // a pool's setting, not the server's
	_, err := c.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	defer c.Exec(ctx, `ROLLBACK`)
	p := plan(t, c, "SetHWM", setHWMSQL, []any{int64(5), 37})
	require.NotContains(t, p, "Sort", "the shard is chosen without sorting the shards:\n%s", p)
	require.Contains(t, p, "Index Scan using leases_hwm_pkey", "the shard is found by its key:\n%s", p)
}
