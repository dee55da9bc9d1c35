package pgstore

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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

// A merged write numbers every argument it sends exactly once, from $1 to
// the last, whatever its row count (the texts built at start and the ones
// built past them alike), and its rows-changed check names the count.
func TestAMergedWriteNumbersEachOfItsArgumentsOnceWhateverItsRowCount(t *testing.T) {
	params := regexp.MustCompile(`\$(\d+)`)
	for n := 1; n <= builtRows+3; n++ {
		updates := make([]heldWrite, n)
		events := make([]heldWrite, n)
		at := make([]int, n)
		for i := range updates {
			updates[i], events[i], at[i] = update(fmt.Sprint("j", i)), ev(fmt.Sprint(i), heldRegEvent), i
		}
		for _, w := range []heldWrite{mergeJobUpdates(updates, at), mergeEvents(events, at)} {
			seen := map[int]int{}
			for _, m := range params.FindAllStringSubmatch(w.sql, -1) {
				k, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				seen[k]++
			}
			require.Len(t, seen, len(w.args), "%d rows: %s", n, w.sql)
			for k := 1; k <= len(w.args); k++ {
				require.Equal(t, 1, seen[k], "%d rows: $%d in %s", n, k, w.sql)
			}
			require.Equal(t, n, w.rows)
			require.NoError(t, w.check(pgconn.NewCommandTag(fmt.Sprint("UPDATE ", n))))
		}
		err := mergeJobUpdates(updates, at).check(pgconn.NewCommandTag(fmt.Sprint("UPDATE ", n-1)))
		require.EqualError(t, err, fmt.Sprintf("the update of %d jobs changed %d rows, not %d", n, n-1, n))
	}
	require.Contains(t, eventsSQL(2, true), registerEvents)
	require.NotContains(t, eventsSQL(2, false), registerEvents)
}

// A held job update that changes no row fails naming the job, and one that
// changes its row passes.
func TestAHeldJobUpdateThatChangesNoRowFailsNamingItsJob(t *testing.T) {
	check := oneRowOf("the update of job ", "j1")
	require.EqualError(t, check(pgconn.NewCommandTag("UPDATE 0")), "the update of job j1 changed 0 rows, not 1")
	require.NoError(t, check(pgconn.NewCommandTag("UPDATE 1")))
}

// The clock sample rides on the last held write only if that write, as it
// will be sent (after merging), returns rows: a write of unknown rows that
// ends the list once the others of its kind are merged ahead of it must not
// carry the sample (its RETURNING could answer nothing).
func TestTheSampleRidesOnlyOnALastWriteWhoseRowsAreKnownOnceMerged(t *testing.T) {
	unknown := heldWrite{sql: "attempt"} // rows unknown
	tx := &txConn{pending: []heldWrite{update("a"), unknown, update("b")}}
	require.False(t, tx.lastReturns(), "merged, the updates go first and the attempt is last")
	tx = &txConn{pending: []heldWrite{unknown, update("a"), update("b")}}
	require.True(t, tx.lastReturns())
	tx = &txConn{pending: []heldWrite{update("a"), unknown}}
	require.False(t, tx.lastReturns())
}
