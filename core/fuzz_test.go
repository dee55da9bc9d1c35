package core

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core/internal/legacyfixture"
)

func FuzzParseFacts(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"metadata": {"a": 1}}`, `{"provenance": {"t": {"x": [1, 2]}}}`,
		`{"metadata": {"": 1}}`, `{"metadata": null}`, `{"metadata": {"a": 1}, "metadata": {"b": 2}}`, `[`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		facts, err := ParseFacts(s)
		if err != nil {
			if KindOf(err) != KindInvalidArgument {
				t.Fatalf("facts error of kind %v", KindOf(err))
			}
			return
		}
		// Whatever is accepted is valid and survives a round trip.
		if err := facts.validate(); err != nil {
			t.Fatalf("accepted facts do not validate: %v", err)
		}
		b, err := json.Marshal(struct {
			M map[string]json.RawMessage `json:"metadata,omitempty"`
			P map[string]json.RawMessage `json:"provenance,omitempty"`
		}{facts.Metadata, facts.Provenance})
		if err != nil {
			t.Fatalf("accepted facts do not marshal: %v", err)
		}
		again, err := ParseFacts(string(b))
		if err != nil || len(again.Metadata) != len(facts.Metadata) || len(again.Provenance) != len(facts.Provenance) {
			t.Fatalf("round trip changed the facts")
		}
	})
}

// FuzzMigrateLegacy migrates random pre-lease databases and checks the
// migration's promises: every job kept in order, no claim survives, one
// claim_expired event per expired claim, terminal and requested jobs as they
// were.
func FuzzMigrateLegacy(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4})
	f.Add([]byte{1, 1, 1})
	f.Add([]byte{})
	states := []string{"requested", "claimed", "completed", "failed", "cancelled"}
	f.Fuzz(func(t *testing.T, spec []byte) {
		if len(spec) > 64 {
			spec = spec[:64]
		}
		fx := legacyfixture.Fixture{ProductionName: "old"}
		claimed := 0
		for i, b := range spec {
			st := states[int(b)%len(states)]
			j := legacyfixture.Job{ID: uuid.NewString(), State: st}
			if b&0x80 != 0 {
				j.Key = fmt.Sprintf("k%d", i)
			}
			if st != "requested" {
				j.Worker, j.ClaimedAt = "w", 1_700_000_000_000_000+int64(i)
			}
			if st == "claimed" {
				j.ClaimID = uuid.NewString()
				claimed++
			}
			fx.Jobs = append(fx.Jobs, j)
		}
		path := filepath.Join(t.TempDir(), "old.db")
		if err := legacyfixture.Build(path, fx); err != nil {
			t.Fatal(err)
		}
		a, err := Open(path)
		if err != nil {
			t.Fatalf("migration failed: %v", err)
		}
		defer a.Close()
		js, err := a.Jobs("old")
		if err != nil || len(js) != len(fx.Jobs) {
			t.Fatalf("jobs lost: %v", err)
		}
		for i, j := range js {
			want := fx.Jobs[i].State
			if want == "claimed" {
				want = StateRequested
			}
			if j.ID != fx.Jobs[i].ID || j.State != want || j.Key != fx.Jobs[i].Key {
				t.Fatalf("job %d migrated wrongly: %+v", i, j)
			}
		}
		evs, err := a.Events("old", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Kind == "claim_expired" {
				n++
			}
		}
		if n != claimed {
			t.Fatalf("%d claims expired, %d events", claimed, n)
		}
	})
}
