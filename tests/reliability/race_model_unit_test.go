package reliability

// The lease model must reject the histories a broken authority would
// produce; otherwise a passing race proves nothing.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func checkModel(ops ...*raceOp) porcupine.CheckResult { return checkModelOf(fifo, ops...) }

func checkModelOf(window int, ops ...*raceOp) porcupine.CheckResult {
	return checkJobsOf(window, make(mState, 2), ops...)
}

// jobNames are the model's jobs' ids in the unit tests: "j0", "j1", ...
func jobNames(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%d", i)
	}
	return ids
}

// checkJobsOf checks ops against the model from the initial jobs init
// ("j0", "j1", ... in request order).
func checkJobsOf(window int, init mState, ops ...*raceOp) porcupine.CheckResult {
	idx := map[string]int{}
	for i, id := range jobNames(len(init)) {
		idx[id] = i
	}
	var h []porcupine.Operation
	for i, o := range splitCompleteNext(ops) {
		if isClaim(o.Op) && o.Lease == "" {
			o.Lease = o.W
		}
		h = append(h, porcupine.Operation{ClientId: i, Input: o, Call: o.Call, Return: o.Ret})
	}
	m := leaseModel(init, leaseRules{idx: idx, window: window, maxAttempts: raceMaxAttempts})
	return porcupine.CheckOperationsTimeout(m.ToModel(), h, 10*time.Second)
}

func claimOp(w, job string, call, ret, t, dur int64) *raceOp {
	return &raceOp{W: w, Op: "claim", DurUS: dur, Call: call, Ret: ret, Kind: "ok", RJob: job, Expiry: t + dur}
}

func TestLeaseModelAcceptsALegalHistory(t *testing.T) {
	require.Equal(t, porcupine.Ok, checkModel(
		claimOp("a", "j0", 0, 10, 5, 100),
		claimOp("b", "j1", 1, 11, 6, 100),
		&raceOp{W: "a", Lease: "a", Op: "complete", Job: "j0", Call: 20, Ret: 30, Kind: "ok"},
		&raceOp{W: "c", Lease: "c", Op: "claim", DurUS: 50, Call: 200, Ret: 210, Kind: "ok", RJob: "j1", Expiry: 255},
		&raceOp{W: "b", Lease: "b", Op: "complete", Job: "j1", Call: 220, Ret: 230, Kind: "lease_lost"},
		&raceOp{W: "d", Lease: "d", Op: "claim", DurUS: 50, Call: 240, Ret: math.MaxInt64}, // killed
	))
}

func TestLeaseModelRejectsTwoLiveOwners(t *testing.T) {
	require.Equal(t, porcupine.Illegal, checkModel(
		claimOp("a", "j0", 0, 10, 5, 100),
		claimOp("b", "j0", 20, 30, 25, 100), // a's claim lives until 105
	))
}

func TestLeaseModelRejectsCompletionAfterExpiry(t *testing.T) {
	require.Equal(t, porcupine.Illegal, checkModel(
		claimOp("a", "j0", 0, 10, 5, 100),
		&raceOp{W: "a", Lease: "a", Op: "complete", Job: "j0", Call: 110, Ret: 120, Kind: "ok"},
	))
}

func TestLeaseModelRejectsSkippingTheQueue(t *testing.T) {
	require.Equal(t, porcupine.Illegal, checkModel(claimOp("a", "j1", 0, 10, 5, 100)))
}

func TestLeaseModelWithAWindowAcceptsSkippingWithinItButNotTwoOwners(t *testing.T) {
	require.Equal(t, porcupine.Ok, checkModelOf(2, claimOp("a", "j1", 0, 10, 5, 100)))
	require.Equal(t, porcupine.Illegal, checkModelOf(2, claimOp("a", "j1", 0, 10, 5, 100), claimOp("b", "j1", 20, 30, 25, 100)))
	// Window 1 is strict order: passing over j0 is illegal; so is nothing
	// to claim while j0 and j1 are both claimable with a window of 2.
	require.Equal(t, porcupine.Illegal, checkModelOf(1, claimOp("a", "j1", 0, 10, 5, 100)))
	require.Equal(t, porcupine.Illegal, checkModelOf(2, &raceOp{W: "a", Op: "claim", DurUS: 100, Call: 0, Ret: 10, Kind: "nothing_to_claim"}))
}

func TestLeaseModelRejectsAnExpiredVerdictBeforeTheExpiry(t *testing.T) {
	require.Equal(t, porcupine.Illegal, checkModel(
		claimOp("a", "j0", 0, 10, 5, 100),
		&raceOp{W: "a", Lease: "a", Op: "renew", Job: "j0", DurUS: 100, Call: 20, Ret: 30, Kind: "expired"},
	))
}

func TestLeaseModelLetsAKilledCompletionHaveHappenedOrNot(t *testing.T) {
	// The killed completion happened: the job is not claimable any more.
	require.Equal(t, porcupine.Ok, checkModel(
		claimOp("a", "j0", 0, 10, 5, 100),
		&raceOp{W: "a", Lease: "a", Op: "complete", Job: "j0", Call: 20, Ret: math.MaxInt64},
		&raceOp{W: "b", Lease: "b", Op: "claim", DurUS: 50, Call: 300, Ret: 310, Kind: "ok", RJob: "j1", Expiry: 355},
	))
	// Or it did not: the job is claimable again after its expiry.
	require.Equal(t, porcupine.Ok, checkModel(
		claimOp("a", "j0", 0, 10, 5, 100),
		&raceOp{W: "a", Lease: "a", Op: "complete", Job: "j0", Call: 20, Ret: math.MaxInt64},
		&raceOp{W: "b", Lease: "b", Op: "claim", DurUS: 50, Call: 300, Ret: 310, Kind: "ok", RJob: "j0", Expiry: 355},
	))
}

func endOp(w, op, job string, call, ret int64, kind string) *raceOp {
	return &raceOp{W: w, Lease: w, Op: op, Job: job, Call: call, Ret: ret, Kind: kind}
}

func TestLeaseModelCountsAttemptsAndTheLastOneThatEndsWithoutCompletionIsDead(t *testing.T) {
	var ops []*raceOp
	for i := 0; i < raceMaxAttempts; i++ {
		w := fmt.Sprintf("w%d", i)
		at := int64(100 * i)
		ops = append(ops, claimOp(w, "j0", at, at+10, at+5, 50),
			endOp(w, []string{"release", "fail_retry"}[i%2], "j0", at+20, at+30, "ok"))
	}
	one := make(mState, 1)
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, one, ops...))
	// Dead: nobody may claim it again, and nothing_to_claim is right.
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, one, append(ops, claimOp("x", "j0", 1000, 1010, 1005, 50))...))
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, one, append(ops,
		&raceOp{W: "x", Op: "claim", DurUS: 50, Call: 1000, Ret: 1010, Kind: "nothing_to_claim"})...))
}

func TestLeaseModelTreatsAWaitingClaimAsAClaim(t *testing.T) {
	require.Equal(t, porcupine.Ok, checkModel(waitOp("a", "j0", 0, 500, 400, 100), waitOp("b", "j1", 0, 600, 450, 100)))
	require.Equal(t, porcupine.Illegal, checkModel(waitOp("a", "j1", 0, 500, 400, 100)), "skipping the queue")
	require.Equal(t, porcupine.Illegal, checkModel(waitOp("a", "j0", 0, 10, 5, 100), waitOp("b", "j0", 0, 50, 40, 100)), "two live owners")
}

func TestLeaseModelKnowsAKeptAliveExpiryOnlyFromBelow(t *testing.T) {
	keep := &raceOp{W: "a", Lease: "a", Op: "keep_alive", Job: "j0", DurUS: 100, Call: 20, Ret: 21, Kind: "ok"}
	// Renewed in the background: j0 is not claimable at its first expiry,
	// so a later claim passes over it.
	require.Equal(t, porcupine.Ok, checkModel(claimOp("a", "j0", 0, 10, 5, 100), keep, claimOp("b", "j1", 200, 210, 205, 100)))
	require.Equal(t, porcupine.Illegal, checkModel(claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j1", 200, 210, 205, 100)),
		"without a keep-alive j0 is first in line at 205")
	// It may also have expired then: a claim may take it after the known expiry, never before.
	require.Equal(t, porcupine.Ok, checkModel(claimOp("a", "j0", 0, 10, 5, 100), keep, claimOp("b", "j0", 200, 210, 205, 100)))
	require.Equal(t, porcupine.Illegal, checkModel(claimOp("a", "j0", 0, 10, 5, 100), keep, claimOp("b", "j0", 50, 60, 55, 100)))
	// Stopping it tells the last confirmed expiry: the bound moves up.
	stop := &raceOp{W: "a", Lease: "a", Op: "stop_keep_alive", Job: "j0", Call: 300, Ret: 301, Kind: "ok", Expiry: 500}
	require.Equal(t, porcupine.Illegal, checkModel(claimOp("a", "j0", 0, 10, 5, 100), keep, stop, claimOp("b", "j0", 400, 410, 405, 100)))
	require.Equal(t, porcupine.Ok, checkModel(claimOp("a", "j0", 0, 10, 5, 100), keep, stop, claimOp("b", "j0", 600, 610, 605, 100)))
	// A keep-alive that failed renews nothing.
	failed := *keep
	failed.Kind = "closed"
	require.Equal(t, porcupine.Illegal, checkModel(claimOp("a", "j0", 0, 10, 5, 100), &failed, claimOp("b", "j1", 200, 210, 205, 100)))
}

// A claim whose pre-commit sample reaches its own expiry commits nothing and
// reports expired (docs/DESIGN.md, "born expired"); on a loaded machine the
// race's 30 ms claims meet it. It needs the call to have lasted at least the
// claim's duration: both samples lie inside the call.
func TestLeaseModelAcceptsAClaimBornExpiredOnlyAfterItsDuration(t *testing.T) {
	bornExpired := func(call, ret int64) *raceOp {
		return &raceOp{W: "a", Op: "claim", DurUS: 50, Call: call, Ret: ret, Kind: "expired"}
	}
	for _, window := range []int{fifo, skipLockedWindow} {
		require.Equal(t, porcupine.Ok, checkModelOf(window, bornExpired(0, 50),
			claimOp("b", "j0", 60, 70, 65, 100)), "nothing was claimed: j0 is still first")
		require.Equal(t, porcupine.Illegal, checkModelOf(window, bornExpired(0, 49)))
	}
}

// A claim of unknown outcome may have taken only a job that was claimable
// at some sample while it ran (between its call and its return), and the
// lease it may have taken lives at most its duration past its return. So it
// cannot have taken a job another lease holds beyond its return, and the
// holder's lease_lost is then wrong.
func TestLeaseModelLetsAClaimOfUnknownOutcomeTakeOnlyAJobClaimableWhileItRan(t *testing.T) {
	killed := &raceOp{W: "k", Op: "claim", DurUS: 50, Call: 20, Ret: 30, Kind: "killed"}
	lost := complete("a", "j0", 40, 50, "lease_lost")
	for _, window := range []int{fifo, skipLockedWindow} {
		require.Equal(t, porcupine.Illegal, checkModelOf(window, claimOp("a", "j0", 0, 10, 5, 100), killed, lost), "window %d", window)
		require.Equal(t, porcupine.Illegal, checkSplitOf(window, claimOp("a", "j0", 0, 10, 5, 100), killed, lost).Result, "window %d: the checker", window)
	}
	// After a's expiry (105) it may have taken the job.
	late := &raceOp{W: "k", Op: "claim", DurUS: 50, Call: 100, Ret: 110, Kind: "killed"}
	require.Equal(t, porcupine.Ok, checkModel(claimOp("a", "j0", 0, 10, 5, 100), late, complete("a", "j0", 120, 130, "lease_lost")))
	require.Equal(t, porcupine.Ok, checkSplitOf(fifo, claimOp("a", "j0", 0, 10, 5, 100), late, complete("a", "j0", 120, 130, "lease_lost")).Result)
}

// A claim of unknown outcome that returned long ago holds nothing any
// more: its lease lived at most its duration past its return. So it does
// not explain a nothing_to_claim after that.
func TestLeaseModelCountsAClaimOfUnknownOutcomeOnlyWhileItsLeaseCanLive(t *testing.T) {
	one := make(mState, 1)
	killed := &raceOp{W: "k", Op: "claim", DurUS: 50, Call: 0, Ret: 10, Kind: "killed"}
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, one, killed, nothingToClaim("b", 1000, 1010)))
	require.Equal(t, porcupine.Illegal, checkSplitJobs(fifo, one, killed, nothingToClaim("b", 1000, 1010)).Result, "the checker")
	// While it may still hold the job, nothing to claim is right.
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, one, killed, nothingToClaim("b", 40, 50)))
	require.Equal(t, porcupine.Ok, checkSplitJobs(fifo, one, killed, nothingToClaim("b", 40, 50)).Result, "the checker")
}

// checkBothWays checks ops with the whole model and with the race's checker
// from the initial jobs init ("j0", "j1", ...) and the jobs the history
// requests, under backoff b; it returns both verdicts.
func checkBothWays(window int, init mState, b raceBackoff, ops ...*raceOp) (porcupine.CheckResult, porcupine.CheckResult) {
	idx := map[string]int{}
	names := jobNames(len(init))
	for i, id := range names {
		idx[id] = i
	}
	all := append(mState{}, init...)
	mark := markSkew(ops)
	for _, o := range ops {
		if isClaim(o.Op) && o.Lease == "" {
			o.Lease = o.W
		}
		if _, ok := idx[o.RJob]; o.Op == "request" && !ok {
			idx[o.RJob] = len(all)
			j := requestedJob(o, mark)
			j.st = jAbsent
			all = append(all, j)
		}
	}
	var h []porcupine.Operation
	for i, o := range splitCompleteNext(ops) {
		h = append(h, porcupine.Operation{ClientId: i, Input: o, Call: o.Call, Return: o.Ret})
	}
	m := leaseModel(all, leaseRules{idx: idx, window: window, maxAttempts: raceMaxAttempts, backoff: b, mark: mark})
	whole := porcupine.CheckOperationsTimeout(m.ToModel(), h, 10*time.Second)
	k := keptHistory{Window: window, MaxAttempts: raceMaxAttempts, Backoff: b, Order: names, Ops: ops}
	for _, j := range init {
		k.Jobs = append(k.Jobs, keptJob{Priority: j.prio, ClaimableUS: j.olo})
	}
	return whole, checkRaceHistory(k, time.Minute).Result
}

// requireBoth: the whole model and the checker both give want.
func requireBoth(t *testing.T, want porcupine.CheckResult, init mState, b raceBackoff, what string, ops ...*raceOp) {
	t.Helper()
	whole, split := checkBothWays(fifo, init, b, ops...)
	require.Equal(t, want, whole, "%s: the whole model", what)
	require.Equal(t, want, split, "%s: the checker", what)
}

func requestOp(w, job string, call, ret int64, prio int, delay, runAt int64) *raceOp {
	return &raceOp{W: w, Op: "request", Call: call, Ret: ret, Kind: "ok", RJob: job, Prio: prio, DurUS: delay, RunAt: runAt}
}

func coordOp(w, op, job string, call, ret int64, kind string) *raceOp {
	return &raceOp{W: w, Op: op, Job: job, Call: call, Ret: ret, Kind: kind}
}

// A job requested in the history is claimable from its sample plus its
// delay, or from its run-at, never before; and it is claimed before jobs
// of lower priority once it is.
func TestLeaseModelMakesARequestedJobClaimableFromItsDelayOrRunAtAndByItsPriority(t *testing.T) {
	none := mState{}
	requireBoth(t, porcupine.Ok, none, raceBackoff{}, "claimed after its delay",
		requestOp("c", "r0", 0, 10, 0, 100, 0), claimOp("a", "r0", 200, 210, 205, 50))
	requireBoth(t, porcupine.Illegal, none, raceBackoff{}, "claimed before its delay",
		requestOp("c", "r0", 0, 10, 0, 100, 0), claimOp("a", "r0", 50, 60, 55, 50))
	requireBoth(t, porcupine.Ok, none, raceBackoff{}, "claimed after its run-at",
		requestOp("c", "r0", 0, 10, 0, 0, 500), claimOp("a", "r0", 600, 610, 605, 50))
	requireBoth(t, porcupine.Illegal, none, raceBackoff{}, "claimed before its run-at",
		requestOp("c", "r0", 0, 10, 0, 0, 500), claimOp("a", "r0", 400, 410, 405, 50))
	requireBoth(t, porcupine.Illegal, none, raceBackoff{}, "claimed before it was requested",
		claimOp("a", "r0", 0, 10, 5, 50), requestOp("c", "r0", 20, 30, 0, 0, 0))
	requireBoth(t, porcupine.Ok, none, raceBackoff{}, "nothing to claim before its delay",
		requestOp("c", "r0", 0, 10, 0, 100, 0), nothingToClaim("a", 50, 60))
	requireBoth(t, porcupine.Illegal, none, raceBackoff{}, "nothing to claim after its delay",
		requestOp("c", "r0", 0, 10, 0, 100, 0), nothingToClaim("a", 200, 210))
	one := make(mState, 1)
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "the higher priority first",
		requestOp("c", "r0", 0, 10, 2, 0, 0), claimOp("a", "r0", 50, 60, 55, 50), claimOp("b", "j0", 70, 80, 75, 50))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "the lower priority while a higher one is claimable",
		requestOp("c", "r0", 0, 10, 2, 0, 0), claimOp("b", "j0", 70, 80, 75, 50))
	// A request of unknown outcome whose job exists happened by its return.
	killed := requestOp("c", "r0", 100, 110, 0, 0, 0)
	killed.Kind = "killed"
	requireBoth(t, porcupine.Ok, none, raceBackoff{}, "a killed request", killed, claimOp("a", "r0", 150, 160, 155, 50))
	requireBoth(t, porcupine.Illegal, none, raceBackoff{}, "a killed request's job claimed before its call",
		killed, claimOp("a", "r0", 50, 60, 55, 50))
}

// A retry puts the job back after its delay or, without one, after the
// backoff of the attempt; a lapsed claim waits its backoff too.
func TestLeaseModelPutsARetriedJobBackAfterItsDelayOrBackoff(t *testing.T) {
	one := make(mState, 1)
	retry := func(delay int64) *raceOp {
		o := endOp("a", "fail_retry", "j0", 20, 30, "ok")
		o.DurUS = delay
		return o
	}
	for _, c := range []struct {
		name  string
		b     raceBackoff
		delay int64
	}{{"a delay", raceBackoff{}, 1000}, {"the backoff", raceBackoff{BaseUS: 1000, CapUS: 5000}, 0}} {
		requireBoth(t, porcupine.Ok, one, c.b, c.name+": claimed after it",
			claimOp("a", "j0", 0, 10, 5, 500), retry(c.delay), claimOp("b", "j0", 1100, 1110, 1105, 50))
		requireBoth(t, porcupine.Illegal, one, c.b, c.name+": claimed before it",
			claimOp("a", "j0", 0, 10, 5, 500), retry(c.delay), claimOp("b", "j0", 500, 510, 505, 50))
		requireBoth(t, porcupine.Ok, one, c.b, c.name+": nothing to claim while it waits",
			claimOp("a", "j0", 0, 10, 5, 500), retry(c.delay), nothingToClaim("b", 500, 510))
		// (The checker bounds a backoff by the last attempt's: 4 000.)
		requireBoth(t, porcupine.Illegal, one, c.b, c.name+": nothing to claim after it",
			claimOp("a", "j0", 0, 10, 5, 500), retry(c.delay), nothingToClaim("b", 6000, 6010))
	}
	b := raceBackoff{BaseUS: 1000, CapUS: 5000}
	requireBoth(t, porcupine.Illegal, one, b, "a lapsed claim taken before its backoff",
		claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j0", 500, 510, 505, 50))
	requireBoth(t, porcupine.Ok, one, b, "a lapsed claim taken after its backoff",
		claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j0", 1200, 1210, 1205, 50))
}

// A cancel ends a requested or held job for good (until a redrive): its
// lease is told cancelled, nobody claims it; a finished job cannot be
// cancelled.
func TestLeaseModelCancelsARequestedOrHeldJobAndTellsItsHolder(t *testing.T) {
	one := make(mState, 1)
	claim := claimOp("a", "j0", 0, 10, 5, 500)
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "the holder told cancelled",
		claim, coordOp("c", "cancel", "j0", 20, 30, "ok"), complete("a", "j0", 40, 50, "cancelled"), nothingToClaim("b", 60, 70))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a completion after the cancel",
		claim, coordOp("c", "cancel", "j0", 20, 30, "ok"), complete("a", "j0", 40, 50, "ok"))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "cancelled without a cancel",
		claim, complete("a", "j0", 40, 50, "cancelled"))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a cancelled job claimed",
		coordOp("c", "cancel", "j0", 0, 10, "ok"), claimOp("b", "j0", 20, 30, 25, 50))
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a completed job's cancel refused",
		claim, complete("a", "j0", 20, 30, "ok"), coordOp("c", "cancel", "j0", 40, 50, "wrong_state"))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a completed job cancelled",
		claim, complete("a", "j0", 20, 30, "ok"), coordOp("c", "cancel", "j0", 40, 50, "ok"))
}

// A retry_job or a redrive returns only a failed, dead or cancelled job,
// claimable at once with fresh attempts; the lease it had is lost.
func TestLeaseModelRedrivesOnlyAFailedDeadOrCancelledJobWithFreshAttempts(t *testing.T) {
	one := make(mState, 1)
	failed := []*raceOp{claimOp("a", "j0", 0, 10, 5, 500), endOp("a", "fail", "j0", 20, 30, "ok")}
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a failed job retried and claimed",
		append(failed, coordOp("c", "retry_job", "j0", 40, 50, "ok"), claimOp("b", "j0", 60, 70, 65, 50))...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a failed job claimed without a retry",
		append(failed, claimOp("b", "j0", 60, 70, 65, 50))...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a requested job retried",
		coordOp("c", "retry_job", "j0", 40, 50, "ok"))
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a requested job's retry refused",
		coordOp("c", "retry_job", "j0", 40, 50, "wrong_state"))
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "the old lease lost after a retry",
		append(failed, coordOp("c", "retry_job", "j0", 40, 50, "ok"), complete("a", "j0", 60, 70, "lease_lost"))...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "the old lease in the wrong state after a retry",
		append(failed, coordOp("c", "retry_job", "j0", 40, 50, "ok"), complete("a", "j0", 60, 70, "wrong_state"))...)
	// Fresh attempts: a dead job redriven gets all of them again.
	var dead []*raceOp
	for i := int64(0); i < raceMaxAttempts; i++ {
		w := fmt.Sprintf("w%d", i)
		dead = append(dead, claimOp(w, "j0", 100*i, 100*i+10, 100*i+5, 50), release(w, "j0", 100*i+20, 100*i+30))
	}
	again := append([]*raceOp{}, dead...)
	again = append(again, &raceOp{W: "c", Op: "redrive", State: "dead", Call: 1000, Ret: 1010, Kind: "ok"})
	for i := int64(0); i < raceMaxAttempts; i++ {
		w := fmt.Sprintf("x%d", i)
		again = append(again, claimOp(w, "j0", 2000+100*i, 2000+100*i+10, 2000+100*i+5, 50), release(w, "j0", 2000+100*i+20, 2000+100*i+30))
	}
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a dead job redriven claimed max_attempts times", again...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a dead job claimed without a redrive",
		append(dead, claimOp("b", "j0", 2000, 2010, 2005, 50))...)
	// A lapsed last attempt is dead once a claim notices it: a redrive of
	// the dead jobs may return it.
	lapsed := append(append([]*raceOp{}, dead[:2*raceMaxAttempts-1]...),
		&raceOp{W: "c", Op: "redrive", State: "dead", Call: 1000, Ret: 1010, Kind: "ok"}, claimOp("b", "j0", 2000, 2010, 2005, 50))
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a lapsed last attempt redriven", lapsed...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a lapsed last attempt claimed without a redrive",
		append(append([]*raceOp{}, dead[:2*raceMaxAttempts-1]...), claimOp("b", "j0", 2000, 2010, 2005, 50))...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a redrive of failed jobs returning a dead one",
		append(dead, &raceOp{W: "c", Op: "redrive", State: "failed", Call: 1000, Ret: 1010, Kind: "ok"},
			claimOp("b", "j0", 2000, 2010, 2005, 50))...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a redrive returning a completed job",
		claimOp("a", "j0", 0, 10, 5, 500), complete("a", "j0", 20, 30, "ok"),
		&raceOp{W: "c", Op: "redrive", State: "failed", Call: 40, Ret: 50, Kind: "ok"}, claimOp("b", "j0", 60, 70, 65, 50))
}

// skewed is o on a worker whose authority clock runs skew µs ahead of the
// wall clock of the history (behind when negative).
func skewed(o *raceOp, skew int64) *raceOp {
	o.Skew = skew
	return o
}

// Under a clock fault a call's samples lie in its window on its own
// worker's clock: a claim 50 µs behind returns an expiry the wall clock
// would call too early; a request sampled a long way ahead is not ready
// until its clock's time; and a claim of the next job never fails because
// of a job it may not take yet (it takes another, or finds nothing).
func TestLeaseModelReadsEachCallsSamplesOnItsWorkersClock(t *testing.T) {
	one := make(mState, 1)
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a claim on a clock behind",
		skewed(claimOp("a", "j0", 100, 110, 55, 100), -50))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "the same claim on the wall clock",
		claimOp("a", "j0", 100, 110, 55, 100))
	ahead := skewed(requestOp("c", "r0", 0, 10, 5, 0, 0), 1000000)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a job sampled ahead claimed before its clock's time",
		ahead, claimOp("a", "r0", 500, 510, 505, 50))
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "a job sampled ahead passed over",
		ahead, claimOp("a", "j0", 500, 510, 505, 50))
	requireBoth(t, porcupine.Ok, mState{}, raceBackoff{}, "nothing to claim but a job sampled ahead",
		ahead, nothingToClaim("a", 500, 510))
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a claim refused because of a job sampled ahead",
		ahead, &raceOp{W: "a", Op: "claim", DurUS: 50, Call: 500, Ret: 510, Kind: "wrong_state"})
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "a waiting claim refused because of a job sampled ahead",
		ahead, &raceOp{W: "a", Op: "claim_wait", DurUS: 50, Call: 500, Ret: 510, Kind: "wrong_state"})
}

// A coordinator's write to a job (cancel, retry_job, redrive) acts no
// earlier than the job's last change, so a job's own times never run
// backwards: a job requested on a clock far ahead, then cancelled and
// retried on the wall clock, is claimable from the retry's recorded time —
// its request's, far ahead — and not at the retry's sample.
func TestLeaseModelMakesARetriedJobClaimableNoEarlierThanItsLastChange(t *testing.T) {
	const ahead = 1000000
	retried := func(how *raceOp) []*raceOp {
		return []*raceOp{skewed(requestOp("c", "r0", 0, 10, 5, 0, 0), ahead),
			coordOp("c", "cancel", "r0", 20, 30, "ok"), how}
	}
	retry := func() *raceOp { return coordOp("c", "retry_job", "r0", 40, 50, "ok") }
	redrive := func() *raceOp {
		return &raceOp{W: "c", Op: "redrive", State: "cancelled", Call: 40, Ret: 50, Kind: "ok"}
	}
	for _, c := range []struct {
		name string
		how  func() *raceOp
	}{{"retry_job", retry}, {"a redrive", redrive}} {
		requireBoth(t, porcupine.Ok, mState{}, raceBackoff{}, c.name+": claimed at its request's time",
			append(retried(c.how()), claimOp("a", "r0", ahead+100, ahead+110, ahead+105, 50))...)
		requireBoth(t, porcupine.Ok, mState{}, raceBackoff{}, c.name+": nothing to claim before its request's time",
			append(retried(c.how()), nothingToClaim("a", 500, 510))...)
		requireBoth(t, porcupine.Ok, make(mState, 1), raceBackoff{}, c.name+": passed over before its request's time",
			append(retried(c.how()), claimOp("a", "j0", 500, 510, 505, 50))...)
		requireBoth(t, porcupine.Illegal, mState{}, raceBackoff{}, c.name+": claimed before the job's last change",
			append(retried(c.how()), claimOp("a", "r0", 500, 510, 505, 50))...)
	}
	// (A redrive may not have reached the job: only a retry_job surely
	// returns it.)
	requireBoth(t, porcupine.Illegal, mState{}, raceBackoff{}, "retry_job: nothing to claim after its request's time",
		append(retried(retry()), nothingToClaim("a", ahead+100, ahead+110))...)
}

// A lapsed last attempt dies when a claim notices it, and that claim's
// clock may run ahead of the coordinator's (a guarded call's clock ahead
// moves the mark, markSkew): a retry on the wall clock may find the job
// dead before the lapse's time on the wall clock, but not before the
// lapse's time less the most any guarded clock ran ahead.
func TestLeaseModelLetsARetryFindALapsedLastAttemptDeadOnAClockAheadOfIt(t *testing.T) {
	one := make(mState, 1)
	lapsed := func(retry *raceOp) []*raceOp {
		return []*raceOp{
			claimOp("w0", "j0", 0, 10, 5, 100), release("w0", "j0", 20, 30),
			claimOp("w1", "j0", 40, 50, 45, 100), release("w1", "j0", 60, 70),
			claimOp("w2", "j0", 80, 90, 85, 100), // the last attempt, until 185
			// Its holder, on a clock 30 µs ahead, hears it expired.
			skewed(complete("w2", "j0", 150, 160, "expired"), 30),
			retry, claimOp("w3", "j0", 300, 310, 305, 50)}
	}
	requireBoth(t, porcupine.Ok, one, raceBackoff{}, "found dead by a claim on a clock ahead",
		lapsed(coordOp("c", "retry_job", "j0", 170, 175, "ok"))...)
	requireBoth(t, porcupine.Illegal, one, raceBackoff{}, "found dead before any clock reached the lapse",
		lapsed(coordOp("c", "retry_job", "j0", 100, 110, "ok"))...)
}

// A job cancelled before its run-at and then redriven (or retried) is
// claimable from the redrive, so it comes before a job that became
// claimable later, though its run-at was later still. The checker once
// kept the run-at as the least claimable time and rejected the store's
// (right) choice of the redriven job.
func TestLeaseModelAndCheckerMakeARedrivenJobClaimableFromItsRedriveEvenBeforeItsRunAt(t *testing.T) {
	init := mState{runAt(0, 500), runAt(0, 50)} // j0 due at 500, j1 at 50
	cancel := coordOp("c", "cancel", "j0", 10, 20, "ok")
	redrive := &raceOp{W: "c", Op: "redrive", State: "cancelled", Call: 30, Ret: 40, Kind: "ok"}
	retry := coordOp("c", "retry_job", "j0", 30, 40, "ok")
	for _, back := range []*raceOp{redrive, retry} {
		requireBoth(t, porcupine.Ok, init, raceBackoff{}, back.Op+": the job back first takes its place from it",
			cancel, back, claimOp("a", "j0", 100, 110, 105, 50))
	}
	// (A redrive of every cancelled job may have missed one, in the model.)
	requireBoth(t, porcupine.Illegal, init, raceBackoff{}, "a claim passing over the job retried",
		cancel, retry, claimOp("a", "j1", 100, 110, 105, 50))
	requireBoth(t, porcupine.Illegal, init, raceBackoff{}, "a cancelled job never back is not claimed",
		cancel, claimOp("a", "j0", 100, 110, 105, 50))
}
