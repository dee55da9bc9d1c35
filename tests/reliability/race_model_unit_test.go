package reliability

// The lease model must reject the histories a broken authority would
// produce; otherwise a passing race proves nothing.

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/libleases/libleases/core"
	"github.com/stretchr/testify/require"
)

func checkModel(ops ...*raceOp) porcupine.CheckResult { return checkModelOf(fifo, ops...) }

func checkModelOf(window int, ops ...*raceOp) porcupine.CheckResult {
	return checkJobsOf(window, make(mState, 2), ops...)
}

// checkJobsOf checks ops against the model from the initial jobs init
// ("j0", "j1", ... in request order).
func checkJobsOf(window int, init mState, ops ...*raceOp) porcupine.CheckResult {
	idx := map[string]int{}
	for i := range init {
		idx[fmt.Sprintf("j%d", i)] = i
	}
	var h []porcupine.Operation
	for i, o := range ops {
		if o.Op == "claim" && o.Lease == "" {
			o.Lease = o.W
		}
		h = append(h, porcupine.Operation{ClientId: i, Input: o, Call: o.Call, Return: o.Ret})
	}
	m := leaseModel(init, idx, window)
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

func TestLeaseModelNeverLetsAnExpiredLastAttemptBeClaimedAgain(t *testing.T) {
	one := mState{{att: raceMaxAttempts - 1}}
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, one,
		claimOp("a", "j0", 0, 10, 5, 50), claimOp("b", "j0", 100, 110, 105, 50)))
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, one, claimOp("a", "j0", 0, 10, 5, 50),
		&raceOp{W: "b", Op: "claim", DurUS: 50, Call: 100, Ret: 110, Kind: "nothing_to_claim"},
		endOp("a", "complete", "j0", 120, 130, "lease_lost"))) // its lapse was noticed
}

func TestLeaseModelServesPriorityFirstAndARetryAfterWaitingJobs(t *testing.T) {
	jobs := mState{{}, {prio: 1}}
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, jobs, claimOp("a", "j0", 0, 10, 5, 50)))
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, jobs, claimOp("a", "j1", 0, 10, 5, 50)))
	// A retried job goes behind one whose claimable time is earlier.
	same := make(mState, 2)
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, same, claimOp("a", "j0", 0, 10, 5, 500),
		endOp("a", "fail_retry", "j0", 20, 30, "ok"), claimOp("b", "j0", 40, 50, 45, 500)))
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, same, claimOp("a", "j0", 0, 10, 5, 500),
		endOp("a", "fail_retry", "j0", 20, 30, "ok"), claimOp("b", "j1", 40, 50, 45, 500), claimOp("c", "j0", 60, 70, 65, 500)))
}

func TestLeaseModelHonoursARunAt(t *testing.T) {
	delayed := mState{{lo: 100, hi: 100, olo: 100, ohi: 100}, {lo: 200, hi: 200, olo: 200, ohi: 200}}
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, delayed, claimOp("a", "j0", 0, 10, 5, 50)))
	require.Equal(t, porcupine.Ok, checkJobsOf(fifo, delayed, claimOp("a", "j0", 100, 110, 105, 50)))
	require.Equal(t, porcupine.Illegal, checkJobsOf(fifo, delayed,
		&raceOp{W: "a", Op: "claim", DurUS: 50, Call: 150, Ret: 160, Kind: "nothing_to_claim"}))
}

func job(id string, prio int, claimableUS int64) core.Job {
	return core.Job{ID: id, Priority: prio, ClaimableAt: time.UnixMicro(claimableUS)}
}

func TestClaimOrderCheckRefusesPassingOverAnUntouchedEarlierJob(t *testing.T) {
	jobs := []core.Job{job("j0", 0, 0), job("j1", 0, 0), job("j2", 1, 50)}
	// j2 (priority 1) is not claimable before 50: j0 must come first at 5.
	require.Error(t, checkClaimOrder([]*raceOp{claimOp("a", "j1", 0, 10, 5, 100)}, jobs, fifo))
	require.NoError(t, checkClaimOrder([]*raceOp{claimOp("a", "j0", 0, 10, 5, 100)}, jobs, fifo))
	require.Error(t, checkClaimOrder([]*raceOp{claimOp("a", "j0", 60, 70, 65, 100)}, jobs, fifo), "priority first once due")
	require.NoError(t, checkClaimOrder([]*raceOp{claimOp("a", "j1", 0, 10, 5, 100)}, jobs, 2), "within the window")
	// A claim of unknown outcome may have taken j0.
	require.NoError(t, checkClaimOrder([]*raceOp{{W: "k", Op: "claim", DurUS: 100, Call: 0, Ret: math.MaxInt64},
		claimOp("a", "j1", 1, 10, 5, 100)}, jobs, fifo))
	require.Error(t, checkClaimOrder([]*raceOp{{W: "b", Op: "claim", DurUS: 100, Call: 0, Ret: 10, Kind: "nothing_to_claim"}}, jobs, fifo))
}

func TestPartitionByJobGivesEveryJobItsOperationsAndEveryUnknownClaim(t *testing.T) {
	ops := []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), endOp("a", "release", "j0", 20, 30, "ok"),
		{W: "k", Op: "claim", DurUS: 100, Call: 40, Ret: math.MaxInt64}, claimOp("b", "j1", 50, 60, 55, 100),
		{W: "c", Op: "claim", DurUS: 100, Call: 70, Ret: 80, Kind: "nothing_to_claim"}}
	var h []porcupine.Operation
	for i, o := range ops {
		h = append(h, porcupine.Operation{ClientId: i, Input: o, Call: o.Call, Return: o.Ret})
	}
	p := partitionByJob(h)
	require.Len(t, p, 2)
	require.Len(t, p["j0"], 3)
	require.Len(t, p["j1"], 2)
}

func TestLeaseModelTakesAClaimBornExpiredAsNoChange(t *testing.T) {
	require.Equal(t, porcupine.Ok, checkModel(
		&raceOp{W: "a", Op: "claim", DurUS: 10, Call: 0, Ret: 100, Kind: "expired"},
		claimOp("b", "j0", 110, 120, 115, 100)))
}
