// leases serve as an operator runs it: the listen address rules, the help
// that says why, a real server answering until SIGTERM (docs/web.md).
package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeRefusesANonLoopbackAddressUnlessPublic(t *testing.T) {
	e := newEnv(t)
	e.setup(1)
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.1:8080", "[::]:8080"} {
		r := e.run("serve", "--listen", addr)
		wantExit(t, r, 2, "not a loopback address", "no authentication", "--listen-public")
	}
	wantExit(t, e.run("serve", "--listen", "localhost"), 2, "is not HOST:PORT")
	r := e.must("serve", "--help")
	for _, why := range []string{"NO AUTHENTICATION", "--listen-public", "authenticating proxy", "--allow-actions", "127.0.0.1:8080"} {
		if !strings.Contains(r.stdout, why) {
			t.Errorf("serve --help lacks %q:\n%s", why, r.stdout)
		}
	}
}

func TestServeAnswersUntilSIGTERMAndNeverCreatesADatabase(t *testing.T) {
	e := newEnv(t)
	wantExit(t, e.run("serve", "--listen", "127.0.0.1:0"), 1, "not_found")
	if exists(e.db) {
		t.Fatal("serve created a database")
	}
	e.setup(2)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd, out, errb, done := e.start(opts{}, "serve", "--listen", addr)
	defer cmd.Process.Kill()
	base := "http://" + addr
	var health *http.Response
	waitFor(t, "the server to answer", func() bool {
		health, err = http.Get(base + "/healthz")
		return err == nil
	})
	health.Body.Close()
	if health.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", health.Status)
	}
	resp, err := http.Get(base + "/production?name=" + prod)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), prod) {
		t.Fatalf("the production page: %s\n%s", resp.Status, page)
	}
	resp, err = http.Post(base+"/actions/cancel", "application/x-www-form-urlencoded", strings.NewReader("production="+prod))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("a POST to a read-only server: %s", resp.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		r := e.finish([]string{"serve"}, err, out, errb)
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "leases serve: "+base+"/ (read-only; stop with Ctrl-C)") {
			t.Fatalf("serve did not print its URL: %s", r)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}

func TestServeLabelsAtLeastOneProductionInMetrics(t *testing.T) {
	e := newEnv(t)
	e.setup(1)
	for _, n := range []string{"0", "-3"} {
		wantExit(t, e.run("serve", "--listen", "127.0.0.1:0", "--metrics-productions", n), 2, "--metrics-productions", "at least 1")
	}
	r := e.must("serve", "--help")
	for _, want := range []string{"--metrics-productions", `production="_other"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, r.stdout)
		}
	}
}
