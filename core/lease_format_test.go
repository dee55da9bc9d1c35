// No value that holds a claim secret shows it: not through any fmt verb or
// flag, JSON, text or binary marshalling, gob, or either slog handler, alone
// or inside the structs, slices and maps a caller might log.
package core

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// formatVerbs is every verb fmt knows (%T and %p included), and
// formatFlags every flag, alone and in the pairs that change output.
var (
	formatVerbs = []string{"v", "s", "q", "x", "X", "d", "o", "O", "b", "c", "U", "e", "E", "f", "F", "g", "G", "t", "T", "p"}
	formatFlags = []string{"", "+", "#", "-", " ", "0", "+#", "# ", "#0", "-#", "40", "-40", ".3", "40.3", "#40", "+40"}
)

// leakForms is every way the secret's 16 bytes could be printed: as text
// in the usual encodings, and as the output of fmt itself for each format
// applied to the bytes (whole, and element by element as fmt prints an
// array inside a struct).
func leakForms(raw [16]byte) []string {
	h := hex.EncodeToString(raw[:])
	u := uuid.UUID(raw).String()
	forms := []string{string(raw[:]), h, strings.ToUpper(h), u, strings.ToUpper(u),
		base64.StdEncoding.EncodeToString(raw[:]), base64.RawStdEncoding.EncodeToString(raw[:]),
		base64.URLEncoding.EncodeToString(raw[:]), base64.RawURLEncoding.EncodeToString(raw[:])}
	for _, verb := range formatVerbs {
		for _, flags := range formatFlags {
			format := "%" + flags + verb
			forms = append(forms, strings.Trim(fmt.Sprintf(format, raw), "[]{}"), strings.Trim(fmt.Sprintf(format, raw[:]), "[]{}"))
			elems := make([]string, 6)
			for i := range elems {
				elems[i] = fmt.Sprintf(format, raw[5+i])
			}
			forms = append(forms, strings.Join(elems, " "), strings.Join(elems, ", "), strings.Join(elems, ","))
		}
	}
	for _, v := range []any{raw, raw[:]} {
		b, _ := json.Marshal(v)
		forms = append(forms, strings.Trim(string(b), `[]"`))
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range forms {
		// Too short to tell apart from chance (or only a type name such as
		// "[16]uint8"): not a form of this secret.
		if len(strings.TrimSpace(f)) >= 12 && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// wrapped is v alone and inside what a caller might print or log.
func wrapped(v any) map[string]any {
	return map[string]any{
		"alone": v, "in a slice": []any{v}, "in an exported field": struct{ V any }{v},
		"in an unexported field": struct{ v any }{v}, "in a map": map[string]any{"k": v},
		"behind a pointer": &struct{ V any }{v},
	}
}

// requireNoLeak fails if out holds any leak form, naming how out was made.
func requireNoLeak(t *testing.T, forms []string, out, how string) {
	t.Helper()
	for _, f := range forms {
		if strings.Contains(out, f) {
			t.Fatalf("%s shows the secret (as %q) in %q", how, f, out)
		}
	}
}

func TestNoValueThatHoldsASecretShowsItThroughFmtJSONTextGobOrSlog(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Hour)
	x, err := l.BeginExecution(t.TempDir())
	require.NoError(t, err)
	defer x.Abandon()
	text, err := l.Export()
	require.NoError(t, err)
	tok, err := DecodeToken(text)
	require.NoError(t, err)
	e, err := f.a.Begin()
	require.NoError(t, err)
	defer e.Abort()
	pending, err := e.Claim("p", "w", time.Hour)
	require.NoError(t, err)
	// The forms of both secrets: the active lease's and the pending one's.
	forms := append(leakForms(tok.Secret.Bytes()), leakForms(pending.secret.Bytes())...)
	values := map[string]any{
		"*Lease": l, "Lease by value": reflect.ValueOf(l).Elem().Interface(),
		"pending *Lease": pending, "Token": tok, "*Token": &tok, "Secret": tok.Secret, "*Secret": &tok.Secret,
		"*Edit": e, "Edit by value": reflect.ValueOf(e).Elem().Interface(),
		"*Execution": x, "Execution by value": reflect.ValueOf(x).Elem().Interface(),
		"*Authority": f.a, "Authority by value": reflect.ValueOf(f.a).Elem().Interface(),
		"Token in an exported field": struct{ T Token }{tok}, "Token in an unexported field": struct{ t Token }{tok},
		"Secret in an exported field": struct{ S Secret }{tok.Secret}, "Secret in an unexported field": struct{ s Secret }{tok.Secret},
	}
	var logged bytes.Buffer
	loggers := []*slog.Logger{slog.New(slog.NewTextHandler(&logged, nil)), slog.New(slog.NewJSONHandler(&logged, nil))}
	formats := 0
	for name, v := range values {
		for where, w := range wrapped(v) {
			how := name + " " + where
			for _, verb := range formatVerbs {
				for _, flags := range formatFlags {
					requireNoLeak(t, forms, fmt.Sprintf("%"+flags+verb, w), "%"+flags+verb+" of "+how)
					formats++
				}
			}
			requireNoLeak(t, forms, fmt.Sprint(w)+fmt.Sprintln(w), "Sprint of "+how)
			if b, err := json.Marshal(w); err == nil {
				requireNoLeak(t, forms, string(b), "JSON of "+how)
			}
			for _, lg := range loggers {
				logged.Reset()
				lg.Info("msg", "v", w, slog.Any("any", w), slog.Group("g", "v", w))
				requireNoLeak(t, forms, logged.String(), "slog of "+how)
			}
		}
		if m, ok := v.(encoding.TextMarshaler); ok {
			b, _ := m.MarshalText()
			requireNoLeak(t, forms, string(b), "MarshalText of "+name)
		}
		if m, ok := v.(encoding.BinaryMarshaler); ok {
			b, _ := m.MarshalBinary()
			requireNoLeak(t, forms, string(b), "MarshalBinary of "+name)
		}
		var g bytes.Buffer
		if err := gob.NewEncoder(&g).Encode(v); err == nil {
			requireNoLeak(t, forms, g.String(), "gob of "+name)
		}
	}
	require.Greater(t, formats, 10000)
}

// The forms are what a careless formatter prints: each is found in the
// output of formatting the bare bytes, so a clean result above proves
// something.
func TestLeakFormsFindTheBareBytesInEveryFormat(t *testing.T) {
	raw := [16]byte(uuid.New())
	forms := leakForms(raw)
	for _, verb := range formatVerbs {
		if verb == "T" {
			continue
		}
		for _, flags := range formatFlags {
			for _, v := range []any{raw, raw[:], struct{ S [16]byte }{raw}, []any{raw}} {
				out := fmt.Sprintf("%"+flags+verb, v)
				shown := strings.Trim(strings.ReplaceAll(out, " ", ""), "[]{}&")
				if len(shown) < 12 || (verb == "p" && reflect.TypeOf(v).Kind() == reflect.Slice) {
					continue // a precision cut it short, or %p printed the slice's address
				}
				found := false
				for _, f := range forms {
					found = found || strings.Contains(out, f)
				}
				require.True(t, found, "%%%s%s of %T: %q", flags, verb, v, out)
			}
		}
	}
	b, _ := json.Marshal(raw)
	found := false
	for _, f := range forms {
		found = found || strings.Contains(string(b), f)
	}
	require.True(t, found, "JSON of the bytes %s", b)
}
