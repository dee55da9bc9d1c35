// The event log's secondary indexes trail the log (projector.go): every
// listing, count, page, timeline and workers-seen view stays exact
// whatever the projector's progress.
package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// heldStore opens a new file whose projector stands still until the test
// moves it (ProjectTo).
func heldStore(t *testing.T) *DB {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "proj.db"), Options{Synchronous: "NORMAL"}, func() int64 { return 1 })
	require.NoError(t, err)
	s.proj.held.Store(true)
	t.Cleanup(func() { s.Close() })
	return s
}

const projT0 = int64(1_700_000_000_000_000)

// projLog writes jobs of two productions, each in its own transaction as
// the core writes them: requested, claimed, sometimes renewed, then
// completed or failed, by five workers, one second apart; every 11th event
// recorded a clock behind by three minutes (a late event).
func projLog(t *testing.T, s *DB, from, n int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewSource(int64(from)))
	for i := from; i < from+n; i++ {
		for _, pid := range []string{"pid", "pid2"} {
			write(t, s, func(tx store.Tx) {
				if i == 0 {
					require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: pid, Name: pid, CreatedAt: 1}))
				}
				at := projT0 + int64(i)*1_000_000
				w := fmt.Sprintf("w%d", i%5)
				id := fmt.Sprintf("%s-j%03d", pid, i)
				state := store.StateCompleted
				if r.Intn(4) == 0 {
					state = store.StateFailed
				}
				if i%7 == 3 {
					state = store.StateClaimed
				}
				claimedAt := at + 500_000
				require.NoError(t, tx.InsertJob(ctx, store.Job{ID: id, ProductionID: pid, Payload: []byte("x"), State: state,
					Worker: w, ClaimedAt: claimedAt, Expiry: claimedAt + 60_000_000, RequestedAt: at, UpdatedAt: at + 900_000,
					Attempts: 1, ClaimableAt: at, ReadyAt: claimedAt + 60_000_000}))
				kinds := []string{"requested", "claimed"}
				if r.Intn(2) == 0 {
					kinds = append(kinds, "renewed")
				}
				if state != store.StateClaimed {
					kinds = append(kinds, state)
				}
				for k, kind := range kinds {
					e := store.Event{At: at + int64(k)*300_000, ProductionID: pid, JobID: id, Kind: kind}
					if kind == "claimed" {
						e.At = claimedAt
					}
					if kind != "requested" {
						e.Worker = w
					}
					if (i*4+k)%11 == 5 && kind != "claimed" {
						e.At -= 180_000_000
					}
					require.NoError(t, tx.InsertEvent(ctx, e))
				}
			})
		}
	}
}

// refEvents is every event, read by the primary key alone.
func refEvents(t *testing.T, s *DB) []store.Event {
	t.Helper()
	es, err := s.Events(context.Background(), "", 0, 0)
	require.NoError(t, err)
	return es
}

func refPage(all []store.Event, f store.EventFilter) []store.Event {
	out := []store.Event{}
	for _, e := range all {
		if (f.ProductionID != "" && f.JobID == "" && e.ProductionID != f.ProductionID) || (f.JobID != "" && e.JobID != f.JobID) ||
			(f.Kind != "" && e.Kind != f.Kind) || e.Seq <= f.AfterSeq || e.Seq >= f.Before {
			continue
		}
		out = append(out, e)
	}
	if f.Newest {
		slices.Reverse(out)
	}
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

func refBuckets(all []store.Event, pid, kind string, since, width int64) []store.Bucket {
	m := map[int64]int64{}
	for _, e := range all {
		if e.ProductionID == pid && e.Kind == kind && e.At >= since {
			m[e.At/width*width]++
		}
	}
	out := []store.Bucket{}
	for b, n := range m {
		out = append(out, store.Bucket{Start: b, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

func refSeen(all []store.Event, pid string, since int64, limit int) []store.WorkerSeen {
	m := map[string]int64{}
	for _, e := range all {
		if e.ProductionID == pid && slices.Contains(store.WorkerKinds, e.Kind) && e.At > m[e.Worker] {
			m[e.Worker] = e.At
		}
	}
	out := []store.WorkerSeen{}
	for w, at := range m {
		if at >= since {
			out = append(out, store.WorkerSeen{Worker: w, LastSeen: at})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LastSeen != out[j].LastSeen {
			return out[i].LastSeen > out[j].LastSeen
		}
		return out[i].Worker < out[j].Worker
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// views reads every reader of the event log, by reader kind, as JSON: the
// ones with a reference computed from the primary key are checked against
// it here; all are returned so the points of the projection can be compared.
func views(t *testing.T, s *DB, point string) map[string]string {
	t.Helper()
	ctx := context.Background()
	all := refEvents(t, s)
	top := all[len(all)-1].Seq
	out := map[string]string{}
	var tt *testing.T
	js := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(tt, err)
		return string(b)
	}
	reader := func(name string, fn func(t *testing.T) string) {
		t.Run(point+"/"+name, func(t *testing.T) {
			tt = t
			out[name] = fn(t)
		})
	}
	reader("event pages", func(t *testing.T) string {
		// Event pages of every filter, from several starts, both ways.
		var pages []string
		for _, pid := range []string{"pid", "pid2"} {
			for _, f := range []store.EventFilter{{ProductionID: pid}, {ProductionID: pid, Kind: "claimed"},
				{ProductionID: pid, Kind: "completed"}, {JobID: pid + "-j003"}, {JobID: pid + "-j020"},
				{JobID: pid + "-j039", Kind: "claimed"}, {}} {
				for _, after := range []int64{0, top / 3, 2 * top / 3} {
					for _, limit := range []int{7, 1000} {
						for _, newest := range []bool{false, true} {
							f := f
							f.AfterSeq, f.Before, f.Limit, f.Newest = after, top+1, limit, newest
							if newest {
								f.AfterSeq, f.Before = 0, top-after+1
							}
							got, err := s.ListEvents(ctx, f)
							require.NoError(t, err)
							require.Equal(t, refPage(all, f), got, "%+v", f)
							pages = append(pages, js(got))
						}
					}
				}
			}
		}
		return js(pages)
	})
	reader("prune", func(t *testing.T) string {
		// The pruner's reads and deletes of a production's and a job's events.
		var prune []string
		for _, pid := range []string{"pid", "pid2"} {
			for _, after := range []int64{0, top / 2} {
				got, err := s.Events(ctx, pid, after, 9)
				require.NoError(t, err)
				require.Equal(t, refPage(all, store.EventFilter{ProductionID: pid, AfterSeq: after, Before: top + 1, Limit: 9}), got)
				prune = append(prune, js(got))
			}
			ids := []string{pid + "-j001", pid + "-j017", pid + "-j038", pid + "-j039"}
			n, err := s.CountJobEvents(ctx, ids)
			require.NoError(t, err)
			var want int64
			for _, id := range ids {
				want += int64(len(refPage(all, store.EventFilter{JobID: id, Before: top + 1, Limit: 1 << 30})))
			}
			require.Equal(t, want, n, "count of jobs' events")
			tx, err := s.BeginWrite(ctx)
			require.NoError(t, err)
			d, err := tx.DeleteJobEvents(ctx, pid+"-j038", 2)
			require.NoError(t, err)
			require.EqualValues(t, 2, d, "the oldest events of a job, in the tail or not")
			_, dn, err := tx.DeleteJobs(ctx, ids)
			require.NoError(t, err)
			require.Equal(t, want-2, dn, "a job's events are deleted with it, in the tail or not")
			require.NoError(t, tx.Rollback())
			prune = append(prune, js(n))
		}
		return js(prune)
	})
	reader("counts", func(t *testing.T) string {
		// Per-minute counts, in-order and late events, from several times.
		var counts []string
		for _, pid := range []string{"pid", "pid2"} {
			for _, kind := range []string{"claimed", "completed", "renewed", "requested"} {
				for _, since := range []int64{0, projT0 + 10_000_000, projT0 + 31_000_000} {
					got, err := s.CountEvents(ctx, pid, kind, since, 10_000_000)
					require.NoError(t, err)
					require.Equal(t, refBuckets(all, pid, kind, since, 10_000_000), got, "%s %s %d", pid, kind, since)
					counts = append(counts, js(got))
				}
			}
		}
		return js(counts)
	})
	reader("workers seen", func(t *testing.T) string {
		// Workers seen (and those holding claims).
		var seen []string
		for _, pid := range []string{"pid", "pid2"} {
			for _, since := range []int64{0, projT0 + 35_000_000} {
				for _, limit := range []int{2, 50} {
					got, err := s.Workers(ctx, pid, since, projT0, limit)
					require.NoError(t, err)
					var last []store.WorkerSeen
					for _, w := range got {
						if w.LastSeen != 0 {
							last = append(last, store.WorkerSeen{Worker: w.Worker, LastSeen: w.LastSeen})
						}
					}
					require.Equal(t, refSeen(all, pid, since, limit), append([]store.WorkerSeen{}, last...))
					seen = append(seen, js(got))
				}
			}
		}
		return js(seen)
	})
	reader("worker jobs", func(t *testing.T) string {
		// A worker's jobs, by pages both ways.
		var wj []string
		for _, pid := range []string{"pid", "pid2"} {
			for _, w := range []string{"w0", "w3"} {
				got, err := s.ListWorkerJobs(ctx, store.WorkerJobFilter{ProductionID: pid, Worker: w, Limit: 1000})
				require.NoError(t, err)
				require.NotEmpty(t, got)
				wj = append(wj, js(got))
				mid := got[len(got)/2]
				for _, f := range []store.WorkerJobFilter{
					{ProductionID: pid, Worker: w, BeforeAt: mid.ClaimedAt, BeforeID: mid.ID, Limit: 3},
					{ProductionID: pid, Worker: w, Newer: true, AfterAt: mid.ClaimedAt, AfterID: mid.ID, Limit: 3},
					{ProductionID: pid, Worker: w, States: []string{store.StateCompleted}, Limit: 1000},
				} {
					page, err := s.ListWorkerJobs(ctx, f)
					require.NoError(t, err)
					wj = append(wj, js(page))
				}
			}
		}
		return js(wj)
	})
	reader("job times", func(t *testing.T) string {
		// A page's times (each job's first claim).
		var times []string
		for _, pid := range []string{"pid", "pid2"} {
			var ids []string
			for i := 0; i < 45; i++ {
				ids = append(ids, fmt.Sprintf("%s-j%03d", pid, i))
			}
			got, err := s.JobTimes(ctx, pid, ids)
			require.NoError(t, err)
			for _, r := range got {
				require.NotZero(t, r.FirstClaimedAt, r.ID)
			}
			times = append(times, js(got))
		}
		return js(times)
	})
	return out
}

// TestAListingIsExactWhileTheProjectionTrailsTheLog reads every reader of
// the event log with the projector held still at several points (nothing
// projected, half, all, all and a new tail) and finds each exact: the
// event pages, the pruner's reads and deletes and the per-minute counts
// against the log read by its primary key, and every view the same at
// each point.
func TestAListingIsExactWhileTheProjectionTrailsTheLog(t *testing.T) {
	s := heldStore(t)
	ctx := context.Background()
	projLog(t, s, 0, 45)
	all := refEvents(t, s)
	top := all[len(all)-1].Seq
	mark, err := s.ProjectionMark(ctx)
	require.NoError(t, err)
	require.Zero(t, mark, "nothing projected")
	points := map[string]map[string]string{}
	points["nothing projected"] = views(t, s, "nothing projected")
	require.NoError(t, s.ProjectTo(ctx, top/2))
	mark, err = s.ProjectionMark(ctx)
	require.NoError(t, err)
	require.Equal(t, top/2, mark)
	points["half"] = views(t, s, "half")
	require.NoError(t, s.ProjectTo(ctx, top))
	points["all"] = views(t, s, "all")
	for _, point := range []string{"nothing projected", "half"} {
		for reader, v := range points["all"] {
			require.Equal(t, v, points[point][reader], "%s at the point %q", reader, point)
		}
	}
	// A new tail after a whole projection.
	projLog(t, s, 45, 5)
	views(t, s, "all and a new tail")
	require.NoError(t, s.ProjectTo(ctx, top+1000))
	views(t, s, "all again")
}
