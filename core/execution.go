// Reference executor: an execution request owns one attempt's output files for
// an active lease, and turns a finished file into a registered output fact.
package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Execution is one execution request of an active lease. It owns a fresh
// random nonce (not a credential: it grants nothing), a reserved temporary
// file and the name of a final file, both in the caller's output directory and
// both containing the job id and the nonce, so two workers running the same
// job never touch each other's files. It is consumed by exactly one Finish or
// Abandon; later calls report KindClosed. It is safe for concurrent use.
type Execution struct {
	l     *Lease
	mu    sync.Mutex
	nonce string
	temp  string
	final string
	used  bool
}

// crashAfterRename is a test-only crash point between the rename of the
// output and the database completion. Release builds never set it; core's
// internal tests set it to show that a crash there leaves an unregistered
// final file and publishes no fact. A non-nil error stops Finish on the spot,
// without cleanup, as a crash would.
var crashAfterRename func(x *Execution) error

// BeginExecution starts an execution request for an active lease. It reserves
// the temporary file (created exclusively, mode 0600) in outputDir and names
// the final file. Nothing is written to the store.
func (l *Lease) BeginExecution(outputDir string) (*Execution, error) {
	if err := l.nilCheck(); err != nil {
		return nil, err
	}
	if err := checkText("output directory", outputDir, MaxPathLen, false); err != nil {
		return nil, err
	}
	if err := l.localCheck(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(outputDir)
	if err != nil {
		return nil, errf(KindInvalidArgument, "output directory %q: %v", outputDir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, errf(KindInvalidArgument, "output directory %q: %v", outputDir, pathErr(err))
	}
	if !st.IsDir() {
		return nil, errf(KindInvalidArgument, "output directory %q is not a directory", outputDir)
	}
	nonce, err := newUUID()
	if err != nil {
		return nil, err
	}
	base := l.jobID + "." + nonce
	x := &Execution{l: l, nonce: nonce,
		temp:  filepath.Join(dir, base+".tmp"),
		final: filepath.Join(dir, base+".out")}
	if len(x.final) > MaxPathLen {
		return nil, errf(KindInvalidArgument, "output path would be longer than %d bytes", MaxPathLen)
	}
	f, err := os.OpenFile(x.temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, &Error{Kind: KindStorage, Msg: "reserve temporary output file", Err: pathErr(err)}
	}
	if err := f.Close(); err != nil {
		os.Remove(x.temp)
		return nil, &Error{Kind: KindStorage, Msg: "reserve temporary output file", Err: pathErr(err)}
	}
	return x, nil
}

// pathErr drops the operation name so messages read "path: reason".
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// String names the job, the nonce and the files; never the lease's secret.
func (x *Execution) String() string {
	return fmt.Sprintf("execution{job=%s nonce=%s temp=%q final=%q}", x.l.jobID, x.nonce, x.temp, x.final)
}

// Format shows String for every verb and flag.
func (x *Execution) Format(f fmt.State, verb rune) { formatAs(f, verb, x.String()) }

// LogValue logs String.
func (x *Execution) LogValue() slog.Value { return slog.StringValue(x.String()) }

// TempPath is the reserved temporary file the work writes to.
func (x *Execution) TempPath() string { return x.temp }

// FinalPath is the name the output gets when Finish succeeds.
func (x *Execution) FinalPath() string { return x.final }

// Nonce is the execution nonce (a random UUID, not a credential).
func (x *Execution) Nonce() string { return x.nonce }

// Lease is the lease this request belongs to.
func (x *Execution) Lease() *Lease { return x.l }

// take consumes the request; it reports KindClosed if it was already used.
func (x *Execution) take() error {
	if x == nil || x.l == nil {
		return errf(KindInvalidArgument, "execution is nil")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.used {
		return errf(KindClosed, "execution %s of job %s was already finished or abandoned", x.nonce, x.l.jobID)
	}
	x.used = true
	return nil
}

// Finish consumes the request: it fsyncs the temporary file, renames it to the
// final name, fsyncs the directory, and then completes the lease, publishing
// f plus the output (path, size, SHA-256, nonce) in one commit. If anything
// fails before the commit, or the completion is rejected (expired, lease
// lost, cancelled, ...), it removes this request's own files and nothing else.
// If the commit's outcome is unknown (KindOutcomeUnknown), the final file is
// kept, because the completion may have been published.
func (x *Execution) Finish(f Facts) error { return x.finish(context.Background(), f) }

func (x *Execution) finish(ctx context.Context, f Facts) error {
	if err := x.take(); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		x.removeTemp()
		return err
	}
	if err := x.l.localCheck(); err != nil {
		x.removeTemp()
		return err
	}
	out, err := x.seal()
	if err != nil {
		x.removeTemp()
		return err
	}
	if err := os.Rename(x.temp, x.final); err != nil {
		x.removeTemp()
		return &Error{Kind: KindStorage, Msg: "rename output to its final name", Err: err}
	}
	if err := syncDir(filepath.Dir(x.final)); err != nil {
		os.Remove(x.final)
		return err
	}
	if hook := crashAfterRename; hook != nil {
		if err := hook(x); err != nil {
			return err
		}
	}
	f.Outputs = append(append([]Output(nil), f.Outputs...), out)
	if err := x.l.complete(ctx, f); err != nil {
		if KindOf(err) != KindOutcomeUnknown {
			os.Remove(x.final)
		}
		return err
	}
	return nil
}

// seal fsyncs the temporary file and measures it. The temporary path must
// still be a regular file: a symlink put in its place is refused rather than
// followed.
func (x *Execution) seal() (Output, error) {
	fail := func(msg string, err error) (Output, error) {
		return Output{}, &Error{Kind: KindStorage, Msg: msg, Err: pathErr(err)}
	}
	st, err := os.Lstat(x.temp)
	if err != nil {
		return fail("temporary output file", err)
	}
	if !st.Mode().IsRegular() {
		return Output{}, errf(KindInvalidArgument, "temporary output %s is no longer a regular file", x.temp)
	}
	file, err := os.OpenFile(x.temp, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fail("open temporary output file", err)
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return fail("read temporary output file", err)
	}
	if err := file.Sync(); err != nil {
		return fail("fsync temporary output file", err)
	}
	return Output{Path: x.final, Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Nonce: x.nonce}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return &Error{Kind: KindStorage, Msg: "open output directory for fsync", Err: pathErr(err)}
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return &Error{Kind: KindStorage, Msg: "fsync output directory", Err: pathErr(err)}
	}
	return nil
}

// removeTemp removes this request's temporary file; a file already gone is
// fine, and nothing else is touched.
func (x *Execution) removeTemp() { os.Remove(x.temp) }

// Abandon consumes the request and removes its temporary file. It writes
// nothing to the store: the lease stays as it was. Abandoning a consumed
// request does nothing.
func (x *Execution) Abandon() {
	if x.take() != nil {
		return
	}
	x.removeTemp()
}
