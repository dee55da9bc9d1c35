// A rewrite into incremental auto-vacuum that cannot write.
package sqlitestore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// mountSmall mounts a tmpfs of size bytes at a new directory and returns
// it (root only: the test skips without it, as the reliability suite's
// full-disk test does).
func mountSmall(t *testing.T, size int64, opts string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a small filesystem needs root (CI runs as root)")
	}
	mnt := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d%s", size, opts), "tmpfs", mnt).CombinedOutput()
	require.NoError(t, err, "mount a small tmpfs as root: %s", bytes.TrimSpace(out))
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

func TestARewriteIntoIncrementalAutoVacuumOnAFullDiskLeavesTheFileUsableAndSaysWhatItNeeds(t *testing.T) {
	mnt := mountSmall(t, 24<<20, "")
	path := filepath.Join(mnt, "v6.db")
	a, s := oldSchemaAuthority(t, path, 3000)
	ctx := context.Background()
	// Half the jobs deleted beside the authority: the file holds as many
	// free pages as live ones.
	write(t, s, func(tx store.Tx) {
		for i := 0; i < 1500; i++ {
			require.NoError(t, tx.DeleteJob(ctx, fmt.Sprint("big", i)))
		}
	})
	size := fileSize(t, s, path)
	// Fill the disk but for 2 MiB: a copy of the live pages (6 MiB) no
	// longer fits.
	free := freeBytes(t, mnt)
	require.Greater(t, free, int64(2<<20))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, free-(2<<20)), 0o644))

	_, err := a.Prune(ctx, core.PruneOptions{})
	require.Error(t, err, "the rewrite cannot fit")
	require.Equal(t, core.KindStorage, core.KindOf(err), "%v", err)
	require.ErrorIs(t, err, store.ErrFull)
	require.Contains(t, err.Error(), "the file is unchanged and usable")
	require.Contains(t, err.Error(), "MiB free beside the file")
	t.Log(err)

	// The file is as it was, and usable: read and written.
	mode, err := s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "0", mode)
	ok, err := s.Pragma("integrity_check")
	require.NoError(t, err)
	require.Equal(t, "ok", ok)
	require.EqualValues(t, 1500, completedJobs(t, a))
	id, err := a.RequestJob("big", "", nil)
	require.NoError(t, err, "a write after the failed rewrite")
	_, err = a.Job("big", id)
	require.NoError(t, err)

	// With room again, the next prune rewrites it. The room is counted
	// once the WAL holds nothing still to copy (the failed rewrite's
	// frames and the write's): the handle's checkpointer copies them in
	// the background, which this waits for.
	require.NoError(t, os.Remove(filepath.Join(mnt, "filler")))
	checkpointAll(t, s)
	_, err = a.Prune(ctx, core.PruneOptions{})
	require.NoError(t, err)
	mode, err = s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "2", mode)
	require.Less(t, fileSize(t, s, path), size*6/10)
	require.EqualValues(t, 1500, completedJobs(t, a))
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &fs))
	return int64(fs.Bavail) * int64(fs.Bsize)
}

func TestARewriteIntoIncrementalAutoVacuumOfAReadOnlyFileLeavesItUsableAndSaysWhy(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a read-only bind mount needs root (CI runs as root); root ignores a file's own permissions")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "v6.db")
	a, s := oldSchemaAuthority(t, path, 600)
	ctx := context.Background()
	write(t, s, func(tx store.Tx) {
		for i := 0; i < 500; i++ {
			require.NoError(t, tx.DeleteJob(ctx, fmt.Sprint("big", i)))
		}
	})
	fileSize(t, s, path)
	require.NoError(t, a.Close())

	// The file alone read-only (as a file of another user's is to a user
	// who may only read it), in a directory where SQLite can keep its WAL
	// index: SQLite opens it for reading only.
	ro := readOnlyBind(t, path)
	s, err := Open(ro, Options{}, func() int64 { return 1 })
	require.NoError(t, err)
	a, err = core.OpenStore(ro, "SQLite", func() (store.Backend, error) { return s, nil })
	require.NoError(t, err)
	defer a.Close()
	a.SetPruneInterval(0)

	_, err = a.Prune(ctx, core.PruneOptions{})
	require.Error(t, err)
	require.Equal(t, core.KindStorage, core.KindOf(err), "%v", err)
	require.ErrorIs(t, err, store.ErrReadOnly)
	require.Contains(t, err.Error(), "the file is unchanged and usable")
	require.Contains(t, err.Error(), "prune from one that may write it")
	t.Log(err)
	require.EqualValues(t, 100, completedJobs(t, a), "the file is read as before")
	mode, err := s.Pragma("auto_vacuum")
	require.NoError(t, err)
	require.Equal(t, "0", mode)
}

// readOnlyBind mounts the file at path read-only at a path of its own (a
// bind mount, remounted read-only; unmounted at the test's end) and
// returns that path, in a directory where SQLite can keep its WAL index.
// It needs root.
func readOnlyBind(t *testing.T, path string) string {
	t.Helper()
	ro := filepath.Join(t.TempDir(), "ro.db")
	require.NoError(t, os.WriteFile(ro, nil, 0o644))
	for _, args := range [][]string{{"--bind", path, ro}, {"-o", "remount,bind,ro", ro}} {
		out, err := exec.Command("mount", args...).CombinedOutput()
		require.NoError(t, err, "mount %v: %s", args, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", ro).Run() })
	return ro
}
