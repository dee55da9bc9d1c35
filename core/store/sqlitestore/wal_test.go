package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// TestAListingPausesOnceNotOnEveryPageWhenTheWALCannotStartOver: a reader
// outside the library pins the WAL past its limit; listings pause for a
// checkpoint that cannot happen once, then page at full speed.
func TestAListingPausesOnceNotOnEveryPageWhenTheWALCannotStartOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pinned.db")
	s, err := Open(path, Options{Synchronous: "NORMAL"}, func() int64 { return 0 })
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	pid := uuid.NewString()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: pid, Name: "p", CreatedAt: 1}))
	require.NoError(t, tx.Commit())
	pin, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer pin.Close()
	rtx, err := pin.Begin()
	require.NoError(t, err)
	defer rtx.Rollback()
	var n int
	require.NoError(t, rtx.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n))
	big := bytes.Repeat([]byte("x"), 1<<20)
	for i := 0; i < 20; i++ {
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.InsertJob(ctx, store.Job{ID: uuid.NewString(), ProductionID: pid, Payload: big,
			State: store.StateRequested, RequestedAt: 1, UpdatedAt: 1}))
		require.NoError(t, tx.Commit())
	}
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(JournalSizeLimit), "the pinned WAL is past the limit")
	start := time.Now()
	for i := 0; i < 500; i++ {
		js, err := s.ListJobs(ctx, store.JobFilter{ProductionID: pid, Limit: 1, AfterSeq: int64(i % 20)})
		require.NoError(t, err)
		require.Len(t, js, 1)
	}
	// Pausing on every page would take 500 × walPace = 50 s; pausing once
	// a walPaceRetryAfter costs a tenth of the time spent. The bound is half
	// the first, so that a loaded or stalled machine (500 pages took 2.8 s
	// in one make test) does not fail it and per-page pauses still do.
	require.Less(t, time.Since(start), 500*walPace/2)
}
