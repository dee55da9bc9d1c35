// Test harness: builds the leasestest binary once and runs it as a
// subprocess, recording every output so that a final scan can prove that no
// claim secret ever reached standard output or standard error.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/testwait"
)

var (
	binPath     string
	repoVersion string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leases-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		fmt.Fprintln(os.Stderr, "read VERSION:", err)
		return 1
	}
	repoVersion = strings.TrimSpace(string(v))
	binPath = filepath.Join(dir, "leases")
	build := exec.Command("go", "build", "-tags", "leasestest",
		"-ldflags", "-X main.version="+repoVersion, "-o", binPath, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the leases test binary failed:", err)
		return 1
	}
	code := m.Run()
	if leaks := transcript.scan(); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: a claim secret appeared in command output:")
		for _, l := range leaks {
			fmt.Fprintln(os.Stderr, "  ", l)
		}
		return 1
	}
	// With the whole suite run, the scan must have had secrets to look for.
	if transcript.tokens() == 0 && flag.Lookup("test.run").Value.String() == "" {
		fmt.Fprintln(os.Stderr, "FAIL: the secret scan saw no tokens, so it proved nothing")
		return 1
	}
	return code
}

// transcript keeps every output and every secret form seen by the tests.
var transcript = &record{}

type record struct {
	mu      sync.Mutex
	outputs []entry
	secrets map[string]string
}

func (r *record) tokens() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.secrets)
}

// addToken registers every textual form a token's secret could leak in.
func (r *record) addToken(t *testing.T, tok string) {
	t.Helper()
	dec, err := core.DecodeToken(tok)
	if err != nil {
		t.Fatalf("token file does not hold a valid token: %v", err)
	}
	s := dec.Secret.Bytes()
	forms := map[string]string{
		tok:                             "token",
		strings.TrimPrefix(tok, "lt1."): "token body",
		uuid.UUID(s).String():           "secret (uuid)",
		hex.EncodeToString(s[:]):        "secret (hex)",
		strings.ToUpper(hex.EncodeToString(s[:])):  "secret (HEX)",
		base64.StdEncoding.EncodeToString(s[:]):    "secret (base64)",
		base64.RawURLEncoding.EncodeToString(s[:]): "secret (base64url)",
		string(s[:]): "secret (raw bytes)",
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	for k, v := range forms {
		r.secrets[k] = v
	}
}

func (r *record) add(label, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outputs = append(r.outputs, entry{label, text})
}

// scan reports every (output, secret form) match.
func (r *record) scan() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var leaks []string
	for _, out := range r.outputs {
		for s, what := range r.secrets {
			if strings.Contains(out.text, s) {
				leaks = append(leaks, fmt.Sprintf("%s in the output of %s", what, out.label))
			}
		}
	}
	return leaks
}

// entry is one captured stream; label names the command with any
// token-shaped argument replaced.
type entry struct{ label, text string }

func label(args []string, stream string) string {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if looksLikeToken(a) {
			shown[i] = "<token argument>"
		}
	}
	return "leases " + strings.Join(shown, " ") + " [" + stream + "]"
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// env is one test's directory and database.
type env struct {
	t   *testing.T
	dir string
	db  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, db: filepath.Join(dir, "leases.db")}
	t.Cleanup(e.scanDatabase)
	return e
}

// scanDatabase proves the database files hold no secret in any form.
func (e *env) scanDatabase() {
	files, _ := filepath.Glob(e.db + "*")
	transcript.mu.Lock()
	defer transcript.mu.Unlock()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for s, what := range transcript.secrets {
			if bytes.Contains(b, []byte(s)) {
				e.t.Errorf("%s found in database file %s", what, filepath.Base(f))
			}
		}
	}
}

type opts struct {
	stdin string
	env   []string
	dir   string
	noDB  bool // do not set LEASES_DB
}

func (e *env) run(args ...string) result { return e.runWith(opts{}, args...) }

func (e *env) command(o opts, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(binPath, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir, "LC_ALL=C"}
	if !o.noDB {
		cmd.Env = append(cmd.Env, "LEASES_DB="+e.db)
	}
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Dir = e.dir
	if o.dir != "" {
		cmd.Dir = o.dir
	}
	cmd.Stdin = strings.NewReader(o.stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// start runs leases in the background; done delivers cmd.Wait's result.
func (e *env) start(o opts, args ...string) (cmd *exec.Cmd, out, errb *bytes.Buffer, done <-chan error) {
	e.t.Helper()
	cmd, out, errb = e.command(o, args...)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	return cmd, out, errb, waited
}

func (e *env) runWith(o opts, args ...string) result {
	e.t.Helper()
	cmd, out, errb := e.command(o, args...)
	err := cmd.Run()
	return e.finish(args, err, out, errb)
}

func (e *env) finish(args []string, err error, out, errb *bytes.Buffer) result {
	e.t.Helper()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("running leases %v: %v", args, err)
	}
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	outs := []entry{{label(args, "stdout"), r.stdout}, {label(args, "stderr"), r.stderr}}
	for _, o := range outs {
		transcript.add(o.label, o.text)
	}
	if leaks := (&record{outputs: outs, secrets: transcript.snapshot()}).scan(); len(leaks) > 0 {
		e.t.Errorf("secret leaked: %v", leaks)
	}
	return r
}

func (r *record) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.secrets))
	for k, v := range r.secrets {
		out[k] = v
	}
	return out
}

// must runs a command that has to succeed.
func (e *env) must(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("leases %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func wantExit(t *testing.T, r result, code int, stderrHas ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	for _, s := range stderrHas {
		if !strings.Contains(r.stderr, s) {
			t.Fatalf("stderr lacks %q: %s", s, r)
		}
	}
	if code != 0 && !strings.HasPrefix(r.stderr, "leases: ") && !strings.Contains(r.stderr, "\nleases: ") {
		t.Fatalf("error is not reported as 'leases: <message>': %s", r)
	}
}

const prod = "nightly"

// setup creates the production and n jobs; it returns their ids.
func (e *env) setup(n int) []string {
	e.t.Helper()
	e.must("production", "create", prod)
	var ids []string
	for i := 0; i < n; i++ {
		r := e.must("job", "request", "--production", prod, "--key", fmt.Sprintf("job-%d", i))
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	return ids
}

// claim claims (optionally a given job) into a new token file and registers
// the token with the secret scan.
func (e *env) claim(worker, dur string, extra ...string) (tokenPath string, r result) {
	e.t.Helper()
	tokenPath = filepath.Join(e.dir, fmt.Sprintf("token-%d", time.Now().UnixNano()))
	args := append([]string{"claim", "--production", prod, "--worker", worker, "--duration", dur, "--token-out", tokenPath}, extra...)
	r = e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("claim: %s", r)
	}
	e.register(tokenPath)
	return tokenPath, r
}

func (e *env) register(tokenPath string) {
	e.t.Helper()
	b, err := os.ReadFile(tokenPath)
	if err != nil {
		e.t.Fatalf("read token file: %v", err)
	}
	transcript.addToken(e.t, strings.TrimSpace(string(b)))
}

func (e *env) readToken(tokenPath string) string {
	e.t.Helper()
	b, err := os.ReadFile(tokenPath)
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// jobs reads the job listing as JSON.
type jobRow struct {
	ID        string  `json:"id"`
	State     string  `json:"state"`
	Worker    *string `json:"worker"`
	ClaimedAt *int64  `json:"claimed_at_unix_us"`
	Expiry    *int64  `json:"expiry_unix_us"`
	Attempts  int64   `json:"attempts"`
	Reason    *string `json:"reason"`
}

func (e *env) jobs() map[string]jobRow {
	e.t.Helper()
	r := e.must("job", "list", "--production", prod, "--json")
	var rows []jobRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		e.t.Fatalf("job list --json: %v\n%s", err, r.stdout)
	}
	m := map[string]jobRow{}
	for _, row := range rows {
		m[row.ID] = row
	}
	return m
}

func (e *env) job(id string) jobRow {
	e.t.Helper()
	j, ok := e.jobs()[id]
	if !ok {
		e.t.Fatalf("job %s not listed", id)
	}
	return j
}

type eventRow struct {
	Seq   int64   `json:"seq"`
	JobID *string `json:"job_id"`
	Kind  string  `json:"kind"`
}

func (e *env) events() []eventRow {
	e.t.Helper()
	r := e.must("events", "--json")
	var rows []eventRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		e.t.Fatalf("events --json: %v\n%s", err, r.stdout)
	}
	return rows
}

// facts reads published facts directly from the authority.
func (e *env) facts(jobID string) core.Facts {
	e.t.Helper()
	a, err := leases.Open(e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	defer a.Close()
	f, err := a.FactsOf(prod, jobID)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// promptly bounds what must happen at once (a wait ended by a signal, a
// cancel seen): it takes milliseconds, and seconds leave room for a loaded or
// stalled CI host while staying far below the minute-long waits and claims
// the tests would otherwise sit through.
const promptly = 10 * time.Second

// waitFor polls until cond holds, which must come to pass eventually: it
// fails only after testwait.EventuallyBound, which a loaded or stalled CI host
// does not reach.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testwait.EventuallyBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
