// Retries, dead jobs, run-at and priorities from the command line: a
// production's retry policy (at creation and later), the scheduling flags of
// job request, and redrive of one job or of every failed, dead or cancelled
// job of a production (docs/cli.md, "Retries").
package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/libleases/libleases/core"
)

func init() {
	register(&command{name: "production policy", args: "NAME [--max-attempts N] [--backoff BASE[,CAP]] [--jitter PCT] [--json]",
		summary: "show a production's retry policy, or change parts of it (coordinator)",
		detail: `Without flags, prints the policy. With flags, changes the parts given and keeps the
others; the change applies to every attempt that ends after it (a policy_changed event
records it; the same policy again changes nothing). A claim that ends without completion
(released, failed with --retry, expired) costs one attempt: the job comes back after
BASE*2^(n-1), varied by +-PCT % and at most CAP, and after its last attempt it is dead.
` + policyFlagsHelp,
		examples: []string{"leases production policy nightly",
			"leases production policy nightly --max-attempts 5 --backoff 30s,10m",
			"leases production policy nightly --backoff 0 --json"},
		run: runProductionPolicy})
	register(&command{name: "production redrive", args: "NAME [--state dead|failed|cancelled] [--json]",
		summary: "return every dead (or failed, or cancelled) job of a production to the queue (coordinator)",
		detail: `Each job becomes requested and claimable at once with its attempts reset to 0 (its
attempt history keeps the old ones); a redriven event records the state it left. The jobs
are redriven 500 per transaction: each job's redrive is atomic, the whole is not, so a
failure part-way says how many were redriven (run the command again for the rest).`,
		examples: []string{"leases production redrive nightly",
			"leases production redrive nightly --state failed --json"},
		run: runProductionRedrive})
	register(&command{name: "job retry", args: "--production P --job ID",
		summary: "return one failed, dead or cancelled job to the queue, its attempts reset (coordinator)",
		detail: `The job becomes requested and claimable at once with its attempts reset to 0; its
attempt history keeps the old attempts, and a redriven event records the state it left.
A job in any other state is refused (wrong_state, exit 1) and nothing changes.`,
		examples: []string{"leases job retry --production nightly --job 3f1c2a9e-0b7d-4c1e-9a55-2f0d8e6b1c44"},
		run:      runJobRetry})
}

// policyFlagsHelp explains the policy flags of production create and policy.
const policyFlagsHelp = `--max-attempts is 1..1000 (default 25). --backoff BASE[,CAP] takes durations with a unit
(0 for none), at most 8784h; without CAP the cap stays as it is (1h by default) unless
BASE is longer, which makes the wait constant. --jitter is a whole percentage, 0..100
(default 20).`

// backoffRule: a backoff or a delay may be zero and reaches up to core.MaxDelay.
var backoffRule = spanRule{max: core.MaxDelay, zeroOK: true}

// backoffFlag reads --backoff BASE[,CAP].
type backoffFlag struct {
	base, cap   time.Duration
	set, capSet bool
}

func (f *backoffFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	if f.capSet {
		return f.base.String() + "," + f.cap.String()
	}
	return f.base.String()
}

func (f *backoffFlag) Set(s string) error {
	baseText, capText, hasCap := strings.Cut(s, ",")
	base, err := parseSpan(baseText, backoffRule)
	if err != nil {
		return err
	}
	f.base, f.set, f.capSet = base, true, false
	if hasCap {
		if f.cap, err = parseSpan(capText, backoffRule); err != nil {
			return err
		}
		if f.cap < f.base {
			return fmt.Errorf("%s: the cap %s is shorter than the base %s", quoteIfOdd(s), capText, baseText)
		}
		f.capSet = true
	}
	return nil
}

// policyFlags are the flags that set parts of a retry policy.
type policyFlags struct {
	maxAttempts, jitter *string
	backoff             backoffFlag
	cmd                 string
}

func addPolicyFlags(cc *cmdContext) *policyFlags {
	pf := &policyFlags{cmd: cc.cmd.name}
	pf.maxAttempts = cc.fs.String("max-attempts", "", fmt.Sprintf("claims a job may take before it is dead, `N` in 1..%d (default 25)", core.MaxAttemptsLimit))
	cc.fs.Var(&pf.backoff, "backoff", "wait `BASE[,CAP]` before the second attempt, doubling after each up to CAP (0: none; default 1s,1h)")
	pf.jitter = cc.fs.String("jitter", "", "vary each wait by up to +-`PCT` percent, 0..100 (default 20)")
	return pf
}

func (pf *policyFlags) given() bool {
	return *pf.maxAttempts != "" || pf.backoff.set || *pf.jitter != ""
}

// apply sets the given parts on p. The bounds are checked here, before
// anything is opened, so that bad input creates no database; they are
// core's bounds (core checks them again).
func (pf *policyFlags) apply(p core.RetryPolicy) (core.RetryPolicy, error) {
	num := func(name, text string, lo, hi int, to *int) error {
		if text == "" {
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSuffix(text, "%"))
		if err != nil || n < lo || n > hi {
			return usagef(pf.cmd, "--%s wants a whole number from %d to %d", name, lo, hi)
		}
		*to = n
		return nil
	}
	if err := num("max-attempts", *pf.maxAttempts, 1, core.MaxAttemptsLimit, &p.MaxAttempts); err != nil {
		return p, err
	}
	if err := num("jitter", *pf.jitter, 0, 100, &p.JitterPercent); err != nil {
		return p, err
	}
	if b := pf.backoff; b.set {
		p.BackoffBase = b.base
		switch {
		case b.capSet:
			p.BackoffCap = b.cap
		case p.BackoffCap < b.base:
			p.BackoffCap = b.base // a first wait longer than the cap: a constant wait
		}
	}
	return p, nil
}

func policyText(p core.RetryPolicy) string {
	if p.BackoffBase == 0 {
		return fmt.Sprintf("max attempts %d, no backoff (a retry is claimable at once)", p.MaxAttempts)
	}
	return fmt.Sprintf("max attempts %d, backoff %s doubling up to %s, jitter %d%%",
		p.MaxAttempts, p.BackoffBase, p.BackoffCap, p.JitterPercent)
}

// findProduction reads one production, with its policy, by name.
func findProduction(a *core.Authority, name string) (core.Production, error) {
	q := core.ProductionQuery{Limit: core.MaxPageSize}
	for {
		page, err := a.ListProductions(context.Background(), q)
		if err != nil {
			return core.Production{}, err
		}
		for _, p := range page.Productions {
			if p.Name == name {
				return p, nil
			}
		}
		if page.Next == "" {
			// The core names the missing production the way every call
			// does (core.MissingProduction: the CLI's hint reads it).
			if _, err := a.Counts(context.Background(), name); err != nil {
				return core.Production{}, err
			}
			return core.Production{}, &core.Error{Kind: core.KindNotFound, Msg: fmt.Sprintf("production %q does not exist", name)}
		}
		q.After = page.Next
	}
}

func runProductionPolicy(cc *cmdContext) error {
	return showOrSetProductionPart(cc, addPolicyFlags(cc), core.DefaultRetryPolicy(),
		func(p *core.Production) *core.RetryPolicy { return &p.Policy },
		(*core.Authority).SetRetryPolicy, policyText)
}

// partFlags are the flags that change one part of a production's settings:
// given says whether any was given, apply lays those given over a part.
type partFlags[T any] interface {
	given() bool
	apply(T) (T, error)
}

// showOrSetProductionPart shows one part of a production's settings (its
// retry policy, its retention), changing it first when flags for it are
// given. Bad flags are refused before anything is opened. The parts not
// given are kept as read; a concurrent change of those parts between the
// read and the write is overwritten (two coordinators changing one policy
// at once: the last one wins).
func showOrSetProductionPart[T any](cc *cmdContext, flags partFlags[T], defaults T,
	part func(*core.Production) *T, set func(*core.Authority, string, T) error, text func(T) string) error {
	cc.withJSON()
	name, done, err := parseName(cc)
	if done || err != nil {
		return err
	}
	if _, err := flags.apply(defaults); err != nil {
		return err
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	p, err := findProduction(a, name)
	if err != nil {
		return err
	}
	if flags.given() {
		v, err := flags.apply(*part(&p))
		if err != nil {
			return err
		}
		if err := set(a, name, v); err != nil {
			return err
		}
		*part(&p) = v
	}
	if cc.jsonOut() {
		return printJSON(p)
	}
	fmt.Printf("production %s: %s\n", nameText(p.Name), text(*part(&p)))
	return nil
}

func runProductionRedrive(cc *cmdContext) error {
	cc.withJSON()
	state := cc.fs.String("state", core.StateDead, "redrive the jobs in `STATE`: dead, failed or cancelled")
	name, done, err := parseName(cc)
	if done || err != nil {
		return err
	}
	switch *state {
	case core.StateDead, core.StateFailed, core.StateCancelled:
	default:
		return usagef(cc.cmd.name, "--state must be dead, failed or cancelled (the states a redrive returns to the queue)")
	}
	a, err := cc.open()
	if err != nil {
		return err
	}
	defer a.Close()
	n, err := a.Redrive(name, *state)
	if err != nil {
		if n > 0 {
			return fmt.Errorf("%w\nleases: %d %s job(s) were redriven before the failure; run the command again for the rest", err, n, *state)
		}
		return err
	}
	if cc.jsonOut() {
		return printJSON(struct {
			Production string `json:"production"`
			State      string `json:"state"`
			Redriven   int64  `json:"redriven"`
		}{name, *state, n})
	}
	fmt.Printf("redrove %d %s job(s) of production %s\n", n, *state, nameText(name))
	return nil
}

func runJobRetry(cc *cmdContext) error {
	return onJob(cc, (*core.Authority).RetryJob, "job %s of production %s is requested again (attempts reset)")
}

// requestFlags are job request's scheduling flags.
type requestFlags struct {
	priority *string
	delay    durationFlag
	runAt    *string
}

func addRequestFlags(cc *cmdContext) *requestFlags {
	rf := &requestFlags{delay: durationFlag{rule: spanRule{max: core.MaxDelay}}}
	rf.priority = cc.fs.String("priority", "", fmt.Sprintf("claim before lower priorities: `N` in 0..%d (default 0)", core.MaxPriority))
	cc.fs.Var(&rf.delay, "delay", "claimable only `DURATION` after the authority's now (at most 8784h)")
	rf.runAt = cc.fs.String("run-at", "", "claimable no earlier than `TIME` on the authority's clock, RFC 3339 with a zone (2026-12-01T06:00:00Z)")
	return rf
}

// options reads the flags; every error is a usage error, found before
// anything is opened.
func (rf *requestFlags) options(cmd string) (core.RequestOptions, error) {
	var o core.RequestOptions
	if *rf.priority != "" {
		n, err := strconv.Atoi(*rf.priority)
		if err != nil || n < 0 || n > core.MaxPriority {
			return o, usagef(cmd, "--priority wants a whole number from 0 to %d", core.MaxPriority)
		}
		o.Priority = n
	}
	o.Delay = rf.delay.d
	if *rf.runAt != "" {
		if rf.delay.set {
			return o, usagef(cmd, "give --delay or --run-at, not both")
		}
		t, err := time.Parse(time.RFC3339Nano, *rf.runAt)
		if err != nil {
			return o, usagef(cmd, "--run-at wants an RFC 3339 time with a zone, e.g. 2026-12-01T06:00:00Z or 2026-12-01T07:00:00+01:00")
		}
		if t.Truncate(time.Microsecond) != t {
			return o, usagef(cmd, "--run-at must be a whole number of microseconds; nothing is rounded")
		}
		o.RunAt = t
	}
	return o, nil
}
