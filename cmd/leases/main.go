// Command leases is the operator and shell-worker front end of the lease
// authority: dispatch, exit statuses and error reporting live here.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/libleases/libleases/core"
)

// version is set at build time: -ldflags "-X main.version=$(cat VERSION)".
var version = "devel"

// Exit statuses: the table of docs/cli.md, which scripts branch on.
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitNothing   = 3
	exitDelivery  = 4
	defaultDBPath = "./leases.db"
)

// usageError is a bad command line: exit status 2.
type usageError struct{ msg, cmd string }

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), cmd: cmd}
}

// deliveryError: a claim committed but its token could not be delivered
// (exit status 4). Its message already holds the receipt.
type deliveryError struct{ msg string }

func (e *deliveryError) Error() string { return e.msg }

// exitStatus maps an error onto the documented exit statuses.
func exitStatus(err error) int {
	var ue *usageError
	var de *deliveryError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &de):
		return exitDelivery
	}
	switch core.KindOf(err) {
	case core.KindNothingToClaim:
		return exitNothing
	case core.KindInvalidArgument, core.KindInvalidDuration:
		// Rejected before any store access: the command line was wrong.
		return exitUsage
	}
	return exitFailure
}

type command struct {
	name     string // "production create"
	args     string // synopsis after the name
	summary  string
	detail   string
	examples []string
	run      func(c *cmdContext) error
}

var commands []*command

func register(c *command) { commands = append(commands, c) }

func findCommand(args []string) (*command, []string) {
	if len(args) >= 2 {
		for _, c := range commands {
			if c.name == args[0]+" "+args[1] {
				return c, args[2:]
			}
		}
	}
	if len(args) >= 1 {
		for _, c := range commands {
			if c.name == args[0] {
				return c, args[1:]
			}
		}
	}
	return nil, args
}

// groupHelp lists the subcommands of "production" or "job".
func groupHelp(w io.Writer, group string) bool {
	var subs []*command
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			subs = append(subs, c)
		}
	}
	if len(subs) == 0 {
		return false
	}
	fmt.Fprintf(w, "Usage: leases %s COMMAND [FLAGS]\n\nCommands:\n", group)
	for _, c := range subs {
		fmt.Fprintf(w, "  %-20s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'leases %s COMMAND --help' for a command's flags and examples.\n", group)
	return true
}

func mainHelp(w io.Writer) {
	fmt.Fprint(w, `leases: job leases from the command line.

Usage: leases [--db PATH] COMMAND [FLAGS] [ARGS]
       leases --version | --help

The database is --db PATH, else $LEASES_DB, else ./leases.db. Only production create
and job request create a missing one (any command does with --create).
A postgres:// or postgresql:// URL instead of a path selects a PostgreSQL server.
Tokens (lease credentials) are read only from --token-file FILE, or --token-file -
for standard input; never from an argument.

Commands:
`)
	cs := append([]*command(nil), commands...)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-20s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Exit status: 0 done (work: stopped as asked); 2 usage error; 3 nothing to claim;
4 claim committed but token delivery failed (receipt on standard error); 1 any
other failure (work: it could not go on).

Run 'leases COMMAND --help' for a command's flags and examples.
`)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == reaperArg {
		os.Exit(reap()) // supervise.go: this process was started as a worker's reaper
	}
	code := run(os.Args[1:])
	held.deliver() // a signal held over a window that must not be cut short (signals.go)
	os.Exit(code)
}

func run(args []string) int {
	err := dispatch(args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "leases: %s\n", err.Error())
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.cmd != "" {
			fmt.Fprintf(os.Stderr, "Run 'leases %s --help' for usage.\n", ue.cmd)
		} else {
			fmt.Fprintln(os.Stderr, "Run 'leases --help' for usage.")
		}
	}
	return exitStatus(err)
}

func dispatch(args []string) error {
	// Checked first, before anything could echo an argument back.
	if err := refuseTokenArguments(args); err != nil {
		return err
	}
	db := ""
	for len(args) > 0 {
		a := args[0]
		switch {
		case isHelpFlag(a):
			mainHelp(os.Stdout)
			return nil
		case a == "--version" || a == "-version" || a == "-V":
			printVersion()
			return nil
		case a == "--db" || a == "-db":
			if len(args) < 2 {
				return usagef("", "flag needs an argument: --db")
			}
			db, args = args[1], args[2:]
			continue
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			db, args = a[strings.Index(a, "=")+1:], args[1:]
			continue
		case strings.HasPrefix(a, "-"):
			name := strings.TrimLeft(flagName(a), "-")
			if hint := didYouMean("--", name, globalFlags); hint != "" {
				return usagef("", "unknown global flag --%s%s", name, hint)
			}
			return usagef("", "unknown global flag --%s (command flags go after the command)", name)
		}
		break
	}
	if len(args) == 0 {
		mainHelp(os.Stderr)
		return usagef("", "no command given")
	}
	if args[0] == "help" {
		if len(args) == 1 {
			mainHelp(os.Stdout)
			return nil
		}
		if c, rest := findCommand(args[1:]); c != nil && len(rest) == 0 {
			// The command defines its flags as it runs: let it show its help.
			cc := newCmdContext(c, db)
			cc.args = []string{"--help"}
			return c.run(cc)
		}
		if len(args) == 2 && groupHelp(os.Stdout, args[1]) {
			return nil
		}
		return unknownCommand(args[1:])
	}
	c, rest := findCommand(args)
	if c == nil {
		if len(args) >= 1 {
			group := args[0]
			if len(args) == 1 && groupHelp(os.Stderr, group) {
				return usagef(group, "%s needs a command", group)
			}
			if len(args) > 1 && isHelpFlag(args[1]) && groupHelp(os.Stdout, group) {
				return nil
			}
		}
		return unknownCommand(args)
	}
	cc := newCmdContext(c, db)
	cc.args = rest
	return withProductionHint(cc, c.run(cc))
}

func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// globalFlags are the flags taken before the command.
var globalFlags = []string{"db", "help", "version"}

// unknownCommand reports a command line whose words name no command, with
// the nearest command when the words look like a typo of one: "job lst" →
// "job list", "relase" → "release", "jb list" → "job list".
func unknownCommand(args []string) error {
	words := args[:min(len(args), 2)]
	if len(words) == 2 && groupHelp(io.Discard, words[0]) {
		hint := ""
		if best := suggest(words[1], subcommands(words[0])); best != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", words[0]+" "+best)
		}
		return usagef(words[0], "unknown command %q%s", strings.Join(words, " "), hint)
	}
	first := map[string]bool{"help": true}
	for _, c := range commands {
		first[strings.Fields(c.name)[0]] = true
	}
	names := make([]string, 0, len(first))
	for n := range first {
		names = append(names, n)
	}
	sort.Strings(names)
	hint := ""
	if best := suggest(words[0], names); best != "" {
		shown := best
		if len(words) == 2 && groupHelp(io.Discard, best) && slices.Contains(subcommands(best), words[1]) {
			shown = best + " " + words[1]
		}
		hint = fmt.Sprintf(" (did you mean %q?)", shown)
	}
	return usagef("", "unknown command %q%s", words[0], hint)
}

// subcommands lists the second words of a group's commands ("list" of "job").
func subcommands(group string) []string {
	var out []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			out = append(out, sub)
		}
	}
	return out
}

// didYouMean is " (did you mean PREFIXcandidate?)" for the candidate nearest
// to word, or "" when none is near enough to be a likely typo.
func didYouMean(prefix, word string, candidates []string) string {
	if best := suggest(word, candidates); best != "" {
		return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
	}
	return ""
}

// suggest returns the candidate a mistyped word most likely meant: the
// nearest by edit distance (a swap of two neighbours counts as one edit),
// within 1 edit for words of up to 4 letters and 2 for longer ones; else the
// only candidate the word starts (at least 3 letters). Ties go to the first
// candidate, so the answer never depends on map order.
func suggest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	limit := 1
	if len(word) > 4 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return best
	}
	var prefixed []string
	for _, c := range candidates {
		if len(word) >= 3 && strings.HasPrefix(c, word) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of adjacent letters each cost one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// flagName is the flag part of "--name=value", so a value is never echoed.
func flagName(a string) string {
	if i := strings.Index(a, "="); i >= 0 {
		return a[:i]
	}
	return a
}
