package reliability

// The lease model must reject the histories a broken authority would
// produce; otherwise a passing race proves nothing.

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func checkModel(ops ...*raceOp) porcupine.CheckResult { return checkModelOf(fifo, ops...) }

func checkModelOf(window int, ops ...*raceOp) porcupine.CheckResult {
	idx := map[string]int{"j0": 0, "j1": 1}
	var h []porcupine.Operation
	for i, o := range splitCompleteNext(ops) {
		if o.Op == "claim" && o.Lease == "" {
			o.Lease = o.W
		}
		h = append(h, porcupine.Operation{ClientId: i, Input: o, Call: o.Call, Return: o.Ret})
	}
	m := leaseModel(idx, 2, window)
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
