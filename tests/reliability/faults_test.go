package reliability

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

var figuresMu sync.Mutex

// recordFigure appends one measured figure to $LEASES_REL_FIGURES (JSON
// lines), from which docs/RELIABILITY.md quotes the last soak.
func recordFigure(t *testing.T, name string, v map[string]int) {
	path := os.Getenv("LEASES_REL_FIGURES")
	if path == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	b, _ := json.Marshal(map[string]any{"test": name, "at": time.Now().UTC().Format(time.RFC3339), "figures": v})
	f.Write(append(b, '\n'))
}

// allowedUnderFaults are the outcomes a call may report while the disk
// fails: the ordinary rejections of the workflow, a storage rejection, or an
// unknown outcome. Never internal, never a crash.
var allowedUnderFaults = map[string]bool{
	"ok": true, "nothing_to_claim": true, "lease_lost": true, "expired": true, "wrong_state": true,
	"not_extended": true, "cancelled": true, "storage": true, "outcome_unknown": true, "busy": true,
}

func TestInjectedFsyncAndWriteErrorsNeverCorruptTheStore(t *testing.T) {
	st := strace(t)
	faults := []string{
		"inject=fsync,fdatasync:error=EIO:when=%d",
		"inject=pwrite64:error=EIO:when=%d",
		"inject=pwrite64:error=ENOSPC:when=%d",
	}
	n := iterations(4, 40)
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	addJobs(t, db, 40)
	var all []ack
	faultsSeen := 0
	for i := 0; i < n; i++ {
		for fi, fault := range faults {
			addJobs(t, db, 5)
			nth := 3 + (i*7+fi*5)%40
			name := fmt.Sprintf("io%d-%d", i, fi)
			r := startWorker(t, dir, db, name, i*10+fi, 700*time.Millisecond,
				st, "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync,fdatasync,pwrite64",
				"-e", fmt.Sprintf(fault, nth))
			err := r.cmd.Wait()
			r.out.Close()
			out, _ := os.ReadFile(filepath.Join(dir, name+".out"))
			require.NoError(t, err, "worker under %q must not crash: %s", fault, out)
			acks := readAcks(t, r.log)
			for _, x := range acks {
				require.True(t, allowedUnderFaults[x.Kind], "call %+v reported %q under %q", x, x.Kind, fault)
				if x.Kind == "storage" || x.Kind == "outcome_unknown" {
					faultsSeen++
				}
			}
			all = append(all, acks...)
			verifyStore(t, db, all)
		}
	}
	require.Positive(t, faultsSeen, "the injected faults reached the callers as storage or outcome-unknown")
	t.Logf("I/O faults: %d runs, %d calls saw the fault, store verified after each", n*len(faults), faultsSeen)
	recordFigure(t, "io_faults", map[string]int{"runs": n * len(faults), "faulted_calls": faultsSeen, "calls": len(all), "lost": 0})
}

func TestAFullDiskGivesAStorageErrorAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "small")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	if os.Getuid() != 0 {
		t.Skip("mounting the small filesystem needs root (CI runs as root); without it, ENOSPC is still injected by TestInjectedFsyncAndWriteErrorsNeverCorruptTheStore")
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=384k", "tmpfs", mnt).CombinedOutput()
	require.NoError(t, err, "mount a small tmpfs as root: %s", bytes.TrimSpace(out))
	defer exec.Command("umount", "-l", mnt).Run()
	db := filepath.Join(mnt, "leases.db")
	a, err := leases.Open(db)
	require.NoError(t, err)
	defer a.Close()
	_, err = a.CreateProduction(production)
	require.NoError(t, err)
	var acked []string
	var full error
	payload := bytes.Repeat([]byte("x"), 8192)
	for i := 0; i < 1000; i++ {
		id, err := a.RequestJob(production, "", payload)
		if err != nil {
			full = err
			break
		}
		acked = append(acked, id)
	}
	require.Error(t, full, "the small filesystem filled up")
	require.True(t, errors.Is(full, core.ErrStorage) || errors.Is(full, core.ErrOutcomeUnknown), "got %v", full)
	require.Contains(t, strings.ToLower(full.Error()), "full")
	// Nothing acknowledged is lost, reading still works, and freeing space
	// lets writes resume.
	jobs, err := a.Jobs(production)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(jobs), len(acked))
	require.NoError(t, a.Close())
	a2, err := leases.Open(db)
	require.NoError(t, err)
	defer a2.Close()
	jobs, err = a2.Jobs(production)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, j := range jobs {
		have[j.ID] = true
	}
	for _, id := range acked {
		require.True(t, have[id], "acknowledged job %s lost", id)
	}
}

func TestHostileFilesGetAClearErrorAndLoseNothing(t *testing.T) {
	dir := t.TempDir()

	t.Run("directory", func(t *testing.T) {
		_, err := leases.Open(dir)
		require.ErrorIs(t, err, core.ErrStorage)
		require.Contains(t, err.Error(), "is a directory")
	})

	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(dir, "real.db")
		seedJobs(t, target, 3)
		link := filepath.Join(dir, "link.db")
		require.NoError(t, os.Symlink(target, link))
		_, err := leases.Open(link)
		require.ErrorIs(t, err, core.ErrStorage)
		require.Contains(t, err.Error(), "symbolic link")
		a, err := leases.Open(target)
		require.NoError(t, err)
		js, err := a.Jobs(production)
		require.NoError(t, err)
		require.Len(t, js, 3)
		a.Close()
	})

	t.Run("corrupt", func(t *testing.T) {
		db := filepath.Join(dir, "corrupt.db")
		seedJobs(t, db, 200)
		b, err := os.ReadFile(db)
		require.NoError(t, err)
		require.Greater(t, len(b), 3*4096)
		for i := 4096; i < len(b); i++ {
			b[i] = 0xA5
		}
		require.NoError(t, os.WriteFile(db, b, 0o600))
		a, err := leases.Open(db)
		if err == nil {
			_, err = a.Jobs(production)
			if err == nil {
				_, err = a.RequestJob(production, "", nil)
			}
			a.Close()
		}
		require.Error(t, err, "a corrupt file must be reported")
		require.ErrorIs(t, err, core.ErrStorage)
		after, _ := os.ReadFile(db)
		require.Equal(t, b, after, "a corrupt file is not rewritten")
	})

	t.Run("truncated WAL", func(t *testing.T) {
		db := filepath.Join(dir, "wal.db")
		seedJobs(t, db, 5)
		r := startWorker(t, dir, db, "walw", 1, time.Minute)
		// Killed once it has committed a few transitions (a loaded host may
		// take seconds to start it), so that it leaves a WAL behind.
		testwait.Eventually(t, func() bool { return len(readAcks(t, r.log)) >= 5 })
		r.kill()
		acks := readAcks(t, r.log)
		wal, err := os.Stat(db + "-wal")
		require.NoError(t, err)
		require.NoError(t, os.Truncate(db+"-wal", wal.Size()-wal.Size()%4096/2-1))
		a, err := leases.Open(db)
		require.NoError(t, err, "a torn WAL tail is discarded, not fatal")
		_, err = a.Jobs(production)
		require.NoError(t, err)
		a.Close()
		_ = acks
	})

	t.Run("read-only file and directory", func(t *testing.T) {
		ro, err := os.MkdirTemp("", "leases-ro-")
		require.NoError(t, err)
		defer os.RemoveAll(ro)
		db := filepath.Join(ro, "leases.db")
		seedJobs(t, db, 2)
		require.NoError(t, os.Chmod(db, 0o444))
		require.NoError(t, os.Chmod(ro, 0o555))
		defer os.Chmod(ro, 0o755)
		before, _ := os.ReadFile(db)
		// Root ignores permission bits, so root makes the attempt as nobody.
		out, err := runUnprivileged(t, db)
		require.NoError(t, err, "%s", out)
		require.Contains(t, out, "storage")
		after, _ := os.ReadFile(db)
		require.Equal(t, before, after)
	})
}

// runUnprivileged opens db in a child process and reports the kind of the
// first failure. Run by root, the child drops to uid 65534 (root ignores
// permission bits); run by anyone else, it keeps that user, to whom the bits
// already apply.
func runUnprivileged(t *testing.T, db string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	tmp, err := os.MkdirTemp("", "leases-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(tmp) })
	copyExe := filepath.Join(tmp, "rel.test")
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(copyExe, b, 0o755))
	require.NoError(t, os.Chmod(tmp, 0o755))
	cmd := exec.Command(copyExe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEASES_REL_OPENONLY="+db, "HOME="+tmp)
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func init() {
	if db := os.Getenv("LEASES_REL_OPENONLY"); db != "" {
		a, err := leases.Open(db)
		if err == nil {
			_, err = a.RequestJob(production, "", nil)
			a.Close()
		}
		if err == nil {
			fmt.Println("unexpectedly writable")
			os.Exit(1)
		}
		fmt.Println(core.KindOf(err).String()+":", err)
		os.Exit(0)
	}
}
