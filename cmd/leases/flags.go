// Command-line parsing shared by every command: flags, durations with units,
// KEY=JSON facts, and the token rules (token files only, never arguments).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

// cmdContext is one command invocation: its flag set and common flags.
type cmdContext struct {
	cmd      *command
	fs       *flag.FlagSet
	args     []string
	db       string
	create   bool
	json     *bool
	dbGlobal string
}

func newCmdContext(c *command, globalDB string) *cmdContext {
	cc := &cmdContext{cmd: c, dbGlobal: globalDB}
	cc.fs = flag.NewFlagSet("leases "+c.name, flag.ContinueOnError)
	cc.fs.SetOutput(io.Discard)
	cc.fs.StringVar(&cc.db, "db", "", "database `PATH`, or a postgres:// URL for PostgreSQL (default $LEASES_DB, else ./leases.db)")
	cc.fs.BoolVar(&cc.create, "create", false, "create the database if it does not exist (production create and job request always may)")
	return cc
}

// withJSON adds --json.
func (cc *cmdContext) withJSON() {
	cc.json = new(bool)
	cc.fs.BoolVar(cc.json, "json", false, "machine-readable JSON output")
}

func (cc *cmdContext) jsonOut() bool { return cc.json != nil && *cc.json }

func (cc *cmdContext) usage(w io.Writer) {
	c := cc.cmd
	fmt.Fprintf(w, "Usage: leases %s %s\n\n%s\n", c.name, c.args, c.summary)
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.detail))
	}
	fmt.Fprint(w, "\nFlags:\n")
	cc.fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  %s\n    \t%s\n", strings.TrimSpace("--"+f.Name+" "+placeholder), usage)
	})
	if len(c.examples) > 0 {
		fmt.Fprint(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

var errHelpShown = errors.New("help shown")

// parse parses flags anywhere among the arguments (up to a "--"), and
// returns the positional arguments. interleave=false stops at the first
// positional argument, for exec's PROGRAM ARGS.
func (cc *cmdContext) parse(interleave bool) ([]string, error) {
	var pos []string
	args := cc.args
	for {
		if err := cc.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				cc.usage(os.Stdout)
				return nil, errHelpShown
			}
			return nil, cc.flagError(err)
		}
		rest := cc.fs.Args()
		if !interleave || len(rest) == 0 {
			pos = append(pos, rest...)
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // everything after "--" is positional
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, nil
}

// flagError turns the flag package's messages into the CLI's: flags are named
// with two dashes, as --help shows them; a mistyped flag gets a suggestion;
// and the offending value is never echoed (it could be a credential typed in
// the wrong place), except by a Value whose own message quotes it on purpose
// (a duration: harmless, and the point of the message).
func (cc *cmdContext) flagError(err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name := strings.TrimLeft(rest, "-")
		return usagef(cc.cmd.name, "unknown flag --%s%s", name, didYouMean("--", name, cc.flagNames()))
	}
	if rest, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		name := strings.TrimLeft(rest, "-")
		return usagef(cc.cmd.name, "flag --%s needs a value%s", name, cc.example(name))
	}
	if strings.HasPrefix(msg, "bad flag syntax: ") {
		return usagef(cc.cmd.name, "bad flag syntax: flags are spelled --name VALUE or --name=VALUE")
	}
	// "invalid value %q for flag -NAME: WHY" and "invalid boolean value %q
	// for -NAME: WHY": the value is between the quotes, so find the flag by
	// its name, never by parsing the value.
	for _, name := range cc.flagNames() {
		for _, marker := range []string{" for flag -" + name + ": ", " for -" + name + ": "} {
			if _, why, ok := strings.Cut(msg, marker); ok {
				if strings.HasPrefix(msg, "invalid boolean value ") {
					why = "want true or false"
				}
				if _, ok := cc.fs.Lookup(name).Value.(*durationFlag); ok {
					return usagef(cc.cmd.name, "--%s %s", name, why) // "--duration 1m30: the last number ..."
				}
				return usagef(cc.cmd.name, "invalid --%s: %s", name, why)
			}
		}
	}
	return usagef(cc.cmd.name, "%s", msg)
}

// flagNames lists the command's flags, --help included.
func (cc *cmdContext) flagNames() []string {
	names := []string{"help"}
	cc.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// example shows how a value-taking flag is written, for a flag given without one.
func (cc *cmdContext) example(name string) string {
	f := cc.fs.Lookup(name)
	if f == nil {
		return ""
	}
	if placeholder, _ := flag.UnquoteUsage(f); placeholder != "" {
		return fmt.Sprintf(" (--%s %s)", name, placeholder)
	}
	return ""
}

func (cc *cmdContext) required(name, value string) error {
	if value == "" {
		if name == "duration" {
			return usagef(cc.cmd.name, "--duration is required (e.g. --duration 30s)")
		}
		return usagef(cc.cmd.name, "--%s is required", name)
	}
	return nil
}

// dbPath: --db, else $LEASES_DB, else ./leases.db. A postgres:// URL is
// passed to core unchanged: it is a location, never a file path.
func (cc *cmdContext) dbPath() string {
	switch {
	case cc.db != "":
		return cc.db
	case cc.dbGlobal != "":
		return cc.dbGlobal
	case os.Getenv("LEASES_DB") != "":
		return os.Getenv("LEASES_DB")
	}
	return defaultDBPath
}

// open opens the authority for a command that reads, or acts on what
// exists: unless --create is given, a missing database is an error that
// says how to create one, and nothing is created (no file, no -wal or -shm,
// no tables in a PostgreSQL schema).
func (cc *cmdContext) open() (*core.Authority, error) { return cc.openWith(cc.create) }

// openCreating opens the authority for a command that creates things
// (production create, job request): a missing database is created.
func (cc *cmdContext) openCreating() (*core.Authority, error) { return cc.openWith(true) }

func (cc *cmdContext) openWith(create bool) (*core.Authority, error) {
	o := leases.Options{MustExist: !create}
	openOptionsHook(&o)
	a, err := leases.OpenWith(cc.dbPath(), o)
	if !create && errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("%w; nothing was created ('leases production create NAME' creates it, or add --create)", err)
	}
	if err == nil {
		if err = clockSeamHook(a); err != nil {
			a.Close()
			return nil, err
		}
	}
	return a, err
}

// ---- durations -------------------------------------------------------------

var durationUnits = []struct {
	name string
	us   int64
}{{"us", 1}, {"ms", 1000}, {"s", 1_000_000}, {"m", 60_000_000}, {"h", 3_600_000_000}}

// parseDuration reads a claim's duration: one or more NUMBER UNIT terms
// ("30s", "1500us", "1.5s", "1m30s"), units us, ms, s, m, h. The arithmetic
// is exact (rational numbers, never floats): a value that is not a whole
// number of microseconds is rejected, never rounded; the range rule is core's.
func parseDuration(text string) (time.Duration, error) { return parseSpan(text, spanRule{}) }

// spanRule is the range of a duration flag. The zero rule is a claim's
// duration (positive, at most 24h, core's ValidateDuration); a wait or a
// delay sets its own bound, and a backoff may be zero.
type spanRule struct {
	max    time.Duration // 0: core.MaxDuration, and core's duration rule applies
	zeroOK bool          // "0" (no unit needed) and "0s" mean none
}

func parseSpan(text string, rule spanRule) (time.Duration, error) {
	bad := func(why string) error { return fmt.Errorf("%s: %s", quoteIfOdd(text), why) }
	if rule.zeroOK && text == "0" {
		return 0, nil
	}
	if text == "" {
		return 0, bad("empty; give a number with a unit, e.g. 30s, 250ms, 1500us")
	}
	if text[0] == '-' {
		return 0, bad("durations must be positive")
	}
	s := text
	total := new(big.Rat)
	lastUnit := ""
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, bad("expected a number (digits, optionally with a decimal fraction) followed by a unit")
		}
		if i < len(s) && s[i] == '.' {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i+1 {
				return 0, bad("a decimal point must be followed by digits")
			}
			i = j
		}
		num := s[:i]
		if len(num) > 40 {
			return 0, bad("number is too long")
		}
		s = s[i:]
		u := 0
		for u < len(s) && (s[u] < '0' || s[u] > '9') && s[u] != '.' {
			u++
		}
		unit := s[:u]
		s = s[u:]
		if unit == "" && s != "" {
			return 0, bad("expected a unit after " + num)
		}
		if unit == "" {
			return 0, bad(missingUnit(text, lastUnit))
		}
		var per int64
		for _, du := range durationUnits {
			if du.name == unit {
				per = du.us
			}
		}
		if per == 0 {
			return 0, bad(fmt.Sprintf("unknown unit %q; use us, ms, s, m or h (durations are whole microseconds)", unit))
		}
		r, ok := new(big.Rat).SetString(num)
		if !ok {
			return 0, bad("not a number")
		}
		total.Add(total, r.Mul(r, new(big.Rat).SetInt64(per)))
		lastUnit = unit
	}
	if !total.IsInt() {
		return 0, bad("not a whole number of microseconds; nothing is rounded")
	}
	n := total.Num()
	if rule.max != 0 {
		if !n.IsInt64() || n.Int64() > rule.max.Microseconds() {
			return 0, bad("at most " + spanText(rule.max))
		}
		if n.Sign() == 0 && !rule.zeroOK {
			return 0, bad("durations must be positive")
		}
		return time.Duration(n.Int64()) * time.Microsecond, nil
	}
	if !n.IsInt64() || n.Int64() > core.MaxDurationUS {
		return 0, bad("durations are at most 24h")
	}
	d := time.Duration(n.Int64()) * time.Microsecond
	if _, err := core.ValidateDuration(d); err != nil {
		return 0, bad(strings.TrimPrefix(err.Error(), core.KindInvalidDuration.String()+": "))
	}
	return d, nil
}

// missingUnit explains a number without a unit. After another term ("1m30")
// the reader most likely meant the next smaller unit, as on a clock face, so
// the message spells the fix out; a lone bare number ("30") could be any unit.
func missingUnit(text, previous string) string {
	if previous == "" {
		return "a bare number has no unit; add one of us, ms, s, m, h (e.g. " + text + "s)"
	}
	for i := 1; i < len(durationUnits); i++ {
		if durationUnits[i].name == previous {
			return "the last number has no unit; write " + text + durationUnits[i-1].name
		}
	}
	return "the last number has no unit; add one of us, ms, s, m, h"
}

// quoteIfOdd shows a duration as typed, quoted only where the bare text would
// be unreadable in a message (empty, spaces, control characters).
func quoteIfOdd(text string) string {
	if text == "" || strings.IndexFunc(text, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '"' }) >= 0 {
		return strconv.Quote(text)
	}
	return text
}

// spanText writes a bound as a person would: 24h, 8784h.
func spanText(d time.Duration) string { return core.FormatDuration(d) }

// durationFlag is a flag.Value using parseSpan with its rule (the zero
// rule: a claim's duration).
type durationFlag struct {
	d    time.Duration
	set  bool
	rule spanRule
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return core.FormatDuration(f.d)
}

func (f *durationFlag) Set(s string) error {
	d, err := parseSpan(s, f.rule)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// ---- facts -----------------------------------------------------------------

// factFlag collects repeated KEY=JSON flags.
type factFlag struct {
	kind string
	m    map[string]json.RawMessage
}

func (f *factFlag) String() string { return "" }

func (f *factFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=JSON, e.g. frames=12 or tool='\"render\"'")
	}
	if !json.Valid([]byte(v)) {
		return fmt.Errorf("the value of %s key %q is not valid JSON (quote strings: %s='\"text\"')", f.kind, k, k)
	}
	if f.m == nil {
		f.m = map[string]json.RawMessage{}
	}
	if _, dup := f.m[k]; dup {
		return fmt.Errorf("%s key %q given twice", f.kind, k)
	}
	f.m[k] = json.RawMessage(v)
	return nil
}

func (cc *cmdContext) factFlags() (*factFlag, *factFlag) {
	md, pv := &factFlag{kind: "metadata"}, &factFlag{kind: "provenance"}
	cc.fs.Var(md, "metadata", "publish a metadata `KEY=JSON` entry on completion (repeatable)")
	cc.fs.Var(pv, "provenance", "publish a provenance `KEY=JSON` entry on completion (repeatable)")
	return md, pv
}

// ---- tokens ----------------------------------------------------------------

// refuseTokenArguments rejects a command line that carries a lease token (or
// the start of one) in any argument: arguments are visible to other users in
// the process list and end up in shell history. The message never repeats the
// argument.
func refuseTokenArguments(args []string) error {
	for i, a := range args {
		if looksLikeToken(a) {
			return usagef("", "argument %d looks like a lease token; tokens are read only from "+
				"--token-file FILE or --token-file - (standard input), never from arguments, "+
				"which other users can see in the process list", i+1)
		}
	}
	return nil
}

const tokenPrefix = "lt1."

func looksLikeToken(a string) bool {
	value := a
	if strings.HasPrefix(a, "-") {
		if _, v, ok := strings.Cut(a, "="); ok {
			value = v
		}
	}
	if strings.HasPrefix(value, tokenPrefix) {
		return true
	}
	for i := strings.Index(a, tokenPrefix); i >= 0; {
		end := min(len(a), i+core.MaxTokenLen)
		for j := end; j > i; j-- {
			if _, err := core.DecodeToken(a[i:j]); err == nil {
				return true
			}
		}
		next := strings.Index(a[i+1:], tokenPrefix)
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// readToken reads a token from a file, or from standard input for "-". The
// content is never echoed in any message.
func readToken(path string) (string, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			if !st.Mode().IsRegular() && st.Mode()&os.ModeNamedPipe == 0 && st.Mode()&os.ModeCharDevice == 0 {
				return "", fmt.Errorf("token file %s is not a regular file", path)
			}
			if st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 {
				fmt.Fprintf(os.Stderr, "leases: warning: token file %s is readable by other users (mode %04o); it holds a credential\n",
					path, st.Mode().Perm())
			}
		}
		r = f
	}
	buf, err := io.ReadAll(io.LimitReader(r, core.MaxTokenLen+3))
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if len(buf) > core.MaxTokenLen+2 {
		return "", fmt.Errorf("the token input is longer than a token (%d bytes at most)", core.MaxTokenLen)
	}
	tok := strings.TrimSpace(string(buf))
	if tok == "" {
		return "", fmt.Errorf("the token input is empty")
	}
	return tok, nil
}

// importLease opens the authority and imports the token read from
// --token-file.
func (cc *cmdContext) importLease(tokenFile string) (*core.Authority, *core.Lease, error) {
	if tokenFile == "" {
		return nil, nil, usagef(cc.cmd.name, "--token-file FILE is required (use - for standard input)")
	}
	tok, err := readToken(tokenFile)
	if err != nil {
		return nil, nil, err
	}
	a, err := cc.open()
	if err != nil {
		return nil, nil, err
	}
	l, err := a.Import(tok)
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, l, nil
}

func tokenFileFlag(cc *cmdContext) *string {
	return cc.fs.String("token-file", "", "read the lease token from `FILE` (- for standard input)")
}
