package pgstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func update(id string) heldWrite {
	args := make([]any, jobUpdateArgs)
	args[jobUpdateArgs-1] = id
	return heldWrite{sql: "update " + id, args: args, rows: 1, kind: heldJobUpdate}
}

func ev(name string, kind heldKind) heldWrite {
	return heldWrite{sql: "event " + name, args: make([]any, eventArgs), rows: 1, kind: kind}
}

// Held writes become one statement per kind only where that cannot change
// what they write: a job's two updates stay two statements (an UPDATE …
// FROM changes a row once), and events whose registration is not the first
// event stay as they are; other writes keep their places.
func TestHeldWritesBecomeOneStatementPerKindOnlyWhereThatWritesTheSame(t *testing.T) {
	other := heldWrite{sql: "attempt"}
	got := coalesce([]heldWrite{other, update("a"), ev("1", heldRegEvent), update("b"), ev("2", heldEvent)})
	require.Len(t, got, 3)
	require.Equal(t, "attempt", got[0].sql)
	require.Equal(t, jobUpdatesSQL(2), got[1].sql)
	require.Equal(t, 2, got[1].rows)
	require.Equal(t, "a", got[1].args[jobUpdateArgs-1])
	require.Equal(t, "b", got[1].args[2*jobUpdateArgs-1])
	require.Equal(t, eventsSQL(2, true), got[2].sql)
	require.Equal(t, 2, got[2].rows)

	same := []heldWrite{update("a"), update("a")}
	require.Equal(t, same, coalesce(same), "two updates of one job")
	lateReg := []heldWrite{ev("1", heldEvent), ev("2", heldRegEvent)}
	require.Equal(t, lateReg, coalesce(lateReg), "a registration after an event")
	one := []heldWrite{other, update("a"), ev("1", heldEvent)}
	require.Equal(t, one, coalesce(one))
}
