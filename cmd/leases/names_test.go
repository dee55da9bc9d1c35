package main

// Names on the command line: a name the rule refuses is a usage error that
// creates nothing, and the text listings print look-alike names so that no
// two print alike (the JSON output keeps their bytes), on both stores.

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/internal/pgtest"
	_ "modernc.org/sqlite"
)

func TestLookAlikeNamesAreRefusedOrPrintedDistinctly(t *testing.T) {
	e := newEnv(t)
	checkLookAlikeNames(t, e, func(name string) {
		db, err := sql.Open("sqlite", e.db)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO productions (id, name, created_unix_us) VALUES (?, ?, 0)`, uuid.NewString(), name); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLookAlikeNamesAreRefusedOrPrintedDistinctlyOnPostgres(t *testing.T) {
	e := pgEnv(t)
	checkLookAlikeNames(t, e, func(name string) {
		pgtest.Exec(t, e.db, `INSERT INTO leases_productions (id, name, created_unix_us) VALUES ($1, $2, 0)`, uuid.NewString(), name)
	})
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
