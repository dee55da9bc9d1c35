package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type run struct {
	cmd *exec.Cmd
	log string
	out *os.File
}

// startWorker starts this test binary as a worker, optionally under a
// wrapper command (strace).
func startWorker(t *testing.T, dir, db, name string, seed int, runFor time.Duration, wrapper ...string) *run {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(filepath.Join(dir, name+".out"))
	require.NoError(t, err)
	args := append(append([]string{}, wrapper...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "LEASES_REL_WORKER="+name, "LEASES_REL_DB="+db, "LEASES_REL_LOG="+logPath,
		"LEASES_REL_SEED="+strconv.Itoa(seed), "LEASES_REL_RUN="+runFor.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	return &run{cmd: cmd, log: logPath, out: out}
}

func (r *run) kill() {
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) // the whole group: strace and its tracee
	r.cmd.Wait()
	r.out.Close()
}

func addJobs(t *testing.T, db string, n int) { seedJobs(t, db, n) }

func TestKill9AtRandomPointsLosesNoAcknowledgedTransition(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	addJobs(t, db, 60)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	n := iterations(50, 500)
	var all []ack
	kills := 0
	for i := 0; i < n; i++ {
		addJobs(t, db, 10)
		runs := []*run{
			startWorker(t, dir, db, fmt.Sprintf("w%d-a", i), i*2, time.Minute),
			startWorker(t, dir, db, fmt.Sprintf("w%d-b", i), i*2+1, time.Minute),
		}
		time.Sleep(time.Duration(30+rng.IntN(250)) * time.Millisecond)
		for _, r := range runs {
			r.kill()
			kills++
			all = append(all, readAcks(t, r.log)...)
		}
		verifyStore(t, db, all)
	}
	oks := 0
	for _, x := range all {
		if x.Kind == "ok" {
			oks++
		}
	}
	require.Positive(t, oks, "the workers did acknowledge work before being killed")
	t.Logf("kill -9 loop: %d iterations, %d kills, %d calls logged, %d acknowledged transitions verified", n, kills, len(all), oks)
	recordFigure(t, "kill9_random", map[string]int{"iterations": n, "kills": kills, "calls": len(all), "acknowledged": oks, "lost": 0})
}

func strace(t *testing.T) string {
	p, err := exec.LookPath("strace")
	// Fault injection by system call is a promise of this suite, not an
	// extra: without strace the test fails (make test installs it).
	require.NoError(t, err, "strace is needed to inject faults by system call; install it (Debian: apt-get install strace)")
	return p
}

func TestKillAtTheNthWriteSystemCallLosesNoAcknowledgedTransition(t *testing.T) {
	st := strace(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	addJobs(t, db, 40)
	n := iterations(12, 120)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var all []ack
	killed := 0
	for i := 0; i < n; i++ {
		addJobs(t, db, 5)
		nth := 1 + rng.IntN(400)
		r := startWorker(t, dir, db, fmt.Sprintf("s%d", i), i, 3*time.Second,
			st, "-f", "-qq", "-o", "/dev/null", "-e", "trace=pwrite64,write",
			"-e", fmt.Sprintf("inject=pwrite64:signal=KILL:when=%d", nth))
		err := r.cmd.Wait()
		r.out.Close()
		if err != nil {
			killed++
		}
		all = append(all, readAcks(t, r.log)...)
		verifyStore(t, db, all)
	}
	require.Positive(t, killed, "at least one worker was killed at a write")
	t.Logf("strace kill at Nth pwrite64: %d iterations, %d killed mid-write", n, killed)
	recordFigure(t, "kill_at_nth_write", map[string]int{"iterations": n, "killed": killed, "calls": len(all), "lost": 0})
}
