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
//     taken this job or not). The model runs
//     on a production of that one job, so a claim never passes over
//     anything: this checks one owner at a time, expiry, renewal, the
//     terminal states and every verdict, exactly as the whole model does
//     for that job. A projection of a linearization of the whole history
//     is a linearization of each partition.
//   - Jobless claim verdicts (busy, clock_regressed, born expired) form one
//     partition of their own: the model decides them without the state.
//   - The claim order (checkClaimOrder): a successful claim may pass over
//     fewer than `window` claimable jobs, and nothing_to_claim needs fewer
//     than `window` claimable jobs. Counted are only the jobs claimable in
//     every linearization (certainlyClaimable), less one for each claim of
//     unknown outcome that could come first (it may have taken one of them),
//     so the count never exceeds the whole model's.
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
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// raceCheck is the verdict on a history: porcupine's on the partitions (with
// its info, for the visualization), and the claim-order violation if any.
type raceCheck struct {
	Result porcupine.CheckResult
	Info   porcupine.LinearizationInfo
	Model  porcupine.Model
	Order  error // a claim-order violation; Result is then Illegal
	// Partitions and MaxPartition: how the work was split.
	Partitions, MaxPartition int
	// MaxPassed is the most claimable jobs a claim certainly passed over
	// (the margin the window leaves).
	MaxPassed int
}

// checkRaceHistory checks hist, on the jobs of order (request order), with a
// claim-order window (fifo or skipLockedWindow).
func checkRaceHistory(hist []*raceOp, order []string, window int, timeout time.Duration) raceCheck {
	hist = splitCompleteNext(hist)
	one := make(map[string]int, len(order)) // every job is the only job of its partition
	for _, id := range order {
		one[id] = 0
	}
	nm := leaseModel(one, 1, window)
	nm.Partition = partitionByJob
	model := nm.ToModel()
	var ops []porcupine.Operation
	clients := map[string]int{}
	for _, o := range hist {
		if _, ok := clients[o.W]; !ok {
			clients[o.W] = len(clients)
		}
		ops = append(ops, porcupine.Operation{ClientId: clients[o.W], Input: o, Call: o.Call, Return: o.Ret})
	}
	parts := partitionByJob(ops)
	c := raceCheck{Model: model, Partitions: len(parts)}
	for _, p := range parts {
		c.MaxPartition = max(c.MaxPartition, len(p))
	}
	c.Result, c.Info = porcupine.CheckOperationsVerbose(model, ops, timeout)
	if c.Result != porcupine.Ok {
		return c
	}
	idx := make(map[string]int, len(order))
	for i, id := range order {
		idx[id] = i
	}
	c.MaxPassed, c.Order = checkClaimOrder(hist, idx, window)
	if c.Order != nil {
		c.Result = porcupine.Illegal
	}
	return c
}

// unknownOutcome: the call may or may not have changed the store.
func unknownOutcome(o *raceOp) bool { return o.Ret == math.MaxInt64 || raceUnknown[o.Kind] }

// partitionByJob is the per-job split described above. nothing_to_claim is
// in no partition: only checkClaimOrder decides it.
func partitionByJob(history []porcupine.Operation) [][]porcupine.Operation {
	byJob := map[string][]porcupine.Operation{}
	var jobs []string
	var unknownClaims, jobless []porcupine.Operation
	add := func(job string, op porcupine.Operation) {
		if _, ok := byJob[job]; !ok {
			jobs = append(jobs, job)
		}
		byJob[job] = append(byJob[job], op)
	}
	for _, op := range history {
		o := op.Input.(*raceOp)
		switch {
		case o.Op != "claim":
			add(o.Job, op)
		case unknownOutcome(o):
			unknownClaims = append(unknownClaims, op)
		case o.Kind == "ok":
			add(o.RJob, op)
		case o.Kind != "nothing_to_claim":
			jobless = append(jobless, op)
		}
	}
	var out [][]porcupine.Operation
	for _, j := range jobs {
		// A claim called after the job surely finished cannot have taken
		// it: the model keeps a finished job finished.
		finished := int64(math.MaxInt64)
		for _, op := range byJob[j] {
			if o := op.Input.(*raceOp); (o.Op == "complete" || o.Op == "fail") && o.Kind == "ok" {
				finished = min(finished, o.Ret)
			}
		}
		part := byJob[j]
		for _, u := range unknownClaims {
			if u.Call <= finished {
				part = append(part, u)
			}
		}
		out = append(out, part)
	}
	if len(jobless) > 0 {
		out = append(out, jobless)
	}
	return out
}

// checkClaimOrder checks every successful claim and every nothing_to_claim
// against the window, and returns the most jobs a claim certainly passed.
func checkClaimOrder(hist []*raceOp, idx map[string]int, window int) (int, error) {
	byJob := map[string][]*raceOp{}
	var unknownClaimCalls []int64
	for _, o := range hist {
		switch {
		case o.Op != "claim":
			byJob[o.Job] = append(byJob[o.Job], o)
		case unknownOutcome(o):
			unknownClaimCalls = append(unknownClaimCalls, o.Call)
		case o.Kind == "ok":
			byJob[o.RJob] = append(byJob[o.RJob], o)
		}
	}
	sort.Slice(unknownClaimCalls, func(i, j int) bool { return unknownClaimCalls[i] < unknownClaimCalls[j] })
	jobs := make([]string, len(idx))
	for id, i := range idx {
		jobs[i] = id
	}
	maxPassed := 0
	for _, c := range hist {
		if c.Op != "claim" || unknownOutcome(c) || (c.Kind != "ok" && c.Kind != "nothing_to_claim") {
			continue
		}
		// A claim of unknown outcome called by the time c returned could
		// be linearized before c and have taken one of the counted jobs.
		mayHaveTaken := sort.Search(len(unknownClaimCalls), func(i int) bool { return unknownClaimCalls[i] > c.Ret })
		upTo, at := len(jobs), c.Call // nothing_to_claim: every job, at the call
		if c.Kind == "ok" {
			p, ok := idx[c.RJob]
			if !ok {
				return maxPassed, fmt.Errorf("%s claim #%d returned job %s, which was never requested", c.W, c.N, c.RJob)
			}
			upTo, at = p, c.Expiry-c.DurUS // the claim's exact sample
		}
		var certain []string
		for _, k := range jobs[:upTo] {
			if certainlyClaimable(byJob[k], c, at) {
				certain = append(certain, k)
			}
		}
		passed := len(certain) - mayHaveTaken
		maxPassed = max(maxPassed, passed)
		if passed >= window {
			what := fmt.Sprintf("claim #%d took job %s (#%d in request order) at %d", c.N, short(c.RJob), upTo, at)
			if c.Kind != "ok" {
				what = fmt.Sprintf("claim #%d found nothing to claim (called %d)", c.N, c.Call)
			}
			return maxPassed, fmt.Errorf("%s %s while %d earlier jobs were claimable in every linearization (%d claims of unknown outcome "+
				"may have taken some), more than the window of %d allows: %v", c.W, what, len(certain), mayHaveTaken, window, shortAll(certain))
		}
	}
	return maxPassed, nil
}

// certainlyClaimable reports whether, in every linearization, the job whose
// operations (claims of unknown outcome aside) are ops is claimable at c's
// linearization point, c's clock sample being at: requested, or claimed with
// an expiry at or before at. It looks for an operation x that surely
// precedes c (x returned before c was called) and leaves the job claimable
// at at, such that no operation that may fall between x and c (returned
// after x was called, called before c returned) could make it unclaimable;
// the job's creation is such an x for every operation.
func certainlyClaimable(ops []*raceOp, c *raceOp, at int64) bool {
	harmless := func(y *raceOp) bool { // leaves the job claimable at at, or unchanged
		if y.Ret != math.MaxInt64 && !raceUnknown[y.Kind] && y.Kind != "ok" {
			return true // a rejection changes nothing
		}
		switch y.Op {
		case "release":
			return true
		case "claim", "renew":
			return y.Kind == "ok" && y.Expiry <= at
		}
		return false // completion or failure: finished; or a renewal of unknown expiry
	}
	leavesClaimable := func(x *raceOp) bool {
		if x.Ret == math.MaxInt64 || x.Kind != "ok" || x.Ret >= c.Call {
			return false
		}
		switch x.Op {
		case "release":
			return true
		case "claim", "renew":
			return x.Expiry <= at
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
	if noneBetween(nil) {
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
// regression fixtures hold (testdata/*.json.gz).
type keptHistory struct {
	Window int       `json:"window"`
	Order  []string  `json:"order"` // job ids in request order
	Ops    []*raceOp `json:"ops"`
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
