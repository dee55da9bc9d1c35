// The observation commands: production list, job list, job show, job counts
// and events. Every listing is streamed: read a page, print it, forget it, so
// memory stays constant however many jobs the store holds (docs/cli.md,
// "Listings"). None prints a secret.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/textesc"
)

// ---- output formats ---------------------------------------------------------

type outFormat int

const (
	formatText  outFormat = iota
	formatJSON            // one JSON array, written as the items are read
	formatJSONL           // one JSON object per line
)

// listingFlags adds --json and --jsonl; the returned func reads the choice
// once the flags are parsed.
func (cc *cmdContext) listingFlags() func() (outFormat, error) {
	cc.withJSON()
	jsonl := cc.fs.Bool("jsonl", false, "machine-readable JSON lines: one object per line")
	return func() (outFormat, error) {
		switch {
		case *cc.json && *jsonl:
			return 0, usagef(cc.cmd.name, "give --json or --jsonl, not both")
		case *cc.json:
			return formatJSON, nil
		case *jsonl:
			return formatJSONL, nil
		}
		return formatText, nil
	}
}

// limitFlag adds --limit N (0: no limit).
func (cc *cmdContext) limitFlag(what string) func() (int, error) {
	n := cc.fs.String("limit", "", "print at most `N` "+what+", then how to continue (on standard error)")
	return func() (int, error) {
		if *n == "" {
			return 0, nil
		}
		v, err := strconv.Atoi(*n)
		if err != nil || v < 1 {
			return 0, usagef(cc.cmd.name, "--limit wants a positive whole number")
		}
		return v, nil
	}
}

// parseListing adds --json/--jsonl and --limit to a listing command's own
// flags, parses them (checking the required ones) and returns the format
// and the limit; done reports that --help was shown.
func (cc *cmdContext) parseListing(what string, required ...string) (f outFormat, limit int, done bool, err error) {
	format := cc.listingFlags()
	n := cc.limitFlag(what)
	if done, err = parseOnly(cc, required...); done || err != nil {
		return
	}
	if f, err = format(); err != nil {
		return
	}
	limit, err = n()
	return
}

// itemWriter prints the items of one listing as they are read, buffered
// and flushed once per page: a table, one JSON array written element by
// element, or JSON lines.
type itemWriter struct {
	w       *bufio.Writer
	format  outFormat
	header  string
	written int
	begun   bool
}

func newItemWriter(format outFormat, header string) *itemWriter {
	return &itemWriter{w: bufio.NewWriterSize(os.Stdout, 64<<10), format: format, header: header}
}

func (s *itemWriter) begin() {
	if s.begun {
		return
	}
	s.begun = true
	switch s.format {
	case formatJSON:
		s.w.WriteString("[")
	case formatText:
		s.w.WriteString(s.header)
	}
}

// item writes one item: v as JSON, or text (one table row, with its newline).
func (s *itemWriter) item(v any, text string) error {
	s.begin()
	switch s.format {
	case formatText:
		s.w.WriteString(text)
	case formatJSONL:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		s.w.Write(b)
		s.w.WriteByte('\n')
	case formatJSON:
		// The array json.Encoder with two-space indentation writes, one
		// element at a time.
		b, err := json.MarshalIndent(v, "  ", "  ")
		if err != nil {
			return err
		}
		if s.written > 0 {
			s.w.WriteString(",")
		}
		s.w.WriteString("\n  ")
		s.w.Write(b)
	}
	s.written++
	return nil
}

// flush ends a page: what was read is on its way out before the next read.
func (s *itemWriter) flush() error { return s.w.Flush() }

// end closes the listing (a JSON array gets its "]"), also when it is empty.
func (s *itemWriter) end() error {
	s.begin()
	if s.format == formatJSON {
		if s.written > 0 {
			s.w.WriteString("\n")
		}
		s.w.WriteString("]\n")
	}
	return s.w.Flush()
}

// ---- paging -------------------------------------------------------------------

// pageThrough lists a cursor-paged listing from after: each page at most
// core.MaxPageSize items and never more than limit still allows (0: no
// limit), so the last page's cursor is exactly where the listing stopped.
// read lists and prints one page and returns its size and next cursor. The
// result is the cursor to continue from: "" when the listing ended; on an
// error, the cursor after the last page printed.
func pageThrough(after string, limit int, read func(after string, size int) (int, string, error)) (string, error) {
	listed := 0
	for {
		size := core.MaxPageSize
		if limit > 0 {
			size = min(size, limit-listed)
		}
		n, next, err := read(after, size)
		if err != nil {
			return after, err
		}
		listed += n
		if next == "" || (limit > 0 && listed >= limit) {
			return next, nil
		}
		after = next
	}
}

// listingEnd reports how a listing ended: with --limit and more to come,
// how to continue (on standard error, so standard output stays one
// document); after a failure mid-way, where to resume.
func listingEnd(err error, start, resume, what string) error {
	if err != nil {
		if resume != "" && resume != start {
			return fmt.Errorf("%w\nleases: the listing stopped; the %s before it were printed: continue with --after %s", err, what, resume)
		}
		return err
	}
	if resume != "" {
		fmt.Fprintf(os.Stderr, "leases: more %s follow; continue with --after %s\n", what, resume)
	}
	return nil
}

// splitNames reads a --state or --kind value: names separated by commas.
func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// ---- text forms -----------------------------------------------------------------

// escapeControls and jsonText write free text and a fact's JSON for a table
// (internal/textesc, the rule the status page shares): every control and
// invisible format character, and every line or paragraph separator, as
// \uXXXX (a backslash as \\ in free text), so that nothing in them can move
// the terminal's cursor or hide part of itself; JSON stays the same value.
func escapeControls(s string) string { return textesc.Text(s) }

func jsonText(raw json.RawMessage) string { return textesc.JSON(raw) }

const (
	jobFormat        = "%-36s  %-16s  %-9s  %-16s  %-27s  %8s  %s\n"
	productionFormat = "%-24s  %-36s  %s\n"
)

func jobLine(j core.Job) string {
	return fmt.Sprintf(jobFormat, j.ID, dash(nameText(j.Key)), j.State, dash(nameText(j.Worker)),
		timeText(j.Expiry), strconv.FormatInt(j.Attempts, 10), dash(escapeControls(oneLine(j.Reason))))
}

// attemptLine is one ended attempt of job show's history, oldest first:
// "#2 host-7 2026-…Z..2026-…Z expired: the claim expired before it finished".
func attemptLine(h core.Attempt) string {
	s := fmt.Sprintf("#%d %s %s..%s %s", h.Number, dash(nameText(h.Worker)), timeText(h.ClaimedAt), timeText(h.EndedAt), h.Ending)
	if h.Reason != "" {
		s += ": " + escapeControls(oneLine(h.Reason))
	}
	return s
}

// ---- commands -------------------------------------------------------------------

// runListing is the body of a cursor-paged listing command: its own flags
// are defined; this adds --json/--jsonl, --limit and --after, parses,
// opens, streams the pages read lists (read prints one page through out
// and returns its size and next cursor) and reports how the listing ended.
func runListing(cc *cmdContext, what, header string, required []string,
	read func(a *core.Authority, out *itemWriter, after string, size int) (int, string, error)) error {
	after := cc.fs.String("after", "", "continue after `CURSOR` (printed by an earlier --limit)")
	f, n, done, err := cc.parseListing(what, required...)
	if done || err != nil {
		return err
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	out := newItemWriter(f, header)
	resume, err := pageThrough(*after, n, func(after string, size int) (int, string, error) {
		listed, next, err := read(a, out, after, size)
		if err != nil {
			return 0, "", err
		}
		return listed, next, out.flush()
	})
	if err == nil {
		err = out.end()
	}
	return listingEnd(err, *after, resume, what)
}

func runProductionList(cc *cmdContext) error {
	return runListing(cc, "productions", fmt.Sprintf(productionFormat, "NAME", "ID", "CREATED"), nil,
		func(a *core.Authority, out *itemWriter, after string, size int) (int, string, error) {
			page, err := a.ListProductions(context.Background(), core.ProductionQuery{After: after, Limit: size})
			if err != nil {
				return 0, "", err
			}
			for _, p := range page.Productions {
				if err := out.item(p, fmt.Sprintf(productionFormat, nameText(p.Name), p.ID, timeText(p.CreatedAt))); err != nil {
					return 0, "", err
				}
			}
			return len(page.Productions), page.Next, nil
		})
}

func runJobList(cc *cmdContext) error {
	prod := cc.fs.String("production", "", "production `NAME`")
	states := cc.fs.String("state", "", "only jobs in one of these states: `STATE[,STATE]`")
	key := cc.fs.String("key", "", "only the job with this `KEY`")
	keyPrefix := cc.fs.String("key-prefix", "", "only the jobs whose key starts with `PREFIX`, in key order")
	job := cc.fs.String("job", "", "only the job with this `ID` (or a unique prefix of 8 or more characters)")
	withFacts := cc.fs.Bool("facts", false, "with --json or --jsonl: each completed job with the facts it published, read a page at a time")
	header := fmt.Sprintf(jobFormat, "ID", "KEY", "STATE", "WORKER", "EXPIRY", "ATTEMPTS", "REASON")
	resolved := false
	return runListing(cc, "jobs", header, []string{"production"},
		func(a *core.Authority, out *itemWriter, after string, size int) (int, string, error) {
			if *job != "" && !resolved {
				id, err := a.ResolveJobID(context.Background(), *prod, *job)
				if err != nil {
					return 0, "", err
				}
				*job, resolved = id, true
			}
			if *withFacts && out.format == formatText {
				return 0, "", usagef("job list", "--facts needs --json or --jsonl")
			}
			q := core.JobQuery{States: splitNames(*states), Key: *key, KeyPrefix: *keyPrefix, ID: *job, After: after, Limit: size,
				Facts: *withFacts}
			page, err := a.ListJobs(context.Background(), *prod, q)
			if err != nil {
				return 0, "", err
			}
			for _, j := range page.Jobs {
				var item any = j
				if f, ok := page.Facts[j.ID]; ok {
					item = listedJob{j, f}
				}
				if err := out.item(item, jobLine(j)); err != nil {
					return 0, "", err
				}
			}
			return len(page.Jobs), page.Next, nil
		})
}

// listedJob is a completed job of `job list --facts`: the job's object with
// the facts its completion published, as `job show --json` has them.
type listedJob struct {
	job   core.Job
	facts core.Facts
}

func (l listedJob) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.job)
	if err != nil {
		return nil, err
	}
	f, err := json.Marshal(l.facts)
	if err != nil {
		return nil, err
	}
	return append(append(append(b[:len(b)-1], `,"facts":`...), f...), '}'), nil
}

func runJobShow(cc *cmdContext) error {
	cc.withJSON()
	a, prod, job, done, err := openJob(cc)
	if done || err != nil {
		return err
	}
	defer a.Close()
	rec, err := a.JobDetail(context.Background(), prod, job)
	if err != nil {
		return err
	}
	if cc.jsonOut() {
		return printJSON(rec)
	}
	w := bufio.NewWriter(os.Stdout)
	line := func(label, value string) { fmt.Fprintf(w, "%-12s%s\n", label, value) }
	line("id", rec.ID)
	line("production", nameText(rec.Production))
	line("key", dash(nameText(rec.Key)))
	line("state", rec.State)
	line("worker", dash(nameText(rec.Worker)))
	line("claimed at", timeText(rec.ClaimedAt))
	line("expiry", timeText(rec.Expiry))
	line("attempts", strconv.FormatInt(rec.Attempts, 10))
	line("reason", dash(escapeControls(oneLine(rec.Reason))))
	line("priority", strconv.Itoa(rec.Priority))
	line("claimable", timeText(rec.ClaimableAt))
	line("payload", fmt.Sprintf("%d bytes", rec.PayloadSize))
	line("requested", timeText(rec.RequestedAt))
	line("updated", timeText(rec.UpdatedAt))
	facts := func(label string, m map[string]json.RawMessage) {
		for _, k := range sortedKeys(m) {
			line(label, nameText(k)+" = "+jsonText(m[k]))
			label = ""
		}
	}
	facts("metadata", rec.Facts.Metadata)
	facts("provenance", rec.Facts.Provenance)
	for i, o := range rec.Facts.Outputs {
		label := "output"
		if i > 0 {
			label = ""
		}
		line(label, fmt.Sprintf("%s (%d bytes, sha256 %s, nonce %s)", escapeControls(o.Path), o.Size, o.SHA256, o.Nonce))
	}
	for i, h := range rec.History {
		label := "history"
		if i > 0 {
			label = ""
		}
		line(label, attemptLine(h))
	}
	return w.Flush()
}

func runJobCounts(cc *cmdContext) error {
	cc.withJSON()
	prod := cc.fs.String("production", "", "production `NAME`")
	if done, err := parseOnly(cc, "production"); done || err != nil {
		return err
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	c, err := a.Counts(context.Background(), *prod)
	if err != nil {
		return err
	}
	if cc.jsonOut() {
		return printJSON(c)
	}
	fmt.Printf("%-18s%d\n%-18s%d (%d of them expired: claimable again)\n%-18s%d\n%-18s%d\n%-18s%d\n%-18s%d\n%-18s%d\n%-18s%s\n%-18s%s\n",
		"requested", c.Requested, "claimed", c.Claimed, c.Expired, "completed", c.Completed, "failed", c.Failed,
		"cancelled", c.Cancelled, "dead", c.Dead, "total", c.Total(), "oldest requested", timeText(c.OldestRequested), "at", timeText(c.At))
	return nil
}

func runEvents(cc *cmdContext) error {
	prod := cc.fs.String("production", "", "only events of production `NAME`")
	job := cc.fs.String("job", "", "only events of the job with this `ID` (or a unique prefix of 8 or more characters)")
	kinds := cc.fs.String("kind", "", "only events of these kinds: `KIND[,KIND]` (with --production or --job)")
	after := cc.fs.String("after", "0", "only events with a sequence number greater than `SEQ`")
	follow := cc.fs.Bool("follow", false, "keep printing new events until SIGINT or SIGTERM")
	interval := durationFlag{d: 250 * time.Millisecond}
	cc.fs.Var(&interval, "interval", "polling `DURATION` for --follow (default 250ms)")
	f, n, done, err := cc.parseListing("events")
	if done || err != nil {
		return err
	}
	seq, err := strconv.ParseInt(*after, 10, 64)
	if err != nil || seq < 0 {
		return usagef(cc.cmd.name, "--after wants a non-negative sequence number")
	}
	if *follow && n > 0 {
		return usagef(cc.cmd.name, "--limit ends a listing; --follow never does: give one of them")
	}
	if *follow && f == formatJSON {
		f = formatJSONL // a stream that never ends is never one array
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	if *job != "" {
		// A unique prefix names the job: in --production, or in any.
		if *job, err = a.ResolveJobID(context.Background(), *prod, *job); err != nil {
			return err
		}
	}
	// A follower ends on SIGINT or SIGTERM with status 0; a listing that
	// ends by itself keeps the default action (the shell sees the signal).
	ctx := context.Background()
	if *follow {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}

	out := newItemWriter(f, fmt.Sprintf(eventFormat, "SEQ", "AT", "PRODUCTION", "JOB", "KIND", "WORKER", "EXPIRY", "DETAIL"))
	q := core.EventQuery{Production: *prod, JobID: *job, Kinds: splitNames(*kinds), After: seq}
	start := seq
	listed := 0
	// readNow lists every event that can be listed now (up to --limit),
	// a page at a time; more reports that --limit stopped it early.
	readNow := func() (more bool, err error) {
		for {
			q.Limit = core.MaxPageSize
			if n > 0 {
				q.Limit = min(q.Limit, n-listed)
			}
			page, err := a.ListEvents(ctx, q)
			if err != nil {
				return false, err
			}
			for _, e := range page.Events {
				if err := out.item(e, eventLine(e)); err != nil {
					return false, err
				}
			}
			if err := out.flush(); err != nil {
				return false, err
			}
			listed += len(page.Events)
			q.After = page.Next
			if !page.More {
				return false, nil
			}
			if n > 0 && listed >= n {
				return true, nil
			}
		}
	}
	if !*follow {
		more, err := readNow()
		if err == nil {
			err = out.end()
		}
		resume := ""
		if more || err != nil {
			resume = strconv.FormatInt(q.After, 10)
		}
		return listingEnd(err, strconv.FormatInt(start, 10), resume, "events")
	}
	var failing error // the transient failure being waited out, if any
	for {
		_, err := readNow()
		if ctx.Err() != nil {
			return out.flush() // interrupted, perhaps while reading: the follower's normal end
		}
		switch {
		case err != nil && !transient(err):
			return err
		case err != nil:
			if failing == nil {
				fmt.Fprintf(os.Stderr, "leases: warning: %v; still following, retrying every %s\n", err, interval.d)
			}
			failing = err
		default:
			if failing != nil {
				fmt.Fprintln(os.Stderr, "leases: the database answers again; following")
				failing = nil
			}
			out.begin() // the table's header, once, when the first read succeeds
			if err := out.flush(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval.d):
		}
	}
}

func eventLine(e core.Event) string {
	return fmt.Sprintf(eventFormat, strconv.FormatInt(e.Seq, 10), timeText(e.At), nameText(e.Production), dash(e.JobID),
		e.Kind, dash(nameText(e.Worker)), timeText(e.Expiry), dash(escapeControls(oneLine(e.Detail))))
}
