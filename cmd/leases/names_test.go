package main

// Names on the command line: a name the rule refuses is a usage error that
// creates nothing, and the text listings print look-alike names so that no
// two print alike (the JSON output keeps their bytes), on both stores.

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/internal/pgtest"
	_ "modernc.org/sqlite"
)

func TestLookAlikeNamesAreRefusedOrPrintedDistinctly(t *testing.T) {
	e := newEnv(t)
	checkLookAlikeNames(t, e, func(name string) { legacyProduction(t, e, name) })
}

func TestLookAlikeNamesAreRefusedOrPrintedDistinctlyOnPostgres(t *testing.T) {
	e := pgEnv(t)
	checkLookAlikeNames(t, e, func(name string) { legacyProduction(t, e, name) })
}

// legacyProduction stores a production name as a database written before
// the name rule would hold it, past every check.
func legacyProduction(t *testing.T, e *env, name string) {
	t.Helper()
	if strings.HasPrefix(e.db, "postgres") {
		pgtest.Exec(t, e.db, `INSERT INTO leases_productions (id, name, created_unix_us) VALUES ($1, $2, 0)`, uuid.NewString(), name)
		return
	}
	db, err := sql.Open("sqlite", e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO productions (id, name, created_unix_us) VALUES (?, ?, 0)`, uuid.NewString(), name); err != nil {
		t.Fatal(err)
	}
}

// checkLookAlikeNames runs the CLI against e; legacy stores a production
// name as a database written before the name rule would hold it.
func checkLookAlikeNames(t *testing.T, e *env, legacy func(name string)) {
	for _, refused := range []string{"cafe\u0301", "nightly\u200b", "nightly "} {
		r := e.run("production", "create", refused)
		wantExit(t, r, 2, "invalid_argument")
	}
	created := []string{"caf\u00e9", "\uff50\uff52\uff4f\uff44", "prod", "p\u0430ypal", "paypal"}
	for _, n := range created {
		e.must("production", "create", n)
	}
	stored := []string{"cafe\u0301", "nightly\u200b", "nightly ", "nightly"}
	for _, n := range stored[:3] {
		legacy(n)
	}
	e.must("production", "create", "nightly")
	var ps []struct{ Name string }
	if err := json.Unmarshal([]byte(e.must("production", "list", "--json").stdout), &ps); err != nil {
		t.Fatal(err)
	}
	inJSON := map[string]bool{}
	for _, p := range ps {
		inJSON[p.Name] = true
	}
	for _, n := range append(created, stored...) {
		if !inJSON[n] {
			t.Errorf("production list --json lacks %+q (its bytes exactly)", n)
		}
	}
	lines := strings.Split(strings.TrimSpace(e.must("production", "list").stdout), "\n")[1:]
	printed := map[string]bool{}
	for _, l := range lines {
		name := strings.Fields(l)[0]
		if printed[name] {
			t.Errorf("two productions print as %q:\n%s", name, strings.Join(lines, "\n"))
		}
		printed[name] = true
	}
	for _, want := range []string{"caf\u00e9", `cafe\u0301`, `nightly\u200b`, `nightly\u0020`, "nightly",
		`\uff50\uff52\uff4f\uff44`, "prod", `p\u0430ypal`, "paypal"} {
		if !printed[want] {
			t.Errorf("production list prints no %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	if len(lines) != len(created)+len(stored) {
		t.Errorf("production list has %d rows, want %d", len(lines), len(created)+len(stored))
	}
}

// nameVectors is tests/vectors/names.json, the rule every surface shares.
type nameVectors struct {
	Accepted []struct{ Name, Why string } `json:"accepted"`
	Refused  []struct {
		Name, Why     string
		ErrorContains []string `json:"error_contains"`
	} `json:"refused"`
	Display []struct{ Name, Text string } `json:"display"`
}

func loadNameVectors(t *testing.T) nameVectors {
	var v nameVectors
	loadVector(t, "names.json", &v)
	if len(v.Accepted) == 0 || len(v.Refused) == 0 || len(v.Display) == 0 {
		t.Fatal("names.json has an empty section")
	}
	return v
}

// loadVector reads tests/vectors/NAME, a file every surface's tests share.
func loadVector(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile("../../tests/vectors/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// The shared name vectors through the command line, on both stores: accepted
// names create productions, keys and claims' workers; refused ones are a
// usage error (exit 2) naming the offending character, wherever a name is
// given (production, key, worker: also leases work's), and change nothing;
// the text listing prints each stored name as its display text.
func TestTheCLIFollowsTheSharedNameVectors(t *testing.T) {
	v := loadNameVectors(t)
	onBothStores(t, func(t *testing.T, e *env) {
		e.must("production", "create", prod)
		for _, a := range v.Accepted {
			e.must("production", "create", a.Name)
			e.must("job", "request", "--production", prod, "--key", a.Name)
			tok, _ := e.claim(a.Name, "1m")
			e.must("release", "--token-file", tok)
		}
		before := e.must("production", "list", "--json").stdout
		eventsBefore := len(e.events())
		for _, r := range v.Refused {
			for _, args := range [][]string{
				{"production", "create", r.Name},
				{"job", "request", "--production", prod, "--key", r.Name},
				{"claim", "--production", prod, "--worker", r.Name, "--duration", "1m", "--token-out", filepath.Join(e.dir, "refused.token")},
				{"work", "--production", prod, "--worker", r.Name, "--duration", "1m", "--exit-when-empty", "--", "true"},
			} {
				res := e.run(args...)
				wantExit(t, res, 2, append([]string{"invalid_argument"}, r.ErrorContains...)...)
				if exists(filepath.Join(e.dir, "refused.token")) {
					t.Fatalf("%s (%s): a refused claim left its token file", args[0], r.Why)
				}
			}
		}
		if after := e.must("production", "list", "--json").stdout; after != before || len(e.events()) != eventsBefore {
			t.Fatal("a refused name changed the store")
		}

		// Display: every vector name stored (as a database written before
		// the rule would hold the refused ones) prints as its text.
		existing := map[string]bool{prod: true}
		for _, a := range v.Accepted {
			existing[a.Name] = true
		}
		// The empty name is in the vectors for DisplayName itself; no
		// listing shows a production without a name.
		display := v.Display[:0:0]
		for _, d := range v.Display {
			if d.Name != "" {
				display = append(display, d)
			}
		}
		for _, d := range display {
			if !existing[d.Name] {
				legacyProduction(t, e, d.Name)
				existing[d.Name] = true
			}
		}
		printed := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(e.must("production", "list").stdout), "\n")[1:] {
			// NAME is the first column; a display text holds no white space
			// that is not escaped, except the spaces of accepted names.
			idx := strings.Index(l, "  ")
			printed[l[:idx]]++
		}
		for _, d := range display {
			if printed[d.Text] != 1 {
				t.Errorf("production list prints %+q as %q %d times, want once", d.Name, d.Text, printed[d.Text])
			}
		}
	})
}
