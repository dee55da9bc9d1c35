package sqlitestore

// The file check's own rules inside one process, and its cost
// (docs/schema.md quotes BenchmarkTheFileCheckOfEachTransaction).

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

func openAt(t testing.TB, path string) *DB {
	t.Helper()
	s, err := Open(path, Options{Synchronous: "NORMAL"}, func() int64 { return 0 })
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func insertProduction(t testing.TB, s *DB) error {
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		return err
	}
	if err := tx.InsertProduction(ctx, store.Production{ID: uuid.NewString(), Name: uuid.NewString(), CreatedAt: 1}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func TestAHandleOfADeletedFileKeepsASecondHandleInTheSameProcessFromCreatingOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	first := openAt(t, path)
	require.NoError(t, insertProduction(t, first))
	require.NoError(t, os.Remove(path))
	_, err := Open(path, Options{}, func() int64 { return 0 })
	require.ErrorIs(t, err, ErrFileGone)
	_, statErr := os.Stat(path)
	require.True(t, os.IsNotExist(statErr), "nothing was created")
	require.ErrorIs(t, insertProduction(t, first), ErrFileGone)
	require.NoError(t, first.Close())
	// Once no handle has the removed file open, the path is free again.
	second := openAt(t, path)
	require.NoError(t, insertProduction(t, second))
}

func TestHandlesOfOneFileAndOfTwoNamesInOneDirectoryDoNotHinderEachOther(t *testing.T) {
	dir := t.TempDir()
	a, b := openAt(t, filepath.Join(dir, "a.db")), openAt(t, filepath.Join(dir, "a.db"))
	c := openAt(t, filepath.Join(dir, "c.db"))
	for _, s := range []*DB{a, b, c} {
		require.NoError(t, insertProduction(t, s))
	}
	// Removing c.db does not concern a.db's handles, nor a new d.db.
	require.NoError(t, os.Remove(filepath.Join(dir, "c.db")))
	require.NoError(t, insertProduction(t, a))
	d := openAt(t, filepath.Join(dir, "d.db"))
	require.NoError(t, insertProduction(t, d))
	require.ErrorIs(t, insertProduction(t, c), ErrFileGone)
}

func BenchmarkTheFileCheckOfEachTransaction(b *testing.B) {
	s := openAt(b, filepath.Join(b.TempDir(), "f.db"))
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if err := s.file.check(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write transaction", func(b *testing.B) {
		for b.Loop() {
			if err := insertProduction(b, s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
