package reliability

// The race's checker (race_check_test.go) must reject what the whole lease
// model rejects, accept what it accepts, and decide a loaded run's history
// that the whole model could not.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func checkSplitOf(window int, ops ...*raceOp) raceCheck {
	return checkSplitJobs(window, make(mState, 2), ops...)
}

// checkSplitJobs checks ops with the checker from the jobs' states at their
// request, init ("j0", "j1", ... in request order).
func checkSplitJobs(window int, init mState, ops ...*raceOp) raceCheck {
	for _, o := range ops {
		if isClaim(o.Op) && o.Lease == "" {
			o.Lease = o.W
		}
	}
	k := keptHistory{Window: window, MaxAttempts: raceMaxAttempts, Order: jobNames(len(init)), Ops: ops}
	for _, j := range init {
		k.Jobs = append(k.Jobs, keptJob{Priority: j.prio, ClaimableUS: j.olo})
	}
	return checkRaceHistory(k, time.Minute)
}

func waitOp(w, job string, call, ret, t, dur int64) *raceOp {
	o := claimOp(w, job, call, ret, t, dur)
	o.Op = "claim_wait"
	return o
}

func keepAlive(w, job string, call, ret int64) *raceOp {
	return &raceOp{W: w, Lease: w, Op: "keep_alive", Job: job, DurUS: 100, Call: call, Ret: ret, Kind: "ok"}
}

// twoAttempts: j0 claimed twice, each attempt ended without completion.
func twoAttempts() []*raceOp {
	return []*raceOp{claimOp("a", "j0", 0, 10, 5, 50), release("a", "j0", 20, 30),
		claimOp("b", "j0", 100, 110, 105, 50), endOp("b", "fail_retry", "j0", 120, 130, "ok")}
}

// runAt is a job's state at its request when it becomes claimable at t.
func runAt(prio int, t int64) mJob { return mJob{lo: t, hi: t, olo: t, ohi: t, prio: prio} }

func complete(w string, job string, call, ret int64, kind string) *raceOp {
	return &raceOp{W: w, Lease: w, Op: "complete", Job: job, Call: call, Ret: ret, Kind: kind}
}

// completeNext is a complete_next of lease w's job, call n of its worker;
// the lease it claims is labelled "w:n". The claim's duration is 60.
func completeNext(w string, n int, job string, call, ret int64, kind, next string, expiry int64) *raceOp {
	return &raceOp{W: w, N: n, Lease: w, Op: "complete_next", Job: job, DurUS: 60, Call: call, Ret: ret, Kind: kind,
		RJob: next, Expiry: expiry}
}

func release(w string, job string, call, ret int64) *raceOp {
	return &raceOp{W: w, Lease: w, Op: "release", Job: job, Call: call, Ret: ret, Kind: "ok"}
}

func pendingClaim(w string, call, dur int64) *raceOp {
	return &raceOp{W: w, Op: "claim", DurUS: dur, Call: call, Ret: math.MaxInt64}
}

func nothingToClaim(w string, call, ret int64) *raceOp {
	return &raceOp{W: w, Op: "claim", DurUS: 100, Call: call, Ret: ret, Kind: "nothing_to_claim"}
}

// raceCases are small histories with the whole model's verdict under strict
// claim order (fifo) and under the PostgreSQL window, on two jobs requested
// as init says (nil: both priority 0, claimable from 0).
var raceCases = []struct {
	name           string
	fifo, windowed porcupine.CheckResult
	ops            func() []*raceOp
	init           mState
}{
	{"a legal history", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j1", 1, 11, 6, 100),
			complete("a", "j0", 20, 30, "ok"),
			{W: "c", Lease: "c", Op: "claim", DurUS: 50, Call: 200, Ret: 210, Kind: "ok", RJob: "j1", Expiry: 255},
			complete("b", "j1", 220, 230, "lease_lost"), pendingClaim("d", 240, 50)}
	}, nil},
	{"waiting claims that take one job in turn", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{waitOp("a", "j0", 0, 10, 5, 100), release("a", "j0", 20, 30),
			waitOp("b", "j0", 40, 50, 45, 100), complete("b", "j0", 60, 70, "ok")}
	}, nil},
	{"two live owners", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j0", 20, 30, 25, 100)}
	}, nil},
	{"a completion after the expiry", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), complete("a", "j0", 110, 120, "ok")}
	}, nil},
	{"a claim passing over a requested job", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j1", 0, 10, 5, 100)}
	}, nil},
	{"a claim passing over an expired claim", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j1", 200, 210, 205, 100)}
	}, nil},
	{"a claim passing over a job released before it was called", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), release("a", "j0", 20, 30), claimOp("b", "j1", 40, 50, 45, 100)}
	}, nil},
	{"a claim passing over a job released while it ran", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), release("a", "j0", 20, 50), claimOp("b", "j1", 40, 60, 45, 100)}
	}, nil},
	{"a claim passing over a job a killed claim may have taken", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{pendingClaim("k", 0, 1000), claimOp("b", "j1", 40, 60, 45, 100)}
	}, nil},
	{"a lease lost to a killed claim", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), pendingClaim("k", 20, 1000), complete("a", "j0", 200, 210, "lease_lost")}
	}, nil},
	{"a lease lost to a killed claim that returned before its expiry", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), {W: "k", Op: "claim", DurUS: 50, Call: 20, Ret: 30, Kind: "killed"},
			complete("a", "j0", 40, 50, "lease_lost")}
	}, nil},
	{"nothing to claim long after a killed claim's lease ended", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100000), {W: "k", Op: "claim", DurUS: 50, Call: 20, Ret: 30, Kind: "killed"},
			nothingToClaim("b", 1000, 1010)}
	}, nil},
	{"a killed claim cannot take a finished job", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), complete("a", "j0", 20, 30, "ok"),
			pendingClaim("k", 40, 1000), complete("k", "j0", 2000, 2010, "ok")}
	}, nil},
	{"nothing to claim while a job is requested", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), nothingToClaim("b", 20, 30)}
	}, nil},
	{"nothing to claim while every job is held", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j1", 0, 10, 6, 100), nothingToClaim("c", 20, 30)}
	}, nil},
	{"an expired verdict before the expiry", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100),
			{W: "a", Lease: "a", Op: "renew", Job: "j0", DurUS: 100, Call: 20, Ret: 30, Kind: "expired"}}
	}, nil},
	{"a killed completion that happened", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), complete("a", "j0", 20, math.MaxInt64, ""),
			claimOp("b", "j1", 300, 310, 305, 50)}
	}, nil},
	{"a killed completion that did not happen", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), complete("a", "j0", 20, math.MaxInt64, ""),
			claimOp("b", "j0", 300, 310, 305, 50)}
	}, nil},
	{"a claim born expired", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{{W: "a", Op: "claim", DurUS: 50, Call: 0, Ret: 50, Kind: "expired"}, claimOp("b", "j0", 60, 70, 65, 100)}
	}, nil},
	{"a claim born expired before its duration", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{{W: "a", Op: "claim", DurUS: 50, Call: 0, Ret: 49, Kind: "expired"}}
	}, nil},
	{"a complete_next completing and claiming the next job", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, 30, "ok", "j1", 85),
			complete("a:1", "j1", 40, 50, "ok")}
	}, nil},
	{"a complete_next claiming a job it may not take", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j1", 0, 10, 6, 100),
			completeNext("a", 1, "j0", 20, 30, "ok", "j1", 85)}
	}, nil},
	{"a complete_next finding nothing while a job is requested", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, 30, "ok", "", 0)}
	}, nil},
	{"a refused complete_next claims nothing", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), claimOp("b", "j1", 0, 10, 6, 100),
			completeNext("b", 1, "j1", 200, 210, "expired", "", 0), complete("a", "j0", 40, 50, "ok")}
	}, nil},
	{"a complete_next whose claim was born expired", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, 80, "invalid_duration", "", 0),
			complete("a", "j0", 85, 90, "ok")}
	}, nil},
	{"a complete_next whose claim was born expired before its duration", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, 40, "invalid_duration", "", 0)}
	}, nil},
	{"a complete_next calling a lease expired while it held", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, 80, "expired", "", 0)}
	}, nil},
	{"a complete_next expired before either claim could", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, 40, "expired", "", 0)}
	}, nil},
	{"a killed complete_next that happened", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, math.MaxInt64, "", "", 0),
			claimOp("b", "j1", 1000, 1010, 1005, 50)}
	}, nil},
	{"a killed complete_next that did not happen", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), completeNext("a", 1, "j0", 20, math.MaxInt64, "", "", 0),
			complete("a", "j0", 40, 50, "ok")}
	}, nil},
	{"a claim passing over a job of higher priority", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100)}
	}, mState{runAt(0, 0), runAt(1, 0)}},
	{"the higher priority first, though requested later", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j1", 0, 10, 5, 100), claimOp("b", "j0", 20, 30, 25, 100)}
	}, mState{runAt(0, 0), runAt(1, 0)}},
	{"a claim before the job's run-at", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100)}
	}, mState{runAt(0, 100), runAt(0, 0)}},
	{"a claim passing over a higher priority not yet due", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j1", 0, 10, 5, 100)}
	}, mState{runAt(1, 100), runAt(0, 0)}},
	{"a claim passing over a higher priority that came due", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j1", 140, 160, 150, 100)}
	}, mState{runAt(1, 100), runAt(0, 0)}},
	{"the earlier claimable time first, though requested later", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j1", 200, 210, 205, 100)}
	}, mState{runAt(0, 100), runAt(0, 50)}},
	{"a retried job served before one that waited longer", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 500), endOp("a", "fail_retry", "j0", 20, 30, "ok"),
			claimOp("b", "j0", 40, 50, 45, 500)}
	}, nil},
	{"a retried job served after the one that waited", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 500), endOp("a", "fail_retry", "j0", 20, 30, "ok"),
			claimOp("b", "j1", 40, 50, 45, 500), claimOp("c", "j0", 60, 70, 65, 500)}
	}, nil},
	{"a released job keeps its place", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 500), release("a", "j0", 20, 30),
			claimOp("b", "j0", 40, 50, 45, 500)}
	}, nil},
	{"a claim of a dead job", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return append(twoAttempts(), claimOp("c", "j0", 200, 210, 205, 50), release("c", "j0", 220, 230),
			claimOp("d", "j0", 300, 310, 305, 50))
	}, mState{runAt(1, 0), runAt(0, 0)}},
	{"an expired last attempt claimed again", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return append(twoAttempts(), claimOp("c", "j0", 200, 210, 205, 50), claimOp("d", "j0", 300, 310, 305, 50))
	}, mState{runAt(1, 0), runAt(0, 0)}},
	{"nothing to claim while a lapsed claim is claimable", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 50), claimOp("e", "j1", 0, 10, 6, 1000), nothingToClaim("d", 300, 310)}
	}, mState{runAt(1, 0), runAt(0, 0)}},
	{"a waiting claim skipping the queue", porcupine.Illegal, porcupine.Ok, func() []*raceOp {
		return []*raceOp{waitOp("a", "j1", 0, 500, 400, 100)}
	}, nil},
	{"waiting claims in line", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{waitOp("a", "j0", 0, 500, 400, 100), waitOp("b", "j1", 0, 600, 450, 100)}
	}, nil},
	{"a kept-alive claim passed over after its first expiry", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), keepAlive("a", "j0", 20, 21), claimOp("b", "j1", 200, 210, 205, 100)}
	}, nil},
	{"a kept-alive claim taken before its known expiry", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{claimOp("a", "j0", 0, 10, 5, 100), keepAlive("a", "j0", 20, 21), claimOp("b", "j0", 50, 60, 55, 100)}
	}, nil},
	{"nothing to claim after a killed claim may have used an attempt", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{pendingClaim("k", 0, 50), claimOp("e", "j1", 0, 10, 6, 10000),
			claimOp("a", "j0", 100, 110, 105, 50), release("a", "j0", 120, 130),
			claimOp("b", "j0", 200, 210, 205, 50), release("b", "j0", 220, 230), nothingToClaim("c", 300, 310)}
	}, mState{runAt(1, 0), runAt(0, 0)}},
	{"nothing to claim while a job is dead or held", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return append(twoAttempts(), claimOp("c", "j0", 200, 210, 205, 50), claimOp("e", "j1", 200, 210, 206, 1000),
			nothingToClaim("d", 300, 310), complete("c", "j0", 320, 330, "lease_lost"))
	}, mState{runAt(1, 0), runAt(0, 0)}},
	// A waiting claim is a claim: it belongs to the partition of the job it
	// took, and its verdicts count in the claim order.
	{"a waiting claim and its completion", porcupine.Ok, porcupine.Ok, func() []*raceOp {
		return []*raceOp{waitOp("a", "j0", 0, 10, 5, 100), complete("a", "j0", 20, 30, "ok"),
			waitOp("b", "j1", 40, 50, 45, 100), release("b", "j1", 60, 70)}
	}, nil},
	{"two live owners by waiting claims", porcupine.Illegal, porcupine.Illegal, func() []*raceOp {
		return []*raceOp{waitOp("a", "j0", 0, 10, 5, 100), waitOp("b", "j0", 20, 30, 25, 100)}
	}, nil},
}

func TestRaceCheckerAgreesWithTheWholeModelOnSmallHistories(t *testing.T) {
	for _, c := range raceCases {
		for _, w := range []struct {
			window int
			want   porcupine.CheckResult
		}{{fifo, c.fifo}, {2, c.windowed}} {
			init := c.init
			if init == nil {
				init = make(mState, 2)
			}
			require.Equal(t, w.want, checkJobsOf(w.window, init, c.ops()...), "%s, window %d: the whole model", c.name, w.window)
			require.Equal(t, w.want, checkSplitJobs(w.window, init, c.ops()...).Result, "%s, window %d: the checker", c.name, w.window)
		}
	}
}

// Killed claims are concurrent only up to their worker's end, so a job
// whose partition holds dozens of them is still decided, Illegal included
// (proving Illegal exhausts every order of them). Seven at a time overlap,
// as the race's six workers and one restarted one can.
func TestRaceCheckerDecidesAJobAmongManyKilledClaims(t *testing.T) {
	var ops []*raceOp
	for i := 0; i < 42; i++ {
		call := int64(i/7) * 1000
		ops = append(ops, &raceOp{W: fmt.Sprintf("k%d", i), Op: "claim", DurUS: 100, Call: call + int64(i%7), Ret: call + 500, Kind: "killed"})
	}
	end := int64(7000)
	require.Equal(t, porcupine.Ok, checkSplitOf(skipLockedWindow, append(ops, claimOp("a", "j0", end, end+10, end+5, 100))...).Result)
	twoOwners := append(ops, claimOp("a", "j0", end, end+10, end+5, 100), claimOp("b", "j0", end+20, end+30, end+25, 100))
	require.Equal(t, porcupine.Illegal, checkSplitOf(skipLockedWindow, twoOwners...).Result)
}

// A round of the PostgreSQL race on a loaded machine (two races at once):
// 1 218 operations, three claims killed mid-call at the end, two claims
// born expired. The whole model ran out of 5 minutes on it.
const loadedRaceFixture = "testdata/race-postgres-loaded.json.gz"

func TestRaceCheckerDecidesAHistoryTheWholeModelCouldNot(t *testing.T) {
	k, err := loadKeptHistory(loadedRaceFixture)
	require.NoError(t, err)
	c := checkRaceHistory(k, time.Minute)
	require.Equal(t, porcupine.Ok, c.Result, "%v", c.Order)
	require.Less(t, c.MaxPassed, k.Window)
}

// The same history with a violation planted, each decided Illegal.
func TestRaceCheckerFindsAViolationPlantedInALoadedHistory(t *testing.T) {
	// moveLease makes the lease of claim b claim (and work on) job instead.
	moveLease := func(k keptHistory, b *raceOp, job string) {
		for _, o := range k.Ops {
			if o.Lease == b.Lease {
				if isClaim(o.Op) {
					o.RJob = job
				} else {
					o.Job = job
				}
			}
		}
	}
	t.Run("a second owner", func(t *testing.T) {
		k, err := loadKeptHistory(loadedRaceFixture)
		require.NoError(t, err)
		// a claimed a job and completed it later; b claimed another job in
		// between, at a sample before a's expiry: give b a's job.
		for _, a := range k.Ops {
			done := finishedBy(k, a)
			if done == nil {
				continue
			}
			for _, b := range k.Ops {
				if b.Op == "claim" && b.Kind == "ok" && b.W != a.W && b.Call > a.Ret && b.Ret < done.Call && b.Expiry-b.DurUS < a.Expiry {
					moveLease(k, b, a.RJob)
					c := checkRaceHistory(k, time.Minute)
					require.Equal(t, porcupine.Illegal, c.Result)
					require.NoError(t, c.Order, "caught by the job's partition")
					return
				}
			}
		}
		t.Fatal("the fixture has no claim to plant a second owner with")
	})
	t.Run("a claim far out of order", func(t *testing.T) {
		k, err := loadKeptHistory(loadedRaceFixture)
		require.NoError(t, err)
		last := k.Order[len(k.Order)-1] // never claimed in the fixture
		for _, o := range k.Ops {
			require.False(t, o.RJob == last || o.Job == last)
		}
		for _, b := range k.Ops {
			if finishedBy(k, b) != nil { // a lease that ends well on any job nobody else touches
				moveLease(k, b, last)
				break
			}
		}
		c := checkRaceHistory(k, time.Minute)
		require.Equal(t, porcupine.Illegal, c.Result)
		require.ErrorContains(t, c.Order, "more than the window of 32 allows")
	})
}

// finishedBy is the successful completion of claim a's lease, if any.
func finishedBy(k keptHistory, a *raceOp) *raceOp {
	if a.Op != "claim" || a.Kind != "ok" {
		return nil
	}
	for _, o := range k.Ops {
		if o.Lease == a.Lease && o.Op == "complete" && o.Kind == "ok" {
			return o
		}
	}
	return nil
}

// A failed race keeps history.json in the directory it names:
// LEASES_RACE_REPLAY=that/history.json go test -run TestRaceCheckerReplays
// ./tests/reliability/ checks it again (a visualization goes next to it).
func TestRaceCheckerReplaysAKeptHistory(t *testing.T) {
	path := os.Getenv("LEASES_RACE_REPLAY")
	if path == "" {
		path = loadedRaceFixture
	}
	k, err := loadKeptHistory(path)
	require.NoError(t, err)
	c := checkRaceHistory(k, raceCheckTimeout)
	t.Logf("%s: %d operations: %s (%d partitions, the largest %d operations; at most %d jobs passed, window %d)",
		path, len(k.Ops), c.Result, c.Partitions, c.MaxPartition, c.MaxPassed, k.Window)
	if c.Result != porcupine.Ok && c.Order == nil {
		viz := filepath.Join(filepath.Dir(path), "replay.html")
		if porcupine.VisualizePath(c.Model, c.Info, viz) == nil {
			t.Logf("visualization: %s", viz)
		}
	}
	require.Equal(t, porcupine.Ok, c.Result, "%v", c.Order)
}

// A waiting claim is partitioned by the job it took, like a claim: the job
// is known only at its return (its call line has none), so a checker that
// split by the call's job put every waiting claim into one partition of no
// job and found its lease's completion without a claim (Illegal).
func TestRaceCheckerPartitionsAWaitingClaimByTheJobItTook(t *testing.T) {
	wait := claimOp("a", "j0", 0, 10, 5, 100)
	wait.Op = "claim_wait"
	c := checkSplitOf(1, wait, complete("a", "j0", 20, 30, "ok"), claimOp("b", "j1", 40, 50, 45, 100),
		complete("b", "j1", 60, 70, "ok"))
	require.Equal(t, porcupine.Ok, c.Result, "%v", c.Order)
	require.Equal(t, 2, c.Partitions, "one partition per job")
}
