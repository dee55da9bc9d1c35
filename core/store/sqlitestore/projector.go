// The projection of the event log's secondary indexes (schema 13).
package sqlitestore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/libleases/libleases/core/store"
)

// An event is recorded unprojected: its commit writes the events b-tree
// (and events_by_kind_late for a late one), none of the four secondary
// indexes, which are partial indexes of projected events. The projector
// marks the events after the mark in meta projected, in write
// transactions of its own, and advances the mark with them, so every event
// with seq at or below the mark is projected and every later one is not.
// A listing reads its projected part from an index (projected = 1) and its
// unprojected part from the tail after the mark (tailSQL: a range of the
// primary key, as long as the tail): the two parts are disjoint and cover
// every event, whatever the projector's progress, in one read transaction.
const (
	// projectedMarkSQL is the mark: every event at or below it is projected.
	projectedMarkSQL = `(SELECT v FROM meta WHERE k = 'projected_seq')`
	// ProjectAfter is how many events a handle records before it wakes its
	// projector, which then projects every event recorded so far: the tail
	// a reader scans is about this long per process writing the file.
	ProjectAfter = 64
	// ProjectBatch is how many numbers of seq one projector transaction
	// covers while the tail is short; a longer tail (an edit that recorded
	// thousands of events in one commit) is projected half at a time, at
	// most ProjectBatchMax numbers, so the projector, which gets one turn
	// of the writer lock among the writers queued for it, keeps up with
	// writers that record many events per turn.
	ProjectBatch    = 256
	ProjectBatchMax = 8192
	// inTail is the condition of a listing's unprojected part without a
	// lower bound of its own (tailSQL).
	inTail = `seq > ` + projectedMarkSQL + ` AND projected = 0`
)

// tailSQL is the condition of a listing's unprojected part: seq above
// both after and the mark, projected = 0. after is an SQL expression of
// the listing's own lower bound of seq ("0" for none); one bound of the
// primary key, so the scan starts at the mark.
func tailSQL(after string) string {
	return `seq > max(` + after + `, ` + projectedMarkSQL + `) AND projected = 0`
}

// projector projects a writable handle's events in the background.
type projector struct {
	s       *DB
	pending atomic.Int64 // events this handle recorded since its last pass
	wake    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	held    atomic.Bool // a test's seam: the projector stands still
	off     atomic.Bool // the file cannot be written: readers scan the tail
	mu      sync.Mutex  // one batch at a time (ProjectTo beside the goroutine)
}

func newProjector(s *DB) *projector {
	ctx, cancel := context.WithCancel(context.Background())
	p := &projector{s: s, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go p.run()
	return p
}

// recorded counts an event recorded by a transaction of the handle.
func (p *projector) recorded() {
	if p != nil {
		p.pending.Add(1)
	}
}

// committed runs after each commit of the handle: it wakes the projector
// once the handle recorded ProjectAfter events since its last pass.
func (p *projector) committed() {
	if p != nil && p.pending.Load() >= ProjectAfter {
		p.poke()
	}
}

func (p *projector) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *projector) run() {
	defer close(p.done)
	for {
		select {
		case <-p.ctx.Done():
			// Closing: a pass asked for (at open, or by the handle's last
			// commits) still runs its first batch, so a short-lived
			// handle of a file with a long tail shortens it.
			select {
			case <-p.wake:
				p.pass(1)
			default:
			}
			return
		case <-p.wake:
		}
		p.pass(-1)
	}
}

// pass projects the events recorded so far, at most batches batches (-1:
// all), and none started once the handle is closing but the first. A
// batch that has begun, including its wait for the writer lock (at most
// the busy timeout), runs to its end.
func (p *projector) pass(batches int) {
	p.pending.Store(0)
	for i := 0; i != batches && !p.held.Load() && !p.off.Load(); i++ {
		if i > 0 && p.ctx.Err() != nil {
			return
		}
		more, err := p.batch(context.Background(), 1<<62)
		if errors.Is(err, store.ErrReadOnly) {
			p.off.Store(true)
		}
		if err != nil || !more {
			return
		}
	}
}

// stop ends the projector: a batch in progress runs to its end, a pass
// asked for runs its first batch, no other starts.
func (p *projector) stop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

// batch projects the events after the mark, ProjectBatch numbers of seq
// or half the tail (at most ProjectBatchMax), none above limit, in one
// redoable transaction: lost at a
// power cut, its events are still unprojected and the mark where it was,
// so they are projected again. more says events remain to project.
func (p *projector) batch(ctx context.Context, limit int64) (more bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tx, err := p.s.BeginWrite(store.Redoable(ctx))
	if err != nil {
		return false, err
	}
	t := tx.(*Tx)
	defer t.Rollback()
	var mark, top int64
	if err := t.queryRow(ctx, `SELECT `+projectedMarkSQL+`, (SELECT coalesce(max(seq), 0) FROM events)`).
		Scan(&mark, &top); err != nil {
		return false, classify(err)
	}
	upTo := min(mark+min(max(ProjectBatch, (top-mark)/2), ProjectBatchMax), top, limit)
	if upTo <= mark {
		return false, nil
	}
	if _, err := t.exec(ctx, `UPDATE events SET projected = 1 WHERE seq > ? AND seq <= ? AND projected = 0`,
		mark, upTo); err != nil {
		return false, classify(err)
	}
	if _, err := t.exec(ctx, `UPDATE meta SET v = ? WHERE k = 'projected_seq'`, upTo); err != nil {
		return false, classify(err)
	}
	if err := t.Commit(); err != nil {
		return false, err
	}
	return upTo < min(top, limit), nil
}

// ProjectTo projects every event up to seq, for diagnostics, the tests and
// the benchmarks: with the projection held (HoldProjection), it stands
// where it is left.
func (s *DB) ProjectTo(ctx context.Context, seq int64) error {
	for {
		more, err := s.proj.batch(ctx, seq)
		if err != nil || !more {
			return err
		}
	}
}

// ProjectionMark is the projection's mark: every event at or below it is
// projected.
func (s *DB) ProjectionMark(ctx context.Context) (int64, error) {
	var v int64
	err := s.queryRow(ctx, `SELECT `+projectedMarkSQL).Scan(&v)
	return v, classify(err)
}

// HoldProjection holds the handle's background projection still (true) or
// lets it run again (false), for diagnostics and the benchmarks: while it
// is held, the handle's commits leave their events unprojected (every
// listing stays exact: it scans a longer tail) until Project or another
// handle projects them.
func (s *DB) HoldProjection(hold bool) {
	s.proj.held.Store(hold)
	if !hold {
		s.proj.poke()
	}
}

// Project projects every event recorded so far, in the projector's
// batches, and returns how many it projected.
func (s *DB) Project(ctx context.Context) (int64, error) {
	top, _, err := s.NewestEvent(ctx)
	if err != nil {
		return 0, err
	}
	count := func() (n int64, err error) {
		err = s.queryRow(ctx, `SELECT count(*) FROM events WHERE `+inTail+` AND seq <= ?`, top).Scan(&n)
		return n, classify(err)
	}
	before, err := count()
	if err != nil {
		return 0, err
	}
	if err := s.ProjectTo(ctx, top); err != nil {
		return 0, err
	}
	after, err := count()
	return before - after, err
}
