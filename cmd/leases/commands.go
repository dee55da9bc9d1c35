// The operator commands: productions, jobs, claims and claimant transitions,
// cancellation, events and version. No output of any command holds a secret:
// the only secret the CLI ever handles is written to the --token-out file.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/libleases/libleases/core"
)

func init() {
	register(&command{name: "production create", args: "NAME [--max-attempts N] [--backoff BASE[,CAP]] [--jitter PCT] [--keep-STATE D] [--json]",
		summary: "create a production (idempotent) and print its id",
		detail: `Without policy flags, an existing production of that name is returned as it is. With
them, the production gets the default retry policy with those parts changed; an existing
production with another policy is refused (wrong_state): change it with 'leases production
policy'. The retention flags (--keep-completed, --keep-failed, --keep-dead,
--keep-cancelled, --keep-events) do the same for the retention policy ('leases production
retention').
` + policyFlagsHelp + "\n" + retentionFlagsHelp,
		examples: []string{"leases production create nightly",
			"leases --db /srv/jobs.db production create nightly --json",
			"leases production create imports --max-attempts 5 --backoff 30s,10m --jitter 10"},
		run: runProductionCreate})
	register(&command{name: "production list", args: "[--limit N] [--after CURSOR] [--json|--jsonl]",
		summary: "list productions, streamed page by page",
		detail: `The listing is read and printed a page at a time, in constant memory. --json prints one
JSON array, --jsonl one object per line. With --limit, if more productions follow, standard
error says how to continue: "leases: more productions follow; continue with --after CURSOR".`,
		examples: []string{"leases production list", "leases production list --json | jq -r '.[].name'"},
		run:      runProductionList})
	register(&command{name: "job request", args: "--production P [--key K] [--payload-file F|-] [--priority N] [--delay D | --run-at TIME] [--json]",
		summary: "request a job and print its id",
		detail: `With --key the request is idempotent: the same key and payload return the same job (the
first request's priority and time stand); the same key with another payload is refused.
Claims take the highest priority first, then the earliest claimable time, then request
order. --delay and --run-at are on the authority's clock: --delay counts from its now, and
a --run-at in the past means now; at most 366 days (8784h) ahead.`,
		examples: []string{"leases job request --production nightly --key frame-1",
			"render-spec frame-2 | leases job request --production nightly --key frame-2 --payload-file -",
			"leases job request --production nightly --key urgent-fix --priority 100",
			"leases job request --production nightly --key reindex --delay 15m",
			"leases job request --production nightly --key report --run-at 2026-12-01T06:00:00Z"},
		run: runJobRequest})
	register(&command{name: "job list", args: "--production P [--state S[,S]] [--key K] [--job ID] [--limit N] [--after CURSOR] [--json|--jsonl [--facts]]",
		summary: "list the jobs of a production in request order, streamed (attribution and expiry, never a secret)",
		detail: `The listing is read and printed a page at a time, in constant memory, however many jobs
there are. --json prints one JSON array (written as it is read), --jsonl one object per line.
With --limit N at most N jobs are printed; if more follow, standard error says how to continue:
"leases: more jobs follow; continue with --after CURSOR". Every job that existed when the
listing began is listed exactly once, in the state its page saw.`,
		examples: []string{"leases job list --production nightly", "leases job list --production nightly --state claimed,requested",
			"leases job list --production nightly --jsonl | jq -r .id", "leases job list --production nightly --limit 100 --after CURSOR",
			"leases job list --production nightly --state dead"},
		run: runJobList})
	register(&command{name: "job show", args: "--production P --job ID [--json]",
		summary: "show one job: its state, times, priority, payload size, facts and attempt history (never a secret)",
		examples: []string{"leases job show --production nightly --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44",
			"leases job show --production nightly --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44 --json | jq .facts",
			"leases job show --production nightly --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44 --json | jq '.attempt_history[].ending'"},
		run: runJobShow})
	register(&command{name: "job counts", args: "--production P [--json]",
		summary:  "count a production's jobs by state, with expired claims and the oldest waiting job",
		examples: []string{"leases job counts --production nightly", "leases job counts --production nightly --json | jq .requested"},
		run:      runJobCounts})
	register(&command{name: "claim", args: "--production P --worker W --duration D --token-out FILE [--job ID | --wait D] [--json]",
		summary: "claim the next job (or --job ID) and write its token to a new private file",
		detail: `FILE is created exclusively with mode 0600 before the claim commits; if it already
exists nothing is claimed. The token is written only after the claim is active. If writing
it fails, FILE is removed, the committed claim's receipt (production, job, worker, expiry)
is printed on standard error and the exit status is 4: the claim stays until its expiry or
'leases cancel'. Exit status 3 means there was nothing to claim (with --wait: nothing became
claimable within the wait). --wait waits without polling and without writing; SIGINT or
SIGTERM ends the wait at once, claiming nothing and removing FILE.
Durations take a unit: us, ms, s, m or h (250ms, 30s, 1500us, 1m30s); at most 24h.`,
		examples: []string{"leases claim --production nightly --worker host-7 --duration 5m --token-out job.token",
			"leases claim --production nightly --worker host-7 --duration 30s --token-out t --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44",
			"leases claim --production nightly --worker host-7 --duration 5m --token-out job.token --wait 10m",
			`leases claim ... --token-out t; case $? in 3) echo "queue empty";; esac`},
		run: runClaim})
	register(&command{name: "renew", args: "--token-file F --duration D [--json]",
		summary:  "extend a claim to now+D (must extend it, and commit before the current expiry)",
		examples: []string{"leases renew --token-file job.token --duration 5m", "leases renew --token-file - --duration 30s < job.token"},
		run:      runRenew})
	register(&command{name: "release", args: "--token-file F",
		summary:  "give a claimed job back (it becomes requested again)",
		examples: []string{"leases release --token-file job.token"},
		run:      runRelease})
	register(&command{name: "fail", args: "--token-file F --reason TEXT [--retry [--delay D]]",
		summary: "mark a claimed job failed, for good or (--retry) to be tried again",
		detail: `Without --retry the job is failed for good, whatever attempts it has left. With --retry
the attempt ends and the job returns to the queue after --delay (on the authority's clock),
or by default after the production's backoff; if that was its last attempt it is dead.
The line printed says which, as observed just after.`,
		examples: []string{"leases fail --token-file job.token --reason 'input corrupt'",
			"leases fail --token-file job.token --reason 'upstream 503' --retry",
			"leases fail --token-file job.token --reason 'rate limited' --retry --delay 10m"},
		run: runFail})
	register(&command{name: "complete", args: "--token-file F [--metadata KEY=JSON]... [--provenance KEY=JSON]...",
		summary: "mark a claimed job completed, publishing metadata and provenance in the same commit",
		examples: []string{`leases complete --token-file job.token --metadata frames=12 --provenance tool='"render 2.1"'`,
			"leases complete --token-file job.token"},
		run: runComplete})
	register(&command{name: "cancel", args: "--production P --job ID",
		summary: "coordinator cancel of a requested or claimed job (no token needed)",
		detail: `The holder's next operation fails as cancelled. Use it to recover a claim whose token
was lost, e.g. after exit status 4 from 'leases claim'.`,
		examples: []string{"leases cancel --production nightly --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44"},
		run:      runCancel})
	register(&command{name: "events", args: "[--production P] [--job ID] [--kind K[,K]] [--after SEQ] [--limit N] [--follow [--interval D]] [--json|--jsonl]",
		summary: "list the event log, streamed (no secrets); --follow streams new events until interrupted",
		detail: `The log is read and printed a page at a time, in constant memory. --json prints one JSON
array, --jsonl (and --json with --follow) one object per line. --kind needs --production or
--job. With --limit N at most N events are printed; if more follow, standard error says
"leases: more events follow; continue with --after SEQ".
--follow polls every --interval (default 250ms) and stops on SIGINT or SIGTERM with status 0.`,
		examples: []string{"leases events --production nightly", "leases events --follow --json | jq .kind",
			"leases events --after 120", "leases events --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44",
			"leases events --production nightly --kind claim_expired --jsonl", "leases events --production nightly --kind retry,dead,redriven"},
		run: runEvents})
	register(&command{name: "version", args: "",
		summary: "print the version (also: leases --version, leases -V)", examples: []string{"leases version", "leases --version"}, run: runVersion})
}

// timeText formats a time as RFC 3339 UTC with microseconds; "-" for none.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// nameText is a name as the text output prints it: look-alike and
// invisible characters escaped, so two names never print alike (JSON output
// keeps every name's exact bytes).
func nameText(s string) string { return core.DisplayName(s) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// prepare parses flags; it reports the shown-help case as done.
func prepare(cc *cmdContext, interleave bool) ([]string, bool, error) {
	pos, err := cc.parse(interleave)
	if errors.Is(err, errHelpShown) {
		return nil, true, nil
	}
	return pos, false, err
}

// parseOnly parses a command that takes flags and no positional argument,
// and checks that the named flags were given. done reports that --help was
// shown.
func parseOnly(cc *cmdContext, required ...string) (done bool, err error) {
	pos, done, err := prepare(cc, true)
	if done || err != nil {
		return done, err
	}
	if len(pos) > 0 {
		return false, usagef(cc.cmd.name, "unexpected argument %q", pos[0])
	}
	for _, name := range required {
		if err := cc.required(name, cc.fs.Lookup(name).Value.String()); err != nil {
			return false, err
		}
	}
	return false, nil
}

// parseName parses a command that takes flags and one production NAME.
func parseName(cc *cmdContext) (name string, done bool, err error) {
	pos, done, err := prepare(cc, true)
	if done || err != nil {
		return "", done, err
	}
	if len(pos) != 1 {
		return "", false, usagef(cc.cmd.name, "give exactly one production NAME")
	}
	return pos[0], false, nil
}

func runProductionCreate(cc *cmdContext) error {
	cc.withJSON()
	pf := addPolicyFlags(cc)
	rf := addRetentionFlags(cc)
	name, done, err := parseName(cc)
	if done || err != nil {
		return err
	}
	policy, err := pf.apply(core.DefaultRetryPolicy())
	if err != nil {
		return err
	}
	retention, err := rf.apply(core.DefaultRetentionPolicy())
	if err != nil {
		return err
	}
	a, err := cc.openCreating()
	if err != nil {
		return err
	}
	defer a.Close()
	var p core.Production
	if rf.given() {
		p, err = a.CreateProductionWithPolicies(name, policy, retention)
	} else if pf.given() {
		p, err = a.CreateProductionWithPolicy(name, policy)
	} else {
		p, err = a.CreateProduction(name)
	}
	if err != nil {
		return err
	}
	if cc.jsonOut() {
		return printJSON(p)
	}
	fmt.Println(p.ID)
	return nil
}

func runJobRequest(cc *cmdContext) error {
	cc.withJSON()
	prod := cc.fs.String("production", "", "production `NAME`")
	key := cc.fs.String("key", "", "idempotency `KEY`, unique within the production")
	payloadFile := cc.fs.String("payload-file", "", "read the payload from `FILE` (- for standard input)")
	rf := addRequestFlags(cc)
	if done, err := parseOnly(cc, "production"); done || err != nil {
		return err
	}
	o, err := rf.options(cc.cmd.name)
	if err != nil {
		return err
	}
	var payload []byte
	if *payloadFile != "" {
		var r io.Reader = os.Stdin
		if *payloadFile != "-" {
			f, err := os.Open(*payloadFile)
			if err != nil {
				return fmt.Errorf("payload file: %w", err)
			}
			defer f.Close()
			r = f
		}
		var err error
		payload, err = io.ReadAll(io.LimitReader(r, core.MaxPayloadLen+1))
		if err != nil {
			return fmt.Errorf("read payload: %w", err)
		}
		if len(payload) > core.MaxPayloadLen {
			return usagef(cc.cmd.name, "the payload is larger than %d bytes", core.MaxPayloadLen)
		}
	}
	a, err := cc.openCreating()
	if err != nil {
		return err
	}
	defer a.Close()
	id, err := a.RequestJobWith(*prod, *key, payload, o)
	if err != nil {
		return err
	}
	if cc.jsonOut() {
		return printJSON(map[string]string{"id": id, "production": *prod})
	}
	fmt.Println(id)
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// receipt is what a committed claim reports: never the secret.
type receipt struct {
	Production string `json:"production"`
	JobID      string `json:"job_id"`
	Worker     string `json:"worker"`
	Expiry     int64  `json:"expiry_unix_us"`
	TokenFile  string `json:"token_file,omitempty"`
}

func (r receipt) text() string {
	return fmt.Sprintf("production=%s job=%s worker=%s expiry=%s", nameText(r.Production), r.JobID, nameText(r.Worker),
		timeText(time.UnixMicro(r.Expiry)))
}

func runClaim(cc *cmdContext) error {
	cc.withJSON()
	prod := cc.fs.String("production", "", "production `NAME`")
	worker := cc.fs.String("worker", "", "worker `NAME` recorded as the claim's attribution")
	var dur durationFlag
	cc.fs.Var(&dur, "duration", "claim `DURATION` with a unit: us, ms, s, m, h (e.g. 30s)")
	tokenOut := cc.fs.String("token-out", "", "create `FILE` (exclusively, mode 0600) and write the token to it")
	jobID := cc.fs.String("job", "", "claim this job `ID` (or a unique prefix of 8 or more characters) instead of the next one")
	wait := durationFlag{rule: spanRule{max: core.MaxWait}}
	cc.fs.Var(&wait, "wait", "when nothing is claimable, wait up to `DURATION` for a job (at most 24h)")
	if done, err := parseOnly(cc, "production", "worker", "duration", "token-out"); done || err != nil {
		return err
	}
	if wait.set && *jobID != "" {
		return usagef(cc.cmd.name, "--wait waits for the next job; it cannot be combined with --job")
	}
	if *tokenOut == "-" {
		return usagef(cc.cmd.name, "--token-out needs a file: a token is never written to standard output")
	}

	// From here until the token is written (or the file removed), SIGINT
	// and SIGTERM wait: the file ends complete or gone, and a committed
	// claim's receipt is printed, before the signal takes effect.
	held.start()
	// Reserve the credential file before anything else, so an existing file
	// refuses the claim with nothing changed (not even a database created).
	out, err := os.OpenFile(*tokenOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("token file %s already exists; nothing was claimed (choose a new file name)", *tokenOut)
		}
		return fmt.Errorf("create token file: %w; nothing was claimed", err)
	}
	reserved, err := out.Stat()
	if err != nil {
		out.Close()
		return fmt.Errorf("create token file: %w; nothing was claimed", err)
	}
	discard := func() {
		out.Close()
		removeOwn(*tokenOut, reserved)
	}
	if err := out.Chmod(0o600); err != nil {
		discard()
		return fmt.Errorf("create token file: %w; nothing was claimed", err)
	}

	pausePoint("claim-reserved")
	a, err := cc.open()
	if err != nil {
		discard()
		return err
	}
	if s := held.interrupted(); s != nil {
		a.Close()
		discard()
		return fmt.Errorf("interrupted (%v) before the claim was made: nothing was claimed, and %s was removed", s, *tokenOut)
	}
	claimCommitHook(a)
	var l *core.Lease
	switch {
	case *jobID != "":
		// A unique prefix of the id names the job (core.ResolveJobID).
		var id string
		if id, err = a.ResolveJobID(context.Background(), *prod, *jobID); err == nil {
			l, err = a.ClaimJob(*prod, id, *worker, dur.d)
		}
	case wait.set:
		ctx, stop := held.context()
		l, err = a.ClaimWait(ctx, *prod, *worker, dur.d, wait.d)
		stop()
		if core.KindOf(err) == core.KindInterrupted {
			a.Close()
			discard()
			return fmt.Errorf("interrupted (%v) while waiting for a job: nothing was claimed, and %s was removed",
				held.interrupted(), *tokenOut)
		}
	default:
		l, err = a.Claim(*prod, *worker, dur.d)
	}
	if err != nil {
		a.Close()
		discard()
		var ce *core.Error
		if errors.As(err, &ce) && ce.Kind == core.KindOutcomeUnknown && ce.JobID != "" {
			// No lease came back, so there is no token to write: name the
			// job, so the claim can be found and given back if it committed.
			return fmt.Errorf("%w\nleases: no token was written (%s was removed); if the claim committed, job %s is "+
				"claimed by %s until its expiry: see 'leases job list --production %s', and give it back with "+
				"'leases cancel --production %s --job %s'", err, *tokenOut, ce.JobID, *worker, *prod, *prod, ce.JobID)
		}
		return err
	}
	pausePoint("claim-committed")
	rc := receipt{Production: l.Production(), JobID: l.JobID(), Worker: l.Worker(), Expiry: l.ExpiryUnixUS(), TokenFile: *tokenOut}
	tok, err := l.Export()
	a.Close()
	if err == nil {
		err = writeToken(out, *tokenOut, tok)
	}
	if err != nil {
		discard()
		return &deliveryError{msg: fmt.Sprintf("the claim is committed but its token could not be written to %s (%v); "+
			"the file was removed.\nleases: receipt: %s\n"+
			"leases: the claim stays until its expiry; to give the job back now run: leases cancel --production %s --job %s",
			*tokenOut, scrubErr(err, tok), rc.text(), rc.Production, rc.JobID)}
	}
	if cc.jsonOut() {
		return printJSON(rc)
	}
	fmt.Printf("claimed %s (token in %s)\n", rc.text(), *tokenOut)
	return nil
}

// writeToken writes and fsyncs the token and the directory entry.
func writeToken(f *os.File, path, tok string) error {
	restore := tokenWriteHook()
	_, err := f.Write([]byte(tok + "\n"))
	restore()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if d, err := os.Open(dirOf(path)); err == nil {
		defer d.Close()
		return d.Sync()
	}
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndex(path, "/"); i >= 0 {
		if i == 0 {
			return "/"
		}
		return path[:i]
	}
	return "."
}

// removeOwn removes path only if it is still the file we created.
func removeOwn(path string, ours os.FileInfo) {
	if st, err := os.Lstat(path); err == nil && os.SameFile(ours, st) {
		os.Remove(path)
	}
}

// scrubErr makes sure an error text cannot carry the token.
func scrubErr(err error, tok string) string {
	msg := err.Error()
	if tok != "" {
		msg = strings.ReplaceAll(msg, tok, "[redacted]")
	}
	return msg
}

func runRenew(cc *cmdContext) error {
	cc.withJSON()
	tf := tokenFileFlag(cc)
	var dur durationFlag
	cc.fs.Var(&dur, "duration", "new expiry is now + `DURATION` (us, ms, s, m, h)")
	if done, err := parseOnly(cc, "duration"); done || err != nil {
		return err
	}
	a, l, err := cc.importLease(*tf)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := l.Renew(dur.d); err != nil {
		return err
	}
	rc := receipt{Production: l.Production(), JobID: l.JobID(), Worker: l.Worker(), Expiry: l.ExpiryUnixUS()}
	if cc.jsonOut() {
		return printJSON(rc)
	}
	fmt.Printf("renewed %s\n", rc.text())
	return nil
}

// transition runs release/fail/complete: token in, one claimant operation.
func transition(cc *cmdContext, verb string, op func(l *core.Lease) error) error {
	a, l, err := cc.importLease(cc.fs.Lookup("token-file").Value.String())
	if err != nil {
		return err
	}
	defer a.Close()
	if err := op(l); err != nil {
		return err
	}
	fmt.Printf("%s job %s of production %s\n", verb, l.JobID(), nameText(l.Production()))
	return nil
}

func runRelease(cc *cmdContext) error {
	tokenFileFlag(cc)
	if done, err := parseOnly(cc); done || err != nil {
		return err
	}
	return transition(cc, "released", func(l *core.Lease) error { return l.Release() })
}

func runFail(cc *cmdContext) error {
	tokenFileFlag(cc)
	reason := cc.fs.String("reason", "", "why the job failed (`TEXT`)")
	retry := cc.fs.Bool("retry", false, "fail this attempt only: the job returns to the queue, or is dead if it was its last attempt")
	delay := durationFlag{rule: spanRule{max: core.MaxDelay}}
	cc.fs.Var(&delay, "delay", "with --retry: claimable again `DURATION` after the authority's now (default: the production's backoff)")
	if done, err := parseOnly(cc, "reason"); done || err != nil {
		return err
	}
	if !*retry {
		if delay.set {
			return usagef(cc.cmd.name, "--delay needs --retry: a job failed for good never returns")
		}
		return transition(cc, "failed", func(l *core.Lease) error { return l.Fail(*reason) })
	}
	a, l, err := cc.importLease(cc.fs.Lookup("token-file").Value.String())
	if err != nil {
		return err
	}
	defer a.Close()
	if err := l.FailRetry(*reason, delay.d); err != nil {
		return err
	}
	fmt.Printf("failed (retryable) job %s of production %s: %s\n", l.JobID(), nameText(l.Production()),
		afterRetry(a, l.Production(), l.JobID()))
	return nil
}

// afterRetry says what became of a job its claimant failed with a retry, as
// read just after the commit (another worker may have claimed it since).
func afterRetry(a *core.Authority, production, jobID string) string {
	j, err := a.JobDetail(context.Background(), production, jobID)
	switch {
	case err != nil:
		return fmt.Sprintf("committed (its state could not be read: %v)", err)
	case j.State == core.StateRequested:
		return fmt.Sprintf("requested again, claimable at %s (%d attempt(s) used)", timeText(j.ClaimableAt), j.Attempts)
	case j.State == core.StateDead:
		return fmt.Sprintf("dead, all %d attempts used", j.Attempts)
	}
	return "now " + j.State
}

func runComplete(cc *cmdContext) error {
	tokenFileFlag(cc)
	md, pv := cc.factFlags()
	if done, err := parseOnly(cc); done || err != nil {
		return err
	}
	return transition(cc, "completed", func(l *core.Lease) error {
		return l.Complete(core.Facts{Metadata: md.m, Provenance: pv.m})
	})
}

// openJob parses a command on one job named by --production P --job ID
// (no token: a coordinator's or an observer's), opens the authority and
// reads the id, which may be a unique prefix of at least 8 characters
// (core.ResolveJobID); done reports that --help was shown.
func openJob(cc *cmdContext) (a *core.Authority, production, jobID string, done bool, err error) {
	prod := cc.fs.String("production", "", "production `NAME`")
	job := cc.fs.String("job", "", "job `ID` (or a unique prefix of 8 or more characters)")
	if done, err = parseOnly(cc, "production", "job"); done || err != nil {
		return nil, "", "", done, err
	}
	if a, err = cc.open(); err != nil {
		return nil, "", "", false, err
	}
	id, err := a.ResolveJobID(context.Background(), *prod, *job)
	if err != nil {
		a.Close()
		return nil, "", "", false, err
	}
	return a, *prod, id, false, nil
}

// onJob runs a coordinator's act on one job (cancel, job retry) and prints
// what it did: did has a verb for the job id and one for the production.
func onJob(cc *cmdContext, act func(a *core.Authority, production, jobID string) error, did string) error {
	a, prod, job, done, err := openJob(cc)
	if done || err != nil {
		return err
	}
	defer a.Close()
	if err := act(a, prod, job); err != nil {
		return err
	}
	fmt.Printf(did+"\n", job, nameText(prod))
	return nil
}

func runCancel(cc *cmdContext) error {
	return onJob(cc, (*core.Authority).Cancel, "cancelled job %s of production %s")
}

// transient tells the failures that `events --follow` waits out from those
// that end it. Waited out: busy (another process holds the lock) and a
// storage failure caused by a lost or refused connection to a database
// server — a PostgreSQL server restarting, failing over or briefly
// unreachable. Everything else is permanent: a corrupt or foreign file, a
// read-only or missing schema, a refused login; polling would only hide it.
// The test is on the error's cause, not on a count of failures, so a corrupt
// file ends the command on its first poll and a server that is down for a
// minute is still followed when it returns.
func transient(err error) bool {
	switch core.KindOf(err) {
	case core.KindBusy:
		return true
	case core.KindStorage:
		return connectionLost(err)
	}
	return false
}

// connectionLost: the error chain shows a network failure (refused, reset,
// timed out), a connection closed mid-answer, or a PostgreSQL SQLSTATE of the
// connection-exception class (08) or an operator/crash shutdown or a server
// still starting (57P01-57P03). The SQLSTATE is read through the method the
// driver's error type has, so this file names no database driver.
func connectionLost(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	for _, cause := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, cause) {
			return true
		}
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		code := coded.SQLState()
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
	}
	return false
}

const eventFormat = "%-6s  %-27s  %-16s  %-36s  %-18s  %-16s  %-27s  %s\n"

func runVersion(cc *cmdContext) error {
	if done, err := parseOnly(cc); done || err != nil {
		return err
	}
	printVersion()
	return nil
}

// printVersion is the output of both `leases version` and `leases --version`.
func printVersion() {
	if testHooks {
		fmt.Printf("leases %s (test build)\n", version)
		return
	}
	fmt.Printf("leases %s\n", version)
}
