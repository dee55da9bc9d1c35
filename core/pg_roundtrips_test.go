// Round trips to the PostgreSQL server per claim → complete cycle, counted
// on the wire by a proxy between the authority and the server.
package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/libleases/libleases/core/internal/wake"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// pgProxy forwards connections to a PostgreSQL server and counts round
// trips: a client send that follows an answer of the server (or opens the
// connection) is one; what the client sends before the answer (a pipeline)
// belongs to the same one. It reads the client's protocol messages so that
// a failure can show what each round trip carried.
type pgProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	counting bool
	trips    [][]string // each round trip's statements, while counting
}

// newPGProxy proxies location's server and returns the location through it.
func newPGProxy(t *testing.T, location string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(location)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &pgProxy{ln: ln, target: u.Host}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// pgConn is one proxied connection's protocol state.
type pgConn struct {
	answered bool              // the server spoke since the client last sent
	trip     int               // index in trips of its current round trip; -1 none
	pending  []byte            // an incomplete client message
	started  bool              // the startup message (no type byte) is past
	prepared map[string]string // statement name → text
}

func (p *pgProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	st := &pgConn{answered: true, trip: -1, prepared: map[string]string{}}
	go pump(s, c, func([]byte) { st.answered = true }, &p.mu)
	pump(c, s, func(b []byte) {
		msgs := st.parse(b)
		if st.answered {
			st.answered, st.trip = false, -1
			if p.counting {
				p.trips = append(p.trips, nil)
				st.trip = len(p.trips) - 1
			}
		}
		if st.trip >= 0 && st.trip < len(p.trips) {
			p.trips[st.trip] = append(p.trips[st.trip], msgs...)
		}
	}, &p.mu)
}

// pump copies from to to, telling saw (under mu) what it read before it
// passes it on; when either side ends, it closes both.
func pump(from, to net.Conn, saw func([]byte), mu *sync.Mutex) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			mu.Lock()
			saw(buf[:n])
			mu.Unlock()
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// parse reads the complete client messages in b (with what an earlier
// read left) and names the statements they run.
func (st *pgConn) parse(b []byte) []string {
	st.pending = append(st.pending, b...)
	var out []string
	for {
		if !st.started {
			if len(st.pending) < 4 {
				return out
			}
			n := int(binary.BigEndian.Uint32(st.pending))
			if len(st.pending) < n {
				return out
			}
			st.pending, st.started = st.pending[n:], true
			continue
		}
		if len(st.pending) < 5 {
			return out
		}
		n := 1 + int(binary.BigEndian.Uint32(st.pending[1:]))
		if len(st.pending) < n {
			return out
		}
		typ, body := st.pending[0], st.pending[5:n]
		fields := strings.SplitN(string(body), "\x00", 3)
		switch typ {
		case 'Q': // simple query
			out = append(out, summary(fields[0]))
		case 'P': // parse: name, text
			if len(fields) > 1 {
				st.prepared[fields[0]] = fields[1]
				out = append(out, "prepare "+summary(fields[1]))
			}
		case 'B': // bind: portal, statement
			if len(fields) > 1 {
				out = append(out, summary(st.prepared[fields[1]]))
			}
		}
		st.pending = st.pending[n:]
	}
}

func summary(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 70 {
		sql = sql[:70] + "…"
	}
	return sql
}

// count runs fn and returns the round trips it made (the pool's pings of
// an idle connection are not the cycle's and are left out).
func (p *pgProxy) count(fn func()) [][]string {
	var out [][]string
	for _, t := range p.countAll(fn) {
		if len(t) == 1 && t[0] == "-- ping" {
			continue
		}
		out = append(out, t)
	}
	return out
}

// proxiedAuthority opens an authority on a fresh schema behind a counting
// proxy, with production "p"; it closes when the test ends.
func proxiedAuthority(t *testing.T) (*pgProxy, *Authority) {
	t.Helper()
	proxy, location := newPGProxy(t, freshSchema(t))
	a, err := Open(location)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	return proxy, a
}

func describeTrips(trips [][]string) string {
	var b strings.Builder
	for i, t := range trips {
		fmt.Fprintf(&b, "%2d. %s\n", i+1, strings.Join(t, " | "))
	}
	return b.String()
}

// maxCycleRoundTrips is the bound on a claim → complete cycle on
// PostgreSQL (docs/PERFORMANCE.md, sections 7 and 11): a claim's first
// statement reads its production with the mark and the clock.
const maxCycleRoundTrips = 8

func TestAClaimToCompleteCycleTakesAtMostEightRoundTripsOnPostgreSQL(t *testing.T) {
	proxy, a := proxiedAuthority(t)
	request := func(n int) {
		for i := 0; i < n; i++ {
			_, err := a.RequestJob("p", "", []byte("x"))
			require.NoError(t, err)
		}
	}
	// measure runs op warm times (every statement then prepared on the
	// connection), then counts the round trips of each of cycles more.
	const warm, cycles = 3, 5
	measure := func(what string, op func()) {
		t.Helper()
		for i := 0; i < warm; i++ {
			op()
		}
		for i := 0; i < cycles; i++ {
			trips := proxy.count(op)
			require.LessOrEqual(t, len(trips), maxCycleRoundTrips, "round trips of one %s:\n%s", what, describeTrips(trips))
			if i == 0 {
				t.Logf("%s, %d round trips:\n%s", what, len(trips), describeTrips(trips))
			}
		}
	}
	request(warm + cycles)
	measure("claim → complete", func() {
		l, err := a.Claim("p", "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(Facts{}))
	})
	// A worker's loop in one commit per job costs less again.
	request(warm + cycles + 1)
	l, err := a.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	measure("complete and claim next", func() {
		n, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
		require.NoError(t, err)
		require.NotNil(t, n)
		l = n
	})
}

// The proxy itself must count: a statement is one round trip, a pipeline
// of two is one, and two statements one after the other are two.
func TestThePGProxyCountsRoundTrips(t *testing.T) {
	proxy, location := newPGProxy(t, freshSchema(t))
	ctx := context.Background()
	c, err := pgconn.Connect(ctx, location)
	require.NoError(t, err)
	defer c.Close(ctx)
	one := func(sql string) {
		_, err := c.Exec(ctx, sql).ReadAll()
		require.NoError(t, err)
	}
	require.Equal(t, [][]string{{"SELECT 1"}}, proxy.count(func() { one("SELECT 1") }))
	require.Equal(t, [][]string{{"SELECT 1"}, {"SELECT 2"}}, proxy.count(func() { one("SELECT 1"); one("SELECT 2") }))
	trips := proxy.count(func() {
		b := &pgconn.Batch{}
		b.ExecParams("SELECT 3", nil, nil, nil, nil)
		b.ExecParams("SELECT 4", nil, nil, nil, nil)
		_, err := c.ExecBatch(ctx, b).ReadAll()
		require.NoError(t, err)
	})
	require.Len(t, trips, 1, "a pipeline is one round trip: %v", trips)
}

// maxNextRoundTrips is the bound on a worker loop's step on PostgreSQL: the
// completion of one job and the claim of the next in one commit.
const maxNextRoundTrips = 5

// The claim that follows a completion in the same commit reads its
// production in the round trip that reads the completion's job, and takes
// its first clock sample from that read: no round trip of its own; the
// completion's writes wait for the claim's.
func TestACompletionThatClaimsTheNextJobTakesAtMostFiveRoundTripsOnPostgreSQL(t *testing.T) {
	for _, trips := range workerLoopStepTrips(t) {
		require.LessOrEqual(t, len(trips), maxNextRoundTrips, "round trips of one complete-and-claim-next:\n%s", describeTrips(trips))
	}
}

// workerLoopStepTrips runs warm-up steps of a worker loop (a completion
// that claims the next job) on a fresh schema behind the counting proxy,
// then returns the round trips of each of five more steps.
func workerLoopStepTrips(t *testing.T) [][][]string {
	t.Helper()
	proxy, a := proxiedAuthority(t)
	const warm, cycles = 3, 5
	for i := 0; i < warm+cycles+1; i++ {
		_, err := a.RequestJob("p", "", []byte("x"))
		require.NoError(t, err)
	}
	l, err := a.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	step := func() {
		n, err := l.CompleteAndClaimNext(Facts{}, time.Minute)
		require.NoError(t, err)
		require.NotNil(t, n)
		l = n
	}
	for i := 0; i < warm; i++ {
		step()
	}
	var steps [][][]string
	for i := 0; i < cycles; i++ {
		steps = append(steps, proxy.count(step))
	}
	return steps
}

// TestABackgroundPruningBatchHoldsTheWriterForTwoRoundTripsOnPostgreSQL: a
// batch of the background pruner is chosen by reads outside any write (its
// production, the time, its jobs, the production's newest job, the store's
// newest event, the count of the jobs' events), and its write is two round
// trips: the begin with the delete, and the commit. A worker's claim that
// overlaps the batch waits for a core beside it on a small machine
// (docs/PERFORMANCE.md, section 12), and a transaction open longer holds
// its locks and its snapshot longer.
func TestABackgroundPruningBatchHoldsTheWriterForTwoRoundTripsOnPostgreSQL(t *testing.T) {
	proxy, location := newPGProxy(t, freshSchema(t))
	a, err := Open(location)
	require.NoError(t, err)
	defer a.Close()
	a.SetPruneInterval(0)
	_, err = a.CreateProductionWithPolicies("p", DefaultRetryPolicy(), RetentionPolicy{Completed: time.Millisecond,
		Failed: time.Millisecond, Dead: time.Millisecond, Cancelled: time.Millisecond, Events: time.Millisecond})
	require.NoError(t, err)
	const batches = 4
	for i := 0; i < (batches+1)*PruneJobBatch; i++ {
		_, err := a.RequestJob("p", "", nil)
		require.NoError(t, err)
		l, err := a.Claim("p", "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(Facts{}))
	}
	time.Sleep(5 * time.Millisecond)
	ctx := store.Redoable(context.Background())
	for i := 0; i < batches; i++ {
		var res PruneResult
		var more bool
		trips := proxy.count(func() {
			res, more, err = a.pruneJobs(ctx, "p", StateCompleted, 0, PruneJobBatch)
			require.NoError(t, err)
		})
		require.EqualValues(t, PruneJobBatch, res.Jobs)
		require.True(t, more)
		if i == 0 {
			continue // its statements are prepared on the connection now
		}
		require.LessOrEqual(t, len(trips), 9, "round trips of one batch:\n%s", describeTrips(trips))
		require.Equal(t, 2, tripsInWrite(trips), "round trips of one batch's write:\n%s", describeTrips(trips))
		if i == 1 {
			t.Logf("one batch, %d round trips:\n%s", len(trips), describeTrips(trips))
		}
	}
}

// tripsInWrite counts the round trips of trips from the one that begins a
// transaction to the one that commits it.
func tripsInWrite(trips [][]string) int {
	begun := -1
	for i, t := range trips {
		for _, s := range t {
			if strings.HasPrefix(s, "BEGIN") && begun < 0 {
				begun = i
			}
			if s == "COMMIT" && begun >= 0 {
				return i - begun + 1
			}
		}
	}
	return 0
}

// statementsOf counts the statements the server ran in trips, besides the
// transaction's BEGIN and COMMIT (as pg_stat_statements does in the
// profile of docs/PERFORMANCE.md, section 11); a statement's preparation is
// not one.
func statementsOf(trips [][]string) int {
	n := 0
	for _, t := range trips {
		for _, s := range t {
			if strings.HasPrefix(s, "prepare ") || strings.HasPrefix(s, "BEGIN") || s == "COMMIT" {
				continue
			}
			n++
		}
	}
	return n
}

// maxNextStatements is the bound on the statements of a worker loop's step
// on PostgreSQL: the mark, the job's row, the production (with the claim's
// first sample and whether anything is due to be promoted or lapsed), the
// next claimable job, the attempt with the history's trim (one statement),
// both jobs' updates (one), both events (one, with the pre-commit sample),
// the mark's update. Every statement costs the server a bind, an executor
// start and a message, however little it does.
const maxNextStatements = 8

func TestAWorkerLoopStepSendsAtMostEightStatementsOnPostgreSQL(t *testing.T) {
	for _, trips := range workerLoopStepTrips(t) {
		require.LessOrEqual(t, statementsOf(trips), maxNextStatements, "statements of one complete-and-claim-next:\n%s", describeTrips(trips))
		require.LessOrEqual(t, len(trips), maxNextRoundTrips, "round trips of one complete-and-claim-next:\n%s", describeTrips(trips))
	}
}

// maxCycleStatements is the bound on the statements of a lone claim and
// completion on PostgreSQL: the claim's production (with the mark, the
// first sample and whether anything is due to be promoted or lapsed), the
// next claimable job, the job's update, the event (with the pre-commit
// sample), the mark's update; the completion's mark, job row, attempt with
// the history's trim, job update, event (with the pre-commit sample), mark
// update.
const maxCycleStatements = 11

func TestAClaimToCompleteCycleSendsAtMostElevenStatementsOnPostgreSQL(t *testing.T) {
	proxy, a := proxiedAuthority(t)
	const warm, cycles = 3, 5
	for i := 0; i < warm+cycles; i++ {
		_, err := a.RequestJob("p", "", []byte("x"))
		require.NoError(t, err)
	}
	cycle := func() {
		l, err := a.Claim("p", "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Complete(Facts{}))
	}
	for i := 0; i < warm; i++ {
		cycle()
	}
	for i := 0; i < cycles; i++ {
		trips := proxy.count(cycle)
		require.LessOrEqual(t, statementsOf(trips), maxCycleStatements, "statements of one claim → complete:\n%s", describeTrips(trips))
	}
}

// countAll runs fn and returns every round trip made meanwhile, the pool's
// pings included.
func (p *pgProxy) countAll(fn func()) [][]string {
	p.mu.Lock()
	p.counting, p.trips = true, nil
	p.mu.Unlock()
	fn()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counting = false
	return p.trips
}

// An idle waiter on PostgreSQL costs one round trip per look, the safety
// poll's: the pool does not ping a connection that idled past a second
// before the look runs on it (a look on a connection the server ended is
// run again on a fresh one, so the ping was a second round trip for
// nothing).
func TestAnIdleWaiterOnPostgreSQLLooksInOneRoundTripWithNoPingBefore(t *testing.T) {
	proxy, a := proxiedAuthority(t)
	// Looks 1.2–1.8 s apart (the poll, jittered): the pool's connections
	// idle longer than the second after which pgxpool pings by default.
	a.waits.hub = wake.New(1500 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := a.ClaimWait(ctx, "p", "w", time.Minute, time.Hour)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // its first looks and the watcher's start are past
	trips := proxy.countAll(func() { time.Sleep(4 * time.Second) })
	cancel()
	requireKind(t, <-done, KindInterrupted)
	require.GreaterOrEqual(t, len(trips), 2, "the safety poll looked at least twice in 4 s:\n%s", describeTrips(trips))
	for _, trip := range trips {
		for _, st := range trip {
			require.True(t, strings.HasPrefix(strings.TrimPrefix(st, "prepare "), "SELECT c.now,"),
				"an idle waiter's round trips are its looks, and nothing else:\n%s", describeTrips(trips))
		}
	}
}
