//go:build leasestest

// Test hooks of the leasestest build (the binary the CLI tests run). Each one
// makes a real failure happen, not a simulated one.
package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

const testHooks = true

// tokenWriteHook: with LEASES_TEST_TOKEN_WRITE_EFBIG=1 the token write of
// `claim` runs under RLIMIT_FSIZE=0, so the kernel refuses it with EFBIG
// (Go ignores SIGXFSZ). The limit is restored right after, so that the
// receipt can still be printed to a file.
func tokenWriteHook() (restore func()) {
	if os.Getenv("LEASES_TEST_TOKEN_WRITE_EFBIG") != "1" {
		return func() {}
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		return func() {}
	}
	zero := old
	zero.Cur = 0
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &zero); err != nil {
		return func() {}
	}
	return func() { syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old) }
}

// execRenewalDisabled: with LEASES_TEST_EXEC_NO_RENEW=1, exec does not renew,
// so a test can let the claim expire while the program runs.
func execRenewalDisabled() bool { return os.Getenv("LEASES_TEST_EXEC_NO_RENEW") == "1" }

// claimCommitHook: with LEASES_TEST_CLAIM_ACK_LOST=1 the claim's commit
// persists and is then reported failed (outcome_unknown), as when the
// acknowledgement of a COMMIT is lost. Unlike the hooks above this failure
// is injected at the store boundary: a commit that persists and still fails
// cannot be brought about from outside the process on demand.
func claimCommitHook(a *core.Authority) {
	if os.Getenv("LEASES_TEST_CLAIM_ACK_LOST") == "1" {
		core.FailCommitsForTest(a, errors.New("injected: the acknowledgement of the commit was lost"))
	}
}

// pausePoint: with LEASES_TEST_PAUSE=NAME and LEASES_TEST_PAUSE_DIR=DIR,
// reaching the pause point NAME creates DIR/NAME.paused and waits until
// DIR/NAME.resume exists, so a test can act (send a signal) exactly there.
func pausePoint(name string) {
	dir := os.Getenv("LEASES_TEST_PAUSE_DIR")
	if os.Getenv("LEASES_TEST_PAUSE") != name || dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".paused"), nil, 0o600); err != nil {
		return
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, name+".resume")); err == nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// workLeaseHook: with LEASES_TEST_WORK_TOKENS=DIR, leases work writes each
// claim's token to DIR/<job>.token (mode 0600), so that the secret scan can
// look for the secrets of claims that never leave the process otherwise.
func workLeaseHook(l *core.Lease) {
	dir := os.Getenv("LEASES_TEST_WORK_TOKENS")
	if dir == "" {
		return
	}
	if tok, err := l.Export(); err == nil {
		os.WriteFile(filepath.Join(dir, l.JobID()+".token"), []byte(tok), 0o600)
	}
}

// openOptionsHook: with LEASES_TEST_BUSY_TIMEOUT_US=N the authority waits at
// most N µs for a lock held elsewhere (SQLite's writer lock, PostgreSQL's
// lock_timeout), so that a test holding the lock makes every write fail with
// busy within a millisecond instead of the default 10 s: how the worker
// loop's back-off is observed through leases work.
func openOptionsHook(o *leases.Options) {
	if n, err := strconv.ParseInt(os.Getenv("LEASES_TEST_BUSY_TIMEOUT_US"), 10, 64); err == nil && n > 0 {
		o.BusyTimeout = time.Duration(n) * time.Microsecond
	}
}
