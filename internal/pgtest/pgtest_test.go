package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestDroppingATestsSchemaEndsOnlyTheSessionsThatHoldItsObjects(t *testing.T) {
	// The tests of a run share the server, and some hold a transaction
	// open on purpose: the drop of a failed test's schema ends the
	// sessions that keep it from dropping, and no other.
	base := URL(t, false)
	ctx := context.Background()
	schema := func(table string) string {
		s := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		Exec(t, base, `CREATE SCHEMA `+s)
		Exec(t, base, `CREATE TABLE `+s+`.`+table+` (v int)`)
		return s
	}
	holding := func(table string) *pgx.Conn {
		c, err := pgx.Connect(ctx, base)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(context.Background()) })
		_, err = c.Exec(ctx, `BEGIN`)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `SELECT count(*) FROM `+table)
		require.NoError(t, err)
		return c
	}
	failed, other := schema("left_open"), schema("held")
	t.Cleanup(func() { drop(t, base, other) })
	leftOpen := holding(failed + ".left_open")
	held := holding(other + ".held")
	// A session that created a table in the schema and never committed
	// holds no lock of a relation the drop can see, only of the schema.
	creating, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	t.Cleanup(func() { creating.Close(context.Background()) })
	_, err = creating.Exec(ctx, `BEGIN; CREATE TABLE `+failed+`.uncommitted (v int)`)
	require.NoError(t, err)

	drop(t, base, failed)

	var n int
	require.NoError(t, held.QueryRow(ctx, `SELECT count(*) FROM `+other+`.held`).Scan(&n),
		"another test's open transaction was ended")
	_, err = held.Exec(ctx, `COMMIT`)
	require.NoError(t, err)
	require.Error(t, leftOpen.QueryRow(ctx, `SELECT 1`).Scan(&n), "the session that kept the schema was ended")
	require.Error(t, creating.QueryRow(ctx, `SELECT 1`).Scan(&n), "the session that was creating in the schema was ended")
}
