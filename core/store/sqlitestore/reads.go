// What a write transaction read already and answers again without a
// statement.
package sqlitestore

import (
	"context"

	"github.com/libleases/libleases/core/store"
)

// txReads is what one member of a group read that it may answer again
// without running a statement. A member holds SQLite's writer lock from
// its first statement to its Commit or Rollback, and the members of a
// group follow each other, never interleave: nothing but the member's own
// statements changes the file meanwhile. So a production it read stays as
// read until it writes productions itself (an edit's claims, which read
// their production once), and the mark read with its first production read
// is the mark as long as no statement came between (a claim reads its
// production and then the mark, as core's guard asks: docs/CLOCK.md).
type txReads struct {
	prods    map[string]store.Production // by name
	mark     int64                       // read with a production, for the next HWM
	markAt   int64                       // the handle's count of statements then
	hasMark  bool
	markRead bool // the member read the mark already: a production's read need not
}

// productionWithMarkSQL is a production by name with the clock mark, in
// one statement.
const productionWithMarkSQL = `SELECT ` + productionColumns + `, (SELECT v FROM meta WHERE k = 'hwm_unix_us')
	FROM productions WHERE name = ?`

// ProductionByName reads the production once per member: later reads
// answer from the first until the member writes productions. Until the
// member has read the mark, the same statement reads it too, for the HWM
// that comes next.
func (t *Tx) ProductionByName(ctx context.Context, name string) (store.Production, error) {
	if p, ok := t.read.prods[name]; ok {
		return p, nil
	}
	if t.read.markRead {
		p, err := t.queries.ProductionByName(ctx, name)
		if err == nil {
			t.keep(p)
		}
		return p, err
	}
	var mark int64
	p, err := scanProduction(withExtra{t.queryRow(ctx, productionWithMarkSQL, name), []any{&mark}})
	if err != nil {
		return store.Production{}, classify(err)
	}
	t.keep(p)
	t.read.mark, t.read.markAt, t.read.hasMark, t.read.markRead = mark, t.ran.Load(), true, true
	return p, nil
}

func (t *Tx) keep(p store.Production) {
	if t.read.prods == nil {
		t.read.prods = map[string]store.Production{}
	}
	t.read.prods[p.Name] = p
}

// HWM reads the mark, or answers with the one a production's read took
// just before, if no statement came between.
func (t *Tx) HWM(ctx context.Context) (int64, error) {
	t.read.markRead = true
	if t.read.hasMark {
		t.read.hasMark = false
		if t.read.markAt == t.ran.Load() {
			return t.read.mark, nil
		}
	}
	return t.queries.HWM(ctx)
}

// The member's writes of productions forget what it read of them.

func (t *Tx) InsertProduction(ctx context.Context, p store.Production) error {
	t.read.prods = nil
	return t.queries.InsertProduction(ctx, p)
}

func (t *Tx) UpdatePolicy(ctx context.Context, productionID string, p store.Policy) error {
	t.read.prods = nil
	return t.queries.UpdatePolicy(ctx, productionID, p)
}

func (t *Tx) UpdateRetention(ctx context.Context, productionID string, r store.Retention) error {
	t.read.prods = nil
	return t.queries.UpdateRetention(ctx, productionID, r)
}

func (t *Tx) DeleteProduction(ctx context.Context, productionID string) error {
	t.read.prods = nil
	return t.queries.DeleteProduction(ctx, productionID)
}
