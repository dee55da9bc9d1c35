package reliability

// The Go worker of the multi-language race (race_test.go). Every worker, in
// every language, follows the same loop and writes the same history schema,
// one JSON object per line, unbuffered so a kill -9 loses at most the line
// being written:
//
//	{"w":W,"n":N,"ev":"call","op":OP,"lease":L,"job":J,"dur_us":D,"t":CALL_UNIX_US}
//	{"w":W,"n":N,"ev":"ret","kind":K,"job":J,"expiry_unix_us":E,"msg":M,"t":RETURN_UNIX_US}
//
// and, on a request's call line, "key":KEY, "prio":P and "run_at_us":R (D
// is its delay); on a redrive's, "state":S.
//
// OP is claim, claim_wait, renew, keep_alive, stop_keep_alive, release,
// fail, fail_retry (D: its delay, 0 for the backoff), complete or
// complete_next, or a coordinator's request, cancel, retry_job or redrive;
// L labels the lease ("W:N" of
// the call that claimed it: a claim, a claim_wait or a complete_next); J is
// the job (known at the call except for claims);
// K is "ok" or the status name; E is the expiry the authority returned (claim
// and renew); M is the error text (scanned for secrets). A call line without
// its ret line is a call whose outcome is unknown (the worker was killed).
//
// The loop: claim for 30-150 ms; sleep 0-60 ms; renew for 30-200 ms one time
// in three; sleep 0-40 ms; then release (2/10), fail (1/10), complete
// (3/10) or complete_next (4/10: complete, and claim the next job for
// 30-150 ms in the same commit; its J and E in the ret line are the new
// lease's, and the loop goes on with that lease instead of claiming), each
// completion with facts {"metadata": {"by": W, "lease": L}}. The Go and C
// workers fail half of their failures retryably (fail_retry); only the Go
// worker calls complete_next (the C worker completes 7/10). Workers that can
// also claim with a wait (claim_wait, waiting up to 0-300 ms, one claim in
// two) and keep a lease alive one time in three (keep_alive for the claim's
// duration, 50-300 ms of work, then stop_keep_alive, whose ret carries the
// lease's last confirmed expiry) before the step above. Every claimed
// lease is exported and its token appended to $LEASES_RACE_TOKENS (the only
// file allowed to hold a credential). Every 25 iterations the job and event
// listings go to standard output, which the secret-leak scan reads.
//
// Before a claim, one time in five, a worker acts as a coordinator
// (coordinate): it requests a job (half the time; key "W-N", priority 0-2,
// a delay of 1-200 ms one time in three, a run-at 0-200 ms ahead one time
// in four), cancels one of the jobs it requested, retries one it requested
// or failed (retry_job), or redrives the failed, dead or cancelled jobs
// (one time in ten).
//
// Clock faults (the Go worker, in a test build: raceSetClock, unless
// LEASES_RACE_CLOCK_FAULTS=0): its
// authority reads the wall clock plus a skew, which it changes one
// iteration in eight, between calls: a small step back (1-5 ms, behind
// the others), a forward jump (5-30 ms: its commits move the mark ahead of
// everyone else's clock) or back to none; and its first request, and one
// in four after it, is sampled a day ahead, with priority 5 (ahead of every other job in claim
// order, and not claimable during the run). Each call line carries the
// skew ("skew_us"), so the model reads its samples on that clock.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

const raceProduction = "race"

type raceLine struct {
	W      string `json:"w"`
	N      int    `json:"n"`
	Ev     string `json:"ev"`
	Op     string `json:"op,omitempty"`
	Lease  string `json:"lease,omitempty"`
	Job    string `json:"job,omitempty"`
	DurUS  int64  `json:"dur_us,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Expiry int64  `json:"expiry_unix_us,omitempty"`
	Msg    string `json:"msg,omitempty"`
	T      int64  `json:"t"`
	Key    string `json:"key,omitempty"`
	Skew   int64  `json:"skew_us,omitempty"`
	Prio   int    `json:"prio,omitempty"`
	RunAt  int64  `json:"run_at_us,omitempty"`
	State  string `json:"state,omitempty"`
}

// raceSetClock is core.SetClockForTest in a test build (the leasestest
// tag), else nil: then the Go worker makes no clock faults.
var raceSetClock func(*core.Authority, func() int64)

// raceAheadUS is how far ahead a request sampled ahead reads the clock.
const raceAheadUS = int64(24 * time.Hour / time.Microsecond)

// raceCoordinator is what a worker knows for its coordinator calls: the
// jobs it requested and those it failed.
type raceCoordinator struct {
	mine, failed []string
}

// pick is a random job of the worker's, "" when it has none.
func (c *raceCoordinator) pick(rng *rand.Rand, failed bool) string {
	l := c.mine
	if failed && len(c.failed) > 0 {
		l = c.failed
	}
	if len(l) == 0 {
		return ""
	}
	return l[rng.IntN(len(l))]
}

func raceWorkerMain(name string) int {
	logf, err := os.OpenFile(os.Getenv("LEASES_RACE_LOG"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tokf, err := os.OpenFile(os.Getenv("LEASES_RACE_TOKENS"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	runMS, _ := strconv.Atoi(os.Getenv("LEASES_RACE_RUN_MS"))
	seed, _ := strconv.ParseUint(os.Getenv("LEASES_RACE_SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 57))
	write := func(x raceLine) {
		b, _ := json.Marshal(x)
		logf.Write(append(b, '\n'))
	}
	a, err := leases.Open(os.Getenv("LEASES_RACE_DB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer a.Close()
	var skew atomic.Int64 // the clock fault in force, µs
	faults := raceSetClock != nil && os.Getenv("LEASES_RACE_CLOCK_FAULTS") != "0"
	if faults {
		raceSetClock(a, func() int64 { return time.Now().UnixMicro() + skew.Load() })
	}
	kind := func(err error) (string, string) {
		if err == nil {
			return "ok", ""
		}
		return core.KindOf(err).String(), err.Error()
	}
	n := 0
	call := func(op, lease, job string, dur time.Duration) int {
		n++
		write(raceLine{W: name, N: n, Ev: "call", Op: op, Lease: lease, Job: job, DurUS: dur.Microseconds(), Skew: skew.Load(), T: time.Now().UnixMicro()})
		return n
	}
	ret := func(id int, err error, job string, expiry int64) {
		t := time.Now().UnixMicro()
		k, m := kind(err)
		write(raceLine{W: name, N: id, Ev: "ret", Kind: k, Job: job, Expiry: expiry, Msg: m, T: t})
	}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	deadline := time.Now().Add(time.Duration(runMS) * time.Millisecond)
	var l *core.Lease // held from the last complete_next, else claimed at the top
	var label string
	var d time.Duration // what l was claimed for
	var co raceCoordinator
	coordinate := func() {
		switch r := rng.IntN(10); {
		case r < 5:
			n++
			key := name + "-" + strconv.Itoa(n)
			x := raceLine{W: name, N: n, Ev: "call", Op: "request", Key: key, Prio: rng.IntN(3)}
			if faults && (len(co.mine) == 0 || rng.IntN(4) == 0) { // sampled a day ahead
				was := skew.Swap(raceAheadUS)
				defer skew.Store(was)
				x.Prio = 5
			}
			x.Skew = skew.Load()
			o := core.RequestOptions{Priority: x.Prio}
			switch rng.IntN(12) {
			case 0, 1, 2, 3:
				o.Delay = ms(1, 200)
				x.DurUS = o.Delay.Microseconds()
			case 4, 5, 6:
				o.RunAt = time.UnixMicro(time.Now().UnixMicro() + ms(0, 200).Microseconds())
				x.RunAt = o.RunAt.UnixMicro()
			}
			x.T = time.Now().UnixMicro()
			write(x)
			id, err := a.RequestJobWith(raceProduction, key, []byte("payload-"+key), o)
			ret(x.N, err, id, 0)
			if err == nil {
				co.mine = append(co.mine, id)
			}
		case r < 7:
			if job := co.pick(rng, false); job != "" {
				id := call("cancel", "", job, 0)
				ret(id, a.Cancel(raceProduction, job), job, 0)
			}
		case r < 9:
			if job := co.pick(rng, true); job != "" {
				id := call("retry_job", "", job, 0)
				ret(id, a.RetryJob(raceProduction, job), job, 0)
			}
		default:
			n++
			st := []string{core.StateFailed, core.StateDead, core.StateCancelled}[rng.IntN(3)]
			write(raceLine{W: name, N: n, Ev: "call", Op: "redrive", State: st, T: time.Now().UnixMicro()})
			_, err := a.Redrive(raceProduction, st)
			ret(n, err, "", 0)
		}
	}
	for it := 1; time.Now().Before(deadline); it++ {
		if it%25 == 0 {
			js, _ := a.Jobs(raceProduction)
			evs, _ := a.Events(raceProduction, 0)
			out, _ := json.Marshal(map[string]any{"jobs": js, "events": evs})
			fmt.Println(string(out))
		}
		if faults && rng.IntN(8) == 0 {
			switch rng.IntN(3) {
			case 0: // a small step back
				skew.Store(-ms(1, 5).Microseconds())
			case 1: // a forward jump
				skew.Store(ms(5, 30).Microseconds())
			default:
				skew.Store(0)
			}
		}
		if l == nil && rng.IntN(5) == 0 {
			coordinate()
		}
		if l == nil {
			d = ms(30, 150)
			waiting := rng.IntN(2) == 0
			op := "claim"
			if waiting {
				op = "claim_wait"
			}
			id := call(op, "", "", d)
			label = name + ":" + strconv.Itoa(id)
			var err error
			if waiting {
				l, err = a.ClaimWait(context.Background(), raceProduction, name, d, ms(0, 300))
			} else {
				l, err = a.Claim(raceProduction, name, d)
			}
			if err != nil {
				l = nil
				ret(id, err, "", 0)
				if !waiting {
					time.Sleep(5 * time.Millisecond)
				}
				continue
			}
			ret(id, nil, l.JobID(), l.ExpiryUnixUS())
			if tok, err := l.Export(); err == nil {
				tokf.Write([]byte(tok + "\n"))
			}
		}
		job := l.JobID()
		time.Sleep(ms(0, 60))
		if rng.IntN(3) == 0 {
			id := call("keep_alive", label, job, d)
			ret(id, l.KeepAlive(d), job, 0)
			time.Sleep(ms(50, 300))
			id = call("stop_keep_alive", label, job, 0)
			l.StopKeepAlive()
			ret(id, nil, job, l.ExpiryUnixUS())
		}
		if rng.IntN(3) == 0 {
			d := ms(30, 200)
			id := call("renew", label, job, d)
			err := l.Renew(d)
			var exp int64
			if err == nil {
				exp = l.ExpiryUnixUS()
			}
			ret(id, err, job, exp)
		}
		time.Sleep(ms(0, 40))
		facts := core.Facts{Metadata: map[string]json.RawMessage{
			"by": json.RawMessage(strconv.Quote(name)), "lease": json.RawMessage(strconv.Quote(label))}}
		switch r := rng.IntN(10); {
		case r < 2:
			id := call("release", label, job, 0)
			ret(id, l.Release(), job, 0)
		case r < 3 && rng.IntN(2) == 0:
			var delay time.Duration // half of them after a delay, else the backoff
			if rng.IntN(2) == 0 {
				delay = ms(1, 50)
			}
			id := call("fail_retry", label, job, delay)
			ret(id, l.FailRetry("race retry by "+name, delay), job, 0)
		case r < 3:
			id := call("fail", label, job, 0)
			err := l.Fail("race failure by " + name)
			ret(id, err, job, 0)
			if err == nil {
				co.failed = append(co.failed, job)
			}
		case r < 6:
			id := call("complete", label, job, 0)
			ret(id, l.Complete(facts), job, 0)
		default:
			// Complete and claim the next job in one commit; the next
			// lease is labelled by this call, as a claim's is.
			nd := ms(30, 150)
			id := call("complete_next", label, job, nd)
			next, err := l.CompleteAndClaimNext(facts, nd)
			if next == nil {
				ret(id, err, "", 0)
			} else {
				ret(id, nil, next.JobID(), next.ExpiryUnixUS())
				if tok, err := next.Export(); err == nil {
					tokf.Write([]byte(tok + "\n"))
				}
			}
			l, label, d = next, name+":"+strconv.Itoa(id), nd
			continue
		}
		l = nil
	}
	return 0
}
