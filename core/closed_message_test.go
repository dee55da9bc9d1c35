package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A use of a settled lease says how this lease settled the claim and that a
// settled lease is closed, so "completing twice" explains itself.
func TestAClosedLeaseSaysHowThisLeaseEndedItsClaimAndThatASettledLeaseIsClosed(t *testing.T) {
	f := newFixture(t)
	f.request(5)
	const settled = "; a lease is closed once it has completed, released or failed its claim"
	for _, c := range []struct {
		settle func(l *Lease) error
		want   string
	}{
		{func(l *Lease) error { return l.Complete(Facts{}) }, "this lease already completed the job" + settled},
		{func(l *Lease) error { return l.Release() }, "this lease already released the job" + settled},
		{func(l *Lease) error { return l.Fail("broken") }, "this lease already failed the job" + settled},
		{func(l *Lease) error { return l.FailRetry("flaky", 0) }, "this lease already failed the job (retryable)" + settled},
	} {
		l := f.claim("w", time.Minute)
		require.NoError(t, c.settle(l))
		want := "closed: lease for job " + l.JobID() + " is closed: " + c.want
		for _, use := range []func() error{
			func() error { return l.Complete(Facts{}) },
			func() error { return l.Renew(time.Minute) },
			func() error { return l.Release() },
			func() error { _, err := l.Payload(); return err },
			func() error { _, err := l.Export(); return err },
		} {
			err := use()
			requireKind(t, err, KindClosed)
			require.Equal(t, want, err.Error())
		}
	}
	// A claim whose edit was aborted never settled: the message says so.
	e, err := f.a.Begin()
	require.NoError(t, err)
	l, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	e.Abort()
	err = l.Complete(Facts{})
	requireKind(t, err, KindClosed)
	require.Equal(t, "closed: lease for job "+l.JobID()+" is closed: it was claimed in an edit that was aborted", err.Error())
}
