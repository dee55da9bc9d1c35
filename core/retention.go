// Retention (docs/CONCEPTS.md "Retention and pruning"): how long a
// production keeps its finished jobs and its events, and the pruning that
// deletes what is past it, in small batches, each a short transaction.
package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/libleases/libleases/core/store"
)

const (
	// MaxRetention bounds every duration of a retention policy: 100 years.
	MaxRetention = 36500 * 24 * time.Hour
	// KeepForGood, as a duration of a retention policy, keeps what it
	// covers for good: pruning never deletes it.
	KeepForGood time.Duration = 0

	// PruneJobBatch bounds how many jobs one pruning transaction deletes,
	// and PruneEventBatch how many events (a pruned job's or old ones):
	// with a job's facts, outputs and at most AttemptHistoryLen attempts,
	// a batch deletes a bounded number of rows, so it holds the writer
	// for a bounded time (docs/decisions.md, "Retention").
	PruneJobBatch   = 64
	PruneEventBatch = 1000
	// serialBackgroundBatch is the background pruner's batch of jobs on a
	// store whose writers take turns (store.SerialWriter): a worker's
	// claim that arrives while a batch writes waits for it there, so the
	// batch is a quarter of PruneJobBatch (docs/decisions.md, "Retention").
	serialBackgroundBatch = 16
	// reclaimBatch is how many free pages one transaction gives back to
	// the file system after a prune (SQLite: 2 MiB at 4 KiB a page).
	reclaimBatch = 512
)

// RetentionPolicy is how long a production keeps its finished jobs — by
// state, counted from the job's last change (when it finished) — and its
// events, counted from when each was recorded. KeepForGood (0) keeps them
// for good. A pruned job is gone with its payload, facts, outputs, attempt
// history and events.
type RetentionPolicy struct {
	Completed time.Duration
	Failed    time.Duration
	Dead      time.Duration
	Cancelled time.Duration
	Events    time.Duration
}

// DefaultRetentionPolicy is the policy of a production created without
// one: completed and cancelled jobs for 7 days, failed and dead ones for 30
// days (they wait for a person), events for 7 days (docs/decisions.md,
// "Retention"). Productions that existed before retention policies keep
// everything until one is set.
func DefaultRetentionPolicy() RetentionPolicy {
	const day = 24 * time.Hour
	return RetentionPolicy{Completed: 7 * day, Failed: 30 * day, Dead: 30 * day, Cancelled: 7 * day, Events: 7 * day}
}

// MarshalJSON writes the policy as listings show it (µs, 0: kept for good).
func (r RetentionPolicy) MarshalJSON() ([]byte, error) { return marshalRetention(r) }

func marshalRetention(r RetentionPolicy) ([]byte, error) {
	return json.Marshal(struct {
		Completed int64 `json:"completed_us"`
		Failed    int64 `json:"failed_us"`
		Dead      int64 `json:"dead_us"`
		Cancelled int64 `json:"cancelled_us"`
		Events    int64 `json:"events_us"`
	}{r.Completed.Microseconds(), r.Failed.Microseconds(), r.Dead.Microseconds(), r.Cancelled.Microseconds(),
		r.Events.Microseconds()})
}

func (r RetentionPolicy) check() (store.Retention, error) {
	var out store.Retention
	for _, f := range []struct {
		what string
		d    time.Duration
		to   *int64
	}{{"completed retention", r.Completed, &out.CompletedUS}, {"failed retention", r.Failed, &out.FailedUS},
		{"dead retention", r.Dead, &out.DeadUS}, {"cancelled retention", r.Cancelled, &out.CancelledUS},
		{"events retention", r.Events, &out.EventsUS}} {
		if f.d == KeepForGood {
			continue
		}
		us, err := wholeUS(f.what+" (0 keeps for good)", f.d, time.Microsecond, MaxRetention)
		if err != nil {
			return out, err
		}
		*f.to = us
	}
	return out, nil
}

func toRetention(r store.Retention) RetentionPolicy {
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return RetentionPolicy{Completed: us(r.CompletedUS), Failed: us(r.FailedUS), Dead: us(r.DeadUS),
		Cancelled: us(r.CancelledUS), Events: us(r.EventsUS)}
}

func describeRetention(r store.Retention) string {
	return fmt.Sprintf("keep_completed_us=%d keep_failed_us=%d keep_dead_us=%d keep_cancelled_us=%d keep_events_us=%d",
		r.CompletedUS, r.FailedUS, r.DeadUS, r.CancelledUS, r.EventsUS)
}

// keepUS is how long r keeps a finished job of state (0: for good).
func keepUS(r store.Retention, state string) int64 {
	switch state {
	case store.StateCompleted:
		return r.CompletedUS
	case store.StateFailed:
		return r.FailedUS
	case store.StateDead:
		return r.DeadUS
	case store.StateCancelled:
		return r.CancelledUS
	}
	return 0
}

// CreateProductionWithPolicies creates a production with a retry and a
// retention policy, or returns the existing one of that name when both are
// the same (another is WrongState: change them with SetRetryPolicy and
// SetRetentionPolicy).
func (a *Authority) CreateProductionWithPolicies(name string, policy RetryPolicy, retention RetentionPolicy) (Production, error) {
	return a.createProductionWithPolicies(context.Background(), name, policy, retention)
}

func (a *Authority) createProductionWithPolicies(ctx context.Context, name string, policy RetryPolicy,
	retention RetentionPolicy) (Production, error) {
	sp, err := policy.check()
	if err != nil {
		return Production{}, err
	}
	sr, err := retention.check()
	if err != nil {
		return Production{}, err
	}
	return a.createProductionWith(ctx, name, &sp, &sr)
}

// SetRetentionPolicy is the coordinator's change of a production's
// retention policy. Pruning applies it from its next batch. A
// retention_changed event records it.
func (a *Authority) SetRetentionPolicy(production string, r RetentionPolicy) error {
	return a.setRetentionPolicy(context.Background(), production, r)
}

func (a *Authority) setRetentionPolicy(ctx context.Context, production string, r RetentionPolicy) error {
	sr, err := r.check()
	if err != nil {
		return err
	}
	return a.changeProduction(ctx, production, func(tx store.Tx, p store.Production, now int64) error {
		if p.Retention == sr {
			return nil
		}
		if err := tx.UpdateRetention(ctx, p.ID, sr); err != nil {
			return storageErr("set retention policy", err)
		}
		return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, Kind: "retention_changed", Detail: describeRetention(sr)})
	})
}

// ---- pruning ------------------------------------------------------------------

// DefaultPruneInterval is how often an open authority prunes in the
// background: each pass runs after the interval, give or take a quarter of
// it at random, so that processes opened together spread their passes.
const DefaultPruneInterval = 10 * time.Minute

// SetPruneInterval sets how often this authority prunes in the background,
// by every production's retention policy, on a goroutine of its own (off
// the workers' path: each batch is one short write, queued as any other);
// 0 stops it. Every open authority prunes by default (DefaultPruneInterval):
// every process may, since each batch decides under the store's locks what
// it deletes (two pruners at once take turns, and a row is deleted once), so
// no pruner is elected; a pass that finds nothing costs a few index reads
// per production. A pass that fails (busy, a store fault) is tried again at
// the next interval, and logged (SetLogger): a Warn record per failed pass,
// with its error and how many passes in a row have failed, a Warn record for
// a pass that could not vacuum (PruneResult.Note; once while the note stays
// the same), and an Info record for the first pass that succeeds after
// failures; a pass that succeeds logs nothing. LastBackgroundPrune is what
// the last pass did. Close stops it, waiting for a batch in flight.
func (a *Authority) SetPruneInterval(d time.Duration) {
	a.mu.Lock()
	stop := a.pruner
	a.pruner = nil
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
	if d <= 0 || a.closed.Load() {
		return
	}
	run := store.Run(func(ctx context.Context) {
		for {
			wait := d - d/4 + time.Duration(rand.Int64N(int64(d/2)+1))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			res, err := a.Prune(ctx, PruneOptions{Background: true})
			if err != nil && (ctx.Err() != nil || a.closed.Load()) {
				// Cut short by Close or by SetPruneInterval: no failure of
				// the store's, and no pass to report.
				continue
			}
			a.backgroundPassEnded(res, err)
		}
	})
	a.mu.Lock()
	if a.pruner != nil || a.closed.Load() {
		// Set again, or closed, meanwhile: this one stops.
		a.mu.Unlock()
		run()
		return
	}
	a.pruner = run
	a.mu.Unlock()
}

// BackgroundPrune is what the background pruner's last pass did.
type BackgroundPrune struct {
	Ended    time.Time   // when the last pass ended; zero if none has yet
	Result   PruneResult // what it deleted (before its error, if any)
	Err      error       // why it stopped early; nil if it finished
	Failures int64       // consecutive passes that failed, this one included; 0 after a success
}

// LastBackgroundPrune is what this authority's background pruner's last
// pass did (SetPruneInterval); a pass cut short by Close or by
// SetPruneInterval is not one. Its Err is also logged (SetLogger); a program
// that reports on its own health can read Failures instead.
func (a *Authority) LastBackgroundPrune() BackgroundPrune {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastPrune
}

// backgroundPassEnded records a background pass (LastBackgroundPrune) and
// logs what it cannot return to anyone: a failure, a vacuum it could not
// run, or a success after failures. A pass that succeeds logs nothing: one
// runs every few minutes in every process. A note is logged when it differs
// from the last one logged: a role that may not vacuum is a standing setting
// (the server's autovacuum then brings the space back), not news every pass.
// Nothing logged carries a secret or a payload: the store keeps only
// secrets' hashes, and pruning writes no row's values; its errors are its
// own texts and the store's messages (PostgreSQL's without their detail, the
// part that may quote a row).
func (a *Authority) backgroundPassEnded(res PruneResult, err error) {
	last := BackgroundPrune{Ended: time.Now(), Result: res, Err: err}
	a.mu.Lock()
	before := a.lastPrune.Failures
	if err != nil {
		last.Failures = before + 1
	}
	a.lastPrune = last
	newNote := res.Note != "" && res.Note != a.noteLogged
	if newNote {
		a.noteLogged = res.Note
	}
	a.mu.Unlock()
	ctx := context.Background()
	log := a.log()
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "leases: background prune failed", slog.Any("err", err),
			slog.Int64("jobs", res.Jobs), slog.Int64("events", res.Events), slog.Int64("batches", res.Batches),
			slog.Int64("failures", last.Failures))
	}
	if newNote {
		log.LogAttrs(ctx, slog.LevelWarn, "leases: background prune could not vacuum", slog.String("note", res.Note))
	}
	if err == nil && before > 0 {
		log.LogAttrs(ctx, slog.LevelInfo, "leases: background prune recovered", slog.Int64("failures", before))
	}
}

// FinishedStates are the states pruning deletes jobs of, in the order it
// visits them. A requested or claimed job is never pruned.
var FinishedStates = []string{StateCompleted, StateFailed, StateDead, StateCancelled}

// PruneOptions say what Prune deletes.
type PruneOptions struct {
	// Production limits pruning to one production ("": every production).
	Production string
	// OlderThan, when not 0, replaces each production's retention policy:
	// finished jobs (of every state) and events older than it go, even
	// those the policy keeps for good. Whole µs, at most MaxRetention.
	OlderThan time.Duration
	// Archive, when not "", is a file that receives what is deleted before
	// it is deleted, as JSON Lines (docs/CONCEPTS.md, "Archives"); it is
	// created or continued. Only what was written and synced to it is
	// deleted, and a prune interrupted with an archive is finished by the
	// next one given the same file, without writing anything twice.
	Archive string
	// DryRun deletes nothing and counts what would go: the jobs, and the
	// events pruned by age (a pruned job's own events go with it besides).
	DryRun bool
	// Background runs the pass as the background pruner does
	// (SetPruneInterval), for a program that schedules its own passes: it
	// never rewrites the file (upgradeSpaceMode), and, pruning by the
	// policies (OlderThan 0) without an archive, its batches may be lost at
	// a power cut, since the next pass prunes the same rows again: they
	// commit without waiting for the flush to stable storage, so they hold
	// the writer for less; after each batch it leaves the writer free for
	// as long as the batch held it (docs/CONCEPTS.md, "Retention and
	// pruning").
	Background bool

	// whole: every finished job and event, whatever its age
	// (ArchiveProduction); deleting: the production's newest job too
	// (DeleteProduction).
	whole, deleting bool
}

// Values of older (µs) below 0: every age (allAges), and the production's
// newest job too (allOfIt).
const (
	allAges = -1
	allOfIt = -2
)

// PruneResult counts what pruning deleted (or, in a dry run, would), and
// how long its transactions held the writer (without an archive): from
// each one's begin (on SQLite, once it held the writer lock) to its
// commit's return, the wait for the turn excluded. On PostgreSQL, Vacuumed
// counts the tables the prune then vacuumed so that the deleted rows'
// space is reused (store.DeadSpaceReuser), and Note, when not "", says why
// it could not (the role does not own the tables, or the vacuum failed):
// the deletes stand, and the server's autovacuum brings the space back
// within its naptime instead.
type PruneResult struct {
	Jobs     int64         `json:"jobs"`
	Events   int64         `json:"events"`
	Batches  int64         `json:"batches"`
	Held     time.Duration `json:"held_us"`
	Vacuumed int64         `json:"vacuumed_tables,omitempty"`
	Note     string        `json:"note,omitempty"`
}

// Prune deletes, in batches of at most PruneJobBatch jobs and
// PruneEventBatch events, each its own short transaction, the finished jobs
// and the events past their production's retention (or opts.OlderThan). It
// is an unguarded maintenance write (docs/CLOCK.md): its time is the
// clock's sample but never earlier than the mark, and it moves no mark. It
// never deletes a requested or claimed job, nor one that finished less than
// the retention ago. Within a state it deletes jobs in request order and
// stops at the first one still kept, so a job is pruned once it and every
// job of its state requested before it are past the retention. It keeps a
// production's newest job and the store's newest event (and that event's
// job) whatever their age: a store may number the next ones from them
// (docs/schema.md, schema 7). ctx ends it between batches or inside one
// (then nothing of that batch is deleted, or with an archive, the next
// prune with the same archive finishes it). Unless it is a dry run, it also
// rewrites, once, a store file that keeps the pages pruning frees into one
// that gives them back (upgradeSpaceMode), which the background pruner
// never does.
func (a *Authority) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	var res PruneResult
	if err := a.usable(); err != nil {
		return res, err
	}
	var older int64
	if opts.deleting {
		older = allOfIt
	} else if opts.whole {
		older = allAges
	} else if opts.OlderThan != 0 {
		us, err := wholeUS("prune age", opts.OlderThan, time.Microsecond, MaxRetention)
		if err != nil {
			return res, err
		}
		older = us
	}
	names := []string{opts.Production}
	if opts.Production == "" {
		ps, err := a.Productions()
		if err != nil {
			return res, err
		}
		names = names[:0]
		for _, p := range ps {
			names = append(names, p.Name)
		}
	} else if err := checkText("production name", opts.Production, MaxNameLen, false); err != nil {
		return res, err
	}
	if opts.DryRun {
		for _, name := range names {
			b, err := a.pruneDry(ctx, name, older)
			res.add(b)
			if err != nil {
				return res, err
			}
		}
		return res, nil
	}
	var ar *archive
	if opts.Archive != "" {
		var err error
		if ar, err = openArchive(opts.Archive); err != nil {
			return res, err
		}
		defer ar.close()
		// A batch written by an interrupted prune is deleted first.
		b, err := a.finishArchived(ctx, ar)
		res.add(b)
		if err != nil {
			return res, err
		}
	}
	// The background pruner's batches need not be durable: one lost at a
	// power cut is pruned again by the next pass, and a later durable
	// commit makes it durable with its own (store.Redoable). Their commits
	// then skip the flush that would hold the writer for most of a batch's
	// time, and the claims queued behind them wait that much less. A prune
	// with an archive stays durable (nothing archived is ever archived
	// again), and so does one by an age given (OlderThan): the policy's
	// next pass may keep what it deleted.
	wctx, batch := ctx, PruneJobBatch
	if opts.Background && ar == nil && older == 0 {
		wctx = store.Redoable(ctx)
		if _, ok := a.b.(store.SerialWriter); ok {
			batch = serialBackgroundBatch
		}
	}
	for _, name := range names {
		for _, state := range append(FinishedStates[:len(FinishedStates):len(FinishedStates)], "") {
			// A look outside any write first: a pass that finds nothing
			// (most passes of the background pruner, in every process)
			// takes no turn at the writer.
			if ok, err := a.mightPrune(ctx, name, state, older); err != nil {
				return res, err
			} else if !ok {
				continue
			}
			for {
				if err := ctx.Err(); err != nil {
					return res, abandoned(ctx, err)
				}
				var b PruneResult
				var more bool
				var err error
				switch {
				case ar != nil:
					b, more, err = a.pruneArchived(ctx, ar, name, state, older)
				case state == "":
					b, more, err = a.pruneEvents(wctx, name, older)
				default:
					b, more, err = a.pruneJobs(wctx, name, state, older, batch)
				}
				res.add(b)
				if err != nil {
					return res, err
				}
				if !more {
					break
				}
				if opts.Background && b.Held > 0 {
					// The background pruner leaves the writer to the
					// workers for as long as the batch held it: a worker
					// that queued behind one batch is not then behind the
					// next, and the writer's log (PostgreSQL's WAL flush,
					// SQLite's fsync and checkpoint) carries a batch's
					// writes at most half of the pass's time.
					restAfterBatch(ctx, b.Held)
				}
			}
		}
	}
	if !opts.Background {
		if err := a.upgradeSpaceMode(ctx, &res.Held); err != nil {
			return res, err
		}
	}
	if res.Jobs+res.Events > 0 {
		err := a.reclaim(wctx, &res.Held) // a reclaim lost is done again by the next
		if err != nil {
			return res, err
		}
		a.reuseDeadSpace(ctx, &res)
	}
	return res, nil
}

// reuseDeadSpace tells a store whose deleted rows' space is reused only
// after a vacuum what this prune deleted (store.DeadSpaceReuser); it
// vacuums when enough has gone. What it could not do is res.Note, never a
// failure of the prune: its deletes are committed.
func (a *Authority) reuseDeadSpace(ctx context.Context, res *PruneResult) {
	r, ok := a.b.(store.DeadSpaceReuser)
	if !ok {
		return
	}
	n, note, err := r.ReuseDeadSpace(ctx, res.Jobs, res.Events)
	res.Vacuumed += int64(n)
	if err != nil {
		note = "the space of the deleted rows is left to the server's autovacuum: vacuuming the pruned tables failed: " + err.Error()
	}
	res.Note = note
}

// upgradeSpaceMode rewrites, once, a file that keeps the pages pruning
// frees (created before the store gave them back) into one that gives them
// back, when it holds enough of them (store.SpaceModeUpgrader). Only a
// prune asked for runs it (leases prune, Prune from a program), never the
// background pruner: the rewrite copies the whole file and holds the writer
// for as long as that takes, which an operator chooses when, and never at
// open (docs/decisions.md, "Retention").
func (a *Authority) upgradeSpaceMode(ctx context.Context, held *time.Duration) error {
	u, ok := a.b.(store.SpaceModeUpgrader)
	if !ok {
		return nil
	}
	_, h, err := u.UpgradeSpaceMode(ctx)
	*held += h
	return storageErrOrNil("give the pages pruning freed back to the file system", err)
}

// reclaim gives the pages pruning freed back to the file system, in
// transactions of at most reclaimBatch pages, on a store that keeps them
// until told (store.SpaceReclaimer).
func (a *Authority) reclaim(ctx context.Context, held *time.Duration) error {
	for {
		var given int64
		if err := a.writeHeld(ctx, held, func(tx store.Tx, _ int64, _ *wakes) error {
			r, ok := tx.(store.SpaceReclaimer)
			if !ok {
				return nil
			}
			var err error
			given, err = r.ReclaimSpace(ctx, reclaimBatch)
			return storageErrOrNil("give freed space back", err)
		}); err != nil {
			return err
		}
		if given < reclaimBatch {
			return nil
		}
	}
}

// mightPrune looks, with reads only, at the first job of a production's
// state in request order (state "": its oldest event): pruning can delete
// something only if that one is past its retention at the authority's time
// now (the clock's sample, never earlier than the mark). It may say yes when
// the batch then finds nothing (the newest job or event is kept), never no
// when the batch would delete something: a batch stops at the first one
// still kept, and time only moves on. A production gone meanwhile: no.
func (a *Authority) mightPrune(ctx context.Context, production, state string, older int64) (bool, error) {
	p, err := a.b.ProductionByName(ctx, production)
	if errors.Is(err, store.ErrNoRow) {
		return false, nil
	}
	if err != nil {
		return false, storageErr("look for what to prune", err)
	}
	keep := older
	if keep == 0 {
		if state == "" {
			keep = p.Retention.EventsUS
		} else {
			keep = keepUS(p.Retention, state)
		}
	}
	if keep == 0 {
		return false, nil
	}
	if keep < 0 {
		return true, nil
	}
	now, err := a.pruneNow(ctx)
	if err != nil {
		return false, err
	}
	cutoff := now - keep
	if state == "" {
		evs, err := a.b.Events(ctx, p.ID, 0, 1)
		if err != nil {
			return false, storageErr("look for what to prune", err)
		}
		return len(evs) > 0 && evs[0].At <= cutoff, nil
	}
	rows, err := a.b.ListJobs(ctx, store.JobFilter{ProductionID: p.ID, State: state, Limit: 1})
	if err != nil {
		return false, storageErr("look for what to prune", err)
	}
	return len(rows) > 0 && rows[0].UpdatedAt <= cutoff, nil
}

func (r *PruneResult) add(b PruneResult) {
	r.Jobs += b.Jobs
	r.Events += b.Events
	r.Batches += b.Batches
	r.Held += b.Held
	r.Vacuumed += b.Vacuumed
	if b.Note != "" {
		r.Note = b.Note
	}
}

// MarshalJSON writes Held in µs, as every duration of a listing.
func (r PruneResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Jobs     int64  `json:"jobs"`
		Events   int64  `json:"events"`
		Batches  int64  `json:"batches"`
		Held     int64  `json:"held_us"`
		Vacuumed int64  `json:"vacuumed_tables,omitempty"`
		Note     string `json:"note,omitempty"`
	}{r.Jobs, r.Events, r.Batches, r.Held.Microseconds(), r.Vacuumed, r.Note})
}

// planJobs, read from r at now (a write transaction, or the store outside
// one), is the next batch of a production's jobs of one finished state
// that may be pruned: at most batch, in request order, ending
// before the first one still kept (or the newest job, or the newest event's
// job). more reports that the batch was full.
//
// older allAges plans every finished job whatever its age; allOfIt the
// newest job too (the production is being deleted: its numbers end with
// it).
func planJobs(ctx context.Context, r store.Reader, p store.Production, state string, older, now int64, batch int) ([]store.Job, bool, error) {
	keep := older
	if keep == 0 {
		keep = keepUS(p.Retention, state)
	}
	if keep == 0 {
		return nil, false, nil
	}
	cutoff := now - keep
	if older < 0 {
		cutoff = math.MaxInt64
	}
	jobs, err := r.JobsInState(ctx, p.ID, state, batch)
	if err != nil || len(jobs) == 0 {
		return nil, false, storageErrOrNil("find jobs to prune", err)
	}
	newest, err := r.NewestJobSeq(ctx, p.ID)
	if err != nil {
		return nil, false, storageErr("find jobs to prune", err)
	}
	if older == allOfIt {
		newest = math.MaxInt64
	}
	_, newestEventJob, err := r.NewestEvent(ctx)
	if err != nil {
		return nil, false, storageErr("find jobs to prune", err)
	}
	for i, j := range jobs {
		if j.UpdatedAt > cutoff || j.Seq >= newest || j.ID == newestEventJob {
			return jobs[:i], false, nil
		}
	}
	return jobs, len(jobs) == batch, nil
}

// planEvents, read from r at now (a write transaction, or the store
// outside one), is the next batch of a production's events older than its
// retention: at most PruneEventBatch, oldest first, ending before the first
// one still kept (or the newest event).
func planEvents(ctx context.Context, r store.Reader, p store.Production, older, now int64) ([]store.Event, bool, error) {
	keep := older
	if keep == 0 {
		keep = p.Retention.EventsUS
	}
	if keep == 0 {
		return nil, false, nil
	}
	cutoff := now - keep
	if older < 0 {
		cutoff = math.MaxInt64
	}
	evs, err := r.Events(ctx, p.ID, 0, PruneEventBatch)
	if err != nil || len(evs) == 0 {
		return nil, false, storageErrOrNil("find events to prune", err)
	}
	newest, _, err := r.NewestEvent(ctx)
	if err != nil {
		return nil, false, storageErr("find events to prune", err)
	}
	for i, e := range evs {
		if e.At > cutoff || e.Seq >= newest {
			return evs[:i], false, nil
		}
	}
	return evs, len(evs) == PruneEventBatch, nil
}

// pruneJobs is one batch of a production's jobs of one finished state: at
// most batch jobs (PruneJobBatch at most) and PruneEventBatch of their
// events. more reports that the next batch may find more.
//
// The batch is chosen by reads outside any write, and its transaction only
// deletes: a worker queued for the writer waits behind the deleting
// statements, not behind the reads that chose them (on PostgreSQL the
// transaction is two round trips, not six). What the reads chose may have
// changed before the write: a job retried or redriven since is in another
// state or changed later, and the store's newest event may now be one of
// them; DeleteFinishedJobs checks all three inside the write and keeps
// such a job. The production's newest job only moves on, so a job older
// than it stays older, and a job that did not change has the events that
// were counted. A batch whose events are more than PruneEventBatch (jobs
// with long histories) is chosen and deleted inside one write, job by job
// (pruneJobsInWrite).
func (a *Authority) pruneJobs(ctx context.Context, production, state string, older int64, batch int) (PruneResult, bool, error) {
	p, now, err := a.pruneFrom(ctx, production)
	if err != nil {
		return PruneResult{}, false, err
	}
	jobs, full, err := planJobs(ctx, a.b, p, state, older, now, batch)
	if err != nil || len(jobs) == 0 {
		return PruneResult{}, false, err
	}
	ids := make([]string, len(jobs))
	var updatedBy int64
	for i, j := range jobs {
		ids[i] = j.ID
		updatedBy = max(updatedBy, j.UpdatedAt)
	}
	if n, err := a.b.CountJobEvents(ctx, ids); err != nil {
		return PruneResult{}, false, storageErr("count a batch's events", err)
	} else if n > PruneEventBatch {
		return a.pruneJobsInWrite(ctx, production, state, older, batch)
	}
	return a.deleteChosen(ctx, full, func(tx store.Tx) (int64, int64, error) {
		jobs, events, err := tx.DeleteFinishedJobs(ctx, ids, state, updatedBy)
		return jobs, events, storageErrOrNil("prune jobs", err)
	})
}

// deleteChosen runs del, the write of a batch chosen by reads outside it,
// and counts what it deleted. A batch that deleted nothing (every job
// chosen changed, or another process's pruner holds them) ends the state's
// pass: the next pass looks again. Otherwise more is full, whether the
// reads found a whole batch.
func (a *Authority) deleteChosen(ctx context.Context, full bool, del func(tx store.Tx) (jobs, events int64, err error)) (PruneResult, bool, error) {
	var res PruneResult
	err := a.deleteHeld(ctx, &res.Held, func(tx store.Tx) error {
		var err error
		res.Jobs, res.Events, err = del(tx)
		return err
	})
	if err != nil {
		return PruneResult{Held: res.Held}, false, err
	}
	if res.Jobs+res.Events == 0 {
		return res, false, nil
	}
	res.Batches = 1
	return res, full, nil
}

// pruneJobsInWrite is pruneJobs with the batch chosen inside its write,
// for a batch whose events are more than PruneEventBatch: each job's events
// go in the order of the batch, and a job whose events the budget cuts goes
// in the next batch.
func (a *Authority) pruneJobsInWrite(ctx context.Context, production, state string, older int64, batch int) (PruneResult, bool, error) {
	var res PruneResult
	var more bool
	var held time.Duration
	err := a.writeHeld(ctx, &held, func(tx store.Tx, now int64, _ *wakes) error {
		res, more = PruneResult{}, false
		p, err := productionByName(ctx, tx, production)
		if err != nil {
			return err
		}
		jobs, full, err := planJobs(ctx, tx, p, state, older, now, batch)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		// The jobs chosen now may differ from those pruneJobs counted: if
		// their events fit the budget, a few statements delete them all.
		if n, err := tx.CountJobEvents(ctx, ids); err != nil {
			return storageErr("count a batch's events", err)
		} else if n <= PruneEventBatch {
			if res.Jobs, res.Events, err = tx.DeleteJobs(ctx, ids); err != nil {
				return storageErr("prune jobs", err)
			}
			more = full
			return nil
		}
		budget := PruneEventBatch
		for _, j := range jobs {
			n, err := tx.DeleteJobEvents(ctx, j.ID, budget)
			if err != nil {
				return storageErr("prune a job's events", err)
			}
			res.Events += n
			if budget -= int(n); budget == 0 {
				// The job may have more events: it goes in the next batch.
				more = true
				return nil
			}
			if err := tx.DeleteJob(ctx, j.ID); err != nil {
				return storageErr("prune a job", err)
			}
			res.Jobs++
		}
		more = full
		return nil
	})
	res.Held = held
	if err != nil {
		return PruneResult{Held: held}, false, err
	}
	if res.Jobs+res.Events > 0 {
		res.Batches = 1
	}
	return res, more, nil
}

// pruneEvents is one batch of a production's events older than its
// retention, chosen as pruneJobs chooses its jobs, by reads outside any
// write: an event never changes, and the store's newest event only moves
// on, so the transaction only deletes the events chosen.
func (a *Authority) pruneEvents(ctx context.Context, production string, older int64) (PruneResult, bool, error) {
	p, now, err := a.pruneFrom(ctx, production)
	if err != nil {
		return PruneResult{}, false, err
	}
	evs, full, err := planEvents(ctx, a.b, p, older, now)
	if err != nil || len(evs) == 0 {
		return PruneResult{}, false, err
	}
	return a.deleteChosen(ctx, full, func(tx store.Tx) (int64, int64, error) {
		n, err := tx.DeleteEvents(ctx, p.ID, eventSeqs(evs))
		return 0, n, storageErrOrNil("prune events", err)
	})
}

func eventSeqs(evs []store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// pruneFrom reads, outside any write, the production a batch is chosen
// from and the time it is chosen at (pruneNow).
func (a *Authority) pruneFrom(ctx context.Context, production string) (store.Production, int64, error) {
	p, err := productionByName(ctx, a.b, production)
	if err != nil {
		return p, 0, err
	}
	now, err := a.pruneNow(ctx)
	return p, now, err
}

// pruneNow is the time ages to prune by are measured from: the authority's
// clock, or the high-water mark when that is later (the clock read first).
func (a *Authority) pruneNow(ctx context.Context) (int64, error) {
	now, err := a.observedNow(ctx)
	if err != nil {
		return 0, err
	}
	hwm, err := a.b.HWM(ctx)
	if err != nil {
		return 0, storageErr("read high-water mark", err)
	}
	return max(now, hwm), nil
}

// pruneDry counts what Prune would delete of a production now, reading
// page by page: the jobs of each finished state up to the first one kept,
// and the events up to the first one kept.
func (a *Authority) pruneDry(ctx context.Context, production string, older int64) (PruneResult, error) {
	var res PruneResult
	p, err := a.observed(ctx, production)
	if err != nil {
		return res, err
	}
	now, err := a.pruneNow(ctx)
	if err != nil {
		return res, err
	}
	newestEvent, newestEventJob, err := a.b.NewestEvent(ctx)
	if err != nil {
		return res, storageErr("count what would be pruned", err)
	}
	newestJob, err := a.b.NewestJobSeq(ctx, p.ID)
	if err != nil {
		return res, storageErr("count what would be pruned", err)
	}
	for _, state := range FinishedStates {
		keep := older
		if keep == 0 {
			keep = keepUS(p.Retention, state)
		}
		if keep == 0 {
			continue
		}
		cutoff := now - keep
		f := store.JobFilter{ProductionID: p.ID, State: state, Limit: MaxPageSize}
	jobs:
		for {
			rows, err := a.b.ListJobs(ctx, f)
			if err != nil {
				return res, storageErr("count what would be pruned", err)
			}
			for _, j := range rows {
				if j.UpdatedAt > cutoff || j.Seq >= newestJob || j.ID == newestEventJob {
					break jobs
				}
				res.Jobs++
			}
			if len(rows) < f.Limit {
				break
			}
			f.AfterSeq = rows[len(rows)-1].Seq
		}
	}
	keep := older
	if keep == 0 {
		keep = p.Retention.EventsUS
	}
	if keep == 0 {
		return res, nil
	}
	cutoff := now - keep
	var after int64
	for {
		evs, err := a.b.Events(ctx, p.ID, after, PruneEventBatch)
		if err != nil {
			return res, storageErr("count what would be pruned", err)
		}
		for _, e := range evs {
			if e.At > cutoff || e.Seq >= newestEvent {
				return res, nil
			}
			res.Events++
		}
		if len(evs) < PruneEventBatch {
			return res, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

func storageErrOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return storageErr(op, err)
}

// DeleteProduction deletes a whole production: every job, every event and
// the production itself, in the batches of Prune (with archive, written and
// synced to it first, as Prune does). A production with a requested or
// claimed job is refused (wrong_state: cancel them first, or let them
// finish), and so is one that gets a new job meanwhile. Two events record
// the deletion and stay, under the production's id (now no production's):
// production_deleting, written first (so that the production's own last
// event is not the authority's newest, which pruning keeps: docs/schema.md,
// schema 7), and production_deleted. Its name may then be created again, as
// a new production.
func (a *Authority) DeleteProduction(ctx context.Context, production, archive string) (PruneResult, error) {
	live := func(tx store.Tx, p store.Production) error {
		for _, st := range []string{StateRequested, StateClaimed} {
			js, err := tx.JobsInState(ctx, p.ID, st, 1)
			if err != nil {
				return storageErr("delete production", err)
			}
			if len(js) > 0 {
				return errf(KindWrongState, "production %q has %s jobs; cancel them (or let them finish) before deleting it",
					production, st)
			}
		}
		return nil
	}
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return PruneResult{}, err
	}
	if err := a.write(ctx, func(tx store.Tx, now int64, _ *wakes) error {
		p, err := productionByName(ctx, tx, production)
		if err != nil {
			return err
		}
		if err := live(tx, p); err != nil {
			return err
		}
		return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, Kind: "production_deleting",
			Detail: fmt.Sprintf("production %q is being deleted", production)})
	}); err != nil {
		return PruneResult{}, err
	}
	res, err := a.Prune(ctx, PruneOptions{Production: production, Archive: archive, whole: true, deleting: true})
	if err != nil {
		return res, err
	}
	err = a.write(ctx, func(tx store.Tx, now int64, w *wakes) error {
		p, err := productionByName(ctx, tx, production)
		if err != nil {
			return err
		}
		if err := live(tx, p); err != nil {
			return err
		}
		if n, err := tx.NewestJobSeq(ctx, p.ID); err != nil || n != 0 {
			if err != nil {
				return storageErr("delete production", err)
			}
			return errf(KindWrongState, "production %q got jobs while it was being deleted; delete it again", production)
		}
		if err := tx.DeleteProduction(ctx, p.ID); err != nil {
			return storageErr("delete production", err)
		}
		// Its waiters, in any process, look again: their look no longer
		// finds it, and their claim answers not_found.
		if err := w.add(ctx, tx, p.ID); err != nil {
			return err
		}
		return event(ctx, tx, store.Event{At: now, ProductionID: p.ID, Kind: "production_deleted",
			Detail: fmt.Sprintf("production %q deleted", production)})
	})
	return res, err
}

// ArchiveProduction deletes every finished job and every event of a
// production whatever its age and policy, in the batches of Prune (with
// archive, written and synced to it first). Requested and claimed jobs
// stay, and so does the production's newest job and the authority's
// newest event (Prune).
func (a *Authority) ArchiveProduction(ctx context.Context, production, archive string) (PruneResult, error) {
	if err := checkText("production name", production, MaxNameLen, false); err != nil {
		return PruneResult{}, err
	}
	return a.Prune(ctx, PruneOptions{Production: production, Archive: archive, whole: true})
}

// restAfterBatch is the background pruner's rest between two batches: d,
// or until ctx ends. A variable so that a test can count the rests.
var restAfterBatch = func(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
