// Reading a job back: what a surface publishes, `leases job show --json`
// reads back identically (tests/vectors/facts.json), on both stores.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	leases "github.com/libleases/libleases"
	"github.com/libleases/libleases/core"
)

// factsVector is tests/vectors/facts.json.
type factsVector struct {
	Production string                     `json:"production"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	Provenance map[string]json.RawMessage `json:"provenance"`
	Output     struct {
		Dir     string `json:"dir"`
		Content string `json:"content"`
		Size    int64  `json:"size"`
		SHA256  string `json:"sha256"`
	} `json:"output"`
}

func loadFactsVector(t *testing.T) factsVector {
	var v factsVector
	loadVector(t, "facts.json", &v)
	if len(v.Metadata) == 0 || len(v.Provenance) == 0 || v.Output.Size == 0 {
		t.Fatal("facts.json has an empty section")
	}
	return v
}

// showFacts reads a job back with `leases job show --json` and checks its
// facts against the vector: metadata and provenance as JSON values, the one
// output's size and SHA-256 exactly, its path the directory's absolute path,
// the job id and the nonce.
func (e *env) checkShownFacts(v factsVector, production, id, dir string) {
	e.t.Helper()
	var rec struct {
		ID         string `json:"id"`
		Production string `json:"production"`
		State      string `json:"state"`
		Facts      struct {
			Metadata   map[string]any `json:"metadata"`
			Provenance map[string]any `json:"provenance"`
			Outputs    []struct {
				Path   string `json:"path"`
				Size   int64  `json:"size"`
				SHA256 string `json:"sha256"`
				Nonce  string `json:"nonce"`
			} `json:"outputs"`
		} `json:"facts"`
	}
	r := e.must("job", "show", "--production", production, "--job", id, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		e.t.Fatalf("job show --json: %v\n%s", err, r.stdout)
	}
	if rec.ID != id || rec.Production != production || rec.State != "completed" {
		e.t.Fatalf("job show: %+v", rec)
	}
	for what, pair := range map[string][2]any{
		"metadata":   {values(e.t, v.Metadata), rec.Facts.Metadata},
		"provenance": {values(e.t, v.Provenance), rec.Facts.Provenance},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			e.t.Errorf("%s read back differs:\nwant %#v\ngot  %#v", what, pair[0], pair[1])
		}
	}
	if len(rec.Facts.Outputs) != 1 {
		e.t.Fatalf("outputs %+v", rec.Facts.Outputs)
	}
	o := rec.Facts.Outputs[0]
	abs, err := filepath.Abs(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if o.Size != v.Output.Size || o.SHA256 != v.Output.SHA256 || o.Path != abs+"/"+id+"."+o.Nonce+".out" {
		e.t.Fatalf("output %+v, want size %d sha256 %s in %s", o, v.Output.Size, v.Output.SHA256, abs)
	}
	if got, err := os.ReadFile(o.Path); err != nil || string(got) != v.Output.Content {
		e.t.Fatalf("output file %q %v", got, err)
	}
}

func values(t *testing.T, m map[string]json.RawMessage) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, raw := range m {
		var x any
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatal(err)
		}
		out[k] = x
	}
	return out
}

// factFlags spells the vector's facts as --metadata/--provenance KEY=JSON.
func factFlags(v factsVector) []string {
	var args []string
	for flag, m := range map[string]map[string]json.RawMessage{"--metadata": v.Metadata, "--provenance": v.Provenance} {
		for k, raw := range m {
			args = append(args, flag, k+"="+string(raw))
		}
	}
	return args
}

// Published by the CLI (leases work running a program that writes the
// vector's content, the facts given as flags), and by the Go surface (an
// execution request finished with the vector's facts): both read back
// identically through `leases job show --json`.
func TestJobShowReadsBackTheSharedFactsVector(t *testing.T) {
	v := loadFactsVector(t)
	onBothStores(t, func(t *testing.T, e *env) {
		e.must("production", "create", v.Production)
		dir := filepath.Join(e.dir, v.Output.Dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}

		// The CLI publishes: the payload is the output's content.
		r := e.runWith(opts{stdin: v.Output.Content}, "job", "request", "--production", v.Production, "--payload-file", "-")
		wantExit(t, r, 0)
		cliJob := strings.TrimSpace(r.stdout)
		args := append([]string{"work", "--production", v.Production, "--worker", "w-facts", "--duration", "1m",
			"--output-dir", dir, "--max-jobs", "1"}, factFlags(v)...)
		e.must(append(args, "--", "sh", "-c", `cat > "$LEASES_OUTPUT"`)...)
		e.checkShownFacts(v, v.Production, cliJob, dir)

		// The Go surface publishes.
		a, err := leases.Open(e.db)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		goJob, err := a.RequestJob(v.Production, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := a.ClaimJob(v.Production, goJob, "w-go", 60e9)
		if err != nil {
			t.Fatal(err)
		}
		x, err := l.BeginExecution(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(x.TempPath(), []byte(v.Output.Content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := x.Finish(core.Facts{Metadata: v.Metadata, Provenance: v.Provenance}); err != nil {
			t.Fatal(err)
		}
		e.checkShownFacts(v, v.Production, goJob, dir)
	})
}
