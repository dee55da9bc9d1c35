// The projector (projector.go): it keeps the tail short, projects a long
// tail at open, and keeps the mark exact when several handles project
// one file.
package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// tail is how many events lie after the mark, and whether the mark splits
// the log exactly: every event at or below it projected, every later one
// not.
func tail(t *testing.T, s *DB) (n int64, exact bool) {
	t.Helper()
	var wrong int64
	require.NoError(t, s.db.QueryRow(`SELECT
		(SELECT count(*) FROM events WHERE seq > `+projectedMarkSQL+`),
		(SELECT count(*) FROM events WHERE (seq <= `+projectedMarkSQL+`) <> (projected = 1))`).Scan(&n, &wrong))
	return n, wrong == 0
}

// events writes n events of production pid in transactions of per.
func events(t *testing.T, s *DB, n, per int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += per {
		write(t, s, func(tx store.Tx) {
			for k := i; k < min(i+per, n); k++ {
				require.NoError(t, tx.InsertEvent(ctx, store.Event{At: int64(1000 + k), ProductionID: "pid",
					JobID: fmt.Sprint("j", k%40), Kind: "claimed", Worker: fmt.Sprint("w", k%3)}))
			}
		})
	}
}

// waitTail waits until the tail is at most n events long.
func waitTail(t *testing.T, s *DB, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, exact := tail(t, s)
		require.True(t, exact, "the mark splits the log exactly")
		if got <= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "tail still %d events long", got)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTheProjectorKeepsTheTailShorterThanItsThreshold(t *testing.T) {
	s := newStore(t)
	events(t, s, 3000, 7)
	// The handle's last pass left fewer than ProjectAfter of its events
	// behind; nothing more wakes it.
	waitTail(t, s, ProjectAfter-1)
	n, exact := tail(t, s)
	require.True(t, exact)
	require.Less(t, n, int64(ProjectAfter))
	require.NoError(t, s.Close())
}

func TestAFileWithALongTailIsProjectedWhenItIsOpened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.db")
	s, err := Open(path, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	s.proj.held.Store(true) // as a handle closed before its projector ran
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	})
	events(t, s, 2000, 50)
	n, exact := tail(t, s)
	require.True(t, exact)
	require.EqualValues(t, 2000, n)
	require.NoError(t, s.Close())

	s, err = Open(path, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	defer s.Close()
	waitTail(t, s, 0)
}

func TestHandlesProjectingOneFileTogetherKeepTheMarkExact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	var handles []*DB
	for i := 0; i < 3; i++ {
		s, err := Open(path, Options{Synchronous: "NORMAL"}, func() int64 { return 1 })
		require.NoError(t, err)
		defer s.Close()
		handles = append(handles, s)
	}
	write(t, handles[0], func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	})
	var wg sync.WaitGroup
	for _, s := range handles {
		wg.Add(2)
		go func() { defer wg.Done(); events(t, s, 1000, 3) }()
		go func() { // a test's pass beside the background one
			defer wg.Done()
			for i := 0; i < 50; i++ {
				require.NoError(t, s.ProjectTo(context.Background(), 1<<62))
			}
		}()
	}
	wg.Wait()
	for _, s := range handles {
		_, exact := tail(t, s)
		require.True(t, exact)
	}
	require.NoError(t, handles[0].ProjectTo(context.Background(), 1<<62))
	n, exact := tail(t, handles[1])
	require.True(t, exact)
	require.Zero(t, n)
	es, err := handles[2].ListEvents(context.Background(), store.EventFilter{ProductionID: "pid", Before: 1 << 62, Limit: 1 << 20})
	require.NoError(t, err)
	require.Len(t, es, 3000)
}

func TestAShortLivedHandleOfAFileWithALongTailShortensItAndKeepsTheMarkExact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "closed.db")
	s, err := Open(path, Options{Synchronous: "NORMAL"}, func() int64 { return 1 })
	require.NoError(t, err)
	s.HoldProjection(true)
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	})
	events(t, s, 20000, 500)
	require.NoError(t, s.Close())
	for i := 0; i < 5; i++ {
		// Opened with a long tail, it projects at once; closed at once, it
		// ends the batch in progress and starts none.
		s, err := Open(path, Options{Synchronous: "NORMAL"}, func() int64 { return 1 })
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	s, err = Open(path, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	defer s.Close()
	s.HoldProjection(true)
	n, exact := tail(t, s)
	require.True(t, exact)
	require.LessOrEqual(t, n, int64(20000-5*ProjectBatch), "each handle ran a batch")
	es, err := s.ListEvents(context.Background(), store.EventFilter{ProductionID: "pid", Kind: "claimed", Before: 1 << 62, Limit: 1 << 20})
	require.NoError(t, err)
	require.Len(t, es, 20000)
	t.Logf("tail after five short-lived handles: %d events", n)
}
