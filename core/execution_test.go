// Rules of the reference executor (docs/DESIGN.md, "The reference executor"): nonce-named
// files, consumed once, own-files-only cleanup, and no partial facts.
package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// execFixture is an authority on a controllable clock with one production.
type execFixture struct {
	a   *Authority
	now atomic.Int64
	dir string
	loc string // the authority's location
}

const execProd = "render"

func newExecFixture(t *testing.T) *execFixture {
	t.Helper()
	fx := &execFixture{dir: t.TempDir()}
	fx.loc = newLocation(t, "leases.db")
	a, err := Open(fx.loc)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	fx.now.Store(time.Now().UnixMicro())
	a.setClock(fx.now.Load)
	fx.a = a
	if _, err := a.CreateProduction(execProd); err != nil {
		t.Fatalf("create production: %v", err)
	}
	return fx
}

func (fx *execFixture) advance(d time.Duration) { fx.now.Add(int64(d / time.Microsecond)) }

func (fx *execFixture) outDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(fx.dir, "out")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// claimNew requests a job and claims it.
func (fx *execFixture) claimNew(t *testing.T, worker string) *Lease {
	t.Helper()
	id, err := fx.a.RequestJob(execProd, "", []byte("payload"))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	l, err := fx.a.ClaimJob(execProd, id, worker, time.Minute)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return l
}

func execBegin(t *testing.T, l *Lease, dir string) *Execution {
	t.Helper()
	x, err := l.BeginExecution(dir)
	if err != nil {
		t.Fatalf("begin execution: %v", err)
	}
	return x
}

func execWrite(t *testing.T, x *Execution, content string) {
	t.Helper()
	if err := os.WriteFile(x.TempPath(), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func execExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func execWantKind(t *testing.T, err error, k Kind) {
	t.Helper()
	if KindOf(err) != k {
		t.Fatalf("got error %v (kind %v), want kind %v", err, KindOf(err), k)
	}
}

func execJobState(t *testing.T, fx *execFixture, jobID string) string {
	t.Helper()
	j, err := fx.a.Job(execProd, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

func execFacts(t *testing.T, fx *execFixture, jobID string) Facts {
	t.Helper()
	f, err := fx.a.FactsOf(execProd, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func execDirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestExecutionFilesAreNamedByJobAndFreshNonce(t *testing.T) {
	fx := newExecFixture(t)
	l := fx.claimNew(t, "w1")
	out := fx.outDir(t)
	x1 := execBegin(t, l, out)
	x2 := execBegin(t, l, out)
	for _, x := range []*Execution{x1, x2} {
		u, err := uuid.Parse(x.Nonce())
		if err != nil || u.Version() != 4 || u.String() != x.Nonce() {
			t.Fatalf("nonce %q is not a canonical random UUID", x.Nonce())
		}
		for _, p := range []string{x.TempPath(), x.FinalPath()} {
			base := filepath.Base(p)
			if !strings.Contains(base, l.JobID()) || !strings.Contains(base, x.Nonce()) {
				t.Fatalf("%s does not contain job id and nonce", p)
			}
			if filepath.Dir(p) != out {
				t.Fatalf("%s is not in the output directory %s", p, out)
			}
		}
		if x.TempPath() == x.FinalPath() {
			t.Fatal("temporary and final names are the same")
		}
		st, err := os.Lstat(x.TempPath())
		if err != nil {
			t.Fatalf("temporary file was not reserved: %v", err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
			t.Fatalf("temporary file mode %v, want a private regular file", st.Mode())
		}
		if execExists(x.FinalPath()) {
			t.Fatal("final file exists before Finish")
		}
	}
	if x1.Nonce() == x2.Nonce() {
		t.Fatal("two requests share a nonce")
	}
	tok, err := l.Export()
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := DecodeToken(tok)
	if x1.Nonce() == uuid.UUID(dec.Secret.Bytes()).String() {
		t.Fatal("the nonce is the claim secret")
	}
}

func TestBeginExecutionRequiresAnActiveLease(t *testing.T) {
	fx := newExecFixture(t)
	out := fx.outDir(t)

	released := fx.claimNew(t, "w1")
	if err := released.Release(); err != nil {
		t.Fatal(err)
	}
	_, err := released.BeginExecution(out)
	execWantKind(t, err, KindClosed)

	if _, err := fx.a.RequestJob(execProd, "", nil); err != nil {
		t.Fatal(err)
	}
	e, err := fx.a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	pending, err := e.Claim(execProd, "w2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pending.BeginExecution(out)
	execWantKind(t, err, KindClosed)
	e.Abort()

	_, err = fx.claimNew(t, "w3").BeginExecution(filepath.Join(fx.dir, "missing"))
	execWantKind(t, err, KindInvalidArgument)
	if names := execDirNames(t, out); len(names) != 0 {
		t.Fatalf("refused requests left files: %v", names)
	}
}

func TestFinishRenamesAndCompletesWithOutputFacts(t *testing.T) {
	fx := newExecFixture(t)
	l := fx.claimNew(t, "w1")
	x := execBegin(t, l, fx.outDir(t))
	content := "frame 1\n"
	execWrite(t, x, content)

	err := x.Finish(Facts{
		Metadata:   map[string]json.RawMessage{"frames": json.RawMessage(`1`)},
		Provenance: map[string]json.RawMessage{"tool": json.RawMessage(`"render"`)},
	})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if execExists(x.TempPath()) {
		t.Fatal("temporary file survived Finish")
	}
	got, err := os.ReadFile(x.FinalPath())
	if err != nil || string(got) != content {
		t.Fatalf("final file: %q, %v", got, err)
	}
	if s := execJobState(t, fx, l.JobID()); s != StateCompleted {
		t.Fatalf("job is %s, want completed", s)
	}
	if l.State() != LeaseClosed {
		t.Fatalf("lease is %v after Finish, want closed", l.State())
	}
	f := execFacts(t, fx, l.JobID())
	sum := sha256.Sum256([]byte(content))
	want := Output{Path: x.FinalPath(), Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Nonce: x.Nonce()}
	if len(f.Outputs) != 1 || f.Outputs[0] != want {
		t.Fatalf("outputs %+v, want [%+v]", f.Outputs, want)
	}
	if string(f.Metadata["frames"]) != `1` || string(f.Provenance["tool"]) != `"render"` {
		t.Fatalf("facts %+v lack the metadata/provenance", f)
	}
}

func TestExecutionIsConsumedOnce(t *testing.T) {
	fx := newExecFixture(t)
	out := fx.outDir(t)
	l := fx.claimNew(t, "w1")
	x := execBegin(t, l, out)
	if err := x.Finish(Facts{}); err != nil {
		t.Fatal(err)
	}
	execWantKind(t, x.Finish(Facts{}), KindClosed)
	x.Abandon()
	if !execExists(x.FinalPath()) {
		t.Fatal("Abandon after Finish removed the registered output")
	}

	l2 := fx.claimNew(t, "w1")
	y := execBegin(t, l2, out)
	y.Abandon()
	execWantKind(t, y.Finish(Facts{}), KindClosed)
	if s := execJobState(t, fx, l2.JobID()); s != StateClaimed {
		t.Fatalf("finishing an abandoned request changed the job to %s", s)
	}
}

func TestAbandonRemovesItsTempFileAndWritesNothing(t *testing.T) {
	fx := newExecFixture(t)
	out := fx.outDir(t)
	other := filepath.Join(out, "someone-elses-file")
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := fx.claimNew(t, "w1")
	before, _ := fx.a.Events("", 0)
	x := execBegin(t, l, out)
	execWrite(t, x, "partial")
	x.Abandon()
	if execExists(x.TempPath()) || execExists(x.FinalPath()) {
		t.Fatal("Abandon left the request's files")
	}
	if !execExists(other) {
		t.Fatal("Abandon removed a file it does not own")
	}
	after, _ := fx.a.Events("", 0)
	if len(after) != len(before) {
		t.Fatalf("Abandon wrote %d events", len(after)-len(before))
	}
	if s := execJobState(t, fx, l.JobID()); s != StateClaimed || l.State() != LeaseActive {
		t.Fatalf("Abandon changed the job (%s) or the lease (%v)", s, l.State())
	}
}

func TestRejectedCompletionRemovesOnlyItsOwnFiles(t *testing.T) {
	cases := []struct {
		name string
		kind Kind
		lose func(fx *execFixture, l *Lease)
	}{
		{"expired", KindExpired, func(fx *execFixture, l *Lease) { fx.advance(2 * time.Minute) }},
		{"cancelled", KindCancelled, func(fx *execFixture, l *Lease) {
			if err := fx.a.Cancel(execProd, l.JobID()); err != nil {
				panic(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newExecFixture(t)
			out := fx.outDir(t)
			other := filepath.Join(out, "keep.out")
			if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			l := fx.claimNew(t, "w1")
			x := execBegin(t, l, out)
			execWrite(t, x, "work")
			c.lose(fx, l)
			execWantKind(t, x.Finish(Facts{Metadata: map[string]json.RawMessage{"k": json.RawMessage(`true`)}}), c.kind)
			if execExists(x.TempPath()) || execExists(x.FinalPath()) {
				t.Fatal("rejected completion left its files")
			}
			if !execExists(other) {
				t.Fatal("rejected completion removed a file it does not own")
			}
			if f := execFacts(t, fx, l.JobID()); len(f.Outputs)+len(f.Metadata)+len(f.Provenance) != 0 {
				t.Fatalf("rejected completion published %+v", f)
			}
		})
	}
}

func TestTwoWorkersOnOneJobNeverTouchEachOthersFiles(t *testing.T) {
	fx := newExecFixture(t)
	out := fx.outDir(t)
	a := fx.claimNew(t, "worker-a")
	xa := execBegin(t, a, out)
	execWrite(t, xa, "from a")

	fx.advance(2 * time.Minute) // a's claim expires while it works
	b, err := fx.a.ClaimJob(execProd, a.JobID(), "worker-b", time.Minute)
	if err != nil {
		t.Fatalf("second claim after expiry: %v", err)
	}
	xb := execBegin(t, b, out)
	if xb.TempPath() == xa.TempPath() || xb.FinalPath() == xa.FinalPath() {
		t.Fatal("two workers got the same file names")
	}
	execWrite(t, xb, "from b")
	if err := xb.Finish(Facts{}); err != nil {
		t.Fatalf("b finish: %v", err)
	}
	if got, _ := os.ReadFile(xa.TempPath()); string(got) != "from a" {
		t.Fatalf("b's finish touched a's temporary file: %q", got)
	}

	execWantKind(t, xa.Finish(Facts{}), KindLeaseLost)
	if execExists(xa.TempPath()) || execExists(xa.FinalPath()) {
		t.Fatal("a's rejected completion left its files")
	}
	if got, err := os.ReadFile(xb.FinalPath()); err != nil || string(got) != "from b" {
		t.Fatalf("a's cleanup touched b's output: %q %v", got, err)
	}
	f := execFacts(t, fx, a.JobID())
	if len(f.Outputs) != 1 || f.Outputs[0].Nonce != xb.Nonce() || f.Outputs[0].Path != xb.FinalPath() {
		t.Fatalf("registered outputs %+v, want only b's", f.Outputs)
	}
}

var errExecCrash = errors.New("simulated crash after rename")

func TestCrashBetweenRenameAndCompletionLeavesUnregisteredFileAndNoFact(t *testing.T) {
	fx := newExecFixture(t)
	l := fx.claimNew(t, "w1")
	x := execBegin(t, l, fx.outDir(t))
	execWrite(t, x, "done")
	before, _ := fx.a.Events("", 0)

	crashAfterRename = func(*Execution) error { return errExecCrash }
	t.Cleanup(func() { crashAfterRename = nil })
	if err := x.Finish(Facts{Metadata: map[string]json.RawMessage{"k": json.RawMessage(`1`)}}); !errors.Is(err, errExecCrash) {
		t.Fatalf("finish: %v, want the simulated crash", err)
	}
	crashAfterRename = nil

	if got, err := os.ReadFile(x.FinalPath()); err != nil || string(got) != "done" {
		t.Fatalf("the renamed output should survive the crash: %q %v", got, err)
	}
	if f := execFacts(t, fx, l.JobID()); len(f.Outputs)+len(f.Metadata)+len(f.Provenance) != 0 {
		t.Fatalf("a crash before completion published %+v", f)
	}
	if s := execJobState(t, fx, l.JobID()); s != StateClaimed {
		t.Fatalf("job is %s after the crash, want claimed", s)
	}
	after, _ := fx.a.Events("", 0)
	if len(after) != len(before) {
		t.Fatalf("the crash wrote %d events", len(after)-len(before))
	}
}

func TestFinishRejectsBadFactsBeforeWritingAndCleansUp(t *testing.T) {
	fx := newExecFixture(t)
	l := fx.claimNew(t, "w1")
	x := execBegin(t, l, fx.outDir(t))
	err := x.Finish(Facts{Metadata: map[string]json.RawMessage{"k": json.RawMessage(`{not json`)}})
	execWantKind(t, err, KindInvalidArgument)
	if execExists(x.TempPath()) || execExists(x.FinalPath()) {
		t.Fatal("refused Finish left its files")
	}
	if s := execJobState(t, fx, l.JobID()); s != StateClaimed {
		t.Fatalf("refused Finish changed the job to %s", s)
	}
}

func TestFinishRefusesATempPathReplacedBySymlink(t *testing.T) {
	fx := newExecFixture(t)
	out := fx.outDir(t)
	target := filepath.Join(fx.dir, "precious")
	if err := os.WriteFile(target, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := fx.claimNew(t, "w1")
	x := execBegin(t, l, out)
	if err := os.Remove(x.TempPath()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, x.TempPath()); err != nil {
		t.Fatal(err)
	}
	execWantKind(t, x.Finish(Facts{}), KindInvalidArgument)
	if got, _ := os.ReadFile(target); !bytes.Equal(got, []byte("precious")) {
		t.Fatal("the symlink target was touched")
	}
	if execExists(x.FinalPath()) {
		t.Fatal("a symlink was registered as the output")
	}
	if s := execJobState(t, fx, l.JobID()); s != StateClaimed {
		t.Fatalf("job is %s, want claimed", s)
	}
}

func TestFinishKeepsTheFinalFileWhenTheCommitOutcomeIsUnknown(t *testing.T) {
	for _, survived := range []bool{true, false} {
		fx := newExecFixture(t)
		l := fx.claimNew(t, "w1")
		x := execBegin(t, l, fx.outDir(t))
		execWrite(t, x, "maybe")
		// Commit really commits (or rolls back) and then reports an error, as
		// SQLite can after an fsync failure.
		fault := faulty(fx.a)
		fault.commitErr, fault.commitSucceeds = errors.New("disk I/O error (fsync)"), survived
		execWantKind(t, x.Finish(Facts{}), KindOutcomeUnknown)
		fault.commitErr = nil
		if !execExists(x.FinalPath()) {
			t.Fatalf("survived=%v: the output was removed although its completion may have been published", survived)
		}
		f := execFacts(t, fx, l.JobID())
		if survived && (len(f.Outputs) != 1 || f.Outputs[0].Path != x.FinalPath()) {
			t.Fatalf("the surviving commit registered %+v", f.Outputs)
		}
		if !survived && len(f.Outputs) != 0 {
			t.Fatalf("a rolled-back commit registered %+v", f.Outputs)
		}
	}
}

func TestFinishRemovesItsFilesWhenNothingCommitted(t *testing.T) {
	fx := newExecFixture(t)
	l := fx.claimNew(t, "w1")
	x := execBegin(t, l, fx.outDir(t))
	execWrite(t, x, "work")
	// Another connection holds the writer lock: the completion is refused as
	// busy before anything is written.
	other, err := OpenWith(fx.loc, Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	e, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Abort()
	// Touching the job locks its row (PostgreSQL); the refusal keeps the
	// edit open.
	if _, err := e.ClaimJob(execProd, l.JobID(), "w2", time.Minute); KindOf(err) != KindWrongState {
		t.Fatalf("claiming a held job in the edit: %v", err)
	}
	slow, err := OpenWith(fx.loc, Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fx.a.b, slow.b = slow.b, fx.a.b
	execWantKind(t, x.Finish(Facts{}), KindBusy)
	e.Abort()
	if execExists(x.TempPath()) || execExists(x.FinalPath()) {
		t.Fatal("a completion that wrote nothing left its files")
	}
	if s := execJobState(t, fx, l.JobID()); s != StateClaimed {
		t.Fatalf("job is %s", s)
	}
}
