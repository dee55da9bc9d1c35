// A worker's loop in one commit: completing a lease and claiming the
// production's next job together (docs/DESIGN.md, "Complete and claim next").
package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libleases/libleases/core/store"
)

// CompleteAndClaimNext completes the lease with f, as Complete does, and
// claims the next claimable job of the same production for the same worker
// for duration d, as Claim does, in one commit: one write transaction and,
// on SQLite, one fsync instead of two.
//
// Every rule of both operations holds. The completion's are checked first:
// if the completion is refused, nothing is claimed and the error is the
// completion's. If the production has nothing to claim, the completion
// commits alone and next is nil with a nil error. Otherwise the lease is
// closed and next is the new, active lease. If the commit's outcome is
// unknown the lease stays active (its next use asks the store) and no new
// lease is returned; the error names the job the claim chose (its
// ClaimedJobID).
//
// It is one commit: when only the claim half fails, nothing commits, the
// completion neither, and the lease still holds its claim, so the failure
// is no verdict about the lease (its Done stays open, its keep-alive runs
// on). A new claim that would be born expired (d shorter than the commit
// took) is KindInvalidDuration, not KindExpired.
func (l *Lease) CompleteAndClaimNext(f Facts, d time.Duration) (next *Lease, err error) {
	return l.completeAndClaimNext(context.Background(), f, d)
}

func (l *Lease) completeAndClaimNext(ctx context.Context, f Facts, d time.Duration) (*Lease, error) {
	if err := l.nilCheck(); err != nil {
		return nil, err
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	us, err := ValidateDuration(d)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var next *Lease
	var claimErr error // the claim half's refusal, in the last attempt
	err = l.transitionOf(ctx, "completed", func(g *guard) error {
		next, claimErr = nil, nil // a retried transaction chooses again
		// The claim reads its production right after the completion reads
		// its job: a store may send both reads at once.
		if ra, ok := g.tx.(store.ReadAhead); ok {
			ra.ProductionAhead(l.production)
		}
		if err := completeIn(g, l, f); err != nil {
			return err
		}
		n, err := claimIn(g, l.production, "", l.worker, us)
		if KindOf(err) == KindNothingToClaim {
			return nil
		}
		if err != nil {
			claimErr = err
			return err
		}
		next = n
		return nil
	}, func(err error) bool {
		// The claim half failed: nothing committed, the completion neither,
		// and this lease still holds its claim.
		return (claimErr != nil && err == claimErr) || bornExpired(err, next)
	})
	if err == nil {
		if next != nil {
			next.state = LeaseActive
		}
		return next, nil
	}
	if bornExpired(err, next) {
		return nil, &Error{Kind: KindInvalidDuration, JobID: l.jobID,
			Msg: fmt.Sprintf("the claim of job %s for %s would have been born expired (the commit took longer than its "+
				"duration): nothing was committed, the completion of job %s neither, and this lease still holds its "+
				"claim; complete it, or complete and claim the next job for longer", next.jobID, d, l.jobID)}
	}
	if next != nil && KindOf(err) == KindOutcomeUnknown {
		err = &Error{Kind: KindOutcomeUnknown, JobID: l.jobID, ClaimedJobID: next.jobID, Err: errors.Unwrap(err),
			Msg: fmt.Sprintf("the completion of job %s and the claim of job %s in production %q may or may not have "+
				"committed, and no new lease was returned: this lease's next use asks the store; observe job %s "+
				"(worker, attempts), and cancel it or let it expire", l.jobID, next.jobID, l.production, next.jobID)}
	}
	return nil, err
}

// bornExpired reports whether err is the pre-commit rejection of the new
// claim next (its expiry passed before the commit), not of the lease
// being completed.
func bornExpired(err error, next *Lease) bool {
	var e *Error
	return next != nil && errors.As(err, &e) && e.Kind == KindExpired && e.JobID == next.jobID
}
