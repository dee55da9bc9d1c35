// What a live view needs besides the listings (docs/observing.md): the
// event log from its newest end, and the authority's clock beside its
// high-water mark. Short reads only, like every observation.
package core

import (
	"context"
	"encoding/json"
	"time"
)

// RecentPage is one page of events, newest first. Older is the Before of
// the next (older) page, 0 after the oldest; Newest is the seq of the newest
// event listed (or the query's After when none), the After a follower
// continues from.
type RecentPage struct {
	Events []Event `json:"events"`
	Older  int64   `json:"older"`
	Newest int64   `json:"newest"`
}

// RecentEvents lists the newest events the query selects (its Production,
// JobID, Kinds, After and Limit, as for ListEvents) that lie below before
// (0: no bound), newest first. On PostgreSQL the page starts below the
// follower-safe horizon, so an event that commits late is never above a
// page a follower already saw.
func (a *Authority) RecentEvents(ctx context.Context, q EventQuery, before int64) (RecentPage, error) {
	if before < 0 {
		return RecentPage{}, errf(KindInvalidArgument, "before must not be negative")
	}
	sel, err := a.selectEvents(ctx, q)
	if err != nil {
		return RecentPage{}, err
	}
	if before > 0 && before < sel.f.Before {
		sel.f.Before = before
	}
	sel.f.Newest = true
	es, err := sel.read(ctx, a.b)
	if err != nil {
		return RecentPage{}, err
	}
	page := RecentPage{Newest: q.After}
	if len(es) > sel.limit {
		es = es[:sel.limit]
		page.Older = es[sel.limit-1].Seq
	}
	if page.Events, err = sel.named(ctx, a.b, es); err != nil {
		return RecentPage{}, err
	}
	if len(es) > 0 {
		page.Newest = es[0].Seq
	}
	return page, nil
}

// ClockReading is the authority's clock as an observer sees it: Now, the
// time every transition would be decided at (the PostgreSQL server's clock,
// or this host's for SQLite), and the durable high-water mark, the latest
// time a transition was decided at. Now behind the mark means the clock went
// back: guarded operations are refused (clock_regressed) until it catches
// up (docs/CLOCK.md).
type ClockReading struct {
	Now           time.Time
	HighWaterMark time.Time
}

// Lag is how far Now is behind the high-water mark; 0 when it is not.
func (c ClockReading) Lag() time.Duration {
	return max(0, c.HighWaterMark.Sub(c.Now))
}

// MarshalJSON writes both times in unix µs and the lag in µs.
func (c ClockReading) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Now   int64 `json:"now_unix_us"`
		HWM   int64 `json:"high_water_mark_unix_us"`
		LagUS int64 `json:"lag_us"`
	}{c.Now.UnixMicro(), c.HighWaterMark.UnixMicro(), c.Lag().Microseconds()})
}

// ReadClock reads the authority's high-water mark, then its time, in two
// short reads (neither is a guarded operation: nothing moves the mark). In
// that order, a transition committing between them cannot show as lag.
func (a *Authority) ReadClock(ctx context.Context) (ClockReading, error) {
	if err := a.usable(); err != nil {
		return ClockReading{}, err
	}
	hwm, err := a.b.HWM(ctx)
	if err != nil {
		return ClockReading{}, storageErr("read high-water mark", err)
	}
	now, err := a.observedNow(ctx)
	if err != nil {
		return ClockReading{}, err
	}
	return ClockReading{Now: time.UnixMicro(now).UTC(), HighWaterMark: time.UnixMicro(hwm).UTC()}, nil
}
