// What a program run by exec or work may outlive or inherit: nothing of it
// outlives its worker, whatever kills the worker; a temporary output left by
// a worker killed outright is removed once its claim is over; a closed log
// neither kills the worker nor fails a job; and the program's environment
// holds only its own job's LEASES_* values.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/libleases/libleases/core"
)

// ---- the environment ------------------------------------------------------------

// jobVariables are the variables the executor sets for a program. Every one
// of them is removed from the inherited environment first, so a value the
// worker itself inherited (another job's output path, say) never reaches a
// program, also when this job sets no value for it (no --output-dir: no
// LEASES_OUTPUT at all).
var jobVariables = []string{"LEASES_OUTPUT", "LEASES_JOB_ID", "LEASES_PRODUCTION", "LEASES_FACTS"}

// programEnv is the worker's environment without any of jobVariables, then
// set (NAME=VALUE each).
func programEnv(set ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !isJobVariable(name) {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

func isJobVariable(name string) bool {
	for _, v := range jobVariables {
		if name == v {
			return true
		}
	}
	return false
}

// ---- a closed log ---------------------------------------------------------------

// survivingClosedLogs makes a write to a closed standard output or error
// (a pipe whose reader has gone: `| head`, a restarted log collector) fail
// with EPIPE instead of killing the process with SIGPIPE. A handled signal,
// unlike an ignored one, is reset by exec, so programs still start with
// SIGPIPE at its default.
func survivingClosedLogs() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// programLog is what a program gets as standard output or error for the
// worker's dst. A pipe or socket, which can close under the worker, is not
// handed over: the program writes to a pipe of its own that the worker copies
// to dst, dropping what dst no longer takes, so a closed log never kills or
// fails the program. Anything else (a terminal, a file, /dev/null) cannot
// close that way and is passed as it is, so a program still sees its
// terminal. closeChildEnd closes the worker's copy of the program's end once
// the program has it (or will never start); drained waits (a little) for
// the copy to reach dst.
type programLog struct {
	child *os.File
	copy  bool
	done  chan struct{}
}

func newProgramLog(dst *os.File) (*programLog, error) {
	st, err := dst.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return &programLog{child: dst}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pl := &programLog{child: w, copy: true, done: make(chan struct{})}
	go func() {
		defer close(pl.done)
		defer r.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				dst.Write(buf[:n]) // a closed log drops the output; the program goes on
			}
			if err != nil {
				return
			}
		}
	}()
	return pl, nil
}

// closeChildEnd: the program holds its end now (or never will: it did not
// start), so the copy ends when the program's group is gone.
func (pl *programLog) closeChildEnd() {
	if pl.copy {
		pl.child.Close()
	}
}

// drainWait bounds the wait for a program's last output: a process that
// left the program's group (a daemon) may hold the pipe open for good.
const drainWait = time.Second

// drained waits until the program's output has been copied: every writer
// is gone (the group was killed), or drainWait has passed.
func (pl *programLog) drained() {
	if pl.copy {
		select {
		case <-pl.done:
		case <-time.After(drainWait):
		}
	}
}

// ---- nothing outlives the worker --------------------------------------------------

// startSupervised starts cmd (a program in its own process group) so that
// it cannot outlive this process: the program itself gets SIGKILL as its
// parent-death signal, and the reaper (below) kills its whole group when
// this process is gone. The parent-death signal fires when the *thread*
// that started the program exits, so the program is started, and waited
// for, on a locked OS thread that is not released until it has been
// reaped. waited delivers cmd.Wait's result.
//
// The reaper runs before the program does (started after it, a worker
// killed while the reaper was still starting left the program's group to
// nobody), and the program runs none of its own code before the reaper
// knows its group: it is held at its first instruction (startHeld) until
// the group's number is written. Without the hold, a worker killed between
// the program's exec and that write (a thread not scheduled for a few
// milliseconds on a loaded host is enough) left the children the program
// had forked meanwhile running: the program died by its parent-death
// signal, its children by nothing.
func startSupervised(cmd *exec.Cmd) (waited <-chan error, err error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	reaper.ready()
	started := make(chan error, 1)
	w := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // only once the program is reaped
		held, pending, err := startHeld(cmd)
		if err != nil {
			started <- err
			return
		}
		pausePoint("program-held")
		reaper.watch(cmd.Process.Pid)
		if held {
			letGo(cmd.Process.Pid, pending)
		}
		started <- nil
		w <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return w, nil
}

// startHeld starts cmd traced by this thread (PTRACE_TRACEME in the child),
// so that the kernel stops the program right after its exec, before its
// first instruction, and waits for that stop; letGo lets it run, with the
// signal (pending) that reached it while it was held, if one did. Where
// tracing is refused (this process is traced itself, by strace or a
// debugger; a seccomp or Yama policy), it starts cmd untraced and reports
// held false: the program then runs at once, as before the hold. The
// calling goroutine is locked to its OS thread, which is the tracer.
func startHeld(cmd *exec.Cmd) (held bool, pending syscall.Signal, err error) {
	cmd.SysProcAttr.Ptrace = true
	err = cmd.Start()
	cmd.SysProcAttr.Ptrace = false
	if err != nil {
		if !errors.Is(err, syscall.EPERM) {
			return false, 0, err
		}
		// Tracing refused, or the exec itself refused with EPERM: a
		// second start without tracing tells them apart. A Cmd starts
		// once, even when its start failed: the second is a copy.
		*cmd = exec.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
			Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles,
			SysProcAttr: cmd.SysProcAttr, Cancel: cmd.Cancel, WaitDelay: cmd.WaitDelay}
		return false, 0, cmd.Start()
	}
	held, pending = heldAtExec(cmd.Process.Pid)
	return held, pending, nil
}

// heldAtExec waits for the traced program's stop at its exec (the SIGTRAP
// the kernel sends a traced process that execs). A signal that reaches it
// first (a drain forwarded to its group) stops it too: that signal is kept
// back (pending) for letGo to deliver, so that it is delivered once and the
// SIGTRAP never is. It reports false if the program ended first (killed
// before it ran); the wait leaves an ended program's status for cmd.Wait
// (WNOWAIT).
func heldAtExec(pid int) (held bool, pending syscall.Signal) {
	for {
		code, sig, err := waitNoReap(pid)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || code != cldTrapped {
			return false, 0
		}
		if sig == syscall.SIGTRAP {
			return true, pending
		}
		pending = sig
		if syscall.PtraceCont(pid, 0) != nil {
			return false, 0
		}
	}
}

// cldTrapped is the si_code of a traced child's stop (CLD_TRAPPED).
const cldTrapped = 4

// waitNoReap waits for pid to stop or end, without reaping it: waitid(2)
// with WNOWAIT, which the syscall package does not wrap. It returns the
// si_code (CLD_*) and the signal (or exit status) of the siginfo.
func waitNoReap(pid int) (code int32, sig syscall.Signal, err error) {
	const pPID, wExited, wStopped, wNoWait, wAll = 1, 4, 2, 0x1000000, 0x40000000
	// siginfo_t on Linux: si_signo, si_errno, si_code, then (8-aligned)
	// si_pid, si_uid, si_status; 128 bytes in all.
	var info [32]int32
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
		wExited|wStopped|wNoWait|wAll, 0, 0)
	if e != 0 {
		return 0, 0, e
	}
	return info[2], syscall.Signal(info[6]), nil
}

// letGo detaches from a program held by startHeld, which then runs; the
// signal it received while held (pending, 0 for none) is delivered now.
func letGo(pid int, pending syscall.Signal) {
	syscall.RawSyscall6(syscall.SYS_PTRACE, syscall.PTRACE_DETACH, uintptr(pid), 0, uintptr(pending), 0, 0)
}

// reaperArg, as the only argument, runs leases as a reaper.
const reaperArg = "--internal-reaper"

// reaper is this process's reaper: a leases process of its own (this
// executable again) that is told the process group of every program
// started, and of every one that ended, over a pipe only this process
// holds. When the pipe closes (this process is gone: SIGKILL, the OOM
// killer, a crash), it kills every group still running. It sits in a
// process group of its own and ignores SIGINT, SIGTERM and SIGHUP, so the
// signals that drain a worker do not end it first; it is started before
// the first program.
var reaper = &reaperConn{}

type reaperConn struct {
	mu     sync.Mutex
	w      *os.File
	failed bool // could not be started, or went away: warned once
}

func (r *reaperConn) watch(pgid int)   { r.send('+', pgid) }
func (r *reaperConn) release(pgid int) { r.send('-', pgid) }

// ready starts the reaper unless it runs (or could not be started: warned
// once).
func (r *reaperConn) ready() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startOnce()
}

// startOnce starts the reaper unless it runs or failed; it reports whether
// it runs. r.mu is held.
func (r *reaperConn) startOnce() bool {
	if r.failed {
		return false
	}
	if r.w == nil {
		if err := r.start(); err != nil {
			r.warn(err)
			return false
		}
	}
	return true
}

func (r *reaperConn) send(op byte, pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.startOnce() {
		return
	}
	if _, err := fmt.Fprintf(r.w, "%c%d\n", op, pgid); err != nil {
		r.warn(err)
	}
}

func (r *reaperConn) warn(err error) {
	r.failed = true
	fmt.Fprintf(os.Stderr, "leases: warning: the reaper process is not running (%v): if this process is killed outright, "+
		"the programs' own children may outlive it (the programs themselves still get SIGKILL)\n", err)
}

func (r *reaperConn) start() error {
	pr, pw, err := os.Pipe() // close-on-exec: no program inherits the write end
	if err != nil {
		return err
	}
	cmd := exec.Command("/proc/self/exe", reaperArg)
	cmd.Stdin = pr
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pr.Close()
	if err != nil {
		pw.Close()
		return err
	}
	go cmd.Wait()
	r.w = pw
	return nil
}

// reap is the reaper process: it reads "+PGID" (a program's group started)
// and "-PGID" (that group ended) lines until its input closes, then kills
// every group still listed.
func reap() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	groups := map[int]bool{}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := in.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// ---- temporary outputs left behind -------------------------------------------------

// sweepTemporaries removes the temporary outputs in dir that nobody owns any
// more and whose claim is over, so that one left by a worker killed outright
// does not stay for good. A temporary output is DIR/<job>.<nonce>.tmp, and
// only the claim it was made under could ever register it. Its owner is
// gone when its lock (lockTemporary: held by the exec or work process that
// reserved it, as long as it runs) can be taken; its claim is over when its
// job, a job of production, is not claimed at all (requested again,
// completed, failed, dead, cancelled). Anything else keeps its files: a live
// owner (two workers of one job never touch each other's files), a job
// claimed now, a job of another production, a job that cannot be read now.
// work sweeps when it starts and after each job, exec before and after its
// program: the job a crashed worker held is claimed again, or ends, and the
// next sweep of the directory then removes the file.
func sweepTemporaries(a *core.Authority, production, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // BeginExecution reports a directory it cannot use
	}
	for _, e := range entries {
		jobID, ok := temporaryOf(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // its owner runs
			continue
		}
		if j, err := a.Job(production, jobID); err == nil && j.State != core.StateClaimed {
			if os.Remove(path) == nil {
				fmt.Fprintf(os.Stderr, "leases: removed %s, a temporary output of job %s left by a worker that is gone\n",
					escapeControls(path), jobID)
			}
		}
		f.Close()
	}
}

// lockTemporary marks the temporary output at path as owned by this
// process for as long as the returned file stays open (a lock the kernel
// drops when the process ends, however it ends): sweepTemporaries never
// removes a file whose owner runs. The file is close-on-exec, so no program
// holds the lock on its worker's behalf. A lock that cannot be taken only
// leaves the file to the job's state.
func lockTemporary(path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil
	}
	return f
}

// temporaryOf reads a temporary output's name, <job>.<nonce>.tmp, the
// nonce a UUID.
func temporaryOf(name string) (jobID string, ok bool) {
	base, ok := strings.CutSuffix(name, ".tmp")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(base, '.')
	if i <= 0 || !isUUID(base[i+1:]) {
		return "", false
	}
	return base[:i], true
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f'):
			return false
		}
	}
	return true
}
