// Package reliability tests the authority's promises under faults: workers
// killed at random points or at their Nth write system call, injected I/O
// errors, hostile files. Helper worker processes are this test binary run
// again with LEASES_REL_WORKER set.
package reliability

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	if name := os.Getenv("LEASES_REL_WORKER"); name != "" {
		os.Exit(workerMain(name))
	}
	if name := os.Getenv("LEASES_RACE_WORKER"); name != "" {
		os.Exit(raceWorkerMain(name))
	}
	if name := os.Getenv("LEASES_POISON_WORKER"); name != "" {
		os.Exit(poisonWorkerMain(name))
	}
	os.Exit(m.Run())
}

// ack is one logged call: written only after the call returned.
type ack struct {
	Worker    string `json:"worker"`
	Op        string `json:"op"`
	Job       string `json:"job"`
	Kind      string `json:"kind"` // "ok" or the error kind
	Expiry    int64  `json:"expiry_unix_us,omitempty"`
	DurUS     int64  `json:"dur_us,omitempty"`
	CallUS    int64  `json:"call_unix_us"`
	ReturnUS  int64  `json:"return_unix_us"`
	FactsSeed string `json:"facts_seed,omitempty"`
}

const production = "rel"

// fullFacts is the complete fact set a worker publishes; any other number
// of facts on a job would be a partial publication.
func fullFacts(worker, job, seed string) core.Facts {
	return core.Facts{
		Metadata: map[string]json.RawMessage{
			"by":   json.RawMessage(strconv.Quote(worker)),
			"seed": json.RawMessage(strconv.Quote(seed)),
			"pad":  json.RawMessage(strconv.Quote(strings.Repeat("p", 2048))),
		},
		Provenance: map[string]json.RawMessage{"job": json.RawMessage(strconv.Quote(job))},
	}
}

const factsPerCompletion = 4

// workerMain runs claim/renew/release/fail/complete with short expiries
// until killed or out of time, logging every call after it returns.
func workerMain(name string) int {
	path := os.Getenv("LEASES_REL_DB")
	logf, err := os.OpenFile(os.Getenv("LEASES_REL_LOG"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logf.Close()
	runFor, _ := time.ParseDuration(os.Getenv("LEASES_REL_RUN"))
	if runFor == 0 {
		runFor = time.Hour
	}
	seed, _ := strconv.ParseUint(os.Getenv("LEASES_REL_SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 11))
	enc := json.NewEncoder(logf)
	a, err := leases.Open(path)
	if err != nil {
		// A fault during open is reported like any other call's.
		enc.Encode(ack{Worker: name, Op: "open", Kind: core.KindOf(err).String()})
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		return 0
	}
	defer a.Close()
	log := func(x ack) { enc.Encode(x) }
	kindOf := func(err error) string {
		if err == nil {
			return "ok"
		}
		return core.KindOf(err).String()
	}
	deadline := time.Now().Add(runFor)
	for n := 0; time.Now().Before(deadline); n++ {
		d := time.Duration(20+rng.IntN(200)) * time.Millisecond
		call := time.Now().UnixMicro()
		l, err := a.Claim(production, name, d)
		x := ack{Worker: name, Op: "claim", Kind: kindOf(err), DurUS: d.Microseconds(), CallUS: call, ReturnUS: time.Now().UnixMicro()}
		if err != nil {
			log(x)
			if errors.Is(err, core.ErrNothingToClaim) {
				time.Sleep(5 * time.Millisecond)
			}
			continue
		}
		x.Job, x.Expiry = l.JobID(), l.ExpiryUnixUS()
		log(x)
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
		if rng.IntN(3) == 0 {
			d := time.Duration(50+rng.IntN(200)) * time.Millisecond
			call := time.Now().UnixMicro()
			err := l.Renew(d)
			x := ack{Worker: name, Op: "renew", Job: l.JobID(), Kind: kindOf(err), DurUS: d.Microseconds(), CallUS: call, ReturnUS: time.Now().UnixMicro()}
			if err == nil {
				x.Expiry = l.ExpiryUnixUS()
			}
			log(x)
		}
		call = time.Now().UnixMicro()
		x = ack{Worker: name, Job: l.JobID(), CallUS: call}
		switch r := rng.IntN(10); {
		case r < 2:
			x.Op, err = "release", l.Release()
		case r < 3:
			x.Op, err = "fail", l.Fail("reason-"+name)
		default:
			x.Op, x.FactsSeed = "complete", fmt.Sprintf("%s-%d", name, n)
			err = l.Complete(fullFacts(name, l.JobID(), x.FactsSeed))
		}
		x.Kind, x.ReturnUS = kindOf(err), time.Now().UnixMicro()
		log(x)
	}
	return 0
}

func readAcks(t *testing.T, path string) []ack {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []ack
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var x ack
		if json.Unmarshal(sc.Bytes(), &x) != nil {
			continue // the last line may be torn by the kill
		}
		out = append(out, x)
	}
	return out
}

// verifyStore checks the promises after a crash or fault: the file passes
// integrity_check; every acknowledged transition is present; no fact set is
// partial; the high-water mark is at least every acknowledged clock sample.
func verifyStore(t *testing.T, path string, acks []ack) {
	t.Helper()
	a, err := leases.Open(path)
	require.NoError(t, err, "the store must open after the fault")
	defer a.Close()
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(10000)"}).String())
	require.NoError(t, err)
	defer db.Close()
	var integrity string
	require.NoError(t, db.QueryRowContext(context.Background(), `PRAGMA integrity_check`).Scan(&integrity))
	require.Equal(t, "ok", integrity)

	jobs, err := a.Jobs(production)
	require.NoError(t, err)
	state := map[string]core.Job{}
	for _, j := range jobs {
		state[j.ID] = j
	}
	evs, err := a.Events(production, 0)
	require.NoError(t, err)
	type evKey struct {
		kind, job, worker string
		expiry            int64
	}
	events := map[evKey]int{}
	for _, e := range evs {
		var exp int64
		if !e.Expiry.IsZero() {
			exp = e.Expiry.UnixMicro()
		}
		events[evKey{e.Kind, e.JobID, e.Worker, exp}]++
	}
	hwm, err := a.HighWaterMark()
	require.NoError(t, err)
	var minHWM int64
	completedBy := map[string]ack{}
	for _, x := range acks {
		if x.Kind != "ok" {
			continue
		}
		switch x.Op {
		case "claim":
			require.Positive(t, events[evKey{"claimed", x.Job, x.Worker, x.Expiry}], "acknowledged claim %+v is missing", x)
			minHWM = max(minHWM, x.Expiry-x.DurUS)
		case "renew":
			require.Positive(t, events[evKey{"renewed", x.Job, x.Worker, x.Expiry}], "acknowledged renewal %+v is missing", x)
			minHWM = max(minHWM, x.Expiry-x.DurUS)
		case "release":
			require.Positive(t, events[evKey{"released", x.Job, x.Worker, 0}], "acknowledged release %+v is missing", x)
		case "fail":
			require.Equal(t, core.StateFailed, state[x.Job].State, "acknowledged failure %+v is missing", x)
		case "complete":
			require.Equal(t, core.StateCompleted, state[x.Job].State, "acknowledged completion %+v is missing", x)
			completedBy[x.Job] = x
		}
	}
	require.GreaterOrEqual(t, hwm.UnixMicro(), minHWM, "the mark covers every acknowledged clock sample")
	for _, j := range jobs {
		f, err := a.FactsOf(production, j.ID)
		require.NoError(t, err)
		n := len(f.Metadata) + len(f.Provenance)
		if j.State != core.StateCompleted {
			require.Zero(t, n, "job %s is %s but has facts", j.ID, j.State)
			continue
		}
		require.Equal(t, factsPerCompletion, n, "job %s has a partial fact set", j.ID)
		if x, ok := completedBy[j.ID]; ok {
			require.JSONEq(t, strconv.Quote(x.FactsSeed), string(f.Metadata["seed"]), "facts come from the acknowledged completion")
		}
	}
}

func seedJobs(t *testing.T, path string, n int) {
	t.Helper()
	a, err := leases.Open(path)
	require.NoError(t, err)
	defer a.Close()
	_, err = a.CreateProduction(production)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := a.RequestJob(production, "", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
}

func soak() bool { return os.Getenv("LEASES_SOAK") != "" }

func iterations(short, long int) int {
	if v, err := strconv.Atoi(os.Getenv("LEASES_REL_ITERATIONS")); err == nil && v > 0 {
		return v
	}
	if soak() {
		return long
	}
	return short
}
