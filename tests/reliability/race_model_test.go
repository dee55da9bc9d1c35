package reliability

// The sequential lease model the race history must linearize against.
//
// State: per job (in request order) requested, claimed by a lease label with
// an expiry, or terminal; plus the label of the last claim, which the store
// keeps after release (so its holder is told wrong_state, anyone else
// lease_lost).
//
// Time: every authority decision compares a clock sample with an expiry.
// Workers and the authority read the same system clock, so a sample taken
// during a call lies in [call, return]. A successful claim or renewal also
// tells the exact sample: expiry - duration. The model checks each outcome
// against those bounds: a claim at sample T may take a claimed job only if its
// expiry can be <= T, and must take the first claimable job in request
// order; a renewal must commit before the previous expiry and extend it;
// release, fail and complete need the claim unexpired at some sample in the
// window; "expired" needs the expiry reachable by the return time. A claim
// itself can end "expired", having committed nothing: born expired, when its
// pre-commit sample reached its own new expiry (a call at least its duration
// long; a loaded machine makes the race's 30 ms claims meet it).
//
// On PostgreSQL a claim skips jobs other transactions hold at that moment
// (SELECT … FOR UPDATE SKIP LOCKED): "first in line" becomes "first in line
// among the jobs nobody else is touching". The model cannot see the locks, so
// it bounds them: a claim may pass over fewer than `window` claimable jobs,
// and nothing_to_claim needs fewer than `window` claimable jobs (all held).
// With window 1 that is strict request order (SQLite). Everything else — one
// live owner, expiry, renewal, terminal states — is the same for both.
//
// complete_next (Lease.CompleteAndClaimNext) completes the lease's job and
// claims the next one in one commit. The checker splits it in two
// (splitCompleteNext): the completion, on its job, and a claim of the same
// call, labelled like a claim call (W:N); the claim is there only when the
// completion committed or may have. A completion that came back "expired"
// may also be the claim's verdict: born expired, nothing committed.
//
// Unknown outcomes (a kill mid-call, outcome_unknown, storage) are
// nondeterministic: the change happened or it did not, by the return; a call
// a kill cut short returns when its worker was gone (dead, and on PostgreSQL
// its sessions ended too). A claim of unknown
// outcome may have taken any job that could have been first in line, with an
// expiry known only from below (call + duration); [lo, hi] bounds every
// expiry, hi = MaxInt64 when unknown.

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
	jTerminal
)

type mJob struct {
	st     byte
	holder string // label of the current (or, after release/finish, the last) claim
	lo, hi int64  // bounds of the expiry while claimed
}

type mState []mJob

var raceRejections = map[string]bool{
	"nothing_to_claim": true, "expired": true, "lease_lost": true, "wrong_state": true,
	"not_extended": true, "busy": true, "clock_regressed": true,
}

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
			Call: o.Call, Ret: o.Ret, Kind: o.Kind, RJob: o.RJob, Expiry: o.Expiry, Msg: o.Msg}
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

// fifo is the window of a store that claims strictly in request order;
// skipLockedWindow that of PostgreSQL: a claim may pass over the jobs other
// transactions hold at that moment, at most two per concurrent worker
// process (a claim can hold an expired job and a requested one).
const (
	fifo             = 1
	skipLockedWindow = 32
)

func leaseModel(idx map[string]int, n int, window int) porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{make(mState, n)} },
		Step: func(state, input, _ interface{}) []interface{} {
			s, o := state.(mState), input.(*raceOp)
			return toIfaces(stepLease(s, o, idx, window))
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
					fmt.Fprintf(h, "%d:%d:%s:%d:%d;", i, j.st, j.holder, j.lo, j.hi)
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
					fmt.Fprintf(&b, "#%d st=%d %s [%d,%d]\n", i, j.st, j.holder, j.lo, j.hi)
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

func stepLease(s mState, o *raceOp, idx map[string]int, window int) []mState {
	pending := o.Ret == math.MaxInt64
	unknown := pending || raceUnknown[o.Kind]
	if o.Op == "claim" {
		return stepClaim(s, o, idx, unknown, window)
	}
	ji, ok := idx[o.Job]
	if !ok {
		return nil
	}
	j := s[ji]
	held := j.st == jClaimed && j.holder == o.Lease
	if unknown {
		if !held {
			return []mState{s}
		}
		return []mState{s, s.with(ji, applyClaimant(j, o, true))}
	}
	switch o.Kind {
	case "ok":
		if !held {
			return nil
		}
		if o.Op == "renew" {
			t := o.Expiry - o.DurUS
			if t < o.Call || t > o.Ret || t >= j.hi || o.Expiry <= j.lo {
				return nil
			}
		} else if o.Call >= j.hi {
			return nil // the claim had expired before the call began
		}
		return []mState{s.with(ji, applyClaimant(j, o, false))}
	case "expired":
		if held && (o.Ret >= j.lo || (o.Next && o.Ret-o.Call >= o.DurUS)) {
			return []mState{s}
		}
	case "not_extended":
		if held && o.Op == "renew" && o.Call+o.DurUS <= j.hi {
			return []mState{s}
		}
	case "lease_lost":
		if j.holder != o.Lease {
			return []mState{s}
		}
	case "wrong_state":
		if j.holder == o.Lease && j.st != jClaimed {
			return []mState{s}
		}
	case "busy", "clock_regressed":
		return []mState{s}
	}
	return nil
}

// applyClaimant is the state after a successful renew, release, fail or
// complete; for a renewal of unknown outcome the new expiry is bounded only
// from below.
func applyClaimant(j mJob, o *raceOp, unknown bool) mJob {
	switch o.Op {
	case "renew":
		if unknown {
			j.lo, j.hi = max(j.lo+1, o.Call+o.DurUS), math.MaxInt64
		} else {
			j.lo, j.hi = o.Expiry, o.Expiry
		}
	case "release":
		j.st, j.lo, j.hi = jRequested, 0, 0
	default:
		j.st, j.lo, j.hi = jTerminal, 0, 0
	}
	return j
}

func stepClaim(s mState, o *raceOp, idx map[string]int, unknown bool, window int) []mState {
	if unknown {
		out := []mState{s}
		requested := 0
		for i, j := range s {
			if j.st == jTerminal {
				continue
			}
			out = append(out, s.with(i, mJob{st: jClaimed, holder: o.Lease, lo: o.Call + o.DurUS, hi: math.MaxInt64}))
			if j.st == jRequested {
				if requested++; requested == window {
					break // later jobs come after these in line
				}
			}
		}
		return out
	}
	switch o.Kind {
	case "ok":
		ji, ok := idx[o.RJob]
		if !ok {
			return nil
		}
		t := o.Expiry - o.DurUS
		if t < o.Call || t > o.Ret {
			return nil
		}
		passed := 0 // earlier jobs claimable at t: within the window
		for k := 0; k < ji; k++ {
			if s[k].st == jRequested || (s[k].st == jClaimed && s[k].hi <= t) {
				if passed++; passed >= window {
					return nil
				}
			}
		}
		j := s[ji]
		if j.st == jTerminal || (j.st == jClaimed && j.lo > t) {
			return nil
		}
		return []mState{s.with(ji, mJob{st: jClaimed, holder: o.Lease, lo: o.Expiry, hi: o.Expiry})}
	case "nothing_to_claim":
		claimable := 0 // all of them held by others: fewer than the window
		for _, j := range s {
			if j.st == jRequested || (j.st == jClaimed && j.hi <= o.Call) {
				if claimable++; claimable >= window {
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
	case "busy", "clock_regressed":
		return []mState{s}
	}
	return nil
}
