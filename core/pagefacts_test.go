package core

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/libleases/libleases/core/store"
)

// countingFacts counts the reads of facts and outputs, per job and per set.
type countingFacts struct {
	store.Backend
	perJob, sets atomic.Int64
}

func (b *countingFacts) Facts(ctx context.Context, jobID string) ([]store.Fact, error) {
	b.perJob.Add(1)
	return b.Backend.Facts(ctx, jobID)
}

func (b *countingFacts) Outputs(ctx context.Context, jobID string) ([]store.Output, error) {
	b.perJob.Add(1)
	return b.Backend.Outputs(ctx, jobID)
}

func (b *countingFacts) FactsOf(ctx context.Context, jobIDs []string) ([]store.Fact, error) {
	b.sets.Add(1)
	return b.Backend.FactsOf(ctx, jobIDs)
}

func (b *countingFacts) OutputsOf(ctx context.Context, jobIDs []string) ([]store.Output, error) {
	b.sets.Add(1)
	return b.Backend.OutputsOf(ctx, jobIDs)
}

func TestAPageOfJobsCarriesItsCompletedJobsFactsReadInOneQueryForAllOfThem(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ids := f.request(5)
	published := []Facts{
		{Metadata: map[string]json.RawMessage{"frames": json.RawMessage(`24`), "tags": json.RawMessage(`["hd",true,null]`)},
			Provenance: map[string]json.RawMessage{"tool": json.RawMessage(`{"name":"render","v":2.5}`)},
			Outputs: []Output{{Path: "/out/b", Size: 2, SHA256: strings.Repeat("cd", 32), Nonce: "n2"},
				{Path: "/out/a", Size: 1, SHA256: strings.Repeat("ab", 32), Nonce: "n1"}}},
		{}, // completed, publishing nothing
		{Metadata: map[string]json.RawMessage{"ratio": json.RawMessage(`0.5`)}},
	}
	for _, facts := range published {
		l := f.claim("w", time.Minute)
		require.NoError(t, l.Complete(facts))
	}
	l := f.claim("w", time.Minute) // ids[3] stays claimed, ids[4] requested
	defer func() { _ = l.Release() }()

	reads := &countingFacts{Backend: f.a.b}
	f.a.b = reads
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Facts: true})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 5)
	require.EqualValues(t, 2, reads.sets.Load(), "one query for the page's facts, one for its outputs")
	require.Zero(t, reads.perJob.Load(), "no read per job")
	require.Len(t, page.Facts, 3, "an entry for each completed job, none for the others")
	f.a.b = reads.Backend
	for i := range published {
		rec, err := f.a.JobDetail(ctx, "p", ids[i])
		require.NoError(t, err)
		require.Equal(t, rec.Facts, page.Facts[ids[i]], "job %d: the page's facts are its record's", i)
	}
	require.Len(t, page.Facts[ids[0]].Outputs, 2)
	require.Equal(t, "/out/a", page.Facts[ids[0]].Outputs[0].Path, "outputs in path order, as a record has them")
	require.Empty(t, page.Facts[ids[1]].Metadata)
	require.Contains(t, mustJSON(t, page), `"facts":{"`)

	// Bounded by the page: the second page of two carries its own jobs' facts only.
	first, err := f.a.ListJobs(ctx, "p", JobQuery{Facts: true, Limit: 2})
	require.NoError(t, err)
	require.Len(t, first.Facts, 2)
	second, err := f.a.ListJobs(ctx, "p", JobQuery{Facts: true, Limit: 2, After: first.Next})
	require.NoError(t, err)
	require.Equal(t, map[string]Facts{ids[2]: page.Facts[ids[2]]}, second.Facts)

	// Without asking, a page has no facts and its JSON is as before.
	plain, err := f.a.ListJobs(ctx, "p", JobQuery{})
	require.NoError(t, err)
	require.Nil(t, plain.Facts)
	require.NotContains(t, mustJSON(t, plain), `"facts"`)
}
