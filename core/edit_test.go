package core

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAnAbortedEditClosesItsPendingLeasesAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	before := f.snapshot()
	e, err := f.a.Begin()
	require.NoError(t, err)
	_, err = e.RequestJob("p", "k", []byte("x"))
	require.NoError(t, err)
	l1, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	l2, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, LeasePending, l1.State())
	require.NoError(t, e.Complete(l2, Facts{Metadata: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}))
	e.Abort()
	require.Equal(t, LeaseClosed, l1.State())
	require.Equal(t, LeaseClosed, l2.State())
	require.Equal(t, before, f.snapshot())
	requireKind(t, e.Commit(), KindClosed)
	_, err = e.Claim("p", "w", time.Minute)
	requireKind(t, err, KindClosed)
	e.Abort() // a second abort does nothing
}

func TestClaimAndCompleteInOneEditPublishesTheFactsAtomically(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	e, err := f.a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	require.NoError(t, e.Complete(l, Facts{
		Metadata:   map[string]json.RawMessage{"inline": json.RawMessage(`true`)},
		Provenance: map[string]json.RawMessage{"tool": json.RawMessage(`"edit"`)},
	}))
	// Until the commit, nobody else sees anything: the edit holds the writer
	// lock and its writes are uncommitted.
	other, err := Open(f.path)
	require.NoError(t, err)
	defer other.Close()
	js, err := other.Jobs("p")
	require.NoError(t, err)
	require.Equal(t, StateRequested, js[0].State)
	fs, err := other.FactsOf("p", l.JobID())
	require.NoError(t, err)
	require.Empty(t, fs.Metadata)

	require.NoError(t, e.Commit())
	require.Equal(t, LeaseClosed, l.State())
	js, err = other.Jobs("p")
	require.NoError(t, err)
	require.Equal(t, StateCompleted, js[0].State)
	fs, err = other.FactsOf("p", l.JobID())
	require.NoError(t, err)
	require.JSONEq(t, `true`, string(fs.Metadata["inline"]))
	require.JSONEq(t, `"edit"`, string(fs.Provenance["tool"]))
}

func TestAPendingLeaseCannotBeUsedOutsideItsEdit(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	e, err := f.a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	requireKind(t, l.Renew(time.Hour), KindClosed)
	requireKind(t, l.Complete(Facts{}), KindClosed)
	_, err = l.Export()
	requireKind(t, err, KindClosed)
	require.NoError(t, e.Commit())
	require.Equal(t, LeaseActive, l.State())
	require.NoError(t, l.Renew(time.Hour))
}

func TestAFailedClaimingEditClosesItsPendingLeasesAndKeepsActiveOnes(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	active := f.claim("w", time.Hour)
	e, err := f.a.Begin()
	require.NoError(t, err)
	pending, err := e.Claim("p", "w", time.Second)
	require.NoError(t, err)
	require.NoError(t, e.Complete(active, Facts{}))
	f.clk.advance(2 * time.Second) // the pending claim is expired at commit
	requireKind(t, e.Commit(), KindExpired)
	require.Equal(t, LeaseClosed, pending.State())
	require.Equal(t, LeaseActive, active.State(), "a failed operation on an existing lease leaves it active")
	require.Equal(t, StateClaimed, f.job(active.JobID()).State)
	require.Equal(t, StateRequested, f.job(pending.JobID()).State)
	require.NoError(t, active.Complete(Facts{}), "its next use asks the store again")
}

func TestARejectedOperationInsideAnEditLeavesTheEditUsable(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	e, err := f.a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	_, err = e.Claim("p", "w", time.Minute)
	requireKind(t, err, KindNothingToClaim)
	require.NoError(t, e.Complete(l, Facts{}))
	requireKind(t, e.Complete(l, Facts{}), KindWrongState) // this claim already finished in the edit
	require.NoError(t, e.Commit())
	require.Equal(t, StateCompleted, f.job(l.JobID()).State)
}

func TestALeaseOfAnotherEditIsRefused(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	e1, err := f.a.Begin()
	require.NoError(t, err)
	l, err := e1.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	e1.Abort()
	e2, err := f.a.Begin()
	require.NoError(t, err)
	defer e2.Abort()
	requireKind(t, e2.Complete(l, Facts{}), KindClosed)
}

func TestAnEditWhoseAuthorityWasClosedCommitsNothing(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	e, err := f.a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	require.NoError(t, f.a.Close())
	requireKind(t, e.Commit(), KindClosed)
	require.Equal(t, LeaseClosed, l.State())
	f.a = f.open()
	require.Equal(t, StateRequested, f.job(l.JobID()).State)
}
