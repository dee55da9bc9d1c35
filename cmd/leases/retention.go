// Retention from the command line: a production's retention policy (at
// creation and later), pruning by it or by an explicit age, archives, and
// deleting a whole production (docs/cli.md, "Retention").
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/libleases/libleases/core"
)

func init() {
	register(&command{name: "production retention", args: "NAME [--keep-completed D] [--keep-failed D] [--keep-dead D] [--keep-cancelled D] [--keep-events D] [--json]",
		summary: "show a production's retention policy, or change parts of it (coordinator)",
		detail: `Without flags, prints the policy. With flags, changes the parts given and keeps the
others (a retention_changed event records it). A finished job is kept for its state's
duration after it finished, an event for --keep-events after it was recorded; pruning
(in the background of every open authority, and leases prune) deletes them after that.
` + retentionFlagsHelp,
		examples: []string{"leases production retention nightly",
			"leases production retention nightly --keep-completed forever --keep-events 3d"},
		run: runProductionRetention})
	register(&command{name: "prune", args: "[--production P] [--older-than D] [--archive FILE] [--dry-run] [--json]",
		summary: "delete finished jobs and events past their retention (coordinator, cron)",
		detail: `Deletes, in batches of at most 64 jobs and 1000 events (each one short transaction),
the finished jobs (completed, failed, dead, cancelled) and the events older than each
production's retention policy, or than --older-than for every state and the events (even
what the policy keeps for good). A requested or claimed job is never deleted. A pruned job
goes with its payload, facts, outputs, attempt history and events, and its id is then
not_found; its idempotency key may be used again.
--archive FILE first writes what is deleted to FILE as JSON Lines (created, or continued)
and syncs it; only what was written is deleted, and a prune that was interrupted is
finished by the next one given the same FILE, which writes nothing twice.
--dry-run deletes nothing and counts the jobs and the events pruned by age.`,
		examples: []string{"leases prune", "leases prune --production nightly --older-than 720h --archive nightly.jsonl",
			"leases prune --dry-run --json"},
		run: runPrune})
	register(&command{name: "production archive", args: "NAME --archive FILE [--delete] [--json]",
		summary: "archive and delete every finished job and every event of a production (coordinator)",
		detail: `Writes every finished job of the production (whatever its age and policy) and its
events to FILE as JSON Lines, synced, then deletes them, as leases prune --archive does.
With --delete the production itself is deleted too, once it has no requested or claimed
job (refused with wrong_state otherwise: cancel them first); its name may then be created
again.`,
		examples: []string{"leases production archive nightly --archive nightly.jsonl",
			"leases production archive old --archive old.jsonl --delete"},
		run: runProductionArchive})
}

const retentionFlagsHelp = `Each D is a duration with a unit (us, ms, s, m, h, or d for days: 7d, 36h), at most
36500d, or forever (also 0): kept for good. New productions keep completed and cancelled
jobs 7d, failed and dead jobs 30d, events 7d.`

// retentionRule: a retention duration may be "forever" (0) and reaches up
// to core.MaxRetention.
var retentionRule = spanRule{max: core.MaxRetention, zeroOK: true}

// parseRetention reads a retention duration: forever, 0, NUMBERd, or a
// duration with the usual units.
func parseRetention(text string) (time.Duration, error) {
	if text == "forever" {
		return core.KeepForGood, nil
	}
	if days, ok := strings.CutSuffix(text, "d"); ok && days != "" {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: days must be a whole number, e.g. 7d", quoteIfOdd(text))
		}
		if n > int64(core.MaxRetention/(24*time.Hour)) {
			return 0, fmt.Errorf("%s: at most %dd", quoteIfOdd(text), core.MaxRetention/(24*time.Hour))
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return parseSpan(text, retentionRule)
}

// retentionFlags are the flags that set parts of a retention policy.
type retentionFlags struct {
	completed, failed, dead, cancelled, events *string
	cmd                                        string
}

func addRetentionFlags(cc *cmdContext) *retentionFlags {
	rf := &retentionFlags{cmd: cc.cmd.name}
	rf.completed = cc.fs.String("keep-completed", "", "keep completed jobs for `D` after they finished (forever: for good; default 7d)")
	rf.failed = cc.fs.String("keep-failed", "", "keep failed jobs for `D` (default 30d)")
	rf.dead = cc.fs.String("keep-dead", "", "keep dead jobs for `D` (default 30d)")
	rf.cancelled = cc.fs.String("keep-cancelled", "", "keep cancelled jobs for `D` (default 7d)")
	rf.events = cc.fs.String("keep-events", "", "keep events for `D` after they were recorded (default 7d)")
	return rf
}

func (rf *retentionFlags) given() bool {
	return *rf.completed != "" || *rf.failed != "" || *rf.dead != "" || *rf.cancelled != "" || *rf.events != ""
}

// apply sets the given parts on r; bad input is refused before anything is
// opened.
func (rf *retentionFlags) apply(r core.RetentionPolicy) (core.RetentionPolicy, error) {
	for _, f := range []struct {
		name string
		text string
		to   *time.Duration
	}{{"keep-completed", *rf.completed, &r.Completed}, {"keep-failed", *rf.failed, &r.Failed},
		{"keep-dead", *rf.dead, &r.Dead}, {"keep-cancelled", *rf.cancelled, &r.Cancelled},
		{"keep-events", *rf.events, &r.Events}} {
		if f.text == "" {
			continue
		}
		d, err := parseRetention(f.text)
		if err != nil {
			return r, usagef(rf.cmd, "--%s: %v", f.name, err)
		}
		*f.to = d
	}
	return r, nil
}

func keepText(d time.Duration) string {
	if d == core.KeepForGood {
		return "forever"
	}
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func retentionText(r core.RetentionPolicy) string {
	return fmt.Sprintf("keeps completed %s, failed %s, dead %s, cancelled %s, events %s",
		keepText(r.Completed), keepText(r.Failed), keepText(r.Dead), keepText(r.Cancelled), keepText(r.Events))
}

func runProductionRetention(cc *cmdContext) error {
	return showOrSetProductionPart(cc, addRetentionFlags(cc), core.DefaultRetentionPolicy(),
		func(p *core.Production) *core.RetentionPolicy { return &p.Retention },
		(*core.Authority).SetRetentionPolicy, retentionText)
}

func runPrune(cc *cmdContext) error {
	cc.withJSON()
	prod := cc.fs.String("production", "", "prune only production `NAME` (default: every production)")
	older := cc.fs.String("older-than", "", "prune finished jobs and events older than `D`, instead of each policy")
	archive := cc.fs.String("archive", "", "write what is deleted to `FILE` (JSON Lines) before deleting it")
	dry := cc.fs.Bool("dry-run", false, "delete nothing; count what would be deleted")
	if done, err := parseOnly(cc); done || err != nil {
		return err
	}
	o := core.PruneOptions{Production: *prod, Archive: *archive, DryRun: *dry}
	if *older != "" {
		d, err := parseRetention(*older)
		if err != nil || d == 0 {
			if err == nil {
				err = fmt.Errorf("%s: give a positive age", quoteIfOdd(*older))
			}
			return usagef(cc.cmd.name, "--older-than: %v", err)
		}
		o.OlderThan = d
	}
	if *dry && *archive != "" {
		return usagef(cc.cmd.name, "--dry-run writes no archive: give one of --dry-run and --archive")
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	a.SetPruneInterval(0)
	r, err := a.Prune(context.Background(), o)
	if cc.jsonOut() && err == nil {
		return printJSON(struct {
			Jobs     int64  `json:"jobs"`
			Events   int64  `json:"events"`
			HeldUS   int64  `json:"held_us"`
			DryRun   bool   `json:"dry_run"`
			Vacuumed int64  `json:"vacuumed_tables,omitempty"`
			Note     string `json:"note,omitempty"`
		}{r.Jobs, r.Events, r.Held.Microseconds(), *dry, r.Vacuumed, r.Note})
	}
	if err != nil {
		return fmt.Errorf("%w (before it, %d jobs and %d events were deleted)", err, r.Jobs, r.Events)
	}
	verb := "pruned"
	if *dry {
		verb = "would prune"
	}
	fmt.Printf("%s %d jobs and %d events\n", verb, r.Jobs, r.Events)
	if r.Note != "" {
		// Not a failure: the deletes stand (PostgreSQL: the space is autovacuum's to bring back).
		fmt.Fprintf(os.Stderr, "leases prune: note: %s\n", r.Note)
	}
	return nil
}

func runProductionArchive(cc *cmdContext) error {
	cc.withJSON()
	archive := cc.fs.String("archive", "", "write the production's jobs and events to `FILE` (JSON Lines)")
	del := cc.fs.Bool("delete", false, "delete the production itself too (it must have no requested or claimed job)")
	name, done, err := parseName(cc)
	if done || err != nil {
		return err
	}
	if err := cc.required("archive", *archive); err != nil {
		return err
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	a.SetPruneInterval(0)
	var r core.PruneResult
	if *del {
		r, err = a.DeleteProduction(context.Background(), name, *archive)
	} else {
		r, err = a.ArchiveProduction(context.Background(), name, *archive)
	}
	if err != nil {
		return fmt.Errorf("%w (before it, %d jobs and %d events were archived and deleted)", err, r.Jobs, r.Events)
	}
	if cc.jsonOut() {
		return printJSON(r)
	}
	fmt.Printf("archived and deleted %d jobs and %d events\n", r.Jobs, r.Events)
	return nil
}
