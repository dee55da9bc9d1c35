// The context-taking forms of the writes, as database/sql has them: each is
// its plain form with ctx. A context that ends before the operation
// commits ends it, including its wait for the writer lock: nothing is
// written and the error is KindBusy wrapping the context's error
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded). Once the
// commit has started the operation finishes: it then fails only as
// KindOutcomeUnknown. The waits (ClaimWait, Lease.Check), the
// observations (ListJobs, Counts, ...) and the maintenance writes (Prune,
// ArchiveProduction, DeleteProduction) take a context already. A write
// without a form here fails TestEveryGoWriteTakesAContextAsTheWaitsDo
// (frontdoor_test.go at the module root).
package core

import (
	"context"
	"time"
)

// CreateProductionContext is CreateProduction with ctx.
func (a *Authority) CreateProductionContext(ctx context.Context, name string) (Production, error) {
	return a.createProduction(ctx, name, nil)
}

// CreateProductionWithPolicyContext is CreateProductionWithPolicy with ctx.
func (a *Authority) CreateProductionWithPolicyContext(ctx context.Context, name string, policy RetryPolicy) (Production, error) {
	sp, err := policy.check()
	if err != nil {
		return Production{}, err
	}
	return a.createProduction(ctx, name, &sp)
}

// SetRetryPolicyContext is SetRetryPolicy with ctx.
func (a *Authority) SetRetryPolicyContext(ctx context.Context, production string, policy RetryPolicy) error {
	return a.setRetryPolicy(ctx, production, policy)
}

// CreateProductionWithPoliciesContext is CreateProductionWithPolicies with
// ctx.
func (a *Authority) CreateProductionWithPoliciesContext(ctx context.Context, name string, policy RetryPolicy,
	retention RetentionPolicy) (Production, error) {
	return a.createProductionWithPolicies(ctx, name, policy, retention)
}

// SetRetentionPolicyContext is SetRetentionPolicy with ctx.
func (a *Authority) SetRetentionPolicyContext(ctx context.Context, production string, r RetentionPolicy) error {
	return a.setRetentionPolicy(ctx, production, r)
}

// RequestJobContext is RequestJob with ctx.
func (a *Authority) RequestJobContext(ctx context.Context, production, key string, payload []byte) (string, error) {
	return a.request(ctx, production, key, payload, RequestOptions{})
}

// RequestJobWithContext is RequestJobWith with ctx.
func (a *Authority) RequestJobWithContext(ctx context.Context, production, key string, payload []byte, o RequestOptions) (string, error) {
	return a.request(ctx, production, key, payload, o)
}

// CancelContext is Cancel with ctx.
func (a *Authority) CancelContext(ctx context.Context, production, jobID string) error {
	return a.cancel(ctx, production, jobID)
}

// RetryJobContext is RetryJob with ctx.
func (a *Authority) RetryJobContext(ctx context.Context, production, jobID string) error {
	return a.retryJob(ctx, production, jobID)
}

// RedriveContext is Redrive with ctx. It works in transactions of a few
// hundred jobs; a context that ends between two ends it there, and the
// count returned is what the committed ones redrove.
func (a *Authority) RedriveContext(ctx context.Context, production, state string) (int64, error) {
	return a.redriveAll(ctx, production, state)
}

// ClaimContext is Claim with ctx (it claims at once or not at all; ClaimWait
// waits for a job).
func (a *Authority) ClaimContext(ctx context.Context, production, worker string, d time.Duration) (*Lease, error) {
	return a.claimOne(ctx, production, "", worker, d)
}

// ClaimJobContext is ClaimJob with ctx.
func (a *Authority) ClaimJobContext(ctx context.Context, production, jobID, worker string, d time.Duration) (*Lease, error) {
	if err := checkID("job id", jobID); err != nil {
		return nil, err
	}
	return a.claimOne(ctx, production, jobID, worker, d)
}

// ImportContext is Import with ctx.
func (a *Authority) ImportContext(ctx context.Context, token string) (*Lease, error) {
	return a.importToken(ctx, token)
}

// BeginContext is Begin with ctx: the edit's transaction, its operations
// and its Commit run under ctx.
func (a *Authority) BeginContext(ctx context.Context) (*Edit, error) { return a.begin(ctx) }

// RenewContext is Renew with ctx.
func (l *Lease) RenewContext(ctx context.Context, d time.Duration) error { return l.renew(ctx, d) }

// ReleaseContext is Release with ctx.
func (l *Lease) ReleaseContext(ctx context.Context) error { return l.release(ctx) }

// FailContext is Fail with ctx.
func (l *Lease) FailContext(ctx context.Context, reason string) error { return l.fail(ctx, reason) }

// FailRetryContext is FailRetry with ctx.
func (l *Lease) FailRetryContext(ctx context.Context, reason string, delay time.Duration) error {
	return l.failRetry(ctx, reason, delay)
}

// CompleteContext is Complete with ctx.
func (l *Lease) CompleteContext(ctx context.Context, f Facts) error { return l.complete(ctx, f) }

// CompleteAndClaimNextContext is CompleteAndClaimNext with ctx.
func (l *Lease) CompleteAndClaimNextContext(ctx context.Context, f Facts, d time.Duration) (*Lease, error) {
	return l.completeAndClaimNext(ctx, f, d)
}

// FinishContext is Finish with ctx: it bounds the completion's commit (the
// output file is sealed and renamed first, and removed if the completion
// is refused, as Finish does).
func (x *Execution) FinishContext(ctx context.Context, f Facts) error { return x.finish(ctx, f) }
