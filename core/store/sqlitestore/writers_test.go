package sqlitestore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

func openWriters(t *testing.T, path string, busy time.Duration) *DB {
	t.Helper()
	s, err := Open(path, Options{Synchronous: "NORMAL", BusyTimeout: busy}, func() int64 { return 0 })
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// untilQueued waits until n writers wait in q. It waits for a state, not
// for time: the bound only ends a test that would otherwise hang.
func untilQueued(t *testing.T, q *writerQueue, n int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); q.waiting() != n; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(end), "%d writers queued, want %d", q.waiting(), n)
	}
}

// writeProduction begins a write on s (queueing for it) in a goroutine,
// inserts the production name and commits; the channel gets the outcome.
func writeProduction(s *DB, ctx context.Context, name string) <-chan error {
	done := make(chan error, 1)
	go func() {
		tx, err := s.BeginWrite(ctx)
		if err == nil {
			if err = tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: name, CreatedAt: 1}); err != nil {
				tx.Rollback()
			} else {
				err = tx.Commit()
			}
		}
		done <- err
	}()
	return done
}

func productionNames(t *testing.T, s *DB) map[string]bool {
	t.Helper()
	ps, err := s.Productions(context.Background())
	require.NoError(t, err)
	names := map[string]bool{}
	for _, p := range ps {
		names[p.Name] = true
	}
	return names
}

// Each writer joins the queue only once the one before it is queued, so the
// order they asked in is known; they alternate between two handles on one
// file, which share the queue.
func TestWritersOfOneProcessAreServedInTheOrderTheyAsked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo.db")
	handles := []*DB{openWriters(t, path, time.Minute), openWriters(t, path, time.Minute)}
	require.Same(t, handles[0].writers, handles[1].writers, "handles of one file in one process share their queue")
	ctx := context.Background()
	holder, err := handles[0].BeginWrite(ctx)
	require.NoError(t, err)
	const n = 12
	var mu sync.Mutex
	var served []int
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := handles[i%2].BeginWrite(ctx)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
			if err := tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: fmt.Sprint(i), CreatedAt: 1}); err != nil {
				tx.Rollback()
				errs <- err
				return
			}
			errs <- tx.Commit()
		}()
		untilQueued(t, handles[0].writers, i+1)
	}
	require.NoError(t, holder.Commit())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, served)
	require.Len(t, productionNames(t, handles[0]), n)
	require.Zero(t, handles[0].writers.waiting())
}

// A writer queued behind one that holds the lock past its busy timeout is
// busy once the timeout passes, leaves the queue, and writes nothing; the
// writers behind it keep their place.
func TestAQueuedWriterThatOutwaitsTheBusyTimeoutIsBusyAndWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	patient := openWriters(t, path, time.Minute)
	const busy = 100 * time.Millisecond
	hasty := openWriters(t, path, busy)
	ctx := context.Background()
	holder, err := patient.BeginWrite(ctx)
	require.NoError(t, err)
	start := time.Now()
	done := writeProduction(hasty, ctx, "hasty")
	untilQueued(t, patient.writers, 1)
	behind := writeProduction(patient, ctx, "patient")
	untilQueued(t, patient.writers, 2)
	err = <-done
	require.ErrorIs(t, err, store.ErrBusy)
	require.Contains(t, err.Error(), "busy timeout (100ms)")
	require.GreaterOrEqual(t, time.Since(start), busy, "busy only after the timeout")
	untilQueued(t, patient.writers, 1) // it left; the one behind it stays
	require.NoError(t, holder.Commit())
	require.NoError(t, <-behind)
	names := productionNames(t, patient)
	require.False(t, names["hasty"], "the writer that timed out wrote nothing")
	require.True(t, names["patient"])
	require.Zero(t, patient.writers.waiting())
}

// A queued writer whose context ends leaves the queue at once (busy
// wrapping the context's error, store.ErrAbandoned), long before its busy
// timeout; the turn it would have had goes to the writer behind it.
func TestAQueuedWriterWhoseContextEndsLeavesTheQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cancel.db")
	s := openWriters(t, path, time.Minute)
	bg := context.Background()
	holder, err := s.BeginWrite(bg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	done := writeProduction(s, ctx, "cancelled")
	untilQueued(t, s.writers, 1)
	behind := writeProduction(s, bg, "behind")
	untilQueued(t, s.writers, 2)
	start := time.Now()
	cancel()
	err = <-done
	require.ErrorIs(t, err, store.ErrAbandoned)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 30*time.Second, "ended with the context, not at the one-minute busy timeout")
	untilQueued(t, s.writers, 1)
	require.NoError(t, holder.Commit())
	require.NoError(t, <-behind)
	require.Zero(t, s.writers.waiting())
	names := productionNames(t, s)
	require.False(t, names["cancelled"], "the writer whose context ended wrote nothing")
	require.True(t, names["behind"])
}

// The queue itself, hammered: writers that give up at random (context or
// timeout) never leave the turn held by nobody nor let two hold it, and
// every writer that did not give up is served.
func TestTheWriterQueueNeverLosesOrDoublesTheTurn(t *testing.T) {
	var q writerQueue
	var holders atomic.Int32
	var doubled atomic.Bool
	var served, gaveUp atomic.Int32
	var wg sync.WaitGroup
	const n = 400
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			deadline := time.Now().Add(time.Minute)
			switch rand.IntN(4) {
			case 0:
				time.AfterFunc(time.Duration(rand.IntN(2000))*time.Microsecond, cancel)
			case 1:
				deadline = time.Now().Add(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
			if _, ok := q.acquire(ctx, deadline, nil); !ok {
				gaveUp.Add(1)
				return
			}
			if holders.Add(1) != 1 {
				doubled.Store(true)
			}
			time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
			holders.Add(-1)
			served.Add(1)
			q.release()
		}()
	}
	wg.Wait()
	require.False(t, doubled.Load(), "two writers held the turn at once")
	require.EqualValues(t, n, served.Load()+gaveUp.Load())
	require.Positive(t, served.Load())
	require.Zero(t, q.waiting())
	_, ok := q.acquire(context.Background(), time.Now().Add(time.Second), nil)
	require.True(t, ok, "the turn is free again")
	q.release()
}

// connMark names the connection tx runs on: a temporary table is private
// to its connection, so the first transaction on each connection leaves a
// fresh name in it and every later one reads that name back.
func connMark(t *testing.T, w store.Tx) string {
	t.Helper()
	ctx := context.Background()
	tx := w.(*Tx)
	_, err := tx.tx.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS which_conn (id TEXT)`)
	require.NoError(t, err)
	_, err = tx.tx.ExecContext(ctx, `INSERT INTO which_conn SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM which_conn)`, uuid.NewString())
	require.NoError(t, err)
	var id string
	require.NoError(t, tx.tx.QueryRowContext(ctx, `SELECT id FROM which_conn`).Scan(&id))
	return id
}

// markedWrite inserts the production name and commits, returning the name
// of the connection it ran on.
func markedWrite(t *testing.T, s *DB, name string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	id := connMark(t, tx)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: name, CreatedAt: 1}))
	require.NoError(t, tx.Commit())
	return id
}

// Every write of a handle runs on its one writer connection, whatever the
// readers beside it hold: first with a reader holding the pool's connection
// that an earlier write returned (a pooled writer would have to open
// another), then with goroutines reading and writing at once.
func TestWritersOfOneProcessShareOneWriterConnection(t *testing.T) {
	s := openWriters(t, filepath.Join(t.TempDir(), "one.db"), time.Minute)
	ctx := context.Background()
	first := markedWrite(t, s, "first")
	reader, err := s.db.Conn(ctx)
	require.NoError(t, err)
	var marked int
	require.NoError(t, reader.QueryRowContext(ctx, `SELECT count(*) FROM temp.sqlite_schema WHERE name = 'which_conn'`).Scan(&marked))
	require.Zero(t, marked, "a reader got the writer connection")
	require.Equal(t, first, markedWrite(t, s, "second"), "a write with a reader beside it ran on another connection")
	require.NoError(t, reader.Close())

	const goroutines, each = 16, 10
	var mu sync.Mutex
	used := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.Productions(ctx); err != nil {
					t.Error(err)
					return
				}
				id := markedWrite(t, s, fmt.Sprintf("%d-%d", g, i))
				mu.Lock()
				used[id]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]int{first: goroutines * each}, used, "writes ran on more than one connection")
	require.Len(t, productionNames(t, s), 2+goroutines*each)
}

// breakWriterConn makes database/sql give up on the handle's writer
// connection, as it does when the driver answers ErrBadConn: the connection
// is closed. While a transaction runs on it, that waits for its end.
func breakWriterConn(s *DB) {
	s.writer.mu.Lock()
	c := s.writer.conn
	s.writer.mu.Unlock()
	c.Raw(func(any) error { return driver.ErrBadConn })
}

// A writer connection that breaks is replaced: the next write opens a
// fresh one and succeeds, nothing of a write that failed with it is left,
// and the turn at the writer lock is not lost.
func TestABrokenWriterConnectionIsReplacedAndTheNextWriteSucceeds(t *testing.T) {
	ctx := context.Background()
	t.Run("between writes", func(t *testing.T) {
		s := openWriters(t, filepath.Join(t.TempDir(), "between.db"), time.Minute)
		before := markedWrite(t, s, "before")
		breakWriterConn(s)
		require.NotEqual(t, before, markedWrite(t, s, "after"), "the broken connection was used again")
		require.Equal(t, map[string]bool{"before": true, "after": true}, productionNames(t, s))
		require.Zero(t, s.writers.waiting())
	})
	t.Run("while a write runs", func(t *testing.T) {
		s := openWriters(t, filepath.Join(t.TempDir(), "during.db"), time.Minute)
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		during := connMark(t, tx)
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "during", CreatedAt: 1}))
		broken := make(chan struct{})
		go func() { breakWriterConn(s); close(broken) }()
		require.NoError(t, tx.Commit())
		<-broken
		require.NotEqual(t, during, markedWrite(t, s, "after"), "the broken connection was used again")
		require.Equal(t, map[string]bool{"during": true, "after": true}, productionNames(t, s))
	})
	// SQLite rolls back the whole transaction when an INSERT inside it is
	// interrupted: the ROLLBACK that follows finds none, and the writer
	// connection is left for a fresh one.
	t.Run("transaction aborted by an interrupt", func(t *testing.T) {
		s := openWriters(t, filepath.Join(t.TempDir(), "interrupted.db"), time.Minute)
		wctx, cancel := context.WithCancel(ctx)
		w, err := s.BeginWrite(wctx)
		require.NoError(t, err)
		tx := w.(*Tx)
		require.NoError(t, tx.InsertProduction(wctx, store.Production{ID: uuid.NewString(), Name: "lost", CreatedAt: 1}))
		_, err = tx.tx.ExecContext(wctx, `CREATE TEMP TABLE endless (x INTEGER)`)
		require.NoError(t, err)
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err = tx.tx.ExecContext(wctx, `INSERT INTO endless WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c`)
		require.Error(t, err, "the endless INSERT ended without its interrupt")
		require.Error(t, tx.Rollback(), "SQLite had rolled the transaction back already")
		require.Nil(t, s.writer.conn, "the writer connection whose ROLLBACK failed was kept")
		markedWrite(t, s, "after")
		require.Equal(t, map[string]bool{"after": true}, productionNames(t, s), "the interrupted transaction left its writes")
		require.Zero(t, s.writers.waiting())
	})
}

// A write transaction's statements run on the writer connection itself,
// prepared there once: never once the transaction has ended, when the
// connection is in none and a statement would commit on its own.
func TestAStatementOfAWriteTransactionThatHasEndedFailsAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := openWriters(t, filepath.Join(t.TempDir(), "ended.db"), time.Minute)
	for i, end := range []func(store.Tx) error{store.Tx.Commit, store.Tx.Rollback} {
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: fmt.Sprint("in", i), CreatedAt: 1}))
		require.NoError(t, end(tx))
		require.Error(t, tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "after", CreatedAt: 1}))
	}
	require.False(t, productionNames(t, s)["after"], "a statement ran after its transaction ended")
}

// Closing a handle while a write transaction runs waits for it to end,
// then closes the statements prepared on the writer connection and the
// connection: the write commits whole, and nothing crashes.
func TestClosingAHandleWhileAWriteRunsWaitsForItAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "closing.db")
	s, err := Open(path, Options{Synchronous: "NORMAL", BusyTimeout: time.Minute}, func() int64 { return 0 })
	require.NoError(t, err)
	markedWrite(t, s, "before") // statements prepared on the writer connection
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for s.closing.Load() == false {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a write transaction ran", err)
	default:
	}
	wrote := make(chan error, 1)
	go func() {
		err := tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: "during", CreatedAt: 1})
		if _, rerr := tx.JobByID(ctx, "none"); err == nil && !errors.Is(rerr, store.ErrNoRow) {
			err = rerr
		}
		if err == nil {
			err = tx.Commit()
		}
		wrote <- err
	}()
	select {
	case err := <-wrote:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write transaction could not go on while Close waited for it")
	}
	require.NoError(t, <-closed)
	again := openWriters(t, path, time.Minute)
	require.Equal(t, map[string]bool{"before": true, "during": true}, productionNames(t, again))
}
