package core

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The live view's reads (observe_live.go), on the store under test.

// recentOf follows Older from before to the oldest page and returns every
// event, newest first.
func recentOf(t *testing.T, a *Authority, q EventQuery, before int64) []Event {
	t.Helper()
	var out []Event
	for pages := 0; ; pages++ {
		page, err := a.RecentEvents(ctx, q, before)
		require.NoError(t, err)
		out = append(out, page.Events...)
		if page.Older == 0 {
			return out
		}
		require.Len(t, page.Events, q.Limit, "only the oldest page is short")
		before = page.Older
		require.Less(t, pages, 10_000, "paging must end")
	}
}

func TestRecentEventsListTheNewestFirstAndPageBackToTheOldest(t *testing.T) {
	f := newFixture(t)
	ids, _ := f.eventHistory()

	all, err := f.a.Events("", 0)
	require.NoError(t, err)
	newestFirst := slices.Clone(all)
	slices.Reverse(newestFirst)
	for _, limit := range []int{1, 4, 1000} {
		require.Equal(t, newestFirst, recentOf(t, f.a, EventQuery{Limit: limit}, 0), "limit %d", limit)
	}
	page, err := f.a.RecentEvents(ctx, EventQuery{Limit: 3}, 0)
	require.NoError(t, err)
	require.Equal(t, all[len(all)-1].Seq, page.Newest, "a follower continues after the newest listed")
	require.Equal(t, page.Events[2].Seq, page.Older)

	// Filters are ListEvents' own, read from the other end.
	ofP, err := f.a.Events("p", 0)
	require.NoError(t, err)
	slices.Reverse(ofP)
	require.Equal(t, ofP, recentOf(t, f.a, EventQuery{Production: "p", Limit: 2}, 0))
	got := recentOf(t, f.a, EventQuery{Production: "p", Kinds: []string{"claimed", "cancelled"}, Limit: 1}, 0)
	require.Equal(t, []string{"cancelled:", "claimed:w2", "claimed:w1"}, kindsOf(got))
	require.Equal(t, []string{"completed:w2", "claimed:w2", "released:w1", "renewed:w1", "claimed:w1", "requested:"},
		kindsOf(recentOf(t, f.a, EventQuery{JobID: ids[0], Limit: 2}, 0)))
	// Below a seq, and above an After.
	mid := all[5].Seq
	require.Equal(t, newestFirst[len(all)-5:], recentOf(t, f.a, EventQuery{Limit: 2}, mid))
	require.Equal(t, newestFirst[:len(all)-6], recentOf(t, f.a, EventQuery{After: mid, Limit: 2}, 0))
	// Nothing newer than the newest: an empty page that keeps the place.
	last := all[len(all)-1].Seq
	page, err = f.a.RecentEvents(ctx, EventQuery{After: last}, 0)
	require.NoError(t, err)
	require.NotNil(t, page.Events)
	require.Empty(t, page.Events)
	require.Equal(t, last, page.Newest)
	require.Zero(t, page.Older)

	before := f.snapshot()
	for name, q := range badEventQueries {
		_, err := f.a.RecentEvents(ctx, q, 0)
		requireKind(t, err, KindInvalidArgument)
		_ = name
	}
	_, err = f.a.RecentEvents(ctx, EventQuery{}, -1)
	requireKind(t, err, KindInvalidArgument)
	_, err = f.a.RecentEvents(ctx, EventQuery{Production: "nope"}, 0)
	requireKind(t, err, KindNotFound)
	require.Equal(t, before, f.snapshot(), "a rejected listing changes nothing")
}

func TestReadClockShowsTheAuthorityTimeAndHowFarItIsBehindTheHighWaterMark(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	f.claim("w", time.Minute) // decided at t0: the mark is t0
	c, err := f.a.ReadClock(ctx)
	require.NoError(t, err)
	require.Equal(t, time.UnixMicro(t0).UTC(), c.Now)
	require.Equal(t, time.UnixMicro(t0).UTC(), c.HighWaterMark)
	require.Zero(t, c.Lag())

	f.clk.set(t0 - 5_000_000) // the clock went back 5 s
	c, err = f.a.ReadClock(ctx)
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.Lag())
	require.JSONEq(t, `{"now_unix_us":1767225595000000,"high_water_mark_unix_us":1767225600000000,"lag_us":5000000}`,
		mustJSON(t, c))
	require.Equal(t, t0, f.hwm(), "reading the clock moves nothing")

	f.clk.set(t0 + 60_000_000) // ahead of the mark: no lag
	c, err = f.a.ReadClock(ctx)
	require.NoError(t, err)
	require.Zero(t, c.Lag())
	require.Equal(t, t0, f.hwm())

	require.NoError(t, f.a.Close())
	_, err = f.a.ReadClock(ctx)
	requireKind(t, err, KindClosed)
}
