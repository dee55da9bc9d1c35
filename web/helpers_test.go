package web

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/stores"
	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// Every test that touches the store runs on SQLite and on PostgreSQL
// (LEASES_TEST_PG_URL; make test starts a server and requires it).

const pgPassword = "WEBPW9c1e"

// eachStore runs fn on a fresh SQLite file and on a fresh PostgreSQL schema
// whose URL carries a password (which must never appear anywhere).
func eachStore(t *testing.T, fn func(t *testing.T, location string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, filepath.Join(t.TempDir(), "leases.db")) })
	t.Run("postgres", func(t *testing.T) {
		u, err := url.Parse(pgtest.FreshSchema(t, false))
		require.NoError(t, err)
		u.User = url.UserPassword(u.User.Username(), pgPassword)
		fn(t, u.String())
	})
}

// writeCounter is a backend that counts the write transactions begun
// through it: a page view must begin none (no SQLite writer lock, no
// PostgreSQL row lock). It can also show the high-water mark further ahead
// than it is, as a clock that went back would see it.
type writeCounter struct {
	store.Backend
	writes *atomic.Int64
	ahead  *atomic.Int64 // µs added to the stored high-water mark
}

func (b writeCounter) HWM(ctx context.Context) (int64, error) {
	v, err := b.Backend.HWM(ctx)
	return v + b.ahead.Load(), err
}

func (b writeCounter) BeginWrite(ctx context.Context) (store.Tx, error) {
	b.writes.Add(1)
	return b.Backend.BeginWrite(ctx)
}

// site is a server under test over its own authority handle.
type site struct {
	t      *testing.T
	a      *core.Authority // the server's, writes counted
	writer *core.Authority // the test's own, for changes
	writes *atomic.Int64
	ahead  *atomic.Int64
	srv    *httptest.Server
	s      *Server
	loc    string
}

func openCounted(t *testing.T, location string, writes, ahead *atomic.Int64) *core.Authority {
	t.Helper()
	a, err := core.OpenStore(location, stores.Name(location), func() (store.Backend, error) {
		b, err := stores.Open(location, stores.Options{})
		if err != nil {
			return nil, err
		}
		return writeCounter{Backend: b, writes: writes, ahead: ahead}, nil
	})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

func newSite(t *testing.T, location string, cfg Config) *site {
	t.Helper()
	st := &site{t: t, writes: &atomic.Int64{}, ahead: &atomic.Int64{}, loc: location}
	st.writer = openCounted(t, location, &atomic.Int64{}, &atomic.Int64{}) // creates the store
	st.a = openCounted(t, location, st.writes, st.ahead)
	cfg.Authority = st.a
	cfg.Listen = "127.0.0.1:0"
	var err error
	st.s, err = New(cfg)
	require.NoError(t, err)
	st.srv = httptest.NewServer(st.s.Handler())
	t.Cleanup(st.srv.Close)
	return st
}

// seed fills production p: n requested jobs, one claimed and completed with
// facts, one claimed, one failed, one cancelled.
func (st *site) seed(p string, n int) []string {
	t := st.t
	t.Helper()
	_, err := st.writer.CreateProduction(p)
	require.NoError(t, err)
	var ids []string
	for i := 0; i < n; i++ {
		id, err := st.writer.RequestJob(p, "k"+string(rune('a'+i%26))+strings.Repeat("x", i/26), []byte("payload"))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	l, err := st.writer.Claim(p, "done-worker", time.Minute)
	require.NoError(t, err)
	f, err := core.ParseFacts(`{"metadata":{"frames":12},"provenance":{"tool":"render 2.1"}}`)
	require.NoError(t, err)
	require.NoError(t, l.Complete(f))
	l, err = st.writer.Claim(p, "fail-worker", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Fail("input corrupt"))
	_, err = st.writer.Claim(p, "busy-worker", time.Minute)
	require.NoError(t, err)
	require.NoError(t, st.writer.Cancel(p, ids[n-1]))
	return ids
}

type response struct {
	code   int
	header http.Header
	body   string
}

func (st *site) do(req *http.Request) response {
	st.t.Helper()
	c := *st.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	require.NoError(st.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(st.t, err)
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (st *site) get(path string) response {
	st.t.Helper()
	req, err := http.NewRequest(http.MethodGet, st.srv.URL+path, nil)
	require.NoError(st.t, err)
	return st.do(req)
}

// getJSON fetches path, requires 200, and decodes it into v.
func (st *site) getJSON(path string, v any) {
	st.t.Helper()
	r := st.get(path)
	require.Equal(st.t, http.StatusOK, r.code, "%s: %s", path, r.body)
	require.Equal(st.t, "application/json; charset=utf-8", r.header.Get("Content-Type"))
	require.NoError(st.t, json.Unmarshal([]byte(r.body), v), path)
}

// eventCount is the number of events in the log (every production).
func (st *site) eventCount() int {
	st.t.Helper()
	es, err := st.writer.Events("", 0)
	require.NoError(st.t, err)
	return len(es)
}

// asJSON round-trips v through its JSON form, for comparing what the API
// wrote with what core returns.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func jobPath(production, id string) string {
	return "/job?" + url.Values{"production": {production}, "id": {id}}.Encode()
}

// otherID is a well-formed job id that differs from id in its last digit.
func otherID(id string) string {
	last := "0"
	if id[len(id)-1] == '0' {
		last = "1"
	}
	return id[:len(id)-1] + last
}

// tokenSecretForms is a token and its claim secret as text, hex and UUID:
// the forms a page could carelessly show (the reliability suite's leak scan
// checks every form in every view).
func tokenSecretForms(t *testing.T, tok string) []string {
	t.Helper()
	dec, err := core.DecodeToken(tok)
	require.NoError(t, err)
	b := dec.Secret.Bytes()
	return []string{tok, strings.TrimPrefix(tok, "lt1."), hex.EncodeToString(b[:]), uuid.UUID(b).String()}
}

// doomed requests a job of production (a policy of 2 attempts) and fails it
// for a retry twice, so that it is dead; it returns the job's id.
func doomed(t *testing.T, st *site, production string) string {
	t.Helper()
	id, err := st.writer.RequestJob(production, "doomed", nil)
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		l, err := st.writer.ClaimJob(production, id, "flaky", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.FailRetry("flaky input", 0))
	}
	return id
}
