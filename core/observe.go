// Bounded observation (docs/observing.md): paged, filtered listings of
// productions, jobs and events, streams over them, one job's record, counts
// and per-minute rates. Every call is a few short reads; none holds a read
// transaction across pages, and none returns a secret.
package core

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/libleases/libleases/core/store"
)

// Page sizes of every listing: a Limit of 0 means DefaultPageSize; more than
// MaxPageSize is invalid_argument.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// MaxCursorLen bounds a cursor (bytes): every cursor a listing returns fits
// (the longest, a production's, is under 300), so a caller can size a
// buffer for one, and a longer one is refused before it is decoded.
const MaxCursorLen = 1024

// MaxObservedWindow is how far back the per-minute counts and the workers
// seen may look: at most a day of one-minute buckets.
const MaxObservedWindow = 24 * time.Hour

var (
	jobStates  = []string{StateRequested, StateClaimed, StateCompleted, StateFailed, StateCancelled, StateDead}
	eventKinds = []string{"production_created", "requested", "claimed", "renewed", "released", "failed",
		"completed", "cancelled", "claim_expired", "retry", "dead", "redriven", "policy_changed"}
)

// ---- cursors ----------------------------------------------------------------

// A cursor is opaque to callers: the listing it belongs to (kind and scope,
// e.g. one production's jobs) and the last key listed. A cursor of another
// listing is refused rather than silently read as this one's.
func encodeCursor(kind, scope, last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "\x00" + scope + "\x00" + last))
}

// decodeCursor reads a cursor of listing kind: its scope and last key. The
// caller checks the scope once it knows its own.
func decodeCursor(c, kind string) (scope, last string, err error) {
	if len(c) > MaxCursorLen {
		return "", "", errf(KindInvalidArgument, "cursor is %d bytes, the limit is %d: pass back a Next value unchanged",
			len(c), MaxCursorLen)
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.Split(string(raw), "\x00")
	if err != nil || len(parts) != 3 {
		return "", "", errMalformedCursor()
	}
	if parts[0] != kind {
		return "", "", errForeignCursor()
	}
	return parts[1], parts[2], nil
}

func errForeignCursor() error { return errf(KindInvalidArgument, "cursor belongs to another listing") }

func errMalformedCursor() error {
	return errf(KindInvalidArgument, "cursor is malformed: pass back a Next value unchanged")
}

func jobCursor(productionID string, seq int64) string {
	return encodeCursor("jobs", productionID, strconv.FormatInt(seq, 10))
}

// parseJobCursor reads a job cursor: the production it belongs to ("" for
// none) and the last seq listed.
func parseJobCursor(c string) (string, int64, error) {
	if c == "" {
		return "", 0, nil
	}
	scope, last, err := decodeCursor(c, "jobs")
	if err != nil {
		return "", 0, err
	}
	seq, err := strconv.ParseInt(last, 10, 64)
	if err != nil || seq < 0 || scope == "" {
		return "", 0, errMalformedCursor()
	}
	return scope, seq, nil
}

// ---- shared checks ----------------------------------------------------------

func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageSize, nil
	case limit < 0 || limit > MaxPageSize:
		return 0, errf(KindInvalidArgument, "limit %d is outside 1..%d (0 means %d)", limit, MaxPageSize, DefaultPageSize)
	}
	return limit, nil
}

// oneOf checks that every name is known and returns them without repeats;
// none, or every known one, is [""]: no filter.
func oneOf(what string, names, known []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if err := checkText(what, n, MaxNameLen, false); err != nil {
			return nil, err
		}
		if !slices.Contains(known, n) {
			return nil, errf(KindInvalidArgument, "unknown %s %q (one of %s)", what, n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 || len(out) == len(known) {
		return []string{""}, nil
	}
	return out, nil
}

// mergeBySeq merges pages read one filter value at a time (each in seq
// order) into the first limit rows in seq order: so a filter on several
// states or kinds is several index ranges, never a scan.
func mergeBySeq[T any](pages [][]T, seq func(T) int64, limit int) []T {
	var all []T
	for _, p := range pages {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(x, y T) int { return cmp.Compare(seq(x), seq(y)) })
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

// observedNow is the authority's time for an observation: the server's
// clock when the store has one, else this host's (or the test seam).
func (a *Authority) observedNow(ctx context.Context) (int64, error) {
	c, ok := a.b.(store.Clock)
	if !ok || a.seam.Load() != nil {
		return a.now(), nil
	}
	v, err := c.Now(ctx)
	if err != nil {
		return 0, storageErr("read the authority clock", err)
	}
	return v, nil
}

// observed checks the production name, then the authority, and looks the
// production up. Every other argument is checked before it: bad input is
// reported before any store access (docs/errors.md).
func (a *Authority) observed(ctx context.Context, production string) (store.Production, error) {
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return store.Production{}, err
	}
	if err := a.usable(); err != nil {
		return store.Production{}, err
	}
	return productionByName(ctx, a.b, production)
}

// ---- productions ------------------------------------------------------------

// ProductionQuery selects a page of productions in byte order of their names.
type ProductionQuery struct {
	After string // a ProductionPage.Next; "" starts at the first
	Limit int    // 0: DefaultPageSize; at most MaxPageSize
}

// ProductionPage is one page of productions; Next is "" after the last.
type ProductionPage struct {
	Productions []Production `json:"productions"`
	Next        string       `json:"next"`
}

// ListProductions lists one page of productions. Productions are few, but a
// listing is bounded all the same.
func (a *Authority) ListProductions(ctx context.Context, q ProductionQuery) (ProductionPage, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return ProductionPage{}, err
	}
	after := ""
	if q.After != "" {
		if _, after, err = decodeCursor(q.After, "productions"); err != nil {
			return ProductionPage{}, err
		}
	}
	if err := a.usable(); err != nil {
		return ProductionPage{}, err
	}
	ps, err := a.b.ListProductions(ctx, after, limit+1)
	if err != nil {
		return ProductionPage{}, storageErr("list productions", err)
	}
	page := ProductionPage{Productions: []Production{}}
	if len(ps) > limit {
		ps = ps[:limit]
		page.Next = encodeCursor("productions", "", ps[limit-1].Name)
	}
	for _, p := range ps {
		page.Productions = append(page.Productions, toProduction(p))
	}
	return page, nil
}

// ---- jobs ---------------------------------------------------------------------

// JobQuery selects a page of one production's jobs, in request order.
type JobQuery struct {
	States []string // any of these states; none means every state
	Key    string   // exactly this key; "" means any
	// KeyPrefix lists the jobs whose idempotency key starts with it, byte
	// for byte, in byte order of their keys (not request order): one range
	// of the production's keys. "" means any. Not with Key, ID or Worker.
	KeyPrefix string
	ID        string // exactly this job id; "" means any
	// Worker lists the jobs whose claim this worker holds or last held,
	// newest claim first (not request order); "" means any.
	Worker string
	After  string // a JobPage.Next; "" starts at the first job
	// Before is a JobPage.Prev: the page just before the one that gave it
	// (the Limit jobs listed just before it, still in request order). At
	// most one of After and Before.
	Before string
	Limit  int // 0: DefaultPageSize; at most MaxPageSize
	// Facts adds the page's facts (JobPage.Facts), read with the page in
	// one query for its facts and one for its outputs, not one per job.
	Facts bool
}

// JobPage is one page of jobs; Next is "" after the last, Prev "" at the
// first (the cursor of the page before, for JobQuery.Before). With
// JobQuery.Facts, Facts maps the id of each completed job of the page to
// the facts its completion published (a JobRecord's Facts; a job that
// published none has an empty entry); it is bounded by the page's size
// times the facts limit, MaxFactsLen.
type JobPage struct {
	Jobs  []Job            `json:"jobs"`
	Next  string           `json:"next"`
	Prev  string           `json:"prev,omitempty"`
	Facts map[string]Facts `json:"facts,omitempty"`
}

type checkedJobQuery struct {
	// A worker's listing: its cursor's claim time and job id.
	at int64
	id string

	states   []string
	scope    string // the production of the cursor
	after    int64
	before   int64  // with backward
	key      string // a key listing's cursor: the last key listed
	backward bool
	limit    int
}

func (q JobQuery) check() (checkedJobQuery, error) {
	var c checkedJobQuery
	var err error
	if c.states, err = oneOf("job state", q.States, jobStates); err != nil {
		return c, err
	}
	if err := checkText("job key", q.Key, MaxNameLen, true); err != nil {
		return c, err
	}
	if q.ID != "" {
		if err := checkID("job id", q.ID); err != nil {
			return c, err
		}
	}
	if c.limit, err = pageLimit(q.Limit); err != nil {
		return c, err
	}
	if q.After != "" && q.Before != "" {
		return c, errf(KindInvalidArgument, "give at most one of after and before")
	}
	if q.KeyPrefix != "" {
		if err := checkText("job key prefix", q.KeyPrefix, MaxNameLen, false); err != nil {
			return c, err
		}
		if q.Key != "" || q.ID != "" || q.Worker != "" {
			return c, errf(KindInvalidArgument, "a key prefix lists by key: give no key, id or worker with it")
		}
		cur := q.After
		if q.Before != "" {
			c.backward, cur = true, q.Before
		}
		c.scope, c.key, err = parseKeyCursor(cur, q.KeyPrefix)
		return c, err
	}
	if q.Worker != "" {
		if err := checkText("worker", q.Worker, MaxNameLen, false); err != nil {
			return c, err
		}
		cur := q.After
		if q.Before != "" {
			c.backward, cur = true, q.Before
		}
		c.scope, c.at, c.id, err = parseWorkerCursor(cur)
		return c, err
	}
	if q.Before != "" {
		c.backward = true
		c.scope, c.before, err = parseJobCursor(q.Before)
		return c, err
	}
	c.scope, c.after, err = parseJobCursor(q.After)
	return c, err
}

// A key listing is by key, unique in a production: its cursor is the last
// key listed.
func keyCursor(productionID, key string) string { return encodeCursor("jobkeys", productionID, key) }

// parseKeyCursor reads a key listing's cursor: its production ("" for none)
// and the last key listed, which starts with the listing's prefix.
func parseKeyCursor(c, prefix string) (string, string, error) {
	if c == "" {
		return "", "", nil
	}
	scope, key, err := decodeCursor(c, "jobkeys")
	if err != nil {
		return "", "", err
	}
	if scope == "" || !strings.HasPrefix(key, prefix) || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return "", "", errMalformedCursor()
	}
	return scope, key, nil
}

// keyPrefixEnd is the least text above every text that starts with prefix
// in byte order, "" when there is none (a prefix of only U+10FFFF). UTF-8's
// byte order is the order of code points, so it is the prefix with its last
// code point that has a successor raised by one (the surrogates, no text,
// skipped) and the ones after it dropped: always valid UTF-8, so every store
// can compare it as text.
func keyPrefixEnd(prefix string) string {
	rs := []rune(prefix)
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == utf8.MaxRune {
			continue
		}
		r := rs[i] + 1
		if r == 0xD800 {
			r = 0xE000
		}
		return string(rs[:i]) + string(r)
	}
	return ""
}

// listKeyJobs lists one page of the jobs whose key starts with the prefix,
// in byte order of the keys: one range of the production's keys per state.
func (a *Authority) listKeyJobs(ctx context.Context, p store.Production, q JobQuery, c checkedJobQuery, prev bool) (JobPage, error) {
	end := keyPrefixEnd(q.KeyPrefix)
	// read lists up to n jobs of the prefix at or above from ("": the
	// prefix), above after ("": no bound) and below below ("": the prefix's
	// end), from the bottom up or (backward) from the top down. A key holds
	// no NUL byte, so the least key above k is at or above k+"\x01".
	read := func(from, after, below string, backward bool, n int) ([]store.JobRow, error) {
		if from == "" {
			from = q.KeyPrefix
		}
		if below == "" {
			below = end
		}
		pages := make([][]store.JobRow, len(c.states))
		for i, state := range c.states {
			f := store.JobFilter{ProductionID: p.ID, State: state, KeyFrom: from, KeyAfter: after,
				KeyBelow: below, Backward: backward, Limit: n}
			var err error
			if pages[i], err = a.b.ListJobs(ctx, f); err != nil {
				return nil, storageErr("list jobs by key", err)
			}
		}
		var all []store.JobRow
		for _, pg := range pages {
			all = append(all, pg...)
		}
		slices.SortFunc(all, func(x, y store.JobRow) int {
			if backward {
				return strings.Compare(y.Key, x.Key)
			}
			return strings.Compare(x.Key, y.Key)
		})
		if len(all) > n {
			all = all[:n]
		}
		return all, nil
	}
	page := JobPage{}
	var rows []store.JobRow
	var err error
	if c.backward {
		if rows, err = read("", "", c.key, true, c.limit+1); err != nil {
			return JobPage{}, err
		}
		if len(rows) > c.limit {
			rows = rows[:c.limit]
			page.Prev = keyCursor(p.ID, rows[c.limit-1].Key)
		}
		slices.Reverse(rows)
		// Whether a job follows: the first one at or above the cursor.
		after, err := read(c.key, "", "", false, 1)
		if err != nil {
			return JobPage{}, err
		}
		if len(after) > 0 {
			last := c.key
			if len(rows) > 0 {
				last = rows[len(rows)-1].Key
			}
			page.Next = keyCursor(p.ID, last)
		}
	} else {
		if rows, err = read("", c.key, "", false, c.limit+1); err != nil {
			return JobPage{}, err
		}
		if len(rows) > c.limit {
			rows = rows[:c.limit]
			page.Next = keyCursor(p.ID, rows[c.limit-1].Key)
		}
		if prev && c.key != "" {
			// Whether a job comes before: the first one at or below the cursor.
			before, err := read("", "", c.key+"\x01", true, 1)
			if err != nil {
				return JobPage{}, err
			}
			if len(before) > 0 {
				first := c.key + "\x01"
				if len(rows) > 0 {
					first = rows[0].Key
				}
				page.Prev = keyCursor(p.ID, first)
			}
		}
	}
	return a.filledPage(ctx, p.Name, page, rows, q.Facts)
}

// A worker's listing is by claim time and job id, newest first: its cursor
// is that pair.
func workerCursor(productionID string, at int64, id string) string {
	return encodeCursor("workerjobs", productionID, strconv.FormatInt(at, 10)+"/"+id)
}

// parseWorkerCursor reads a worker listing's cursor: its production ("" for
// none), claim time and job id.
func parseWorkerCursor(c string) (string, int64, string, error) {
	if c == "" {
		return "", 0, "", nil
	}
	scope, last, err := decodeCursor(c, "workerjobs")
	if err != nil {
		return "", 0, "", err
	}
	atText, id, ok := strings.Cut(last, "/")
	at, err := strconv.ParseInt(atText, 10, 64)
	if !ok || err != nil || at <= 0 || scope == "" || checkID("job id", id) != nil {
		return "", 0, "", errMalformedCursor()
	}
	return scope, at, id, nil
}

// listWorkerJobs lists one page of the jobs a worker's claim holds or last
// held, newest claim first: Next goes to older claims, Prev to newer ones.
func (a *Authority) listWorkerJobs(ctx context.Context, p store.Production, q JobQuery, c checkedJobQuery) (JobPage, error) {
	f := store.WorkerJobFilter{ProductionID: p.ID, Worker: q.Worker, Key: q.Key, ID: q.ID}
	if c.states[0] != "" {
		f.States = c.states
	}
	read := func(f store.WorkerJobFilter, n int) ([]store.JobRow, error) {
		f.Limit = n
		rows, err := a.b.ListWorkerJobs(ctx, f)
		if err != nil {
			return nil, storageErr("list a worker's jobs", err)
		}
		return rows, nil
	}
	older := func(r store.JobRow) store.WorkerJobFilter {
		g := f
		g.BeforeAt, g.BeforeID = r.ClaimedAt, r.ID
		return g
	}
	newer := func(r store.JobRow) store.WorkerJobFilter {
		g := f
		g.Newer, g.AfterAt, g.AfterID = true, r.ClaimedAt, r.ID
		return g
	}
	at := store.JobRow{}
	at.ClaimedAt, at.ID = c.at, c.id
	cursor := func(r store.JobRow) string { return workerCursor(p.ID, r.ClaimedAt, r.ID) }
	page := JobPage{}
	var rows []store.JobRow
	var err error
	if c.backward {
		if rows, err = read(newer(at), c.limit+1); err != nil {
			return JobPage{}, err
		}
		if len(rows) > c.limit {
			rows = rows[:c.limit]
			page.Prev = cursor(rows[c.limit-1])
		}
		slices.Reverse(rows)
		if len(rows) > 0 {
			more, err := read(older(rows[len(rows)-1]), 1)
			if err != nil {
				return JobPage{}, err
			}
			if len(more) > 0 {
				page.Next = cursor(rows[len(rows)-1])
			}
		}
	} else {
		g := f
		if c.at != 0 {
			g = older(at)
		}
		if rows, err = read(g, c.limit+1); err != nil {
			return JobPage{}, err
		}
		if len(rows) > c.limit {
			rows = rows[:c.limit]
			page.Next = cursor(rows[c.limit-1])
		}
		if c.at != 0 && len(rows) > 0 {
			more, err := read(newer(rows[0]), 1)
			if err != nil {
				return JobPage{}, err
			}
			if len(more) > 0 {
				page.Prev = cursor(rows[0])
			}
		}
	}
	page.Jobs = make([]Job, 0, len(rows))
	for _, r := range rows {
		page.Jobs = append(page.Jobs, toJob(p.Name, r.Job))
	}
	return page, nil
}

// ListJobs lists one page of a production's jobs in request order. Paging
// is by request order, which never changes: following Next to the end lists
// every job that existed when the first page was read exactly once, however
// their states change meanwhile (docs/observing.md).
func (a *Authority) ListJobs(ctx context.Context, production string, q JobQuery) (JobPage, error) {
	return a.listJobs(ctx, production, q, true)
}

// listJobs is ListJobs; a stream, which never goes back, passes prev false
// and skips the read that finds whether a job comes before the page.
func (a *Authority) listJobs(ctx context.Context, production string, q JobQuery, prev bool) (JobPage, error) {
	c, err := q.check()
	if err != nil {
		return JobPage{}, err
	}
	p, err := a.observed(ctx, production)
	if err != nil {
		return JobPage{}, err
	}
	if (q.After != "" || q.Before != "") && c.scope != p.ID {
		return JobPage{}, errForeignCursor()
	}
	if q.Worker != "" {
		return a.listWorkerJobs(ctx, p, q, c)
	}
	if q.KeyPrefix != "" {
		return a.listKeyJobs(ctx, p, q, c, prev)
	}
	// read lists up to n jobs of the filter past the cursor point at: above
	// it in request order, or just below it from the top down (backward).
	read := func(at int64, backward bool, n int) ([]store.JobRow, error) {
		if backward && at <= 0 {
			return nil, nil // no job is below the first (a BeforeSeq of 0 is no bound)
		}
		pages := make([][]store.JobRow, len(c.states))
		for i, state := range c.states {
			f := store.JobFilter{ProductionID: p.ID, State: state, Key: q.Key, ID: q.ID, Limit: n}
			if backward {
				f.BeforeSeq, f.Backward = at, true
			} else {
				f.AfterSeq = at
			}
			var err error
			if pages[i], err = a.b.ListJobs(ctx, f); err != nil {
				return nil, storageErr("list jobs", err)
			}
		}
		seq := func(j store.JobRow) int64 { return j.Seq }
		if backward {
			seq = func(j store.JobRow) int64 { return -j.Seq }
		}
		return mergeBySeq(pages, seq, n), nil
	}
	page := JobPage{}
	var rows []store.JobRow
	if c.backward {
		if rows, err = read(c.before, true, c.limit+1); err != nil {
			return JobPage{}, err
		}
		if len(rows) > c.limit {
			rows = rows[:c.limit]
			page.Prev = jobCursor(p.ID, rows[c.limit-1].Seq)
		}
		slices.Reverse(rows)
		// Whether a job follows: the first one at or above the cursor.
		after, err := read(c.before-1, false, 1)
		if err != nil {
			return JobPage{}, err
		}
		if len(after) > 0 {
			last := c.before
			if len(rows) > 0 {
				last = rows[len(rows)-1].Seq
			}
			page.Next = jobCursor(p.ID, last)
		}
	} else {
		if rows, err = read(c.after, false, c.limit+1); err != nil {
			return JobPage{}, err
		}
		if len(rows) > c.limit {
			rows = rows[:c.limit]
			page.Next = jobCursor(p.ID, rows[c.limit-1].Seq)
		}
		if prev && c.after > 0 {
			// Whether a job comes before: the first one at or below the cursor.
			before, err := read(c.after+1, true, 1)
			if err != nil {
				return JobPage{}, err
			}
			if len(before) > 0 {
				first := c.after + 1
				if len(rows) > 0 {
					first = rows[0].Seq
				}
				page.Prev = jobCursor(p.ID, first)
			}
		}
	}
	return a.filledPage(ctx, p.Name, page, rows, q.Facts)
}

// pageFacts reads the facts and outputs of a page's completed jobs, set-based:
// one query for the facts, one for the outputs. Facts are published with the
// completion, in its transaction, and a completed job stays completed: read
// after the rows, they match them.
func pageFacts(ctx context.Context, r store.Reader, rows []store.JobRow) (map[string]Facts, error) {
	out := map[string]Facts{}
	var ids []string
	for _, row := range rows {
		if row.State == store.StateCompleted {
			ids = append(ids, row.ID)
			out[row.ID] = Facts{}
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	fs, err := r.FactsOf(ctx, ids)
	if err != nil {
		return nil, storageErr("read facts", err)
	}
	for _, x := range fs {
		f, ok := out[x.JobID]
		if !ok {
			continue
		}
		m := &f.Metadata
		if x.Kind == "provenance" {
			m = &f.Provenance
		}
		if *m == nil {
			*m = map[string]json.RawMessage{}
		}
		(*m)[x.Key] = json.RawMessage(x.Value)
		out[x.JobID] = f
	}
	outs, err := r.OutputsOf(ctx, ids)
	if err != nil {
		return nil, storageErr("read outputs", err)
	}
	for _, o := range outs {
		if f, ok := out[o.JobID]; ok {
			f.Outputs = append(f.Outputs, Output{Path: o.Path, Size: o.Size, SHA256: o.SHA256, Nonce: o.Nonce})
			out[o.JobID] = f
		}
	}
	return out, nil
}

// EachJob calls fn for every job the query selects, from q.After to the
// end, reading q.Limit jobs at a time (0: DefaultPageSize), each page in its
// own short read: memory stays constant and no read transaction is held
// while fn runs. An error from fn stops the stream and is returned.
func (a *Authority) EachJob(ctx context.Context, production string, q JobQuery, fn func(Job) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := a.listJobs(ctx, production, q, false)
		if err != nil {
			return err
		}
		for _, j := range page.Jobs {
			if err := fn(j); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}

// JobRecord is everything observable about one job: the observation, the
// payload's size (not the payload), request and update times, the facts
// its completion published and its attempt history (the newest
// AttemptHistoryLen ended claims, oldest first). Never a secret. Its event
// timeline is ListEvents with EventQuery.JobID.
type JobRecord struct {
	Job
	PayloadSize int64
	RequestedAt time.Time
	UpdatedAt   time.Time
	Facts       Facts
	History     []Attempt
}

// Attempt is one ended claim of a job: its number (the job's attempt count
// when it was claimed; a redrive starts again from 1), the worker, when it
// was claimed and ended, how it ended (completed, failed, retry, released,
// expired, cancelled) and the reason given.
type Attempt struct {
	Number    int64     `json:"number"`
	Worker    string    `json:"worker"`
	ClaimedAt time.Time `json:"-"`
	EndedAt   time.Time `json:"-"`
	Ending    string    `json:"ending"`
	Reason    string    `json:"reason"`
}

// MarshalJSON writes the attempt with times in unix µs.
func (x Attempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Number    int64   `json:"number"`
		Worker    string  `json:"worker"`
		ClaimedAt int64   `json:"claimed_at_unix_us"`
		EndedAt   int64   `json:"ended_at_unix_us"`
		Ending    string  `json:"ending"`
		Reason    *string `json:"reason"`
	}{x.Number, x.Worker, x.ClaimedAt.UnixMicro(), x.EndedAt.UnixMicro(), x.Ending, optStr(x.Reason)})
}

// JobDetail reads one job's record.
func (a *Authority) JobDetail(ctx context.Context, production, jobID string) (JobRecord, error) {
	if err := checkID("job id", jobID); err != nil {
		return JobRecord{}, err
	}
	p, err := a.observed(ctx, production)
	if err != nil {
		return JobRecord{}, err
	}
	rows, err := a.b.ListJobs(ctx, store.JobFilter{ProductionID: p.ID, ID: jobID, Limit: 1})
	if err != nil {
		return JobRecord{}, storageErr("look up job", err)
	}
	if len(rows) == 0 {
		return JobRecord{}, errf(KindNotFound, "job %s does not exist in production %q", jobID, p.Name)
	}
	r := rows[0]
	rec := JobRecord{Job: toJob(p.Name, r.Job), PayloadSize: r.PayloadSize,
		RequestedAt: time.UnixMicro(r.RequestedAt).UTC(), UpdatedAt: time.UnixMicro(r.UpdatedAt).UTC()}
	// Facts are published with the completion, in its transaction, and a
	// completed job stays completed: read after the row, they match it.
	if r.State == store.StateCompleted {
		if rec.Facts, err = factsOf(ctx, a.b, jobID); err != nil {
			return JobRecord{}, err
		}
	}
	hist, err := a.b.Attempts(ctx, jobID)
	if err != nil {
		return JobRecord{}, storageErr("read attempts", err)
	}
	rec.History = make([]Attempt, len(hist))
	for i, h := range hist {
		rec.History[i] = Attempt{Number: h.Number, Worker: h.Worker, ClaimedAt: time.UnixMicro(h.ClaimedAt).UTC(),
			EndedAt: time.UnixMicro(h.EndedAt).UTC(), Ending: h.Ending, Reason: h.Reason}
	}
	return rec, nil
}

// JobTimes is when a job was requested, when it was first claimed and how
// its newest ended claim went: from these, how long it waited (request to
// first claim) and how long its claim ran (claim to its end).
type JobTimes struct {
	RequestedAt    time.Time
	FirstClaimedAt time.Time // its first claim ever (zero: never claimed)
	LastEnded      *Attempt  // its newest ended claim (nil: none ended)
}

// Waited is how long the job waited from its request to its first claim;
// false when it was never claimed (it waits still, or was cancelled first).
func (t JobTimes) Waited() (time.Duration, bool) {
	if t.FirstClaimedAt.IsZero() {
		return 0, false
	}
	return max(0, t.FirstClaimedAt.Sub(t.RequestedAt)), true
}

// FinalClaim is the claim that finished j, as history: for a completed,
// failed, dead or cancelled job whose claim ended it (not one cancelled
// while it waited, nor the earlier claims of a job requested again). Its
// expiry no longer matters.
func (t JobTimes) FinalClaim(j Job) (Attempt, bool) {
	switch j.State {
	case StateCompleted, StateFailed, StateDead, StateCancelled:
	default:
		return Attempt{}, false
	}
	if t.LastEnded == nil || j.ClaimedAt.IsZero() || !t.LastEnded.ClaimedAt.Equal(j.ClaimedAt) {
		return Attempt{}, false
	}
	return *t.LastEnded, true
}

// Ran is how long j's claim ran: a claimed job's from its claim to now
// (running), a finished job's from the claim that finished it to its end;
// false for a job no claim holds or finished.
func (t JobTimes) Ran(j Job, now time.Time) (d time.Duration, running, ok bool) {
	if j.State == StateClaimed && !j.ClaimedAt.IsZero() {
		return max(0, now.Sub(j.ClaimedAt)), true, true
	}
	if c, ok := t.FinalClaim(j); ok {
		return max(0, c.EndedAt.Sub(c.ClaimedAt)), false, true
	}
	return 0, false, false
}

// MarshalJSON writes the times in unix µs (null when absent).
func (t JobTimes) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		RequestedAt    *int64   `json:"requested_at_unix_us"`
		FirstClaimedAt *int64   `json:"first_claimed_at_unix_us"`
		LastEnded      *Attempt `json:"last_ended_claim"`
	}{optTime(t.RequestedAt), optTime(t.FirstClaimedAt), t.LastEnded})
}

// JobTimes reads the times of up to MaxPageSize jobs of a production (a
// page of a listing) in one read: ids that are not jobs of the production
// are left out of the map. The first claim is the job's first claimed
// event; the newest ended claim is the newest of its attempt history.
func (a *Authority) JobTimes(ctx context.Context, production string, ids []string) (map[string]JobTimes, error) {
	if len(ids) > MaxPageSize {
		return nil, errf(KindInvalidArgument, "%d job ids: at most %d at a time", len(ids), MaxPageSize)
	}
	for _, id := range ids {
		if err := checkID("job id", id); err != nil {
			return nil, err
		}
	}
	p, err := a.observed(ctx, production)
	if err != nil {
		return nil, err
	}
	out := make(map[string]JobTimes, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := a.b.JobTimes(ctx, p.ID, ids)
	if err != nil {
		return nil, storageErr("read job times", err)
	}
	for _, r := range rows {
		t := JobTimes{RequestedAt: time.UnixMicro(r.RequestedAt).UTC()}
		if r.FirstClaimedAt != 0 {
			t.FirstClaimedAt = time.UnixMicro(r.FirstClaimedAt).UTC()
		}
		if r.Last.EndedAt != 0 {
			t.LastEnded = &Attempt{Number: r.Last.Number, Worker: r.Last.Worker,
				ClaimedAt: time.UnixMicro(r.Last.ClaimedAt).UTC(), EndedAt: time.UnixMicro(r.Last.EndedAt).UTC(),
				Ending: r.Last.Ending, Reason: r.Last.Reason}
		}
		out[r.ID] = t
	}
	return out, nil
}

// factsOf reads the facts and outputs a completion published for a job.
func factsOf(ctx context.Context, r store.Reader, jobID string) (Facts, error) {
	fs, err := r.Facts(ctx, jobID)
	if err != nil {
		return Facts{}, storageErr("read facts", err)
	}
	var f Facts
	for _, x := range fs {
		m := &f.Metadata
		if x.Kind == "provenance" {
			m = &f.Provenance
		}
		if *m == nil {
			*m = map[string]json.RawMessage{}
		}
		(*m)[x.Key] = json.RawMessage(x.Value)
	}
	outs, err := r.Outputs(ctx, jobID)
	if err != nil {
		return Facts{}, storageErr("read outputs", err)
	}
	for _, o := range outs {
		f.Outputs = append(f.Outputs, Output{Path: o.Path, Size: o.Size, SHA256: o.SHA256, Nonce: o.Nonce})
	}
	return f, nil
}

// ---- events -------------------------------------------------------------------

// EventQuery selects a page of events in seq order.
type EventQuery struct {
	Production string   // "" means every production
	JobID      string   // one job's timeline; "" means every job
	Kinds      []string // any of these kinds; none means every kind (needs Production or JobID)
	After      int64    // events with seq > After
	Limit      int      // 0: DefaultPageSize; at most MaxPageSize
}

// EventPage is one page of events. Next is the After of the next page: the
// last listed seq, or the query's After when none was listed; a follower
// keeps it and asks again later. More says whether more events past Next
// can already be listed.
type EventPage struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
	More   bool    `json:"more"`
}

// ListEvents lists one page of events, oldest first. On PostgreSQL a page
// stops at the follower-safe horizon (docs/postgres.md), so following Next
// never skips an event that commits late.
func (a *Authority) ListEvents(ctx context.Context, q EventQuery) (EventPage, error) {
	sel, err := a.selectEvents(ctx, q)
	if err != nil {
		return EventPage{}, err
	}
	es, err := sel.read(ctx, a.b)
	if err != nil {
		return EventPage{}, err
	}
	page := EventPage{Events: make([]Event, 0, len(es)), Next: q.After, More: len(es) > sel.limit}
	if page.More {
		es = es[:sel.limit]
	}
	if page.Events, err = sel.named(ctx, a.b, es); err != nil {
		return EventPage{}, err
	}
	if len(es) > 0 {
		page.Next = es[len(es)-1].Seq
	}
	return page, nil
}

// eventSelection is a checked EventQuery: the store filter (one kind at a
// time), the kinds, the page size and the names of the productions met.
type eventSelection struct {
	f     store.EventFilter
	kinds []string
	limit int
	names map[string]string
}

// selectEvents checks q (bad input before any store access) and resolves
// its production and job; the filter stops at the event horizon.
func (a *Authority) selectEvents(ctx context.Context, q EventQuery) (eventSelection, error) {
	var sel eventSelection
	if err := checkText("production name", q.Production, MaxNameLen, true); err != nil {
		return sel, err
	}
	if q.JobID != "" {
		if err := checkID("job id", q.JobID); err != nil {
			return sel, err
		}
	}
	kinds, err := oneOf("event kind", q.Kinds, eventKinds)
	if err != nil {
		return sel, err
	}
	if kinds[0] != "" && q.Production == "" && q.JobID == "" {
		return sel, errf(KindInvalidArgument, "filtering events by kind needs a production or a job")
	}
	if q.After < 0 {
		return sel, errf(KindInvalidArgument, "after must not be negative")
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return sel, err
	}
	if err := a.usable(); err != nil {
		return sel, err
	}
	sel = eventSelection{kinds: kinds, limit: limit, names: map[string]string{},
		f: store.EventFilter{AfterSeq: q.After, Limit: limit + 1}}
	if q.Production != "" {
		p, err := productionByName(ctx, a.b, q.Production)
		if err != nil {
			return sel, err
		}
		sel.names[p.ID], sel.f.ProductionID = p.Name, p.ID
	}
	if q.JobID != "" {
		j, err := a.b.JobByID(ctx, q.JobID)
		if errors.Is(err, store.ErrNoRow) || (err == nil && sel.f.ProductionID != "" && j.ProductionID != sel.f.ProductionID) {
			return sel, errf(KindNotFound, "job %s does not exist", q.JobID)
		}
		if err != nil {
			return sel, storageErr("look up job", err)
		}
		sel.f.JobID = j.ID
	}
	// One horizon for every kind's range, so the merged page stops where
	// each of them does.
	if sel.f.Before, err = a.b.EventHorizon(ctx); err != nil {
		return sel, storageErr("list events", err)
	}
	return sel, nil
}

// read reads one range per kind and merges them: the first limit+1 events
// in seq order, or from the newest down with f.Newest.
func (sel eventSelection) read(ctx context.Context, b store.Backend) ([]store.Event, error) {
	f := sel.f
	pages := make([][]store.Event, len(sel.kinds))
	for i, kind := range sel.kinds {
		f.Kind = kind
		var err error
		if pages[i], err = b.ListEvents(ctx, f); err != nil {
			return nil, storageErr("list events", err)
		}
	}
	seq := func(e store.Event) int64 { return e.Seq }
	if f.Newest {
		seq = func(e store.Event) int64 { return -e.Seq }
	}
	return mergeBySeq(pages, seq, f.Limit), nil
}

// named turns stored events into observations, naming their productions.
func (sel eventSelection) named(ctx context.Context, r store.Reader, es []store.Event) ([]Event, error) {
	out := make([]Event, 0, len(es))
	for _, e := range es {
		name, ok := sel.names[e.ProductionID]
		if !ok {
			p, err := r.ProductionByID(ctx, e.ProductionID)
			if err != nil && !errors.Is(err, store.ErrNoRow) {
				return nil, storageErr("list events", err)
			}
			name, sel.names[e.ProductionID] = p.Name, p.Name
		}
		out = append(out, toEvent(name, e))
	}
	return out, nil
}

func toEvent(production string, e store.Event) Event {
	out := Event{Seq: e.Seq, At: time.UnixMicro(e.At).UTC(), Production: production, JobID: e.JobID,
		Kind: e.Kind, Worker: e.Worker, Detail: e.Detail}
	if e.Expiry != 0 {
		out.Expiry = time.UnixMicro(e.Expiry).UTC()
	}
	return out
}

// EachEvent calls fn for every event the query selects that can be listed
// now, from q.After on, a page at a time (q.Limit, 0: DefaultPageSize), each
// page its own short read. It returns the After to continue from later.
func (a *Authority) EachEvent(ctx context.Context, q EventQuery, fn func(Event) error) (int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return q.After, err
		}
		page, err := a.ListEvents(ctx, q)
		if err != nil {
			return q.After, err
		}
		for _, e := range page.Events {
			if err := fn(e); err != nil {
				return q.After, err
			}
			q.After = e.Seq
		}
		if !page.More {
			return page.Next, nil
		}
	}
}

// ---- counts and rates ---------------------------------------------------------

// JobCounts are a production's jobs by state at one moment of the authority
// clock (At). Expired counts the claimed jobs whose claim had expired then
// (they are in Claimed too, and claimable again); OldestRequested is when
// the first requested job in request order was requested (zero when none).
type JobCounts struct {
	Requested, Claimed, Completed, Failed, Cancelled, Dead int64
	Expired                                                int64
	OldestRequested                                        time.Time
	At                                                     time.Time
}

// Total is the number of jobs.
func (c JobCounts) Total() int64 {
	return c.Requested + c.Claimed + c.Completed + c.Failed + c.Cancelled + c.Dead
}

// Counts counts a production's jobs by state from the index of jobs by
// state (a range of index entries, not of rows), with its expired claims
// and its oldest waiting job.
func (a *Authority) Counts(ctx context.Context, production string) (JobCounts, error) {
	p, err := a.observed(ctx, production)
	if err != nil {
		return JobCounts{}, err
	}
	now, err := a.observedNow(ctx)
	if err != nil {
		return JobCounts{}, err
	}
	sc, err := a.b.CountJobs(ctx, p.ID, now)
	if err != nil {
		return JobCounts{}, storageErr("count jobs", err)
	}
	return jobCounts(sc, now), nil
}

// CountsByProduction counts the jobs of every production by state, as
// Counts counts one production's, in one read of the store (the index of
// jobs by state and the partial index of claims; never the event log), at
// one moment of the authority clock: by production id. A production with no
// job is absent: its counts are zeros. The cost is the number of jobs and
// of the productions that have any, not of those that have none.
func (a *Authority) CountsByProduction(ctx context.Context) (map[string]JobCounts, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	now, err := a.observedNow(ctx)
	if err != nil {
		return nil, err
	}
	all, err := a.b.CountEveryProduction(ctx, now)
	if err != nil {
		return nil, storageErr("count jobs", err)
	}
	out := make(map[string]JobCounts, len(all))
	for id, sc := range all {
		out[id] = jobCounts(sc, now)
	}
	return out, nil
}

// jobCounts is a store's count of a production's jobs taken at now.
func jobCounts(sc store.JobCounts, now int64) JobCounts {
	c := JobCounts{Requested: sc.ByState[StateRequested], Claimed: sc.ByState[StateClaimed],
		Completed: sc.ByState[StateCompleted], Failed: sc.ByState[StateFailed], Cancelled: sc.ByState[StateCancelled],
		Dead:    sc.ByState[StateDead],
		Expired: sc.Expired, At: time.UnixMicro(now).UTC()}
	if sc.OldestRequested != 0 {
		c.OldestRequested = time.UnixMicro(sc.OldestRequested).UTC()
	}
	return c
}

// NextClaimableAt is when the production's next job that is not claimable
// now becomes claimable: a delayed or backing-off job, or a claim whose
// expiry (and the backoff its lapse costs) will pass; zero when none
// waits. A worker with nothing to claim can sleep until then (a waiting
// claim wakes at it). It reads one entry of two partial indexes. A time
// already past means a claim now would find the job.
func (a *Authority) NextClaimableAt(ctx context.Context, production string) (time.Time, error) {
	p, err := a.observed(ctx, production)
	if err != nil {
		return time.Time{}, err
	}
	us, ok, err := a.b.NextWakeAt(ctx, p.ID)
	if err != nil {
		return time.Time{}, storageErr("find the next claimable time", err)
	}
	if !ok {
		return time.Time{}, nil
	}
	return time.UnixMicro(us).UTC(), nil
}

// windowStart checks that since lies within MaxObservedWindow before the
// authority's now, and returns both in unix µs.
func (a *Authority) windowStart(ctx context.Context, since time.Time) (int64, int64, error) {
	now, err := a.observedNow(ctx)
	if err != nil {
		return 0, 0, err
	}
	s := since.UnixMicro()
	if since.IsZero() || s < now-MaxObservedWindow.Microseconds() {
		return 0, 0, errf(KindInvalidArgument, "since %s is more than %s before the authority's time %s",
			describeUS(s), MaxObservedWindow, describeUS(now))
	}
	return s, now, nil
}

// MinuteCount is the number of events in the minute that starts at Minute.
type MinuteCount struct {
	Minute time.Time
	Count  int64
}

// EventsPerMinute counts a production's events of one kind per minute of
// the authority clock, from since (at most MaxObservedWindow ago) on.
// Minutes are aligned to the clock; the first one counts only events at or
// after since; minutes without events are left out. It reads the index of
// events by kind and time: the cost is the number of events counted.
func (a *Authority) EventsPerMinute(ctx context.Context, production, kind string, since time.Time) ([]MinuteCount, error) {
	if _, err := oneOf("event kind", []string{kind}, eventKinds); err != nil {
		return nil, err
	}
	p, err := a.observed(ctx, production)
	if err != nil {
		return nil, err
	}
	s, _, err := a.windowStart(ctx, since)
	if err != nil {
		return nil, err
	}
	bs, err := a.b.CountEvents(ctx, p.ID, kind, s, time.Minute.Microseconds())
	if err != nil {
		return nil, storageErr("count events", err)
	}
	out := make([]MinuteCount, len(bs))
	for i, b := range bs {
		out[i] = MinuteCount{Minute: time.UnixMicro(b.Start).UTC(), Count: b.Count}
	}
	return out, nil
}

// WorkerActivity is one worker of a production: when it last claimed,
// renewed, released, failed or completed (zero when not since the query's
// time) and how many unexpired claims it holds.
type WorkerActivity struct {
	Worker   string
	LastSeen time.Time
	Holding  int64
}

// Workers lists the workers seen in a production since `since` (at most
// MaxObservedWindow ago) and every worker holding an unexpired claim: at
// most MaxPageSize of them, the most recently seen first, then by name.
func (a *Authority) Workers(ctx context.Context, production string, since time.Time) ([]WorkerActivity, error) {
	p, err := a.observed(ctx, production)
	if err != nil {
		return nil, err
	}
	s, now, err := a.windowStart(ctx, since)
	if err != nil {
		return nil, err
	}
	ws, err := a.b.Workers(ctx, p.ID, s, now, MaxPageSize)
	if err != nil {
		return nil, storageErr("list workers", err)
	}
	slices.SortFunc(ws, func(x, y store.WorkerSeen) int {
		return cmp.Or(cmp.Compare(y.LastSeen, x.LastSeen), strings.Compare(x.Worker, y.Worker))
	})
	out := make([]WorkerActivity, 0, min(len(ws), MaxPageSize))
	for _, w := range ws[:min(len(ws), MaxPageSize)] {
		wa := WorkerActivity{Worker: w.Worker, Holding: w.Holding}
		if w.LastSeen != 0 {
			wa.LastSeen = time.UnixMicro(w.LastSeen).UTC()
		}
		out = append(out, wa)
	}
	return out, nil
}

// ---- JSON forms: times as unix µs, absent times as null, like every listing.

// MarshalJSON writes the job's listing form plus the record's fields.
func (r JobRecord) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		jobJSON
		PayloadSize int64     `json:"payload_size"`
		RequestedAt *int64    `json:"requested_at_unix_us"`
		UpdatedAt   *int64    `json:"updated_at_unix_us"`
		Facts       Facts     `json:"facts"`
		History     []Attempt `json:"attempt_history"`
	}{r.Job.jsonForm(), r.PayloadSize, optTime(r.RequestedAt), optTime(r.UpdatedAt), r.Facts, r.History})
}

// MarshalJSON writes the counts by state name.
func (c JobCounts) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Requested       int64  `json:"requested"`
		Claimed         int64  `json:"claimed"`
		Completed       int64  `json:"completed"`
		Failed          int64  `json:"failed"`
		Cancelled       int64  `json:"cancelled"`
		Dead            int64  `json:"dead"`
		Expired         int64  `json:"expired"`
		OldestRequested *int64 `json:"oldest_requested_unix_us"`
		At              *int64 `json:"at_unix_us"`
	}{c.Requested, c.Claimed, c.Completed, c.Failed, c.Cancelled, c.Dead, c.Expired, optTime(c.OldestRequested), optTime(c.At)})
}

// MarshalJSON writes one minute's count.
func (m MinuteCount) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Minute int64 `json:"minute_unix_us"`
		Count  int64 `json:"count"`
	}{m.Minute.UnixMicro(), m.Count})
}

// MarshalJSON writes one worker's activity.
func (w WorkerActivity) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Worker   string `json:"worker"`
		LastSeen *int64 `json:"last_seen_unix_us"`
		Holding  int64  `json:"holding"`
	}{w.Worker, optTime(w.LastSeen), w.Holding})
}

// filledPage puts rows into page as jobs of production, with their facts
// when withFacts: the end of every listing of jobs, whatever its order.
func (a *Authority) filledPage(ctx context.Context, production string, page JobPage, rows []store.JobRow,
	withFacts bool) (JobPage, error) {
	page.Jobs = make([]Job, 0, len(rows))
	for _, r := range rows {
		page.Jobs = append(page.Jobs, toJob(production, r.Job))
	}
	if withFacts {
		var err error
		if page.Facts, err = pageFacts(ctx, a.b, rows); err != nil {
			return JobPage{}, err
		}
	}
	return page, nil
}
