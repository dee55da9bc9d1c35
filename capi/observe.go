// The Go exports of the paged observations (include/leases.h, "observations,
// paged"): one page, one job's record or one count per call, as JSON.
package main

/*
#include <stdint.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/libleases/libleases/core"
)

// The C shapes of the pages: an exhausted listing's "next" is null, not "",
// so a caller tests for the end without comparing strings.
type jobsPageJSON struct {
	Jobs []core.Job `json:"jobs"`
	Next *string    `json:"next"`
}

// A page of jobs with its jobs' facts (leases_jobs_page_facts_json).
type jobsFactsPageJSON struct {
	Jobs  []core.Job            `json:"jobs"`
	Next  *string               `json:"next"`
	Facts map[string]core.Facts `json:"facts"`
}

type productionsPageJSON struct {
	Productions []core.Production `json:"productions"`
	Next        *string           `json:"next"`
}

func nextOrNull(next string) *string {
	if next == "" {
		return nil
	}
	return &next
}

// nameList reads a comma-separated filter ("requested,claimed"); NULL or ""
// is no filter. Each name is judged by core (unknown or empty names are
// invalid_argument there).
func nameList(what string, p *C.char) ([]string, error) {
	s, err := inStr(what, p, core.MaxNameLen, true)
	if err != nil || s == "" {
		return nil, err
	}
	return strings.Split(s, ","), nil
}

// authorityInto is the body of the exports that read one string through an
// authority: *out (named what) cleared, the authority resolved, then read
// (which checks its arguments before it touches the store), its string
// handed to C.
func authorityInto(h C.uintptr_t, out **C.char, what string, read func(a *core.Authority) (string, error)) C.int {
	if out == nil {
		return status(invalid("%s is NULL", what))
	}
	*out = nil
	a, err := authorityOf(uintptr(h))
	if err != nil {
		return status(err)
	}
	s, err := read(a)
	if err != nil {
		return status(err)
	}
	*out = cString(s)
	return 0
}

// observeInto is authorityInto for the observations: read's value as JSON
// in *out_json.
func observeInto(h C.uintptr_t, out **C.char, read func(a *core.Authority) (any, error)) C.int {
	return authorityInto(h, out, "out_json", func(a *core.Authority) (string, error) {
		v, err := read(a)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "", &core.Error{Kind: core.KindInternal, Msg: "encoding the listing failed", Err: err}
		}
		return string(b), nil
	})
}

//export leasesgo_jobs_page_json
func leasesgo_jobs_page_json(h C.uintptr_t, production, states, key, jobID, cursor *C.char, limit C.uint32_t,
	out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		page, err := jobsPage(a, production, states, key, jobID, cursor, limit, false)
		return jobsPageJSON{Jobs: page.Jobs, Next: nextOrNull(page.Next)}, err
	})
}

//export leasesgo_jobs_page_facts_json
func leasesgo_jobs_page_facts_json(h C.uintptr_t, production, states, key, jobID, cursor *C.char,
	limit C.uint32_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		page, err := jobsPage(a, production, states, key, jobID, cursor, limit, true)
		return jobsFactsPageJSON{Jobs: page.Jobs, Next: nextOrNull(page.Next), Facts: page.Facts}, err
	})
}

// jobsPage reads the arguments of a jobs page and lists it.
func jobsPage(a *core.Authority, production, states, key, jobID, cursor *C.char, limit C.uint32_t,
	facts bool) (core.JobPage, error) {
	p, err := inStr("production", production, core.MaxNameLen, false)
	if err != nil {
		return core.JobPage{}, err
	}
	q := core.JobQuery{Limit: int(limit), Facts: facts}
	if q.States, err = nameList("states", states); err != nil {
		return core.JobPage{}, err
	}
	if q.Key, err = inStr("key", key, core.MaxNameLen, true); err != nil {
		return core.JobPage{}, err
	}
	if q.ID, err = inStr("job_id", jobID, maxIDLen, true); err != nil {
		return core.JobPage{}, err
	}
	if q.After, err = inStr("cursor", cursor, core.MaxCursorLen, true); err != nil {
		return core.JobPage{}, err
	}
	return a.ListJobs(context.Background(), p, q)
}

//export leasesgo_events_page_json
func leasesgo_events_page_json(h C.uintptr_t, production, jobID, kinds *C.char, after C.int64_t, limit C.uint32_t,
	out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		q := core.EventQuery{After: int64(after), Limit: int(limit)}
		var err error
		if q.Production, err = inStr("production", production, core.MaxNameLen, true); err != nil {
			return nil, err
		}
		if q.JobID, err = inStr("job_id", jobID, maxIDLen, true); err != nil {
			return nil, err
		}
		if q.Kinds, err = nameList("kinds", kinds); err != nil {
			return nil, err
		}
		if after < 0 {
			return nil, invalid("after_seq must not be negative")
		}
		return a.ListEvents(context.Background(), q)
	})
}

//export leasesgo_job_json
func leasesgo_job_json(h C.uintptr_t, production, jobID *C.char, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		p, err := inStr("production", production, core.MaxNameLen, false)
		if err != nil {
			return nil, err
		}
		j, err := inStr("job_id", jobID, maxIDLen, false)
		if err != nil {
			return nil, err
		}
		return a.JobDetail(context.Background(), p, j)
	})
}

//export leasesgo_productions_page_json
func leasesgo_productions_page_json(h C.uintptr_t, cursor *C.char, limit C.uint32_t, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		c, err := inStr("cursor", cursor, core.MaxCursorLen, true)
		if err != nil {
			return nil, err
		}
		page, err := a.ListProductions(context.Background(), core.ProductionQuery{After: c, Limit: int(limit)})
		return productionsPageJSON{Productions: page.Productions, Next: nextOrNull(page.Next)}, err
	})
}

//export leasesgo_job_counts_json
func leasesgo_job_counts_json(h C.uintptr_t, production *C.char, out **C.char) (st C.int) {
	defer recoverTo(&st)
	return observeInto(h, out, func(a *core.Authority) (any, error) {
		p, err := inStr("production", production, core.MaxNameLen, false)
		if err != nil {
			return nil, err
		}
		return a.Counts(context.Background(), p)
	})
}
