package core

// The name rule (names.go) on every call that creates a name, read from the
// shared vectors, on the store under test; and how listings print names.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/libleases/libleases/core/store"
	"github.com/stretchr/testify/require"
)

type nameVectors struct {
	Accepted []struct{ Name, Why string }
	Refused  []struct {
		Name, Why     string
		ErrorContains []string `json:"error_contains"`
	}
	Display []struct{ Name, Text string }
}

func readNameVectors(t *testing.T) nameVectors {
	t.Helper()
	raw, err := os.ReadFile("../tests/vectors/names.json")
	require.NoError(t, err)
	var v nameVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Accepted)
	require.NotEmpty(t, v.Refused)
	require.NotEmpty(t, v.Display)
	return v
}

func TestNewNamesMustBeNFCWithoutInvisibleCharactersOrSpaceAtEitherEnd(t *testing.T) {
	v := readNameVectors(t)
	f := newFixture(t)
	f.request(1)
	held := f.claim("w", time.Hour)
	before := f.snapshot()
	prods, err := f.a.Productions()
	require.NoError(t, err)
	// Every call that creates or records a name refuses it before the store.
	surfaces := map[string]func(name string) error{
		"production name": func(n string) error { _, err := f.a.CreateProduction(n); return err },
		"job key":         func(n string) error { _, err := f.a.RequestJob("p", n, nil); return err },
		"worker name":     func(n string) error { _, err := f.a.Claim("p", n, time.Minute); return err },
		"metadata key": func(n string) error {
			return held.Complete(Facts{Metadata: map[string]json.RawMessage{n: json.RawMessage(`1`)}})
		},
		"provenance key": func(n string) error {
			_, err := ParseFacts(fmt.Sprintf(`{"provenance": {%q: 1}}`, n))
			return err
		},
		"worker name (edit)": func(n string) error {
			e, err := f.a.Begin()
			require.NoError(t, err)
			defer e.Abort()
			_, err = e.Claim("p", n, time.Minute)
			return err
		},
		"job key (edit)": func(n string) error {
			e, err := f.a.Begin()
			require.NoError(t, err)
			defer e.Abort()
			_, err = e.RequestJob("p", n, nil)
			return err
		},
	}
	for _, c := range v.Refused {
		for surface, call := range surfaces {
			err := call(c.Name)
			requireKind(t, err, KindInvalidArgument)
			for _, s := range c.ErrorContains {
				require.Contains(t, err.Error(), s, "%s %+q (%s)", surface, c.Name, c.Why)
			}
		}
	}
	require.Equal(t, before, f.snapshot(), "a refused name changed nothing")
	after, err := f.a.Productions()
	require.NoError(t, err)
	require.Equal(t, prods, after)
	require.Equal(t, LeaseActive, held.State())
}

func TestLookAlikeNamesThatPassTheRuleAreDistinctNamesOnTheStore(t *testing.T) {
	v := readNameVectors(t)
	f := newFixture(t)
	ids := map[string]string{}
	for _, c := range v.Accepted {
		p, err := f.a.CreateProduction(c.Name)
		require.NoError(t, err, "%+q (%s)", c.Name, c.Why)
		ids[p.ID] = c.Name
		// The name reads back byte for byte, and finds the same production.
		require.Equal(t, c.Name, p.Name)
		again, err := f.a.CreateProduction(c.Name)
		require.NoError(t, err)
		require.Equal(t, p.ID, again.ID)
		id, err := f.a.RequestJob(c.Name, c.Name, nil)
		require.NoError(t, err)
		l, err := f.a.Claim(c.Name, c.Name, time.Minute)
		require.NoError(t, err)
		require.Equal(t, id, l.JobID())
		require.NoError(t, l.Complete(Facts{Metadata: map[string]json.RawMessage{c.Name: json.RawMessage(`true`)}}))
		js, err := f.a.Jobs(c.Name)
		require.NoError(t, err)
		require.Len(t, js, 1)
		require.Equal(t, c.Name, js[0].Key)
		require.Equal(t, c.Name, js[0].Worker)
		facts, err := f.a.FactsOf(c.Name, id)
		require.NoError(t, err)
		require.Contains(t, facts.Metadata, c.Name)
	}
	require.Len(t, ids, len(v.Accepted), "each accepted name is a production of its own")
	ps, err := f.a.Productions()
	require.NoError(t, err)
	printed := map[string]string{}
	for _, p := range ps {
		text := DisplayName(p.Name)
		require.NotContains(t, printed, text, "%+q and %+q print alike", printed[text], p.Name)
		printed[text] = p.Name
	}
}

// insertLegacyProduction stores a production name as a file written before
// the name rule could hold it: straight through the store.
func insertLegacyProduction(t *testing.T, a *Authority, name string) {
	t.Helper()
	ctx := context.Background()
	tx, err := a.b.BeginWrite(ctx)
	require.NoError(t, err)
	id, err := newUUID()
	require.NoError(t, err)
	require.NoError(t, tx.InsertProduction(ctx, store.Production{ID: id, Name: name, CreatedAt: t0}))
	require.NoError(t, tx.Commit())
}

func TestNamesStoredBeforeTheNameRuleStayReachableByTheirExactBytes(t *testing.T) {
	f := newFixture(t)
	nfd, spaced := "cafe\u0301", "nightly "
	for _, name := range []string{nfd, spaced} {
		insertLegacyProduction(t, f.a, name)
		id, err := f.a.RequestJob(name, "", []byte("x"))
		require.NoError(t, err, "a stored name is looked up by its bytes")
		l, err := f.a.Claim(name, "w", time.Minute)
		require.NoError(t, err)
		require.Equal(t, id, l.JobID())
		require.Equal(t, name, l.Production())
		require.NoError(t, l.Complete(Facts{}))
		js, err := f.a.Jobs(name)
		require.NoError(t, err)
		require.Len(t, js, 1)
		requireKind(t, f.a.Cancel(name, id), KindWrongState) // found: wrong_state, not not_found
		// Creating it again is creating a name: the rule refuses it.
		_, err = f.a.CreateProduction(name)
		requireKind(t, err, KindInvalidArgument)
	}
	// A lookup never normalizes: the NFC spelling is another name.
	_, err := f.a.RequestJob("caf\u00e9", "", nil)
	requireKind(t, err, KindNotFound)
	p, err := f.a.CreateProduction("caf\u00e9")
	require.NoError(t, err)
	js, err := f.a.Jobs(p.Name)
	require.NoError(t, err)
	require.Empty(t, js)
	require.Equal(t, `cafe\u0301`, DisplayName(nfd))
	require.Equal(t, "caf\u00e9", DisplayName(p.Name))
}

func TestListingsPrintEveryNameSoThatNoTwoNamesLookAlike(t *testing.T) {
	v := readNameVectors(t)
	seen := map[string]string{}
	for _, c := range v.Display {
		got := DisplayName(c.Name)
		require.Equal(t, c.Text, got, "%+q", c.Name)
		require.NotContains(t, seen, got, "%+q and %+q print alike", seen[got], c.Name)
		seen[got] = c.Name
	}
}
