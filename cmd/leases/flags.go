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
			return nil, usagef(cc.cmd.name, "%s", scrubFlagError(err))
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

// scrubFlagError keeps the flag package's message but not the offending
// value: `invalid value "..." for flag -x: ...` becomes `invalid value for
// flag -x: ...`.
func scrubFlagError(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "invalid value ") {
		if i := strings.Index(msg, " for flag "); i >= 0 {
			return "invalid value" + msg[i:]
		}
	}
	return msg
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
	a, err := leases.OpenWith(cc.dbPath(), leases.Options{MustExist: !create})
	if !create && errors.Is(err, core.ErrNotFound) {
		return nil, fmt.Errorf("%w; nothing was created ('leases production create NAME' creates it, or add --create)", err)
	}
	return a, err
}

// ---- durations -------------------------------------------------------------

var durationUnits = []struct {
	name string
	us   int64
}{{"us", 1}, {"ms", 1000}, {"s", 1_000_000}, {"m", 60_000_000}, {"h", 3_600_000_000}}

// parseDuration reads a CLI duration: one or more NUMBER UNIT terms ("30s",
// "1500us", "1.5s", "1m30s"), units us, ms, s, m, h. The arithmetic is exact
// (rational numbers, never floats): a value that is not a whole number of
// microseconds is rejected, never rounded; the range rule is core's.
func parseDuration(text string) (time.Duration, error) {
	bad := func(why string) error { return fmt.Errorf("invalid duration %q: %s", text, why) }
	if text == "" {
		return 0, bad("empty; give a number with a unit, e.g. 30s, 250ms, 1500us")
	}
	if text[0] == '-' {
		return 0, bad("durations must be positive")
	}
	s := text
	total := new(big.Rat)
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
		if unit == "" {
			return 0, bad("a bare number has no unit; add one of us, ms, s, m, h (e.g. 30s)")
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
	}
	if !total.IsInt() {
		return 0, bad("not a whole number of microseconds; nothing is rounded")
	}
	n := total.Num()
	if !n.IsInt64() || n.Int64() > core.MaxDurationUS {
		return 0, bad("durations are at most 24h")
	}
	d := time.Duration(n.Int64()) * time.Microsecond
	if _, err := core.ValidateDuration(d); err != nil {
		return 0, bad(strings.TrimPrefix(err.Error(), core.KindInvalidDuration.String()+": "))
	}
	return d, nil
}

// durationFlag is a flag.Value using parseDuration.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
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
