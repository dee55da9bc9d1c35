package sqlitestore

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The WAL's checkpoint off the writers' turn (wal.go, WALAutoCheckpoint).

// walBlobWrite commits one write of about three pages on s through the
// writer queue, as every write of the authority does.
func walBlobWrite(t *testing.T, s *DB) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	require.NoError(t, err)
	_, err = tx.(*Tx).g.conn.ExecContext(ctx, `INSERT INTO wal_test_blobs VALUES (randomblob(3 * 4096))`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
}

func openWALTest(t *testing.T) *DB {
	t.Helper()
	s := openWriters(t, filepath.Join(t.TempDir(), "wal.db"), 10*time.Second)
	_, err := s.db.Exec(`CREATE TABLE wal_test_blobs (b BLOB)`)
	require.NoError(t, err)
	return s
}

// walRestarts is the WAL header's checkpoint sequence: SQLite counts in
// it every time a writer starts the WAL over.
func walRestarts(t *testing.T, s *DB) uint32 {
	t.Helper()
	b, err := os.ReadFile(s.path + "-wal")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 32)
	return binary.BigEndian.Uint32(b[12:])
}

func walFrames(t *testing.T, s *DB) (frames, copied uint32) {
	t.Helper()
	frames, copied, ok := s.wal.frames()
	require.True(t, ok, "the WAL index is readable")
	return frames, copied
}

func TestACommitPastTheCheckpointThresholdLeavesTheCopyToTheCheckpointerOffTheWritersTurn(t *testing.T) {
	held := make(chan struct{})
	var release sync.Once
	free := func() { release.Do(func() { close(held) }) }
	defer free()
	walCheckpointStarts = func() { <-held }
	t.Cleanup(func() { walCheckpointStarts = func() {} })
	s := openWALTest(t)

	// Past the threshold and a residue beyond it, short of the bound at
	// which a writer copies the WAL itself. SQLite's automatic checkpoint
	// would have copied it in the commit that crossed WALAutoCheckpoint.
	restarts := walRestarts(t, s)
	for i := 0; i < walWriterCheckpoint; i++ { // each write adds frames: a bound, not a wait
		walBlobWrite(t, s)
		if frames, _ := walFrames(t, s); frames > WALAutoCheckpoint+2*walResidue {
			break
		}
	}
	frames, copied := walFrames(t, s)
	require.Less(t, frames, uint32(walWriterCheckpoint))
	require.Zero(t, copied, "a writer's commit copied WAL frames into the database (the checkpointer is held)")
	require.Equal(t, restarts, walRestarts(t, s), "the WAL started over: a commit checkpointed it")
	require.Zero(t, s.wal.onTurn.Load()+s.wal.offTurn.Load())

	// Released, the checkpointer copies what the commits left, off the
	// turn; the writers then copy only the residue, and the WAL starts over.
	free()
	for end := time.Now().Add(30 * time.Second); s.wal.offTurn.Load() == 0; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(end), "the checkpointer never ran")
	}
	_, copied = walFrames(t, s)
	require.GreaterOrEqual(t, copied, frames, "the checkpointer copied the WAL")
	for i := 0; i < 3; i++ {
		walBlobWrite(t, s)
	}
	require.Greater(t, walRestarts(t, s), restarts, "the WAL never started over")
	after, _ := walFrames(t, s)
	require.Less(t, after, uint32(WALAutoCheckpoint))
}

func TestTheWALStaysBoundedWhenCheckpointsRunOffTheWritersTurn(t *testing.T) {
	// One writer's blob here is at most 8 frames, and the two writers below
	// may share one transaction (group commit): 16. The bound is the WAL
	// past which a writer copies it itself, plus one transaction.
	const bound = walWriterCheckpoint + 2*8
	run := func(t *testing.T, s *DB, frames int) (largest uint32, restarts uint32) {
		first := walRestarts(t, s)
		var mu sync.Mutex
		var wg sync.WaitGroup
		written := 0
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					done := written >= frames
					written += 4
					mu.Unlock()
					if done || t.Failed() {
						return
					}
					walBlobWrite(t, s)
					f, _ := walFrames(t, s)
					mu.Lock()
					largest = max(largest, f)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		fi, err := os.Stat(s.path + "-wal")
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), int64(32+bound*(24+4096)), "the WAL file outgrew its bound")
		return largest, walRestarts(t, s) - first
	}
	t.Run("with the checkpointer", func(t *testing.T) {
		s := openWALTest(t)
		largest, restarts := run(t, s, 10*WALAutoCheckpoint)
		t.Logf("largest WAL %d frames, %d restarts, %d checkpoints off the turn, %d residues on it",
			largest, restarts, s.wal.offTurn.Load(), s.wal.onTurn.Load())
		require.LessOrEqual(t, largest, uint32(bound))
		require.GreaterOrEqual(t, restarts, uint32(4), "the WAL did not start over every WALAutoCheckpoint frames or so")
		require.Positive(t, s.wal.offTurn.Load())
	})
	t.Run("with the checkpointer stalled", func(t *testing.T) {
		held := make(chan struct{})
		walCheckpointStarts = func() { <-held }
		t.Cleanup(func() { walCheckpointStarts = func() {} })
		s := openWALTest(t)
		t.Cleanup(func() { close(held) }) // before Close, which waits for the checkpointer
		largest, restarts := run(t, s, 6*WALAutoCheckpoint)
		require.LessOrEqual(t, largest, uint32(bound))
		require.GreaterOrEqual(t, restarts, uint32(2))
		require.Zero(t, s.wal.offTurn.Load())
	})
}
