package core

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Job states as observed.
const (
	StateRequested = "requested"
	StateClaimed   = "claimed"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StateDead      = "dead" // attempts used up: terminal, redrivable
)

// Production is a named batch of jobs with its retry and retention
// policies.
type Production struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	CreatedAt time.Time       `json:"-"`
	Policy    RetryPolicy     `json:"-"`
	Retention RetentionPolicy `json:"-"`
}

// MarshalJSON writes times as unix microseconds, like every JSON listing.
func (p Production) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		CreatedAt int64           `json:"created_at_unix_us"`
		Policy    json.RawMessage `json:"policy"`
		Retention json.RawMessage `json:"retention"`
	}{p.ID, p.Name, p.CreatedAt.UnixMicro(), rawJSON(marshalPolicy(p.Policy)), rawJSON(marshalRetention(p.Retention))})
}

func rawJSON(b []byte, err error) json.RawMessage {
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func marshalPolicy(p RetryPolicy) ([]byte, error) {
	return json.Marshal(struct {
		MaxAttempts   int   `json:"max_attempts"`
		BackoffBase   int64 `json:"backoff_base_us"`
		BackoffCap    int64 `json:"backoff_cap_us"`
		JitterPercent int   `json:"jitter_percent"`
	}{p.MaxAttempts, p.BackoffBase.Microseconds(), p.BackoffCap.Microseconds(), p.JitterPercent})
}

// Job is an observation of one job: attribution and expiry, never a secret.
// ClaimedAt and Expiry are zero when the job holds no claim. ClaimableAt is
// when a requested job is (or becomes) claimable, and when a claimed one
// becomes claimable again if its claim lapses; zero once it is finished.
type Job struct {
	ID          string
	Production  string
	Key         string
	State       string
	Worker      string
	ClaimedAt   time.Time
	Expiry      time.Time
	Attempts    int64
	Reason      string
	Priority    int
	ClaimableAt time.Time
}

type jobJSON struct {
	ID         string  `json:"id"`
	Production string  `json:"production"`
	Key        *string `json:"key"`
	State      string  `json:"state"`
	Worker     *string `json:"worker"`
	ClaimedAt  *int64  `json:"claimed_at_unix_us"`
	Expiry     *int64  `json:"expiry_unix_us"`
	Attempts   int64   `json:"attempts"`
	Reason     *string `json:"reason"`
	Priority   int     `json:"priority"`
	Claimable  *int64  `json:"claimable_at_unix_us"`
}

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMicro()
	return &v
}

// MarshalJSON writes the listing form shared by C, the CLI and the bindings.
func (j Job) MarshalJSON() ([]byte, error) { return json.Marshal(j.jsonForm()) }

func (j Job) jsonForm() jobJSON {
	return jobJSON{j.ID, j.Production, optStr(j.Key), j.State, optStr(j.Worker),
		optTime(j.ClaimedAt), optTime(j.Expiry), j.Attempts, optStr(j.Reason), j.Priority, optTime(j.ClaimableAt)}
}

// Event is one entry of the authority's event log. It never carries a secret.
type Event struct {
	Seq        int64
	At         time.Time
	Production string
	JobID      string
	Kind       string
	Worker     string
	Expiry     time.Time
	Detail     string
}

// MarshalJSON writes the listing form shared by C, the CLI and the bindings.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Seq        int64   `json:"seq"`
		At         int64   `json:"at_unix_us"`
		Production string  `json:"production"`
		JobID      *string `json:"job_id"`
		Kind       string  `json:"kind"`
		Worker     *string `json:"worker"`
		Expiry     *int64  `json:"expiry_unix_us"`
		Detail     *string `json:"detail"`
	}{e.Seq, e.At.UnixMicro(), e.Production, optStr(e.JobID), e.Kind, optStr(e.Worker), optTime(e.Expiry), optStr(e.Detail)})
}

// Output is one registered output file of an execution.
type Output struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Nonce  string `json:"nonce"`
}

// Facts are what a completion publishes: metadata and provenance entries
// (JSON values) and registered outputs. Published only by a committed
// completion, and then all together.
type Facts struct {
	Metadata   map[string]json.RawMessage `json:"metadata,omitempty"`
	Provenance map[string]json.RawMessage `json:"provenance,omitempty"`
	Outputs    []Output                   `json:"outputs,omitempty"`
}

// ParseFacts reads the facts_json of the C ABI: {"metadata": {...},
// "provenance": {...}}, either optional. Anything else is rejected before any
// write. An empty string means no facts.
func ParseFacts(text string) (Facts, error) {
	var f Facts
	if text == "" {
		return f, nil
	}
	if len(text) > MaxFactsLen {
		return f, errf(KindInvalidArgument, "facts JSON is %d bytes, the limit is %d", len(text), MaxFactsLen)
	}
	if err := checkText("facts JSON", text, MaxFactsLen, true); err != nil {
		return f, err
	}
	var raw struct {
		Metadata   map[string]json.RawMessage `json:"metadata"`
		Provenance map[string]json.RawMessage `json:"provenance"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return f, errf(KindInvalidArgument, "facts JSON must be {\"metadata\": {...}, \"provenance\": {...}}: %v", err)
	}
	if dec.More() {
		return f, errf(KindInvalidArgument, "facts JSON has trailing data")
	}
	f.Metadata, f.Provenance = raw.Metadata, raw.Provenance
	return f, f.validate()
}

func (f Facts) validate() error {
	for kind, m := range map[string]map[string]json.RawMessage{"metadata": f.Metadata, "provenance": f.Provenance} {
		for k, v := range m {
			if err := checkName(kind+" key", k, MaxNameLen, false); err != nil {
				return err
			}
			if !json.Valid(v) {
				return errf(KindInvalidArgument, "%s value for %q is not valid JSON", kind, k)
			}
			if !utf8.Valid(v) {
				return errf(KindInvalidArgument, "%s value for %q is not valid UTF-8", kind, k)
			}
		}
	}
	paths := make(map[string]bool, len(f.Outputs))
	for _, o := range f.Outputs {
		if err := checkText("output path", o.Path, MaxPathLen, false); err != nil {
			return err
		}
		if paths[o.Path] {
			return errf(KindInvalidArgument, "output path %q is registered twice", o.Path)
		}
		paths[o.Path] = true
	}
	return nil
}
