// The migration from schema 9 (per-minute counts from the index by kind).
package sqlitestore

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/storetest"
	"github.com/stretchr/testify/require"
)

// lateEventRows are requests of a schema-9 fixture recorded out of time
// order (a clock that ran ahead, then came back): seq 6 at 600, 7 at 100,
// 8 at 150 (both late), 9 at 700, 10 at 200 (late). Another production's
// event in between counts for that production only.
var lateEventRows = `INSERT INTO events (seq, at_unix_us, production_id, job_id, kind) VALUES
	(6, 600, 'pid', 'a', 'requested'), (7, 100, 'pid', 'b', 'requested'), (8, 150, 'pid', 'c', 'requested'),
	(9, 700, 'pid', 'd', 'requested'), (100, 50, 'other', 'x', 'requested'), (101, 200, 'pid', 'e', 'requested')`

func TestASchema9FileIsMigratedTo10AndCountsItsLateEventsInTheirMinutes(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "v9.db")
	// The schema-9 fixture: exactly what version 9 wrote.
	oldFile(t, old, schemaV2, migrateV2toV3, migrationFixtureRows, migrateV3toV4, migrateV4toV5, migrateV5toV6,
		migrateV6toV7, migrateV7toV9, []string{workerEventRows, lateEventRows})
	require.Contains(t, schemaOf(t, old), "events_by_kind_time")

	s := openMigrated(t, old)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, storetest.CheckV4Fixture(ctx, s))
	require.NotContains(t, schemaOf(t, old), "events_by_kind_time")
	var late []int64
	rows, err := s.db.Query(`SELECT seq FROM events WHERE late = 1 ORDER BY seq`)
	require.NoError(t, err)
	for rows.Next() {
		var seq int64
		require.NoError(t, rows.Scan(&seq))
		late = append(late, seq)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{7, 8, 101}, late, "each against the greatest time before it in its production and kind")

	// Buckets of 100 µs: every event in the bucket of its time.
	bs, err := s.CountEvents(ctx, "pid", "requested", 0, 100)
	require.NoError(t, err)
	require.Equal(t, []store.Bucket{{Start: 0, Count: 1}, {Start: 100, Count: 2}, {Start: 200, Count: 1},
		{Start: 600, Count: 1}, {Start: 700, Count: 1}}, bs)
	bs, err = s.CountEvents(ctx, "pid", "requested", 120, 100)
	require.NoError(t, err)
	require.Equal(t, []store.Bucket{{Start: 100, Count: 1}, {Start: 200, Count: 1},
		{Start: 600, Count: 1}, {Start: 700, Count: 1}}, bs)
	// A kind's listing stays in seq order.
	es, err := s.ListEvents(ctx, store.EventFilter{ProductionID: "pid", Kind: "requested", Before: 1 << 62, Limit: 10})
	require.NoError(t, err)
	var seqs []int64
	for _, e := range es {
		seqs = append(seqs, e.Seq)
	}
	require.Equal(t, []int64{1, 6, 7, 8, 9, 101}, seqs)

	// A new event is late against the newest in-order one (700).
	write(t, s, func(tx store.Tx) {
		require.NoError(t, tx.InsertEvent(ctx, store.Event{At: 650, ProductionID: "pid", JobID: "f", Kind: "requested"}))
		require.NoError(t, tx.InsertEvent(ctx, store.Event{At: 700, ProductionID: "pid", JobID: "g", Kind: "requested"}))
	})
	bs, err = s.CountEvents(ctx, "pid", "requested", 600, 100)
	require.NoError(t, err)
	require.Equal(t, []store.Bucket{{Start: 600, Count: 2}, {Start: 700, Count: 2}}, bs)
	require.NoError(t, s.Close())

	// A migrated file has exactly the schema of a new one.
	require.Equal(t, freshSchema(t, dir), schemaOf(t, old))
}

// The per-minute counts equal a count of every event by its time, whatever
// the order of times along seq: runs of events in time order at uneven
// rates, clock steps back (late events) and forward, other kinds and
// productions in between, every window start and bucket width.
func TestPerMinuteCountsEqualACountOfEveryEventByItsTime(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "count.db"), Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var ats []int64
	at := int64(1000)
	write(t, s, func(tx store.Tx) {
		for i := 0; i < 3000; i++ {
			switch r := rng.IntN(100); {
			case r < 3:
				at -= rng.Int64N(5000) // a step back: late events follow
			case r < 5:
				at += rng.Int64N(20000) // a step forward
			default:
				at += rng.Int64N(40)
			}
			at = max(at, 0)
			kind, prod := "completed", "pid"
			if rng.IntN(4) == 0 {
				kind = "claimed"
			}
			if rng.IntN(10) == 0 {
				prod = "other"
			}
			require.NoError(t, tx.InsertEvent(ctx, store.Event{At: at, ProductionID: prod, Kind: kind}))
			if kind == "completed" && prod == "pid" {
				ats = append(ats, at)
			}
		}
	})
	for _, width := range []int64{1, 100, 1000, 60000} {
		for _, since := range []int64{0, 777, 5000, 20000, at - 50, at + 1} {
			want := map[int64]int64{}
			for _, a := range ats {
				if a >= since {
					want[a/width*width]++
				}
			}
			bs, err := s.CountEvents(ctx, "pid", "completed", since, width)
			require.NoError(t, err)
			got := map[int64]int64{}
			for i, b := range bs {
				got[b.Start] = b.Count
				if i > 0 {
					require.Less(t, bs[i-1].Start, b.Start, "buckets in order")
				}
			}
			require.Equal(t, want, got, "width %d since %d", width, since)
		}
	}
}
