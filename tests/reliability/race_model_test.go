package reliability

// The sequential lease model the race history must linearize against.
//
// State: per job (in request order) requested, claimed by a lease label with
// an expiry, or terminal (completed, failed or dead); its priority, the
// bounds of its claimable time (the claim order's key) and of its ready time
// (when it may be claimed), and the number of claims so far; plus the label
// of the last claim, which the store keeps after release (so its holder is
// told wrong_state, anyone else lease_lost).
//
// Time: every authority decision compares a clock sample with an expiry.
// Workers and the authority read the same system clock, so a sample taken
// during a call lies in [call, return]. A successful claim or renewal also
// tells the exact sample: expiry - duration. The model checks each outcome
// against those bounds: a claim at sample T may take a claimed job only if its
// expiry can be <= T, and must take the first claimable job in claim order
// (priority, then claimable time, then request order); a renewal must commit
// before the previous expiry and extend it; release, fail, fail_retry and
// complete need the claim unexpired at some sample in the window; "expired"
// needs the expiry reachable by the return time.
//
// Requests in the history (request: a priority, a delay in DurUS or a
// run-at) make a job that was absent requested, ready and claimable at its
// sample plus its delay, or at its run-at when later; such a job's place in
// request order among other jobs is unknown (mJob.late).
//
// Retries (the production's policy: max_attempts and backoff, raceBackoff):
// a claim counts an attempt; a release or a fail_retry of the last attempt
// makes the job dead, and an expired claim of the last attempt is never
// claimable again (it dies when a claim notices it). A fail_retry returns
// the job claimable at its sample plus its delay, or without one plus the
// backoff of its attempt; a lapsed claim is claimable again its backoff
// after its expiry.
//
// Coordinator calls: cancel (a requested or claimed job becomes cancelled;
// every lease of it is then told cancelled; a finished job is
// wrong_state), retry_job (a failed, dead or cancelled job is requested
// again with fresh attempts and no holder, so the lease that had it is
// told lease_lost) and redrive (the same for every job in one state, in
// batches: each job of that state may be returned). Each acts at the
// latest of its sample, the mark and the job's last change (mJob.clo..chi),
// and a retried or redriven job is claimable from that time, "at once"
// meaning from the time the retry recorded, not from its sample: a job's
// own times never run backwards (docs/CLOCK.md, "What each operation
// records"), so a job requested on a clock a day ahead, then cancelled and
// retried on a clock that is right, is claimable only a day later. A
// claim may notice (and end) any lapsed claim, invisibly: the lapsed
// claim's holder may then be told lease_lost instead of expired. A claim of
// unknown outcome that may have taken a job leaves its attempts known only
// within bounds (mJob.att..amax).
//
// A claim itself can end "expired", having committed nothing: born expired,
// when its pre-commit sample reached its own new expiry (a call at least its
// duration long; a loaded machine makes the race's 30 ms claims meet it).
//
// On PostgreSQL a claim skips jobs other transactions hold at that moment
// (SELECT … FOR UPDATE SKIP LOCKED): "first in line" becomes "first in line
// among the jobs nobody else is touching". The model cannot see the locks, so
// it bounds them: a claim may pass over fewer than `window` claimable jobs,
// and nothing_to_claim needs fewer than `window` claimable jobs (all held).
// With window 1 that is strict claim order (SQLite). Everything else — one
// live owner, expiry, renewal, terminal states — is the same for both.
//
// A waiting claim (claim_wait) is a claim whose sample may be anywhere in
// its longer window. A kept-alive lease renews in the background, outside
// the history: from keep_alive on, its expiry is known only from below (the
// last one the history saw; at stop_keep_alive, the last one the lease
// confirmed), so the model never makes its job claimable by the clock
// alone, and lets any claim after the known bound take it.
//
// complete_next (Lease.CompleteAndClaimNext) completes the lease's job and
// claims the next one in one commit. The checker splits it in two
// (splitCompleteNext): the completion, on its job, and a claim of the same
// call, labelled like a claim call (W:N); the claim is there only when the
// completion committed or may have. When only its claim would have been born
// expired nothing committed, the lease still holds, and the call says
// "invalid_duration" (never "expired", a verdict about the lease).
//
// Unknown outcomes (a kill mid-call, outcome_unknown, storage) are
// nondeterministic: the change happened or it did not, by the return; a call
// a kill cut short returns when its worker was gone (dead, and on PostgreSQL
// its sessions ended too). A claim of unknown outcome may have taken only a
// job that could have been first in line at some sample while it ran
// (claimable then: requested and ready, or claimed and expired), and its
// expiry is that sample plus its duration: within [earliest such sample +
// duration, return + duration]. [lo, hi] bounds every expiry, hi = MaxInt64
// when unknown (a renewal of unknown outcome, a keep-alive).
//
// race_check_test.go checks a history against this model per job, and the
// claim order across jobs apart, so that the check always decides.

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

const (
	jRequested byte = iota
	jClaimed
	jTerminal // completed
	jFailed
	jDead
	jCancelled
	jAbsent // not yet requested (a job the history requests)
)

// finished: completed, failed, dead or cancelled (the last three can be
// redriven).
func finished(st byte) bool { return st >= jTerminal && st != jAbsent }

// redrivable maps the state a redrive names to the model's.
var redrivable = map[string]byte{"failed": jFailed, "dead": jDead, "cancelled": jCancelled}

type mJob struct {
	st       byte
	holder   string // label of the current (or, after release/finish, the last) claim
	lo, hi   int64  // bounds of the expiry while claimed; of the ready time while requested
	olo, ohi int64  // bounds of the claimable time, the claim order's key
	prio     int    // the job's priority (fixed at its request)
	late     bool   // requested in the history: its place in request order is unknown
	att      int    // claims known to have taken it
	// clo, chi bound the time of the job's last change by an unguarded
	// write (its request, a cancel, a retry_job or a redrive): the next
	// such write acts no earlier (a job's own times never run backwards).
	// A guarded write's time is a sample at or after that one, and the
	// mark bounds it from above (markSkew), so it needs no bound here.
	clo, chi int64
	// amax bounds the attempts from above: a claim of unknown outcome may
	// have taken the job, so its attempts may be more than att (amax stops
	// at max_attempts, a job's last). Counting such a claim exactly would
	// make the state depend on the order the search tries unknown claims in
	// (which one took it last, after how many), and the search would then
	// never meet a state twice; the bound keeps the states few. A job whose
	// amax reached max_attempts is never certainly claimable, and a release
	// or fail_retry below max_attempts may have left it dead or requested
	// (the model keeps it requested: a claim of a dead job never happens,
	// nothing_to_claim does not count it).
	amax int
}

// raceMaxAttempts is the race production's max_attempts (its backoff:
// racePolicy, race_test.go; leaseRules.backoff).
const raceMaxAttempts = 3

// leaseRules is what the model knows besides the state: where each job is
// in request order, the claim-order window, and the production's
// max_attempts.
type leaseRules struct {
	idx         map[string]int
	window      int
	maxAttempts int
	backoff     raceBackoff
	mark        int64 // markSkew of the history
}

// raceBackoff is a production's backoff (core.RetryPolicy): after attempt n
// a job waits base·2^(n-1), jittered by ±jitter percent, capped at cap.
type raceBackoff struct {
	BaseUS, CapUS int64
	Jitter        int
}

// bounds is the least and the most the wait after attempt n..m can be.
func (b raceBackoff) bounds(n, m int) (int64, int64) {
	if b.BaseUS <= 0 {
		return 0, 0
	}
	one := func(n int, sign float64) int64 {
		d := float64(b.BaseUS) * math.Pow(2, float64(max(n-1, 0))) * (1 + sign*float64(b.Jitter)/100)
		if d >= float64(b.CapUS) {
			return b.CapUS
		}
		if sign > 0 {
			return int64(math.Ceil(d))
		}
		return max(int64(d)-1, 0) // the store truncates; -1 for float rounding
	}
	return one(max(n, 1), -1), one(max(m, 1), 1)
}

// lapseBounds bounds when a lapsed claim of j (its expiry within [lo, hi])
// becomes claimable again: after the backoff of its attempt.
func (r leaseRules) lapseBounds(j mJob) (int64, int64) {
	bl, bh := r.backoff.bounds(j.att, j.amax)
	return addSat(j.lo, bl), addSat(j.hi, bh)
}

// claimable reports whether job j may be (possibly) or must be (certainly)
// claimable at sample t.
func (r leaseRules) claimable(j mJob, t int64, certainly bool) bool {
	bound := j.lo
	if certainly {
		bound = j.hi
		if j.amax >= r.maxAttempts {
			return false
		}
	}
	switch j.st {
	case jRequested:
		return bound <= t
	case jClaimed:
		lo, hi := r.lapseBounds(j)
		if certainly {
			return j.att < r.maxAttempts && hi <= t
		}
		return j.att < r.maxAttempts && lo <= t
	}
	return false
}

// before reports whether job k (index ki) certainly precedes job j (index
// ji) in claim order: priority first, then claimable time, then request
// order.
func before(k mJob, ki int, j mJob, ji int) bool {
	if k.prio != j.prio {
		return k.prio > j.prio
	}
	if k.ohi < j.olo {
		return true
	}
	return k.olo == k.ohi && j.olo == j.ohi && k.ohi == j.olo && ki < ji && !k.late && !j.late
}

type mState []mJob

var raceRejections = map[string]bool{ // a fail_retry answers like release
	"nothing_to_claim": true, "expired": true, "lease_lost": true, "wrong_state": true,
	"not_extended": true, "busy": true, "clock_regressed": true, "interrupted": true, "cancelled": true,
}

// isCoordinator reports whether op is a coordinator's call on a job (no
// lease): cancel, retry_job (the redrive of one job), or request.
func isCoordinator(op string) bool { return op == "cancel" || op == "retry_job" || op == "request" }

// isClaim reports whether op takes a job: a claim, or a waiting claim.
func isClaim(op string) bool { return op == "claim" || op == "claim_wait" }

// raceUnknown: the call may or may not have changed the store. "killed" is
// a call a kill cut short (race_test.go's endKilledCalls).
var raceUnknown = map[string]bool{"outcome_unknown": true, "storage": true, "killed": true}

// raceOp is one call of the history: call and (unless pending) return.
type raceOp struct {
	W, Op, Lease, Job string
	N                 int
	DurUS             int64
	Call, Ret         int64 // Ret = math.MaxInt64 while pending
	Kind              string
	RJob              string
	Expiry            int64
	Msg               string
	// Next marks the completion split from a complete_next, whose DurUS is
	// the duration of the claim that came with it.
	Next bool `json:",omitempty"`
	// A request's priority and run-at (unix µs; 0: none; its delay is
	// DurUS); a redrive's state (failed, dead or cancelled).
	Prio  int    `json:",omitempty"`
	RunAt int64  `json:",omitempty"`
	State string `json:",omitempty"`
	Key   string `json:",omitempty"` // a request's key: names its job when its outcome is unknown
	// Skew is how far the authority's clock of this call's worker ran
	// ahead of the wall clock the history is written in (a clock fault:
	// negative when behind), the same from call to return.
	Skew int64 `json:",omitempty"`
}

// from and to bound the authority's samples during call o: its call and
// return on the authority's clock.
func (o *raceOp) from() int64 { return o.Call + o.Skew }

func (o *raceOp) to() int64 {
	if o.Ret == math.MaxInt64 {
		return math.MaxInt64
	}
	return o.Ret + o.Skew
}

// guarded: the operation checks and moves the mark (docs/CLOCK.md).
func guarded(op string) bool {
	switch op {
	case "request", "cancel", "retry_job", "redrive", "keep_alive", "stop_keep_alive":
		return false
	}
	return true
}

// markSkew is how far ahead of the wall clock the mark may be: the most
// any guarded call's clock ran ahead (0 without clock faults). A time an
// unguarded call records is its sample, or the mark if that is later.
func markSkew(ops []*raceOp) int64 {
	var m int64
	for _, o := range ops {
		if guarded(o.Op) {
			m = max(m, o.Skew)
		}
	}
	return m
}

// actsBy is the latest time an unguarded call o may act at, leaving the
// job's last change aside: its sample, or the mark if that is later (the
// mark runs at most mark skew ahead of the wall clock).
func actsBy(o *raceOp, mark int64) int64 { return addSat(o.Ret, max(o.Skew, mark)) }

// requestedJob is the job a request o makes: its priority, and its ready
// (and claimable) time bounded by the call's window: the sample (or the
// mark, if later) plus the delay, or the run-at if that is later. Its
// request is its last change.
func requestedJob(o *raceOp, mark int64) mJob {
	to := actsBy(o, mark)
	lo, hi := o.from()+o.DurUS, addSat(to, o.DurUS)
	if o.RunAt != 0 {
		lo, hi = max(o.RunAt, o.from()), max(o.RunAt, to)
	}
	return mJob{st: jRequested, lo: lo, hi: hi, olo: lo, ohi: hi, prio: o.Prio, late: true, clo: o.from(), chi: to}
}

// splitCompleteNext replaces each complete_next of hist by its completion
// and, when that committed or may have, its claim: the completion on the
// completed job, the claim on whichever job it took, each checked by the
// model as the operation it is. It is idempotent.
func splitCompleteNext(hist []*raceOp) []*raceOp {
	out := make([]*raceOp, 0, len(hist))
	for _, o := range hist {
		if o.Op != "complete_next" {
			out = append(out, o)
			continue
		}
		done := *o
		done.Op, done.Next, done.RJob, done.Expiry = "complete", true, "", 0
		out = append(out, &done)
		claim := &raceOp{W: o.W, N: o.N, Op: "claim", Lease: o.W + ":" + strconv.Itoa(o.N), DurUS: o.DurUS,
			Call: o.Call, Ret: o.Ret, Kind: o.Kind, RJob: o.RJob, Expiry: o.Expiry, Msg: o.Msg, Skew: o.Skew}
		switch {
		case o.Kind == "ok" && o.RJob == "":
			claim.Kind = "nothing_to_claim"
		case o.Kind != "ok" && o.Ret != math.MaxInt64 && !raceUnknown[o.Kind]:
			continue // refused: nothing was claimed
		}
		out = append(out, claim)
	}
	return out
}

func (s mState) with(i int, j mJob) mState {
	c := make(mState, len(s))
	copy(c, s)
	c[i] = j
	return c
}

// fifo is the window of a store that claims strictly in claim order;
// skipLockedWindow that of PostgreSQL: a claim may pass over the jobs other
// transactions hold at that moment, at most two per concurrent worker
// process (a claim can hold an expired job and a requested one).
const (
	fifo             = 1
	skipLockedWindow = 32
)

func leaseModel(init mState, r leaseRules) porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{append(mState{}, init...)} },
		Step: func(state, input, _ interface{}) []interface{} {
			s, o := state.(mState), input.(*raceOp)
			return toIfaces(r.step(s, o))
		},
		Equal: func(a, b interface{}) bool {
			x, y := a.(mState), b.(mState)
			for i := range x {
				if x[i] != y[i] {
					return false
				}
			}
			return true
		},
		Hash: func(st interface{}) uint64 {
			h := fnv.New64a()
			for i, j := range st.(mState) {
				if j.st != jRequested || j.holder != "" {
					fmt.Fprintf(h, "%d:%d:%s:%d:%d:%d:%d:%d:%d:%d:%d;", i, j.st, j.holder, j.lo, j.hi, j.olo, j.ohi, j.att, j.amax, j.clo, j.chi)
				}
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, _ interface{}) string {
			o := input.(*raceOp)
			return fmt.Sprintf("%s %s %s -> %s %s exp=%d", o.Lease, o.Op, short(o.Job), o.Kind, short(o.RJob), o.Expiry)
		},
		DescribeState: func(st interface{}) string {
			var b strings.Builder
			for i, j := range st.(mState) {
				if j.st != jRequested || j.holder != "" {
					fmt.Fprintf(&b, "#%d st=%d %s [%d,%d] order [%d,%d] prio %d att %d..%d changed [%d,%d]\n", i, j.st, j.holder, j.lo, j.hi,
						j.olo, j.ohi, j.prio, j.att, j.amax, j.clo, j.chi)
				}
			}
			return b.String()
		},
	}
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func toIfaces(ss []mState) []interface{} {
	out := make([]interface{}, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (r leaseRules) step(s mState, o *raceOp) []mState {
	pending := o.Ret == math.MaxInt64
	unknown := pending || raceUnknown[o.Kind]
	if isClaim(o.Op) {
		return r.stepClaim(s, o, unknown)
	}
	if o.Op == "redrive" {
		return r.stepRedrive(s, o)
	}
	job := o.Job
	if o.Op == "request" {
		job = o.RJob
	}
	ji, ok := r.idx[job]
	if !ok {
		return nil
	}
	j := s[ji]
	if isCoordinator(o.Op) {
		return r.stepCoordinator(s, o, ji, unknown)
	}
	held := j.st == jClaimed && j.holder == o.Lease
	if o.Op == "keep_alive" || o.Op == "stop_keep_alive" {
		return stepKeepAlive(s, o, ji, held, pending)
	}
	if unknown {
		if !held {
			return []mState{s}
		}
		return []mState{s, s.with(ji, r.applyClaimant(j, o, true))}
	}
	switch o.Kind {
	case "ok":
		if !held {
			return nil
		}
		if o.Op == "renew" {
			t := o.Expiry - o.DurUS
			if t < o.from() || t > o.to() || t >= j.hi || o.Expiry <= j.lo {
				return nil
			}
		} else if o.from() >= j.hi {
			return nil // the claim had expired before the call began
		}
		return []mState{s.with(ji, r.applyClaimant(j, o, false))}
	case "expired":
		// A verdict about the lease: its own claim's expiry was reachable.
		if held && o.to() >= j.lo {
			return []mState{s}
		}
	case "invalid_duration":
		// A complete_next whose claim half would be born expired (a call
		// at least the claim's duration long): nothing committed, and the
		// lease still holds its claim.
		if held && o.Next && o.Ret-o.Call >= o.DurUS {
			return []mState{s}
		}
	case "not_extended":
		if held && o.Op == "renew" && o.from()+o.DurUS <= j.hi {
			return []mState{s}
		}
	case "cancelled":
		// The coordinator cancelled the job: every lease is told so first.
		if j.st == jCancelled {
			return []mState{s}
		}
	case "lease_lost":
		// Another claim took the job, a redrive returned it, or a claim
		// noticed this one's lapse.
		if j.st != jCancelled && (j.holder != o.Lease || (held && o.to() >= j.lo)) {
			return []mState{s}
		}
	case "wrong_state":
		if j.holder == o.Lease && j.st != jClaimed && j.st != jCancelled {
			return []mState{s}
		}
	case "busy", "clock_regressed":
		return []mState{s}
	}
	return nil
}

// stepCoordinator: a request (the job appears, ready and claimable within
// the call's window plus its delay, or at its run-at), a cancel (a
// requested or claimed job is cancelled, whoever holds it; a cancelled one
// stays so; a finished one is wrong_state) and a retry_job (a failed, dead
// or cancelled job is requested again, claimable from its sample, its
// attempts back to 0 and no lease holding it; anything else wrong_state).
func (r leaseRules) stepCoordinator(s mState, o *raceOp, ji int, unknown bool) []mState {
	j := s[ji]
	var next mJob
	var can, refuse bool
	dead := r.mayBeDead(j, actsBy(o, r.mark))
	switch o.Op {
	case "request":
		can, next = j.st == jAbsent, requestedJob(o, r.mark)
	case "cancel":
		can = j.st == jRequested || j.st == jClaimed || j.st == jCancelled
		refuse = finished(j.st) && j.st != jCancelled || dead
		next = j
		next.st = jCancelled
		next.clo, next.chi = max(j.clo, o.from()), max(j.chi, actsBy(o, r.mark))
	case "retry_job":
		can = j.st == jFailed || j.st == jDead || j.st == jCancelled || dead
		refuse = j.st != jAbsent && (!can || dead)
		next = r.redriven(j, o)
	}
	switch {
	case unknown && can:
		return []mState{s, s.with(ji, next)}
	case unknown:
		return []mState{s}
	case o.Kind == "ok" && can:
		return []mState{s.with(ji, next)}
	case o.Kind == "wrong_state" && refuse:
		return []mState{s}
	case o.Kind == "busy":
		return []mState{s}
	}
	return nil
}

// mayBeDead reports whether job j may be dead by sample t though the model
// does not say so: its attempts may be used up (amax) and it was left
// requested, or its last claim lapsed (it dies when a claim notices it).
// A coordinator's call o passes actsBy(o): the claim that noticed the
// lapse may have read a clock ahead of o's, by as much as the mark may be.
func (r leaseRules) mayBeDead(j mJob, t int64) bool {
	return j.amax >= r.maxAttempts && (j.st == jRequested || (j.st == jClaimed && j.lo <= t))
}

// redriven is job j returned to the queue by a redrive or retry_job o:
// claimable at the time it acts at, its sample or the mark or the job's
// last change, whichever is latest.
func (r leaseRules) redriven(j mJob, o *raceOp) mJob {
	lo, hi := max(o.from(), j.clo), max(actsBy(o, r.mark), j.chi)
	return mJob{st: jRequested, lo: lo, hi: hi, olo: lo, ohi: hi, prio: j.prio, late: j.late, clo: lo, chi: hi}
}

// stepRedrive: a redrive of every job in one state works in batches, each
// job's return atomic but not the whole, so a job in that state may be
// returned by it (or not, had it entered the state after its batch); a
// job in any other state is never touched. Its count is not checked.
func (r leaseRules) stepRedrive(s mState, o *raceOp) []mState {
	st, ok := redrivable[o.State]
	if !ok {
		return nil
	}
	if !unknownOutcome(o) && o.Kind != "ok" && o.Kind != "busy" {
		return nil
	}
	out := []mState{s}
	for i, j := range s {
		if j.st == st || (st == jDead && r.mayBeDead(j, actsBy(o, r.mark))) {
			out = append(out, s.with(i, r.redriven(j, o)))
		}
	}
	return out
}

// stepKeepAlive: neither call writes, but renewals run in the background
// from a keep_alive that succeeded (or may have: it was killed) until its
// stop_keep_alive; a renewal can only have moved the expiry of a held claim
// later.
func stepKeepAlive(s mState, o *raceOp, ji int, held, pending bool) []mState {
	if !held || (o.Op == "keep_alive" && !pending && o.Kind != "ok") {
		return []mState{s}
	}
	j := s[ji]
	j.hi = math.MaxInt64
	if o.Op == "stop_keep_alive" && !pending {
		j.lo = max(j.lo, o.Expiry) // the lease's last confirmed expiry
	}
	if pending {
		return []mState{s, s.with(ji, j)}
	}
	return []mState{s.with(ji, j)}
}

// applyClaimant is the state after a successful renew, release, fail,
// fail_retry or complete; for a renewal of unknown outcome the new expiry is
// bounded only from below.
func (r leaseRules) applyClaimant(j mJob, o *raceOp, unknown bool) mJob {
	ret := o.to()
	if unknown {
		ret = math.MaxInt64
	}
	switch o.Op {
	case "renew":
		if unknown {
			j.lo, j.hi = max(j.lo+1, o.from()+o.DurUS), math.MaxInt64
		} else {
			j.lo, j.hi = o.Expiry, o.Expiry
		}
	case "release", "fail_retry":
		// Ended without completion: back in line, or dead after the last
		// attempt. A release keeps the claimable time; a retry is
		// claimable from its sample plus its delay (DurUS), or without
		// one the backoff of its attempt.
		switch {
		case j.att >= r.maxAttempts:
			j.st, j.lo, j.hi = jDead, 0, 0
		case o.Op == "release":
			j.st, j.lo, j.hi = jRequested, 0, 0
		default:
			lo, hi := o.DurUS, o.DurUS
			if o.DurUS == 0 {
				lo, hi = r.backoff.bounds(j.att, j.amax)
			}
			j.st, j.lo, j.hi = jRequested, o.from()+lo, addSat(ret, hi)
			j.olo, j.ohi = j.lo, j.hi
		}
	case "fail":
		j.st, j.lo, j.hi = jFailed, 0, 0
	default:
		j.st, j.lo, j.hi = jTerminal, 0, 0
	}
	return j
}

func (r leaseRules) stepClaim(s mState, o *raceOp, unknown bool) []mState {
	if unknown {
		// Any job that could have been first in line: claimable at some
		// sample t while the call ran (call <= t <= return), and behind
		// fewer than window jobs that were certainly claimable then and
		// certainly before it (fewest at the earliest such t). Its expiry
		// is t + duration: at most the return's, and at least the call's
		// (t is at least the job's ready time or previous expiry as well,
		// but a bound that depended on the previous holder would make the
		// states depend on the order the search tries unknown claims in).
		// Either way, each job it may have taken may have one attempt
		// more (amax): raised in every branch, so that the states do not
		// depend on the order in which the search tries unknown claims.
		var took []int
		for i, j := range s {
			if r.claimable(j, o.to(), false) && r.passedOver(s, i, max(o.from(), j.lo)) < r.window {
				took = append(took, i)
			}
		}
		base := append(mState{}, s...)
		for _, i := range took {
			base[i].amax = min(base[i].amax+1, r.maxAttempts)
		}
		out := []mState{base}
		for _, i := range took {
			j := base[i]
			out = append(out, base.with(i, mJob{st: jClaimed, holder: o.Lease, lo: o.from() + o.DurUS, hi: addSat(o.to(), o.DurUS),
				olo: j.olo, ohi: j.ohi, prio: j.prio, att: j.att, amax: j.amax, clo: j.clo, chi: j.chi}))
		}
		return out
	}
	switch o.Kind {
	case "ok":
		ji, ok := r.idx[o.RJob]
		if !ok {
			return nil
		}
		t := o.Expiry - o.DurUS
		if t < o.from() || t > o.to() {
			return nil
		}
		j := s[ji]
		if !r.claimable(j, t, false) || r.passedOver(s, ji, t) >= r.window {
			return nil
		}
		return []mState{s.with(ji, mJob{st: jClaimed, holder: o.Lease, lo: o.Expiry, hi: o.Expiry,
			olo: j.olo, ohi: j.ohi, prio: j.prio, att: j.att + 1, amax: min(j.amax+1, r.maxAttempts), clo: j.clo, chi: j.chi})}
	case "nothing_to_claim":
		claimable := 0 // all of them held by others: fewer than the window
		for _, j := range s {
			if r.claimable(j, o.from(), true) {
				if claimable++; claimable >= r.window {
					return nil
				}
			}
		}
		return []mState{s}
	case "expired":
		// Born expired (docs/DESIGN.md): the claim's pre-commit sample
		// reached its own expiry, so nothing committed. Its first sample
		// is at or after the call and the pre-commit one a duration later,
		// both before the return.
		if o.Ret-o.Call >= o.DurUS {
			return []mState{s}
		}
	case "busy", "clock_regressed", "interrupted":
		return []mState{s}
	}
	return nil
}

// addSat is a + b, or MaxInt64 where that overflows (a pending call's
// return is MaxInt64).
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// passedOver counts the jobs a claim of job ji at sample t passes over:
// certainly claimable then and certainly before it in claim order.
func (r leaseRules) passedOver(s mState, ji int, t int64) int {
	n := 0
	for k, j := range s {
		if k != ji && r.claimable(j, t, true) && before(j, k, s[ji], ji) {
			n++
		}
	}
	return n
}
