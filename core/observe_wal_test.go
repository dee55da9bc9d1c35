package core

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/stretchr/testify/require"
)

// The SQLite WAL while listings run. These tests name their files, so they
// test SQLite in both passes.

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return fi.Size()
}

func TestTheWALStaysSmallWhileListingsRunUnderConcurrentWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.db")
	reader, err := Open(path)
	require.NoError(t, err)
	defer reader.Close()
	_, err = reader.CreateProduction("p")
	require.NoError(t, err)
	bulkRequest(t, reader, "p", 20_000)
	// The writer is another handle, as another process would be; NORMAL
	// skips the fsyncs, which change nothing here but the time taken.
	writer, err := OpenWith(path, Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer writer.Close()

	const total = 96 << 20 // bytes of payload written while listing
	payload := bytes.Repeat([]byte("w"), 16<<10)
	var written atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for written.Load() < total {
			if _, err := writer.RequestJob("p", "", payload); err != nil {
				t.Error(err)
				return
			}
			written.Add(int64(len(payload)))
		}
	}()
	// Listings page through every job over and over while the writer runs.
	listings := 0
	var listErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for written.Load() < total && listErr == nil {
			listErr = reader.EachJob(ctx, "p", JobQuery{Limit: MaxPageSize}, func(Job) error { return nil })
			listings++
		}
	}()
	var largest int64
	for written.Load() < total {
		largest = max(largest, walSize(t, path))
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	<-done
	require.NoError(t, listErr)
	require.GreaterOrEqual(t, listings, 2)
	t.Logf("%d listings while %d MiB were written; the WAL reached %.1f MiB", listings, total>>20, float64(largest)/(1<<20))
	// Listings back to back always have a reader holding a snapshot, so the
	// automatic checkpoint alone never lets the WAL start over: it grows
	// with every page written (≈ 100 MiB). Past the limit a writer's
	// RESTART checkpoint, with listings pausing for it, starts it over.
	require.Less(t, largest, int64(3*sqlitestore.JournalSizeLimit), "the WAL grew while listings ran")
	// The listings are over: the next commits checkpoint the whole WAL,
	// then start it over at the limit (one commit when the writer's last
	// checkpoint under the listings succeeded; two when, on a loaded
	// machine, it did not). A checkpoint the listings made fail at the end
	// holds the next try back for 100 ms (the keeper's retry pause): wait
	// that out first.
	time.Sleep(500 * time.Millisecond)
	for i := 0; i < 5 && (i == 0 || walSize(t, path) > sqlitestore.JournalSizeLimit); i++ {
		_, err = writer.RequestJob("p", "", nil)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, walSize(t, path), int64(sqlitestore.JournalSizeLimit))
}

func TestAWALThatAReaderMadeGrowIsCutBackToItsLimitOnceTheReaderEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.db")
	a, err := OpenWith(path, Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer a.Close()
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	// A reader outside the library holds a snapshot: no checkpoint can
	// finish, so everything written meanwhile stays in the WAL.
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	rtx, err := db.Begin()
	require.NoError(t, err)
	var n int
	require.NoError(t, rtx.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n))
	big := bytes.Repeat([]byte("b"), MaxPayloadLen)
	for i := 0; i < 80; i++ {
		_, err := a.RequestJob("p", "", big)
		require.NoError(t, err)
	}
	grown := walSize(t, path)
	require.Greater(t, grown, int64(sqlitestore.JournalSizeLimit), "the reader kept 80 MiB in the WAL")
	require.NoError(t, rtx.Rollback())
	// The next commits checkpoint the whole WAL, then start it over and cut
	// the file back to the limit; without a limit it would keep its size
	// for as long as any connection stays open.
	for i := 0; i < 5 && walSize(t, path) > sqlitestore.JournalSizeLimit; i++ {
		_, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
	}
	t.Logf("the WAL grew to %d MiB and was cut back to %d MiB", grown>>20, walSize(t, path)>>20)
	require.LessOrEqual(t, walSize(t, path), int64(sqlitestore.JournalSizeLimit))
}
