package reliability

// How a race history is checked against the lease model (race_model_test.go)
// in a time porcupine can always finish: per job, and the claim order across
// jobs separately.
//
// The whole-production check is exponential where it matters: a claim of
// unknown outcome (a worker killed mid-claim) may have taken any of dozens of
// jobs at any later point, so three of them at the end of a round give
// porcupine tens of thousands of candidate states to carry, and proving a
// history Illegal means exhausting them. A loaded CI machine ran out of the 2
// minutes ("Unknown").
//
// The reduction is sound: every history the whole model accepts passes it.
//
//   - Per job (porcupine, one partition per job): the job's claimant
//     operations, the successful claims that returned it, and every claim of
//     unknown outcome called before the job surely finished (each may have
//     taken this job or not). The model runs on a production of that one
//     job, from its state at its request (priority, run-at), so a claim
//     never passes over anything: this checks one owner at a time, expiry,
//     renewal, run-at, attempts, the terminal states (dead included) and
//     every verdict, exactly as the whole model does for that job. A
//     projection of a linearization of the whole history is a linearization
//     of each partition.
//   - Jobless claim verdicts (busy, clock_regressed, born expired) form one
//     partition of their own: the model decides them without the state.
//   - The claim order (checkClaimOrder): a successful claim may pass over
//     fewer than `window` claimable jobs that come before it in claim order
//     (priority, then claimable time, then request order), and
//     nothing_to_claim needs fewer than `window` claimable jobs. Counted are
//     only the jobs claimable in every linearization (certainlyClaimable)
//     and before the claimed job in every linearization (orderKey bounds
//     the claimable time a retry moves), less one for each claim of unknown
//     outcome that could come first (it may have taken one of them), so the
//     count never exceeds the whole model's.
//
// What the reduction gives up: the whole model also rejects a history whose
// per-job linearizations exist but cannot be interleaved into one that keeps
// the claim order, or in which one unknown claim would have to have taken
// two jobs. Neither is a way a store fails in practice; a store that serves
// claims out of order or to two owners is caught by the parts above.

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// raceCheck is the verdict on a history: porcupine's on the partitions (with
// the info of the partition that failed, for the visualization), and the
// claim-order violation if any.
type raceCheck struct {
	Result porcupine.CheckResult
	Info   porcupine.LinearizationInfo
	Model  porcupine.Model
	Order  error // a claim-order violation or an unknown job; Result is then Illegal
	// Partitions and MaxPartition: how the work was split.
	Partitions, MaxPartition int
	// MaxPassed is the most claimable jobs a claim certainly passed over
	// (the margin the window leaves).
	MaxPassed int
}

// checkRaceHistory checks a kept history: each partition against the model
// on its one job, then the claim order. A complete_next is checked as its
// two halves (splitCompleteNext).
func checkRaceHistory(k keptHistory, timeout time.Duration) raceCheck {
	k.Ops = splitCompleteNext(k.Ops)
	init, idx := k.initial()
	rules := leaseRules{window: k.Window, maxAttempts: k.maxAttempts(), backoff: k.Backoff, mark: markSkew(k.Ops)}
	// A job the history requests joins the request order after the others
	// (its place among them is unknown: mJob.late), absent until then.
	order := append([]string{}, k.Order...)
	for _, o := range k.Ops {
		if _, ok := idx[o.RJob]; o.Op == "request" && o.RJob != "" && !ok {
			idx[o.RJob] = len(order)
			order = append(order, o.RJob)
			j := requestedJob(o, rules.mark)
			j.st = jAbsent
			init = append(init, j)
		}
	}
	var ops []porcupine.Operation
	clients := map[string]int{}
	for _, o := range k.Ops {
		if _, ok := clients[o.W]; !ok {
			clients[o.W] = len(clients)
		}
		ops = append(ops, porcupine.Operation{ClientId: clients[o.W], Input: o, Call: o.Call, Return: o.Ret})
	}
	parts := partitionByJob(ops)
	c := raceCheck{Partitions: len(parts)}
	for _, p := range parts {
		c.MaxPartition = max(c.MaxPartition, len(p.ops))
	}
	for _, p := range parts {
		r, st := rules, mState{} // the jobless claims' verdicts need no job
		r.idx = map[string]int{}
		if p.job != "" {
			i, ok := idx[p.job]
			if !ok {
				c.Result, c.Order = porcupine.Illegal, fmt.Errorf("an operation names job %s, which was never requested", p.job)
				return c
			}
			r.idx[p.job], st = 0, mState{init[i]}
		}
		nm := leaseModel(st, r)
		model := nm.ToModel()
		res, info := porcupine.CheckOperationsVerbose(model, p.ops, timeout)
		if res != porcupine.Ok {
			c.Result, c.Info, c.Model = res, info, model
			return c
		}
	}
	c.Result = porcupine.Ok
	c.MaxPassed, c.Order = checkClaimOrder(k.Ops, init, idx, order, rules)
	if c.Order != nil {
		c.Result = porcupine.Illegal
	}
	return c
}

// unknownOutcome: the call may or may not have changed the store.
func unknownOutcome(o *raceOp) bool { return o.Ret == math.MaxInt64 || raceUnknown[o.Kind] }

// jobPartition is one job's operations ("" for the jobless claim verdicts).
type jobPartition struct {
	job string
	ops []porcupine.Operation
}

// partitionByJob is the per-job split described above. nothing_to_claim is
// in no partition: only checkClaimOrder decides it.
func partitionByJob(history []porcupine.Operation) []jobPartition {
	byJob := map[string][]porcupine.Operation{}
	var jobs []string
	var unknownClaims, jobless, redrives []porcupine.Operation
	add := func(job string, op porcupine.Operation) {
		if _, ok := byJob[job]; !ok {
			jobs = append(jobs, job)
		}
		byJob[job] = append(byJob[job], op)
	}
	for _, op := range history {
		o := op.Input.(*raceOp)
		switch {
		case o.Op == "request":
			if o.RJob != "" { // else it never happened: no job has its key
				add(o.RJob, op)
			}
		case o.Op == "redrive": // it may touch every job
			redrives = append(redrives, op)
		case !isClaim(o.Op): // a waiting claim is a claim: its job is known at its return
			add(o.Job, op)
		case unknownOutcome(o):
			unknownClaims = append(unknownClaims, op)
		case o.Kind == "ok":
			add(o.RJob, op)
		case o.Kind != "nothing_to_claim":
			jobless = append(jobless, op)
		}
	}
	var out []jobPartition
	for _, j := range jobs {
		// A claim called after the job surely finished cannot have taken
		// it: the model keeps a finished job finished. Only a completion
		// finishes it for good: a failed or cancelled job may be redriven
		// (so only without any retry_job or redrive). (A dead job is not
		// surely dead from one call: a claim of unknown outcome may have
		// counted an attempt, so its claims stay in.)
		redriven := len(redrives) > 0
		for _, op := range byJob[j] {
			redriven = redriven || op.Input.(*raceOp).Op == "retry_job"
		}
		finished := int64(math.MaxInt64)
		for _, op := range byJob[j] {
			o := op.Input.(*raceOp)
			if o.Kind == "ok" && (o.Op == "complete" || (!redriven && (o.Op == "fail" || o.Op == "cancel"))) {
				finished = min(finished, o.Ret)
			}
		}
		part := append(byJob[j], redrives...)
		for _, u := range unknownClaims {
			if u.Call <= finished {
				part = append(part, u)
			}
		}
		out = append(out, jobPartition{j, part})
	}
	if len(jobless) > 0 {
		out = append(out, jobPartition{"", jobless})
	}
	return out
}

// checkClaimOrder checks every successful claim and every nothing_to_claim
// against the window, and returns the most jobs a claim certainly passed.
// init holds each job's state at its request (order: request order).
func checkClaimOrder(hist []*raceOp, init mState, idx map[string]int, order []string, r leaseRules) (int, error) {
	byJob := map[string][]*raceOp{}
	var unknownClaims, redrives []*raceOp
	for _, o := range hist {
		switch {
		case o.Op == "request":
			byJob[o.RJob] = append(byJob[o.RJob], o)
		case o.Op == "redrive":
			redrives = append(redrives, o)
		case !isClaim(o.Op):
			byJob[o.Job] = append(byJob[o.Job], o)
		case unknownOutcome(o):
			unknownClaims = append(unknownClaims, o)
		case o.Kind == "ok":
			byJob[o.RJob] = append(byJob[o.RJob], o)
		}
	}
	maxPassed := 0
	for _, c := range hist {
		if !isClaim(c.Op) || unknownOutcome(c) || (c.Kind != "ok" && c.Kind != "nothing_to_claim") {
			continue
		}
		ti, at := -1, c.from() // nothing_to_claim: every job, at the call
		var target mJob
		if c.Kind == "ok" {
			p, ok := idx[c.RJob]
			if !ok {
				return maxPassed, fmt.Errorf("%s claim #%d returned job %s, which was never requested", c.W, c.N, c.RJob)
			}
			ti, at = p, c.Expiry-c.DurUS // the claim's exact sample
			target = orderKey(init[p], byJob[c.RJob], redrives, c, r)
		}
		var certain []string
		var claims []int // of each certain job, the claims that may precede c
		for i, k := range order {
			if i == ti || !certainlyClaimable(byJob[k], redrives, init[i], c, at, r) {
				continue
			}
			if ti >= 0 && !before(orderKey(init[i], byJob[k], redrives, c, r), i, target, ti) {
				continue
			}
			certain = append(certain, k)
			claims = append(claims, mayPrecede(byJob[k], init[i], c))
		}
		mayHaveTaken := hiddenByUnknownClaims(unknownClaims, claims, c, at, r)
		passed := len(certain) - mayHaveTaken
		maxPassed = max(maxPassed, passed)
		if passed >= r.window {
			what := fmt.Sprintf("claim #%d took job %s (priority %d, #%d in request order) at %d", c.N, short(c.RJob), target.prio, ti, at)
			if c.Kind != "ok" {
				what = fmt.Sprintf("claim #%d found nothing to claim (called %d)", c.N, c.Call)
			}
			return maxPassed, fmt.Errorf("%s %s while %d jobs before it in claim order were claimable in every linearization (%d claims of unknown outcome "+
				"may have taken some), more than the window of %d allows: %v", c.W, what, len(certain), mayHaveTaken, r.window, shortAll(certain))
		}
	}
	return maxPassed, nil
}

// hiddenByUnknownClaims bounds how many of the jobs counted for claim c
// (claims: each one's claims that may precede c) the claims of unknown
// outcome may have made unclaimable at c's sample at. Such a claim u may
// come first only when it was called by c's return; it took at most one
// job, at a sample no later than its return, so its lease lived at most
// until its return plus its duration. One that may still live at at may
// hold a counted job; one that lapsed before at left its job claimable,
// unless it used the job's last attempt (then the job is dead): the lapsed
// ones count only when, all of them on one counted job, they could use up
// its attempts.
func hiddenByUnknownClaims(unknown []*raceOp, claims []int, c *raceOp, at int64, r leaseRules) int {
	maxAttempts := r.maxAttempts
	_, wait := r.backoff.bounds(1, maxAttempts) // a lapse's backoff
	live, lapsed := 0, 0
	for _, u := range unknown {
		switch {
		case u.Call > c.Ret:
		case addSat(addSat(u.to(), u.DurUS), wait) > at:
			live++
		default:
			lapsed++
		}
	}
	for _, n := range claims {
		if lapsed > 0 && n+lapsed >= maxAttempts {
			return live + lapsed
		}
	}
	return live
}

// mayPrecede counts the claims of a job (its state at its request j, its
// operations ops) that may precede claim c: its attempts by then, at most.
func mayPrecede(ops []*raceOp, j mJob, c *raceOp) int {
	n := j.att
	for _, y := range ops {
		if isClaim(y.Op) && y.Call <= c.Ret {
			n++
		}
	}
	return n
}

// orderKey bounds a job's place in claim order at claim c's linearization
// point, given its operations ops: its priority never changes; its
// claimable time is the one the last reset before c set: its request's,
// a retry's (the sample plus the delay or the backoff) or that of a
// retry_job or redrive (the time it acts at). A release and a lapse keep
// the claimable time. olo is the least that any reset which may be the
// last before c sets it to; a redrive or retry_job may set it earlier than
// the request did (a delayed job cancelled before its time and redriven is
// claimable from the redrive), so olo is never only raised. ohi is the
// latest one that may (unbounded for one of unknown outcome). A redrive of
// every job in a state may have returned any job that had been claimed or
// failed by then.
func orderKey(j mJob, ops, redrives []*raceOp, c *raceOp, r leaseRules) mJob {
	_, wait := r.backoff.bounds(1, r.maxAttempts)
	olo, ohi := j.olo, j.ohi
	for _, y := range ops {
		if surelyResets(y) && y.Ret < c.Call {
			olo, ohi = math.MaxInt64, math.MinInt64 // the request's time is not the last
		}
	}
	for _, group := range [][]*raceOp{ops, redrives} {
		for _, y := range group {
			if !mayReset(y) || y.Call > c.Ret || surelyOverwritten(y, ops, c) ||
				(y.Op == "redrive" && !mayBeRedriven(ops, y)) {
				continue
			}
			lo, hi := int64(0), int64(math.MaxInt64) // of unknown outcome: unbounded
			switch {
			case y.Op == "fail_retry":
				lo = y.from() + y.DurUS // the backoff's least is 0
				if y.Kind == "ok" {
					hi = addSat(y.to(), y.DurUS)
					if y.DurUS == 0 {
						hi = addSat(y.to(), wait)
					}
				}
			default: // retry_job, redrive: the time it acts at
				lo = max(y.from(), changedFrom(ops, y))
				if !unknownOutcome(y) {
					hi = changedBy(ops, redrives, y, r.mark)
				}
			}
			olo, ohi = min(olo, lo), max(ohi, hi)
		}
	}
	j.olo, j.ohi = olo, ohi
	return j
}

// mayBeRedriven: a redrive y may have returned the job (its operations
// ops) only if the job had been claimed, failed or cancelled by then.
func mayBeRedriven(ops []*raceOp, y *raceOp) bool {
	for _, x := range ops {
		if x.Op != "request" && x.Call <= y.Ret {
			return true
		}
	}
	return false
}

// mayReset: y may have set its job's claimable time (a retry, a retry_job
// or a redrive that succeeded, or whose outcome is unknown; a redrive that
// answered busy may have returned some jobs).
func mayReset(y *raceOp) bool {
	switch y.Op {
	case "fail_retry", "retry_job", "redrive":
		return y.Kind == "ok" || unknownOutcome(y) || (y.Op == "redrive" && y.Kind == "busy")
	}
	return false
}

// surelyResets: y surely set its job's claimable time (a redrive of every
// job in a state may not have touched this one).
func surelyResets(y *raceOp) bool {
	return (y.Op == "fail_retry" || y.Op == "retry_job") && y.Kind == "ok" && y.Ret != math.MaxInt64
}

// surelyOverwritten: a reset of the job's ops that surely came after y and
// surely before c set the claimable time again, so y's is not the last.
func surelyOverwritten(y *raceOp, ops []*raceOp, c *raceOp) bool {
	for _, z := range ops {
		if z != y && surelyResets(z) && y.Ret != math.MaxInt64 && z.Call > y.Ret && z.Ret < c.Call {
			return true
		}
	}
	return false
}

// changesAt: an unguarded write to a job, which acts no earlier than the
// job's last change (docs/CLOCK.md).
func changesAt(op string) bool {
	return op == "request" || op == "cancel" || op == "retry_job" || op == "redrive"
}

// changedBy bounds from above the time the unguarded write y to a job
// (its operations ops) acts at: its sample or the mark (actsBy), or the
// job's last change, which an unguarded write that may precede y (called
// by y's return) made no later than it may act at itself. (A guarded
// write's time is a sample the mark bounds.)
func changedBy(ops, redrives []*raceOp, y *raceOp, mark int64) int64 {
	t := actsBy(y, mark)
	for _, group := range [][]*raceOp{ops, redrives} {
		for _, x := range group {
			if changesAt(x.Op) && x.Call <= y.Ret {
				t = max(t, actsBy(x, mark))
			}
		}
	}
	return t
}

// changedFrom bounds from below the last change of a job (its operations
// ops) before the unguarded write y: the sample of an unguarded write that
// surely committed before y was called.
func changedFrom(ops []*raceOp, y *raceOp) int64 {
	var t int64
	for _, x := range ops {
		if changesAt(x.Op) && x.Kind == "ok" && x.Ret < y.Call {
			t = max(t, x.from())
		}
	}
	return t
}

// certainlyClaimable reports whether, in every linearization, the job whose
// operations (claims of unknown outcome aside) are ops and whose state at
// its request was j is claimable at c's linearization point, c's clock
// sample being at: requested and ready, or claimed with an expiry at or
// before at, and not dead. It looks for an operation x that surely precedes
// c (x returned before c was called) and leaves the job claimable at at,
// such that no operation that may fall between x and c (returned after x
// was called, called before c returned) could make it unclaimable; the
// job's request is such an x for every operation once the job is ready.
// A job whose claims that may precede c reach maxAttempts may be dead: it
// is never counted.
func certainlyClaimable(ops, redrives []*raceOp, j mJob, c *raceOp, at int64, r leaseRules) bool {
	if mayPrecede(ops, j, c) >= r.maxAttempts {
		return false
	}
	_, wait := r.backoff.bounds(1, r.maxAttempts) // the most a lapse or a retry waits
	readyBy := func(y *raceOp) bool {             // a retry or a request of y is ready by at
		switch y.Op {
		case "request":
			return requestedJob(y, r.mark).hi <= at
		case "fail_retry":
			if y.DurUS == 0 {
				return addSat(y.to(), wait) <= at
			}
			return addSat(y.to(), y.DurUS) <= at
		}
		return changedBy(ops, redrives, y, r.mark) <= at // retry_job
	}
	harmless := func(y *raceOp) bool { // leaves the job claimable at at, or unchanged
		if y.Ret != math.MaxInt64 && !raceUnknown[y.Kind] && y.Kind != "ok" {
			return true // a rejection changes nothing
		}
		switch y.Op {
		case "release":
			return true
		case "fail_retry", "retry_job", "request":
			return y.Kind == "ok" && readyBy(y)
		case "claim", "claim_wait", "renew":
			return y.Kind == "ok" && addSat(y.Expiry, wait) <= at
		}
		// Completion, failure or cancel: finished; a renewal of unknown
		// expiry; a keep-alive, whose renewals the history does not see.
		return false
	}
	leavesClaimable := func(x *raceOp) bool {
		if x.Ret == math.MaxInt64 || x.Kind != "ok" || x.Ret >= c.Call {
			return false
		}
		switch x.Op {
		case "release":
			return true
		case "fail_retry", "retry_job", "request":
			return readyBy(x)
		case "claim", "claim_wait", "renew":
			return addSat(x.Expiry, wait) <= at
		}
		return false
	}
	noneBetween := func(x *raceOp) bool {
		for _, y := range ops {
			if y == x || y.Call > c.Ret || (x != nil && y.Ret < x.Call) {
				continue
			}
			if !harmless(y) {
				return false
			}
		}
		return true
	}
	if j.st != jAbsent && j.hi <= at && noneBetween(nil) {
		return true
	}
	for _, x := range ops {
		if leavesClaimable(x) && noneBetween(x) {
			return true
		}
	}
	return false
}

func shortAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	return out
}

// keptHistory is a history with what checking it needs: what a failed race
// writes next to its worker histories (history.json) and what the checker's
// regression fixtures hold (testdata/*.json.gz). A history kept before
// retries has no MaxAttempts (no limit) and no Jobs (every job priority 0,
// claimable from the start: request order).
type keptHistory struct {
	Window      int         `json:"window"`
	MaxAttempts int         `json:"max_attempts,omitempty"`
	Backoff     raceBackoff `json:"backoff,omitempty"`
	Order       []string    `json:"order"`          // job ids in request order
	Jobs        []keptJob   `json:"jobs,omitempty"` // each job of Order at its request
	Ops         []*raceOp   `json:"ops"`
}

// keptJob is a job's place in claim order at its request.
type keptJob struct {
	Priority    int   `json:"priority"`
	ClaimableUS int64 `json:"claimable_us"`
}

func (k keptHistory) maxAttempts() int {
	if k.MaxAttempts == 0 {
		return math.MaxInt
	}
	return k.MaxAttempts
}

// initial is the model's state of every job at its request, and each job's
// index in request order.
func (k keptHistory) initial() (mState, map[string]int) {
	init := make(mState, len(k.Order))
	idx := make(map[string]int, len(k.Order))
	for i, id := range k.Order {
		idx[id] = i
		if i < len(k.Jobs) {
			t := k.Jobs[i].ClaimableUS
			init[i] = mJob{lo: t, hi: t, olo: t, ohi: t, prio: k.Jobs[i].Priority}
		}
	}
	return init, idx
}

func (k keptHistory) save(path string) error {
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// loadKeptHistory reads a history.json, gzipped or not.
func loadKeptHistory(path string) (keptHistory, error) {
	var k keptHistory
	f, err := os.Open(path)
	if err != nil {
		return k, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return k, err
		}
		r = gz
	}
	err = json.NewDecoder(r).Decode(&k)
	return k, err
}

// raceCheckTimeout only guards against a checker bug: the partitions are
// decided in milliseconds.
const raceCheckTimeout = 10 * time.Minute
