// The redaction vectors (tests/vectors/redaction.json), shared with the
// bindings that show a location themselves (Python's reprs): Redact is the rule.
package pgstore

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestRedactFollowsTheSharedVectors(t *testing.T) {
	raw, err := os.ReadFile("../../../tests/vectors/redaction.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Secret string `json:"secret"`
		Cases  []struct {
			URL      string `json:"url"`
			Redacted string `json:"redacted"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) < 10 || v.Secret == "" {
		t.Fatalf("redaction.json holds %d cases and secret %q", len(v.Cases), v.Secret)
	}
	for _, c := range v.Cases {
		got := Redact(c.URL)
		if got != c.Redacted {
			t.Errorf("Redact(%q) = %q, the vectors say %q", c.URL, got, c.Redacted)
		}
		if strings.Contains(got, v.Secret) {
			t.Errorf("Redact(%q) shows the secret: %q", c.URL, got)
		}
	}
}
