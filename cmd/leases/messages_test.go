// How the CLI talks to a user who got something wrong: --version, flags named
// as --help names them, durations whose message says the fix, and "did you
// mean" for mistyped commands and flags.
package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestVersionFlagPrintsWhatVersionPrints(t *testing.T) {
	e := newEnv(t)
	want := e.must("version").stdout
	for _, args := range [][]string{{"--version"}, {"-V"}, {"-version"}, {"--db", filepath.Join(e.dir, "x.db"), "--version"}} {
		r := e.run(args...)
		wantExit(t, r, 0)
		if r.stdout != want || r.stderr != "" {
			t.Errorf("leases %v printed %q (stderr %q), want what `leases version` prints: %q", args, r.stdout, r.stderr, want)
		}
	}
	if !strings.Contains(e.must("--help").stdout, "--version") {
		t.Error("leases --help does not mention --version")
	}
	if exists(e.db) || exists(filepath.Join(e.dir, "x.db")) {
		t.Error("printing the version opened a database")
	}
}

// singleDashFlag finds a flag written with one dash ("-duration", "flag
// -job"): two letters at least, so "jq -r", "sh -c" and "non-negative" in
// examples and prose do not count.
var singleDashFlag = regexp.MustCompile(`(?:^|[^-\w])-[a-z][a-z-]+`)

func TestEveryMessageAndHelpNamesFlagsWithTwoDashes(t *testing.T) {
	e := newEnv(t)
	check := func(args []string, text string) {
		t.Helper()
		if m := singleDashFlag.FindString(text); m != "" {
			t.Errorf("leases %s names a flag with one dash (%q):\n%s", strings.Join(args, " "), strings.TrimSpace(m), text)
		}
	}
	checked := 0
	for _, c := range allCommands {
		cmd := strings.Fields(c)
		help := e.must(append(cmd, "--help")...)
		check(append(cmd, "--help"), help.stdout)
		// Every flag of the command, given without its value, and misspelt.
		for _, m := range flagRE.FindAllStringSubmatch(help.stdout, -1) {
			name, placeholder := m[1], m[2]
			if placeholder == "" {
				continue // a boolean flag needs no value
			}
			args := append(append([]string(nil), cmd...), "--"+name)
			r := e.run(args...)
			wantExit(t, r, 2, "--"+name+" needs a value")
			check(args, r.stderr)
			checked++
		}
		args := append(append([]string(nil), cmd...), "--no-such-flag")
		r := e.run(args...)
		wantExit(t, r, 2, "unknown flag --no-such-flag")
		check(args, r.stderr)
	}
	if checked < 15 {
		t.Fatalf("only %d value-taking flags were found in the help texts", checked)
	}
	for _, args := range [][]string{
		{"claim", "--production", prod, "--worker", "w", "--duration", "1m30", "--token-out", "t"},
		{"complete", "--token-file", "t", "--metadata", "frames"},
		{"events", "--json=maybe"},
		{"events", "--after", "-1"},
		{"claim", "--production", prod, "--worker", "w", "--token-out", "t"},
		{"renew", "--duration", "1s"},
		{"--bogus", "version"},
		{"-bogus", "version"},
		{"claim", "-durration", "1s"},
		{"exec", "---x"},
	} {
		r := e.run(args...)
		wantExit(t, r, 2)
		check(args, r.stderr)
	}
	check([]string{"--help"}, e.must("--help").stdout)
}

func TestADurationMissingItsLastUnitSaysHowToWriteIt(t *testing.T) {
	e := newEnv(t)
	for text, want := range map[string]string{
		"1m30":  "--duration 1m30: the last number has no unit; write 1m30s",
		"1h30":  "--duration 1h30: the last number has no unit; write 1h30m",
		"2s500": "--duration 2s500: the last number has no unit; write 2s500ms",
		"30":    "--duration 30: a bare number has no unit; add one of us, ms, s, m, h (e.g. 30s)",
		"1.5.3": "--duration 1.5.3: expected a unit after 1.5",
		"":      `--duration "": empty`,
	} {
		for _, cmd := range [][]string{
			{"claim", "--production", prod, "--worker", "w", "--token-out", filepath.Join(e.dir, "t"), "--duration", text},
			{"renew", "--token-file", "t", "--duration=" + text},
		} {
			wantExit(t, e.run(cmd...), 2, want)
		}
	}
	if exists(filepath.Join(e.dir, "t")) || exists(e.db) {
		t.Fatal("a rejected duration created a file")
	}
}

func TestMistypedCommandsAndFlagsGetASuggestion(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "lst", "--production", prod}, `unknown command "job lst" (did you mean "job list"?)`},
		{[]string{"job", "reqest"}, `(did you mean "job request"?)`},
		{[]string{"production", "craete", "x"}, `(did you mean "production create"?)`},
		{[]string{"relase", "--token-file", "t"}, `unknown command "relase" (did you mean "release"?)`},
		{[]string{"evnets"}, `(did you mean "events"?)`},
		{[]string{"jb", "list"}, `unknown command "jb" (did you mean "job list"?)`},
		{[]string{"prod", "list"}, `(did you mean "production list"?)`},
		{[]string{"help", "clam"}, `(did you mean "claim"?)`},
		{[]string{"claim", "--durration", "30s"}, "unknown flag --durration (did you mean --duration?)"},
		{[]string{"claim", "--token_out", "t"}, "(did you mean --token-out?)"},
		{[]string{"events", "--folow"}, "(did you mean --follow?)"},
		{[]string{"job", "list", "--prod", prod}, "(did you mean --production?)"},
		{[]string{"--verison"}, "unknown global flag --verison (did you mean --version?)"},
		{[]string{"--dv", "x", "version"}, "(did you mean --db?)"},
	} {
		r := e.run(c.args...)
		wantExit(t, r, 2, c.want)
	}
	// Nothing near: no guess.
	for _, args := range [][]string{{"frobnicate"}, {"job", "explode"}, {"claim", "--zzz"}, {"--json", "production", "list"}} {
		r := e.run(args...)
		wantExit(t, r, 2)
		if strings.Contains(r.stderr, "did you mean") {
			t.Errorf("leases %v guessed wildly: %s", args, r.stderr)
		}
	}
	if exists(e.db) {
		t.Fatal("a mistyped command opened the database")
	}
}

func TestSuggestFindsTyposOnlyWithinTheirDistance(t *testing.T) {
	words := []string{"request", "list", "release", "renew", "claim", "cancel", "complete"}
	for word, want := range map[string]string{
		"lsit": "list", "lst": "list", "relase": "release", "reneww": "renew", "clam": "claim", "cancle": "cancel",
		"compl": "complete", "requets": "request",
		"lx": "", "xyz": "", "re": "", "cxxxxl": "", "": "",
	} {
		if got := suggest(word, words); got != want {
			t.Errorf("suggest(%q) = %q, want %q", word, got, want)
		}
	}
}
