package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// A handle that may only read the file never projects it (its projector
// stops at the first refusal) and reads every listing exactly, the tail by
// a scan.
func TestAReadOnlyHandleNeverProjectsAndStillListsExactly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a read-only bind mount needs root (CI runs as root)")
	}
	path := filepath.Join(t.TempDir(), "long.db")
	s, err := Open(path, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	s.proj.held.Store(true)
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertProduction(context.Background(), store.Production{ID: "pid", Name: "p", CreatedAt: 1}))
	})
	events(t, s, 500, 50)
	all := refEvents(t, s)
	require.NoError(t, s.Close())

	ro := readOnlyBind(t, path)
	r, err := Open(ro, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	defer r.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !r.proj.off.Load() {
		require.True(t, time.Now().Before(deadline), "the projector tried the read-only file")
		time.Sleep(5 * time.Millisecond)
	}
	n, exact := tail(t, r)
	require.True(t, exact)
	require.EqualValues(t, 500, n, "nothing projected")
	f := store.EventFilter{ProductionID: "pid", Kind: "claimed", Before: 1 << 62, Limit: 1 << 20}
	got, err := r.ListEvents(context.Background(), f)
	require.NoError(t, err)
	require.Equal(t, refPage(all, f), got)
	seen, err := r.Workers(context.Background(), "pid", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, seen, 3)
}
