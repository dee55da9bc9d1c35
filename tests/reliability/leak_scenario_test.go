//go:build leasesworkers

// Built only with the leasesworkers tag: these tests drive worker programs
// (C, C++, Rust, the CLI) that make builds first (make test-race sets the tag),
// so a plain `go test ./...` leaves them out rather than skipping them.

package reliability

// The parts of the secret-leak scan the race does not reach: edits, import,
// the reference executor, coordinator cancel, rejections of every kind,
// waiting claims, keep-alive reports, Check and the worker loop's log, and
// values formatted every way Go can format them (Go surface), and the CLI's
// exec (whose program dumps its whole environment and argument list),
// import errors for damaged tokens, renew and listings, and every view of
// the status page at three stages (leak_web_test.go). The race
// (race_test.go) covers claim, renew, release, fail, complete, listings and
// error strings on the C, C++, Rust, Python and CLI surfaces.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/worker"
	"github.com/stretchr/testify/require"
)

func TestNoSecretInAnyOutputOfAFullScenario(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tokens")
	require.NoError(t, os.Mkdir(tokDir, 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "out"), 0o700))
	db := filepath.Join(dir, "leases.db")
	logf, err := os.Create(filepath.Join(dir, "go-surface.log"))
	require.NoError(t, err)
	defer logf.Close()
	var tokens []string
	keepToken := func(tok string) {
		tokens = append(tokens, tok)
		require.NoError(t, os.WriteFile(filepath.Join(tokDir, fmt.Sprintf("t%d", len(tokens))), []byte(tok), 0o600))
	}
	// say writes values and errors to the scanned log in every way Go shows
	// a value: each fmt verb (with flags), inside the structs a caller would
	// log, as JSON, and through both slog handlers.
	logText, logJSON := slog.New(slog.NewTextHandler(logf, nil)), slog.New(slog.NewJSONHandler(logf, nil))
	say := func(vs ...any) {
		for _, v := range vs {
			for _, w := range []any{v, []any{v}, struct{ V any }{v}, struct{ v any }{v}, map[string]any{"k": v}} {
				for _, verb := range []string{"v", "+v", "#v", "s", "q", "x", "X", "#x", "d", "o", "O", "b", "c", "U", "e", "g", "t", "p", "T"} {
					fmt.Fprintf(logf, "%"+verb+" | ", w)
				}
				b, err := json.Marshal(w)
				fmt.Fprintf(logf, "%s %v\n", b, err)
				logText.Info("say", "v", w)
				logJSON.Info("say", "v", w)
			}
		}
	}

	a, err := leases.Open(db)
	require.NoError(t, err)
	_, err = a.CreateProduction("leak")
	require.NoError(t, err)
	for i := 0; i < 16; i++ {
		_, err := a.RequestJob("leak", fmt.Sprintf("k%d", i), []byte("payload"))
		require.NoError(t, err)
	}

	// Go: an edit claiming and completing in one commit.
	e, err := a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("leak", "go-edit", time.Minute)
	require.NoError(t, err)
	tok, err := l.Export()
	say(l, err, e) // a pending lease does not export; the edit holds it
	require.NoError(t, e.Complete(l, core.Facts{Metadata: map[string]json.RawMessage{"k": json.RawMessage(`1`)}}))
	require.NoError(t, e.Commit())
	_ = tok

	// Go: export, import, every claimant rejection, an execution, cancel.
	l, err = a.Claim("leak", "go", time.Minute)
	require.NoError(t, err)
	tok, err = l.Export()
	require.NoError(t, err)
	keepToken(tok)
	l2, err := a.Import(tok)
	require.NoError(t, err)
	say(l, l2, reflect.ValueOf(l2).Elem().Interface()) // by value, as a careless %v of *l2 would
	dec, err := core.DecodeToken(tok)
	require.NoError(t, err)
	say(dec, &dec, dec.Secret, &dec.Secret)
	views := webSnapshot(t, db, dir, "claimed") // a claim exported and imported, held twice

	say(l2.Renew(time.Millisecond))            // not extended
	say(l2.Renew(48 * time.Hour))              // invalid duration
	_, err = a.Import(tok[:len(tok)-2] + "AA") // a damaged token
	say(err)
	x, err := l2.BeginExecution(filepath.Join(dir, "out"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(x.TempPath(), []byte("output"), 0o600))
	say(x, x.TempPath(), x.FinalPath(), x.Nonce())
	require.NoError(t, x.Finish(core.Facts{}))
	say(l.Complete(core.Facts{})) // the other handle of the same claim: wrong state
	l3, err := a.Claim("leak", "go-cancelled", time.Minute)
	require.NoError(t, err)
	tok3, err := l3.Export()
	require.NoError(t, err)
	keepToken(tok3)
	require.NoError(t, a.Cancel("leak", l3.JobID()))
	say(l3.Renew(time.Hour), l3.Release(), l3.Fail("x"), l3.Complete(core.Facts{}))
	_, err = a.Import(tok3)
	say(err)
	// A claim that expires soon. On a loaded machine its commit can come
	// after its own expiry (born expired: an expired error, nothing held);
	// then claim again with a longer one.
	var l4 *core.Lease
	for d := 20 * time.Millisecond; l4 == nil; d *= 4 {
		l4, err = a.Claim("leak", "go-expiring", d)
		if errors.Is(err, core.ErrExpired) && d < 5*time.Second {
			say(err)
			continue
		}
		require.NoError(t, err)
	}
	tok4, _ := l4.Export()
	keepToken(tok4)
	time.Sleep(time.Until(l4.Expiry()) + 5*time.Millisecond)
	say(l4.Renew(time.Hour))
	l5, err := a.Claim("leak", "go-thief", time.Minute) // takes l4's expired job or the next
	require.NoError(t, err)
	tok5, _ := l5.Export()
	keepToken(tok5)
	say(l4.Complete(core.Facts{}), l5)
	// Go: a waiting claim, its keep-alive reporting a cancel, Check, an
	// interrupted wait, and the worker loop logging a failing and a
	// panicking handler (whose panic value is the lease itself).
	l6, err := a.ClaimWait(context.Background(), "leak", "go-waiter", time.Minute, time.Second)
	require.NoError(t, err)
	tok6, _ := l6.Export()
	keepToken(tok6)
	require.NoError(t, l6.KeepAlive(time.Minute, core.KeepAliveInterval(10*time.Millisecond)))
	require.NoError(t, a.Cancel("leak", l6.JobID()))
	<-l6.Done()
	say(l6, l6.Err(), l6.Check(context.Background()))
	stopped, stop := context.WithCancel(context.Background())
	stop()
	_, err = a.ClaimWait(stopped, "leak", "go-interrupted", time.Minute, time.Second)
	say(err)
	calls := 0
	err = worker.Run(context.Background(), a, worker.Config{Production: "leak", Worker: "go-loop", Duration: time.Minute,
		MaxJobs: 2, Logger: logText}, func(ctx context.Context, l *core.Lease) (core.Facts, error) {
		tok, err := l.Export()
		require.NoError(t, err)
		keepToken(tok)
		if calls++; calls == 1 {
			return core.Facts{}, fmt.Errorf("the handler of %v failed", l)
		}
		panic(l)
	})
	say(err)
	js, _ := a.Jobs("leak")
	evs, _ := a.Events("", 0)
	say(js, evs)
	views += webSnapshot(t, db, dir, "go")
	require.NoError(t, a.Close())

	// CLI: claim into token files, exec (the program dumps its environment
	// and arguments), renew, damaged tokens, listings, help.
	cli := filepath.Join(root, "build/leases")
	outLog, err := os.Create(filepath.Join(dir, "cli.log"))
	require.NoError(t, err)
	defer outLog.Close()
	run := func(stdin string, args ...string) {
		cmd := exec.Command(cli, args...)
		cmd.Env = append(os.Environ(), "LEASES_DB="+db)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = outLog, outLog
		err := cmd.Run()
		fmt.Fprintf(outLog, "leases %s: %v\n", strings.Join(args, " "), err)
	}
	tf := func(i int) string { return filepath.Join(tokDir, fmt.Sprintf("cli%d", i)) }
	for i := 0; i < 4; i++ {
		run("", "claim", "--production", "leak", "--worker", "cli", "--duration", "1m", "--token-out", tf(i), "--json")
		b, err := os.ReadFile(tf(i))
		require.NoError(t, err)
		tokens = append(tokens, strings.TrimSpace(string(b)))
	}
	run("", "renew", "--token-file", tf(0), "--duration", "2m", "--json")
	run("", "renew", "--token-file", tf(0), "--duration", "1us")
	run("", "exec", "--token-file", tf(0), "--output-dir", filepath.Join(dir, "out"), "--", "sh", "-c",
		`env; cat /proc/self/cmdline | tr '\0' ' '; cat /proc/$PPID/cmdline | tr '\0' ' '; echo out > "$LEASES_OUTPUT"`)
	run("", "exec", "--token-file", tf(1), "--output-dir", filepath.Join(dir, "out"), "--", "sh", "-c", "env; exit 3")
	bad := []byte(tokens[len(tokens)-1])
	bad[10] ^= 1
	run(string(bad), "release", "--token-file", "-")
	run(tokens[len(tokens)-1]+"x", "fail", "--token-file", "-", "--reason", "r")
	run("", "cancel", "--production", "leak", "--job", "00000000-0000-4000-8000-000000000000")
	run("", "complete", "--token-file", tf(2), "--metadata", "k=1")
	run("", "complete", "--token-file", tf(2))
	run("", "release", "--token-file", tf(3))
	run("", "fail", "--token-file", tf(3), "--reason", "late")
	run("", "job", "list", "--production", "leak", "--json")
	run("", "job", "list", "--production", "leak")
	run("", "events", "--json")
	run("", "events")
	run("", "help", "claim")

	views += webSnapshot(t, db, dir, "cli")

	checked := scanForSecrets(t, dir, tokens)
	t.Logf("full scenario: %d secrets, zero found outside the token files (%d status page views among them)", checked, views)
	recordFigure(t, "leak_scenario", map[string]int{"secrets_checked": checked, "leaks": 0, "web_views": views})
}
