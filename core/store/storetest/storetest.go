// Package storetest holds what the tests of both stores share: the filters
// of the paged listings whose query plans each store pins, and what the
// migration to schema 4 must make of the schema-3 fixture.
package storetest

import (
	"context"
	"fmt"

	"github.com/libleases/libleases/core/store"
)

// JobPages is one filter of every kind a job page is read with, by name,
// for the production productionID.
func JobPages(productionID string) map[string]store.JobFilter {
	out := map[string]store.JobFilter{
		"jobs":           {AfterSeq: 5},
		"jobs key":       {Key: "k7"},
		"jobs key+state": {Key: "k7", State: store.StateClaimed},
		"jobs id":        {ID: "i"},
		"jobs id+state":  {ID: "i", State: store.StateFailed},
	}
	for _, s := range []string{store.StateRequested, store.StateClaimed, store.StateCompleted, store.StateFailed, store.StateCancelled,
		store.StateDead} {
		out["jobs "+s] = store.JobFilter{State: s, AfterSeq: 5}
		out["jobs "+s+" backward"] = store.JobFilter{State: s, BeforeSeq: 3000, Backward: true}
	}
	// A page backwards: the range below a seq, from its top.
	out["jobs backward"] = store.JobFilter{BeforeSeq: 3000, Backward: true}
	for name, f := range out {
		f.ProductionID, f.Limit = productionID, 101
		out[name] = f
	}
	return out
}

// EventPages is one filter of every kind an event page is read with, by
// name, for the production productionID.
func EventPages(productionID string) map[string]store.EventFilter {
	out := map[string]store.EventFilter{
		"events":                 {AfterSeq: 5},
		"events production":      {ProductionID: productionID},
		"events production+kind": {ProductionID: productionID, Kind: "claimed"},
		"events job":             {JobID: "j"},
		"events job+kind":        {JobID: "j", Kind: "claimed"},
	}
	all := map[string]store.EventFilter{}
	for name, f := range out {
		f.Before, f.Limit = 1<<62, 101
		all[name] = f
		f.Newest = true // the same range, newest first
		all[name+" newest"] = f
	}
	return all
}

// Statement is one statement of the observations, its arguments, and what
// its plan must show.
type Statement struct {
	SQL  string
	Args []any
	Want string
	Also []string // further index reads the plan must hold (a statement of several parts)
}

// CheckV4Fixture checks a store migrated from the schema-3 fixture both
// stores' tests write: production "pid", and jobs j1 (requested at 10), j2
// (claimed at 12 until 500 by its third attempt, requested at 11) and j3
// (failed, requested at 13). The production has the default policy; every
// job keeps its state and attempts, its claimable time is its request time,
// a claim's ready time is its expiry, and requested jobs are due; the state
// check admits dead (and nothing unknown); the attempt history is writable.
func CheckV4Fixture(ctx context.Context, b store.Backend) error {
	p, err := b.ProductionByID(ctx, "pid")
	if err != nil {
		return err
	}
	if want := (store.Policy{MaxAttempts: 25, BackoffBaseUS: 1_000_000, BackoffCapUS: 3_600_000_000, JitterPercent: 20}); p.Policy != want {
		return fmt.Errorf("policy %+v, want the default %+v", p.Policy, want)
	}
	type migrated struct {
		state               string
		attempts, claimable int64
		ready               int64
		due                 bool
	}
	want := map[string]migrated{
		"j1": {"requested", 0, 10, 10, true},
		"j2": {"claimed", 3, 11, 500, false},
		"j3": {"failed", 1, 13, 13, false},
	}
	for id, w := range want {
		j, err := b.JobByID(ctx, id)
		if err != nil {
			return err
		}
		if got := (migrated{j.State, j.Attempts, j.ClaimableAt, j.ReadyAt, j.Due}); got != w {
			return fmt.Errorf("job %s migrated as %+v, want %+v", id, got, w)
		}
	}
	if j, err := b.NextClaimable(ctx, "pid", 0); err != nil || j.ID != "j1" {
		return fmt.Errorf("the next claimable job is %q (%v), want j1", j.ID, err)
	}
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	j, err := tx.JobByID(ctx, "j3")
	if err != nil {
		return err
	}
	j.State = store.StateDead
	if err := tx.UpdateJob(ctx, j); err != nil {
		return fmt.Errorf("a dead job: %w", err)
	}
	if err := tx.InsertAttempt(ctx, store.Attempt{JobID: "j3", Number: 1, Worker: "w", Ending: "retry"}, 20); err != nil {
		return fmt.Errorf("an attempt: %w", err)
	}
	return tx.Commit()
}
