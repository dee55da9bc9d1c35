package core

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

// namedIDsTx gives the jobs it inserts the next of ids instead of their
// random ids, so a test can make ids that share a prefix.
type namedIDsTx struct {
	store.Tx
	ids *[]string
}

func (tx namedIDsTx) InsertJob(ctx context.Context, j store.Job) error {
	if len(*tx.ids) > 0 {
		j.ID, *tx.ids = (*tx.ids)[0], (*tx.ids)[1:]
	}
	return tx.Tx.InsertJob(ctx, j)
}

// requestNamed requests one job of production for each id, with that id.
func (f *fixture) requestNamed(production string, ids ...string) {
	f.t.Helper()
	queue := append([]string(nil), ids...)
	b := f.a.b
	wrapTxs(f.a, func(tx store.Tx) store.Tx { return namedIDsTx{Tx: tx, ids: &queue} })
	defer func() { f.a.b = b }()
	for i := range ids {
		_, err := f.a.RequestJob(production, "", []byte{byte(i)})
		require.NoError(f.t, err)
	}
	for _, id := range ids {
		_, err := f.a.Job(production, id)
		require.NoError(f.t, err, id)
	}
}

func TestAUniqueJobIDPrefixOfAtLeastEightCharactersNamesItsJob(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	f.requestNamed("p", "0a1b2c3d-0000-4000-8000-000000000001", "0a1b2c3e-0000-4000-8000-000000000002",
		"0a1b2c3f-0000-4000-8000-000000000003", "0a1b2c40-0000-4000-8000-000000000004",
		"fffffffe-0000-4000-8000-000000000005", "ffffffff-ffff-4fff-bfff-ffffffffffff")
	f.requestNamed("q", "0a1b2c3c-9999-4000-8000-000000000006")
	ctx := context.Background()
	for prefix, want := range map[string]string{
		"0a1b2c3d":                             "0a1b2c3d-0000-4000-8000-000000000001",
		"0a1b2c3d-":                            "0a1b2c3d-0000-4000-8000-000000000001",
		"0a1b2c3e-0000-4":                      "0a1b2c3e-0000-4000-8000-000000000002",
		"0a1b2c3f":                             "0a1b2c3f-0000-4000-8000-000000000003", // the range ends at 0a1b2c40
		"0a1b2c40":                             "0a1b2c40-0000-4000-8000-000000000004",
		"fffffffe":                             "fffffffe-0000-4000-8000-000000000005",
		"ffffffff":                             "ffffffff-ffff-4fff-bfff-ffffffffffff", // a range with no upper end
		"0a1b2c3d-0000-4000-8000-000000000001": "0a1b2c3d-0000-4000-8000-000000000001",
	} {
		got, err := f.a.ResolveJobID(ctx, "p", prefix)
		require.NoError(t, err, prefix)
		require.Equal(t, want, got, prefix)
		got, err = f.a.ResolveJobID(ctx, "", prefix)
		require.NoError(t, err, prefix)
		require.Equal(t, want, got, "%s in every production", prefix)
	}
	// A prefix is looked up in its production only, or in every one.
	_, err = f.a.ResolveJobID(ctx, "p", "0a1b2c3c")
	requireKind(t, err, KindNotFound)
	require.Equal(t, `not_found: no job id begins with 0a1b2c3c in production "p"`, err.Error())
	got, err := f.a.ResolveJobID(ctx, "", "0a1b2c3c")
	require.NoError(t, err)
	require.Equal(t, "0a1b2c3c-9999-4000-8000-000000000006", got)
	_, err = f.a.ResolveJobID(ctx, "", "0a1b2c3b")
	requireKind(t, err, KindNotFound)
	require.Equal(t, `not_found: no job id begins with 0a1b2c3b`, err.Error())
	_, err = f.a.ResolveJobID(ctx, "nope", "0a1b2c3d")
	requireKind(t, err, KindNotFound)
	// A whole id is returned as it is: the operation on it says whether it exists.
	got, err = f.a.ResolveJobID(ctx, "p", "0a1b2c3b-0000-4000-8000-000000000001")
	require.NoError(t, err)
	require.Equal(t, "0a1b2c3b-0000-4000-8000-000000000001", got)
}

func TestAnAmbiguousJobIDPrefixIsAnErrorListingABoundedNumberOfItsCandidates(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	var ids []string
	for i := range MaxJobIDCandidates + 2 {
		ids = append(ids, fmt.Sprintf("0a1b2c3d-0000-4000-8000-%012d", i))
	}
	f.requestNamed("p", ids[:2]...)
	f.requestNamed("q", "0a1b2c3d-1111-4000-8000-000000000000")
	ctx := context.Background()

	_, err = f.a.ResolveJobID(ctx, "p", "0a1b2c3d")
	requireKind(t, err, KindInvalidArgument)
	require.Equal(t, "invalid_argument: job id prefix 0a1b2c3d is ambiguous: it begins "+ids[0]+", "+ids[1]+
		"; give more of the id", err.Error())
	got, err := f.a.ResolveJobID(ctx, "p", "0a1b2c3d-0000-4000-8000-000000000001")
	require.NoError(t, err)
	require.Equal(t, ids[1], got)

	// Across productions each candidate names its production.
	_, err = f.a.ResolveJobID(ctx, "", "0a1b2c3d")
	requireKind(t, err, KindInvalidArgument)
	require.Equal(t, "invalid_argument: job id prefix 0a1b2c3d is ambiguous: it begins "+ids[0]+` (production "p"), `+
		ids[1]+` (production "p"), 0a1b2c3d-1111-4000-8000-000000000000 (production "q"); give more of the id`, err.Error())
	got, err = f.a.ResolveJobID(ctx, "", "0a1b2c3d-1")
	require.NoError(t, err)
	require.Equal(t, "0a1b2c3d-1111-4000-8000-000000000000", got)

	// Many candidates: the first MaxJobIDCandidates, then "and more".
	f.requestNamed("p", ids[2:]...)
	_, err = f.a.ResolveJobID(ctx, "p", "0a1b2c3d")
	requireKind(t, err, KindInvalidArgument)
	require.Equal(t, "invalid_argument: job id prefix 0a1b2c3d is ambiguous: it begins "+
		strings.Join(ids[:MaxJobIDCandidates], ", ")+", and more; give more of the id", err.Error())
}

func TestAJobIDPrefixThatIsShortOrNotHexOrNotUTF8IsAClearErrorBeforeAnyStoreAccess(t *testing.T) {
	f := newFixture(t)
	f.requestNamed("p", "0a1b2c3d-0000-4000-8000-000000000001")
	require.NoError(t, f.a.Close())
	ctx := context.Background()
	for bad, msg := range map[string]string{
		"":                                      `job id "" must be a lowercase hyphenated UUID or a prefix of one of at least 8 characters`,
		"0a1b2c3":                               `job id "0a1b2c3" must be a lowercase hyphenated UUID or a prefix of one of at least 8 characters`,
		"0A1B2C3D":                              `job id "0A1B2C3D" must be`,
		"0a1b2c3d0":                             `job id "0a1b2c3d0" must be`,
		"0a1b2c3g":                              `job id "0a1b2c3g" must be`,
		"0a1b2c3d%":                             `job id "0a1b2c3d%" must be`,
		"0a1b2c3d\x00":                          `job id "0a1b2c3d\x00" must be`,
		"0a1b2c3d\xff\xfe":                      `job id is not valid UTF-8`,
		"0a1b2c3d-0000-4000-8000-0000000000011": `must be a lowercase hyphenated UUID or a prefix`,
		"0a1b2c3d-0000-4000-8000-00000000000\u00e9": `must be a lowercase hyphenated UUID or a prefix`,
	} {
		for _, production := range []string{"p", ""} {
			_, err := f.a.ResolveJobID(ctx, production, bad)
			requireKind(t, err, KindInvalidArgument)
			require.Contains(t, err.Error(), msg, "%q", bad)
		}
	}
}

func TestAMissingProductionIsReportedByNameSoThatACallerCanSuggestAnother(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	_, err := f.a.Claim("nightyl", "w", time.Minute)
	requireKind(t, err, KindNotFound)
	name, ok := MissingProduction(err)
	require.True(t, ok)
	require.Equal(t, "nightyl", name)
	_, err = f.a.ListJobs(context.Background(), "q\x01", JobQuery{})
	name, ok = MissingProduction(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "q\x01", name)
	// A missing job of an existing production is no missing production.
	_, err = f.a.Job("p", "00000000-0000-4000-8000-000000000000")
	requireKind(t, err, KindNotFound)
	_, ok = MissingProduction(err)
	require.False(t, ok)
	_, ok = MissingProduction(nil)
	require.False(t, ok)
	require.NoError(t, f.a.Cancel("p", ids[0]))
}
