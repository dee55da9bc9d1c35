package main

import (
	"strings"
	"testing"
)

// Every command that reads a job id takes a unique prefix of at least 8
// characters, the id the demo and the status page show.
func TestEveryCommandThatReadsAJobIDTakesAUniquePrefixOfAtLeastEightCharacters(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		ids := e.setup(3)
		short := func(i int) string { return ids[i][:8] }

		r := e.must("job", "show", "--production", prod, "--job", short(0))
		if !strings.Contains(r.stdout, "id          "+ids[0]) {
			t.Fatalf("job show by prefix:\n%s", r.stdout)
		}
		equalIDs(t, "job list --job PREFIX", jsonIDs(t, e.must("job", "list", "--production", prod, "--job", short(1), "--json").stdout), ids[1:2])

		tok, r := e.claim("w-short", "1m", "--job", ids[0][:13])
		if !strings.Contains(r.stdout, "job="+ids[0]) {
			t.Fatalf("claim --job PREFIX claimed another job: %s", r)
		}
		e.must("release", "--token-file", tok)

		r = e.must("cancel", "--production", prod, "--job", short(2))
		if !strings.Contains(r.stdout, "cancelled job "+ids[2]) {
			t.Fatalf("cancel by prefix: %s", r)
		}
		r = e.must("job", "retry", "--production", prod, "--job", short(2))
		if !strings.Contains(r.stdout, "job "+ids[2]+" of production") {
			t.Fatalf("job retry by prefix: %s", r)
		}
		for _, args := range [][]string{{"events", "--job", short(2)}, {"events", "--production", prod, "--job", short(2)}} {
			r = e.must(args...)
			if !strings.Contains(r.stdout, "cancelled") || strings.Contains(r.stdout, ids[0]) {
				t.Fatalf("%v lists other jobs or misses the job's events:\n%s", args, r.stdout)
			}
		}

		// Bad input is a usage error before anything changes; a prefix of
		// no job is not_found. The uppercase prefix begins with a letter:
		// an id whose first 8 characters are all digits reads the same in
		// upper case, and is a valid prefix then.
		upper := "A" + strings.ToUpper(short(0))[1:]
		for _, bad := range []string{ids[0][:7], upper, short(0) + "x", "0a1b2c3d\xff"} {
			wantExit(t, e.run("job", "show", "--production", prod, "--job", bad), 2, "invalid_argument",
				"a lowercase hyphenated UUID or a prefix of one of at least 8 characters")
			wantExit(t, e.run("cancel", "--production", prod, "--job", bad), 2, "invalid_argument")
		}
		missing := "00000000"
		if strings.HasPrefix(ids[0], missing) || strings.HasPrefix(ids[1], missing) || strings.HasPrefix(ids[2], missing) {
			missing = "ffffffff"
		}
		wantExit(t, e.run("job", "show", "--production", prod, "--job", missing), 1, "not_found",
			"no job id begins with "+missing+` in production "`+prod+`"`)
		wantExit(t, e.run("events", "--job", missing), 1, "not_found", "no job id begins with "+missing)
		for _, id := range ids {
			if st := e.job(id).State; st != "requested" {
				t.Fatalf("job %s is %s after the refused commands", id, st)
			}
		}
	})
}
