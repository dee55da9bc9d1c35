package main

// The observation commands on SQLite and PostgreSQL: streamed listings
// (every job once, in request order, as one JSON array, JSON lines or a
// table), --limit and --after, filters, job show and job counts, escaping in
// the text output, and a 200,000-job listing in bounded memory.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	leases "github.com/libleases/libleases"
)

// eachStore runs fn on a SQLite file and on a fresh PostgreSQL schema.
func eachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, newEnv(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgEnv(t)) })
}

// fill requests n jobs of production prod through the Go API, 5,000 per
// edit (one transaction each), and returns their ids in request order.
func fill(t *testing.T, location string, n int) []string {
	t.Helper()
	a, err := leases.Open(location)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateProduction(prod); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, n)
	for len(ids) < n {
		ed, err := a.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5000 && len(ids) < n; i++ {
			id, err := ed.RequestJob(prod, fmt.Sprintf("k%d", len(ids)), nil)
			if err != nil {
				ed.Abort()
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := ed.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func jsonIDs(t *testing.T, out string) []string {
	t.Helper()
	var rows []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not one JSON array: %v\n%.500s", err, out)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

func jsonlIDs(t *testing.T, out string) []string {
	t.Helper()
	var ids []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var row struct{ ID string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("a --jsonl line is not one JSON object: %v: %q", err, line)
		}
		ids = append(ids, row.ID)
	}
	return ids
}

func equalIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: %d ids, want %d in request order\ngot  %.300v\nwant %.300v", what, len(got), len(want), got, want)
	}
}

var continueRE = regexp.MustCompile(`leases: more (\w+) follow; continue with --after (\S+)\n`)

// continuation is the cursor a --limit listing printed on standard error, or "".
func continuation(t *testing.T, r result, what string) string {
	t.Helper()
	m := continueRE.FindStringSubmatch(r.stderr)
	if m == nil {
		return ""
	}
	if m[1] != what {
		t.Fatalf("the continuation names %q, want %q: %s", m[1], what, r.stderr)
	}
	return m[2]
}

func TestJobListStreamsEveryJobOnceAsAJSONArrayJSONLinesOrATable(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := fill(t, e.db, 2*1000+345) // three pages of the stream
		r := e.must("job", "list", "--production", prod, "--json")
		equalIDs(t, "--json", jsonIDs(t, r.stdout), ids)
		if r.stderr != "" {
			t.Fatalf("a whole listing printed on standard error: %q", r.stderr)
		}
		r = e.must("job", "list", "--production", prod, "--jsonl")
		equalIDs(t, "--jsonl", jsonlIDs(t, r.stdout), ids)
		lines := strings.Split(strings.TrimSuffix(e.must("job", "list", "--production", prod).stdout, "\n"), "\n")
		if len(lines) != len(ids)+1 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], ids[0]+" ") ||
			!strings.HasPrefix(lines[len(lines)-1], ids[len(ids)-1]+" ") {
			t.Fatalf("the table has %d lines for %d jobs: %q ... %q", len(lines), len(ids), lines[0], lines[len(lines)-1])
		}
		// An empty listing is still one document.
		e.must("production", "create", "empty")
		if out := e.must("job", "list", "--production", "empty", "--json").stdout; out != "[]\n" {
			t.Fatalf("an empty --json listing is %q", out)
		}
		if out := e.must("job", "list", "--production", "empty", "--jsonl").stdout; out != "" {
			t.Fatalf("an empty --jsonl listing is %q", out)
		}
	})
}

func TestJobListLimitSaysHowToContinueAndAfterContinuesExactly(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := fill(t, e.db, 25)
		var got []string
		args := []string{"job", "list", "--production", prod, "--limit", "10", "--jsonl"}
		for pages := 0; ; pages++ {
			r := e.must(args...)
			got = append(got, jsonlIDs(t, r.stdout)...)
			next := continuation(t, r, "jobs")
			if next == "" {
				if pages != 2 {
					t.Fatalf("25 jobs took %d continuations, want 2", pages)
				}
				break
			}
			args = []string{"job", "list", "--production", prod, "--limit", "10", "--jsonl", "--after", next}
		}
		equalIDs(t, "--limit 10 followed by --after", got, ids)
		// The listing that ends exactly at the limit says nothing more.
		if r := e.must("job", "list", "--production", prod, "--limit", "25", "--json"); continuation(t, r, "jobs") != "" {
			t.Fatalf("a listing that ended printed a continuation: %s", r.stderr)
		}
		// More than a page of the stream, still exactly the limit.
		r := e.must("job", "list", "--production", prod, "--limit", "24", "--json")
		equalIDs(t, "--limit 24", jsonIDs(t, r.stdout), ids[:24])
		// A cursor of another production's jobs is refused before anything is printed.
		e.must("production", "create", "other")
		e.must("job", "request", "--production", "other")
		e.must("job", "request", "--production", "other")
		r = e.must("job", "list", "--production", "other", "--limit", "1")
		wantExit(t, e.run("job", "list", "--production", prod, "--after", continuation(t, r, "jobs")), 2, "invalid_argument", "cursor")
		wantExit(t, e.run("job", "list", "--production", prod, "--after", "not-a-cursor"), 2, "invalid_argument")
	})
}

func TestJobListFiltersByStateKeyAndJob(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := fill(t, e.db, 6)
		tok, _ := e.claim("w-filter", "1m", "--job", ids[2])
		e.must("cancel", "--production", prod, "--job", ids[4])
		equalIDs(t, "--state claimed", jsonIDs(t, e.must("job", "list", "--production", prod, "--state", "claimed", "--json").stdout),
			ids[2:3])
		equalIDs(t, "--state claimed,cancelled", jsonIDs(t, e.must("job", "list", "--production", prod,
			"--state", "claimed,cancelled", "--json").stdout), []string{ids[2], ids[4]})
		equalIDs(t, "--key k5", jsonIDs(t, e.must("job", "list", "--production", prod, "--key", "k5", "--json").stdout), ids[5:6])
		equalIDs(t, "--job", jsonIDs(t, e.must("job", "list", "--production", prod, "--job", ids[1], "--json").stdout), ids[1:2])
		wantExit(t, e.run("job", "list", "--production", prod, "--state", "running"), 2, "invalid_argument", "running")
		e.must("release", "--token-file", tok)
	})
}

func TestListingUsageErrorsExitTwoBeforeOpeningAnything(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"job", "list", "--production", prod, "--json", "--jsonl"},
		{"job", "list", "--production", prod, "--limit", "0"},
		{"job", "list", "--production", prod, "--limit", "-3"},
		{"job", "list", "--production", prod, "--limit", "ten"},
		{"production", "list", "--limit", "0"},
		{"events", "--follow", "--limit", "3"},
		{"events", "--json", "--jsonl"},
		{"job", "show", "--production", prod},
		{"job", "counts"},
	} {
		wantExit(t, e.run(args...), 2, "leases: ")
	}
	if exists(e.db) {
		t.Fatal("a usage error created the database")
	}
}

func TestJobShowPrintsTheRecordWithItsFactsButNeverASecret(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(2)
		tok, _ := e.claim("w-show", "1m", "--job", ids[0])
		r := e.must("job", "show", "--production", prod, "--job", ids[0])
		for _, want := range []string{"id          " + ids[0], "state       claimed", "worker      w-show", "payload     0 bytes"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("job show lacks %q:\n%s", want, r.stdout)
			}
		}
		e.must("complete", "--token-file", tok, "--metadata", `frames=12`, "--metadata", `title="a\u001b[2Jb"`,
			"--provenance", `tool="render 2.1"`)
		r = e.must("job", "show", "--production", prod, "--job", ids[0])
		for _, want := range []string{"state       completed", "metadata    frames = 12", `title = "a\u001b[2Jb"`,
			`provenance  tool = "render 2.1"`} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("job show lacks %q:\n%s", want, r.stdout)
			}
		}
		var rec struct {
			ID          string
			State       string
			PayloadSize int64 `json:"payload_size"`
			Facts       struct {
				Metadata   map[string]any
				Provenance map[string]any
			}
		}
		if err := json.Unmarshal([]byte(e.must("job", "show", "--production", prod, "--job", ids[0], "--json").stdout), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.ID != ids[0] || rec.State != "completed" || rec.Facts.Metadata["frames"] != float64(12) ||
			rec.Facts.Metadata["title"] != "a\x1b[2Jb" || rec.Facts.Provenance["tool"] != "render 2.1" {
			t.Fatalf("job show --json: %+v", rec)
		}
		wantExit(t, e.run("job", "show", "--production", prod, "--job", "00000000-0000-0000-0000-000000000000"), 1, "not_found")
		wantExit(t, e.run("job", "show", "--production", prod, "--job", "nope"), 2, "invalid_argument")
	})
}

func TestJobCountsCountByState(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(4)
		tok, _ := e.claim("w", "1m", "--job", ids[0])
		e.must("complete", "--token-file", tok)
		e.must("cancel", "--production", prod, "--job", ids[1])
		var c struct{ Requested, Claimed, Completed, Failed, Cancelled, Expired int64 }
		if err := json.Unmarshal([]byte(e.must("job", "counts", "--production", prod, "--json").stdout), &c); err != nil {
			t.Fatal(err)
		}
		if c.Requested != 2 || c.Completed != 1 || c.Cancelled != 1 || c.Claimed != 0 || c.Failed != 0 {
			t.Fatalf("job counts --json: %+v", c)
		}
		r := e.must("job", "counts", "--production", prod)
		if !strings.Contains(r.stdout, "requested         2\n") || !strings.Contains(r.stdout, "dead              0\n") ||
			!strings.Contains(r.stdout, "total             4\n") {
			t.Fatalf("job counts:\n%s", r.stdout)
		}
		wantExit(t, e.run("job", "counts", "--production", "missing"), 1, "not_found")
	})
}

func TestProductionListPagesWithLimitAndAfter(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		for _, n := range []string{"c", "a", "b"} {
			e.must("production", "create", n)
		}
		var names []string
		args := []string{"production", "list", "--limit", "2", "--json"}
		for {
			r := e.must(args...)
			var ps []struct{ Name string }
			if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				names = append(names, p.Name)
			}
			next := continuation(t, r, "productions")
			if next == "" {
				break
			}
			args = []string{"production", "list", "--limit", "2", "--json", "--after", next}
		}
		if strings.Join(names, ",") != "a,b,c" {
			t.Fatalf("productions paged as %v", names)
		}
	})
}

func TestEventsStreamWithJobKindAndLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(3)
		tok, _ := e.claim("w-ev", "1m", "--job", ids[1])
		e.must("complete", "--token-file", tok)
		var all []eventRow
		if err := json.Unmarshal([]byte(e.must("events", "--json").stdout), &all); err != nil {
			t.Fatal(err)
		}
		var lines []eventRow
		for _, l := range strings.Split(strings.TrimSpace(e.must("events", "--jsonl").stdout), "\n") {
			var ev eventRow
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, ev)
		}
		if len(all) != 6 || len(lines) != len(all) { // created, 3 requested, claimed, completed
			t.Fatalf("events: %d in --json, %d in --jsonl", len(all), len(lines))
		}
		var timeline []eventRow
		json.Unmarshal([]byte(e.must("events", "--job", ids[1], "--json").stdout), &timeline)
		if len(timeline) != 3 || timeline[0].Kind != "requested" || timeline[2].Kind != "completed" {
			t.Fatalf("events --job: %+v", timeline)
		}
		var kinds []eventRow
		json.Unmarshal([]byte(e.must("events", "--production", prod, "--kind", "claimed,completed", "--json").stdout), &kinds)
		if len(kinds) != 2 || kinds[0].Kind != "claimed" {
			t.Fatalf("events --kind: %+v", kinds)
		}
		wantExit(t, e.run("events", "--kind", "claimed"), 2, "invalid_argument", "needs a production or a job")
		// --limit, then --after SEQ from the continuation.
		r := e.must("events", "--limit", "4", "--json")
		var first []eventRow
		json.Unmarshal([]byte(r.stdout), &first)
		next := continuation(t, r, "events")
		if len(first) != 4 || next != fmt.Sprint(first[3].Seq) {
			t.Fatalf("events --limit 4: %d events, continuation %q", len(first), next)
		}
		var rest []eventRow
		r = e.must("events", "--after", next, "--json")
		json.Unmarshal([]byte(r.stdout), &rest)
		if len(rest) != 2 || rest[0].Seq != all[4].Seq || continuation(t, r, "events") != "" {
			t.Fatalf("events --after %s: %+v", next, rest)
		}
	})
}

// A name or text that holds control or invisible characters cannot steer
// the terminal from a table: they are written as \uXXXX; JSON keeps them.
func TestNameTextEscapesControlAndInvisibleCharacters(t *testing.T) {
	for name, want := range map[string]string{
		"nightly":          "nightly",
		"café":             "café",
		"日本語":              "日本語",
		"red\x1b[31m":      `red\u001b[31m`,
		"bell\a":           `bell\u0007`,
		"rtl\u202eevil":    `rtl\u202eevil`,
		"zero\u200bwidth":  `zero\u200bwidth`,
		"line\u2028break":  `line\u2028break`,
		"nbsp\u00a0space":  `nbsp\u00a0space`,
		"back\\slash":      `back\\slash`,
		" padded ":         `\u0020padded\u0020`,
		"tab\tinside":      `tab\u0009inside`,
		"\u3000wide space": `\u3000wide space`,
	} {
		if got := nameText(name); got != want {
			t.Errorf("nameText(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestTheTextOutputEscapesControlCharactersInFreeText(t *testing.T) {
	e := newEnv(t)
	ids := e.setup(1)
	tok, _ := e.claim("w", "1m", "--job", ids[0])
	e.must("fail", "--token-file", tok, "--reason", "disk\x1b[2J full\u202e")
	r := e.must("job", "list", "--production", prod)
	if strings.ContainsAny(r.stdout, "\x1b\u202e") || !strings.Contains(r.stdout, `disk\u001b[2J full\u202e`) {
		t.Fatalf("job list printed a control character:\n%q", r.stdout)
	}
	if !strings.Contains(e.must("job", "list", "--production", prod, "--json").stdout, `"disk\u001b[2J full`) {
		t.Fatal("--json does not keep the reason's exact text")
	}
	if r := e.must("job", "show", "--production", prod, "--job", ids[0]); strings.ContainsAny(r.stdout, "\x1b\u202e") {
		t.Fatalf("job show printed a control character:\n%q", r.stdout)
	}
}

// watchHighWater samples a running process's peak RSS (VmHWM of
// /proc/PID/status, a high-water mark) every few milliseconds until it
// exits; the returned func waits for the last sample and gives the largest
// and how many were taken. The rusage of a child started from Go would
// count the test process's memory too: the child shares it (vfork) until
// exec, and Linux carries that high-water mark over the exec.
func watchHighWater(pid int) func() (int64, int) {
	re := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`)
	var peak int64
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			m := re.FindSubmatch(b)
			if err != nil || m == nil {
				return // exited (a zombie has no memory left to show)
			}
			kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
			peak, samples = max(peak, kb), samples+1
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() (int64, int) {
		<-done
		return peak, samples
	}
}

// The memory bound of a streamed listing: 200,000 jobs as one JSON array
// from a child whose peak RSS stays under 100 MB (holding them all took
// ≈ 260 MB before the listing was streamed), every job exactly once.
// PostgreSQL runs the same code on 5,000 jobs (five pages; each request is
// a round trip to fill), so there it shows that every job appears once.
func TestAFullJSONListingOf200000JobsStreamsInBoundedMemory(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		n := 200_000
		if strings.HasPrefix(e.db, "postgres") {
			n = 5_000
		}
		ids := fill(t, e.db, n)
		cmd, _, errb := e.command(opts{}, "job", "list", "--production", prod, "--json")
		cmd.Stdout = nil
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		peak := watchHighWater(cmd.Process.Pid)
		// Read the array as a stream too: the test holds ids, not the output.
		dec := json.NewDecoder(bufio.NewReader(stdout))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			t.Fatalf("the listing does not start an array: %v %v", tok, err)
		}
		seen := make(map[string]int, n)
		i := 0
		for dec.More() {
			var row struct{ ID string }
			if err := dec.Decode(&row); err != nil {
				t.Fatal(err)
			}
			if i < n && row.ID != ids[i] {
				t.Fatalf("job %d is %s, want %s (request order)", i, row.ID, ids[i])
			}
			seen[row.ID]++
			i++
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
			t.Fatalf("the listing does not end its array: %v %v", tok, err)
		}
		io.Copy(io.Discard, stdout)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("job list: %v\n%s", err, errb)
		}
		peakKB, samples := peak()
		if samples < 3 {
			t.Fatalf("the child's memory was sampled %d times only", samples)
		}
		if i != n || len(seen) != n {
			t.Fatalf("%d jobs listed, %d distinct, want %d each once", i, len(seen), n)
		}
		t.Logf("%d jobs: the child's peak RSS was %d KB (its rusage says %d KB, the test process's included)",
			n, peakKB, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
		if peakKB > 100<<10 {
			t.Fatalf("listing %d jobs took %d KB of RSS, over the 100 MB bound", n, peakKB)
		}
	})
}

func TestJobListWithFactsPrintsEachCompletedJobsFactsAsJobShowHasThem(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := fill(t, e.db, 3)
		a, err := leases.Open(e.db)
		if err != nil {
			t.Fatal(err)
		}
		l, err := a.Claim(prod, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(leases.Facts{Metadata: map[string]json.RawMessage{"frames": json.RawMessage(`24`)},
			Provenance: map[string]json.RawMessage{"tool": json.RawMessage(`"render"`)}}); err != nil {
			t.Fatal(err)
		}
		a.Close()
		var show struct {
			Facts json.RawMessage `json:"facts"`
		}
		if err := json.Unmarshal([]byte(e.must("job", "show", "--production", prod, "--job", ids[0], "--json").stdout), &show); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"--json", "--jsonl"} {
			out := e.must("job", "list", "--production", prod, "--facts", format).stdout
			var jobs []map[string]json.RawMessage
			if format == "--json" {
				if err := json.Unmarshal([]byte(out), &jobs); err != nil {
					t.Fatalf("%s: %v\n%s", format, err, out)
				}
			} else {
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					var j map[string]json.RawMessage
					if err := json.Unmarshal([]byte(line), &j); err != nil {
						t.Fatalf("%s: %v\n%s", format, err, out)
					}
					jobs = append(jobs, j)
				}
			}
			if len(jobs) != 3 {
				t.Fatalf("%s: %d jobs\n%s", format, len(jobs), out)
			}
			if compactJSON(t, jobs[0]["facts"]) != compactJSON(t, show.Facts) {
				t.Fatalf("%s: facts %s, job show has %s", format, jobs[0]["facts"], show.Facts)
			}
			if _, ok := jobs[1]["facts"]; ok {
				t.Fatalf("%s: a job not completed has facts:\n%s", format, out)
			}
		}
		if _, ok := mustJobs(t, e.must("job", "list", "--production", prod, "--json").stdout)[0]["facts"]; ok {
			t.Fatal("without --facts a job has facts")
		}
		wantExit(t, e.run("job", "list", "--production", prod, "--facts"), 2, "--facts needs --json or --jsonl")
	})
}

func mustJobs(t *testing.T, out string) []map[string]json.RawMessage {
	t.Helper()
	var jobs []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return jobs
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestJobListWithAKeyPrefixListsTheJobsWhoseKeyStartsWithItInKeyOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := fill(t, e.db, 12) // keys k0 … k11
		want := []string{ids[1], ids[10], ids[11]}
		equalIDs(t, "--key-prefix k1", jsonIDs(t, e.must("job", "list", "--production", prod, "--key-prefix", "k1",
			"--json").stdout), want)
		equalIDs(t, "--key-prefix k1 --limit 2", jsonlIDs(t, e.must("job", "list", "--production", prod, "--key-prefix", "k1",
			"--jsonl", "--limit", "2").stdout), want[:2])
		wantExit(t, e.run("job", "list", "--production", prod, "--key-prefix", "k1", "--key", "k1"), 2, "invalid_argument", "key prefix")
	})
}
