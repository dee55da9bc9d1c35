// How the SQLite store reports a constraint's refusal: never as a conflict.
package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// Every SQLite writer holds the one writer lock from its first read to its
// commit, so no refusal is a concurrent creator's race: none is a conflict.
func TestNoConstraintRefusalIsAConflict(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{}, func() int64 { return 0 })
	require.NoError(t, err)
	defer s.Close()
	p := store.Production{ID: "p1", Name: "p", CreatedAt: 1}
	job := store.Job{ID: "j1", ProductionID: "p1", Key: "k", HasKey: true, Payload: []byte{},
		State: store.StateRequested, RequestedAt: 1, UpdatedAt: 1}
	fact := []store.Fact{{JobID: "j1", Kind: "metadata", Key: "k", Value: "1"}}
	write := func(fn func(tx store.Tx) error) error {
		tx, err := s.BeginWrite(ctx)
		require.NoError(t, err)
		defer tx.Rollback()
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	require.NoError(t, write(func(tx store.Tx) error {
		if err := tx.InsertProduction(ctx, p); err != nil {
			return err
		}
		if err := tx.InsertJob(ctx, job); err != nil {
			return err
		}
		return tx.InsertFacts(ctx, fact)
	}))
	again := job
	again.ID = "j2"
	for name, fn := range map[string]func(tx store.Tx) error{
		"production name": func(tx store.Tx) error { return tx.InsertProduction(ctx, store.Production{ID: "p2", Name: "p"}) },
		"job key":         func(tx store.Tx) error { return tx.InsertJob(ctx, again) },
		"fact":            func(tx store.Tx) error { return tx.InsertFacts(ctx, fact) },
	} {
		err := write(fn)
		require.ErrorIs(t, err, store.ErrConstraint, name)
		require.NotErrorIs(t, err, store.ErrConflict, name)
	}
}
