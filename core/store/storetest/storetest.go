// Package storetest holds what the tests of both stores share: the filters
// of the paged listings whose query plans each store pins.
package storetest

import "github.com/libleases/libleases/core/store"

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
	for _, s := range []string{store.StateRequested, store.StateClaimed, store.StateCompleted, store.StateFailed, store.StateCancelled} {
		out["jobs "+s] = store.JobFilter{State: s, AfterSeq: 5}
	}
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
}
