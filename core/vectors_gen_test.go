package core

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite tests/vectors/*.json")

const vectorDir = "../tests/vectors/"

type tokenVector struct {
	Token        string `json:"token"`
	ProductionID string `json:"production_id,omitempty"`
	JobID        string `json:"job_id,omitempty"`
	SecretHex    string `json:"secret_hex,omitempty"`
	Why          string `json:"why,omitempty"`
}

type tokenVectors struct {
	Comment     string        `json:"comment"`
	MaxTokenLen int           `json:"max_token_len"`
	Valid       []tokenVector `json:"valid"`
	Invalid     []tokenVector `json:"invalid"`
}

func mustSecret(t *testing.T, h string) Secret {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 {
		t.Fatalf("bad secret hex %q", h)
	}
	return NewSecret([16]byte(b))
}

// buildTokenVectors derives every vector from a few fixed ids with the codec
// under test; the committed file freezes the result, so a codec change that
// alters any encoding fails TestTokenVectorsAreStable.
func buildTokenVectors(t *testing.T) tokenVectors {
	valid := []tokenVector{
		{ProductionID: "6f1c2f5e-8a3b-4c1d-9e2f-0a1b2c3d4e5f", JobID: "0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2d", SecretHex: "3b9f6e0a2c4d4e1fa7b8c9d0e1f2a3b4"},
		{ProductionID: "00000000-0000-4000-8000-000000000000", JobID: "ffffffff-ffff-4fff-bfff-ffffffffffff", SecretHex: "00000000000040008000000000000000"},
		{ProductionID: "ffffffff-ffff-ffff-ffff-ffffffffffff", JobID: "00000000-0000-0000-0000-000000000000", SecretHex: "ffffffffffff4fffbfffffffffffffff"},
	}
	for i := range valid {
		tok, err := EncodeToken(Token{ProductionID: valid[i].ProductionID, JobID: valid[i].JobID, Secret: mustSecret(t, valid[i].SecretHex)})
		if err != nil {
			t.Fatal(err)
		}
		valid[i].Token = tok
	}
	v0 := valid[0].Token
	flipLast := []byte(v0)
	// The last character carries 2 data bits and 4 bits that must be zero.
	flipLast[len(flipLast)-1] = "AQgw"[(strings.IndexByte("AQgw", flipLast[len(flipLast)-1])+1)%4]
	trailing := []byte(v0)
	idx := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", trailing[len(trailing)-1])
	trailing[len(trailing)-1] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[idx|1]
	badCRC := []byte(v0)
	badCRC[len(badCRC)-3] ^= 1 // an alphabet neighbour: still base64, wrong checksum
	notV4, _ := EncodeToken(Token{ProductionID: valid[0].ProductionID, JobID: valid[0].JobID,
		Secret: mustSecret(t, "3b9f6e0a2c4d1e1fa7b8c9d0e1f2a3b4")})
	invalid := []tokenVector{
		{Token: "", Why: "empty"},
		{Token: "lt1.", Why: "prefix only"},
		{Token: "LT1." + v0[4:], Why: "prefix in upper case"},
		{Token: "lt2." + v0[4:], Why: "unknown version"},
		{Token: "lt0." + v0[4:], Why: "unknown version"},
		{Token: "xx1." + v0[4:], Why: "not a lease token"},
		{Token: v0[:len(v0)-1], Why: "truncated by one character"},
		{Token: v0 + "A", Why: "one character too many"},
		{Token: v0 + "\n", Why: "trailing newline (the CLI strips one; the codec does not)"},
		{Token: " " + v0, Why: "leading space"},
		{Token: v0 + "==", Why: "base64 padding"},
		{Token: strings.Replace(v0, v0[10:11], "+", 1), Why: "standard-alphabet character"},
		{Token: string(trailing), Why: "non-zero trailing bits (a second spelling of the same bytes)"},
		{Token: string(flipLast), Why: "changed last character"},
		{Token: string(badCRC), Why: "checksum does not match"},
		{Token: notV4, Why: "secret is not a version-4 UUID"},
		{Token: strings.Repeat("A", MaxTokenLen+1), Why: "longer than the limit"},
		{Token: "lt1." + strings.Repeat("A", 4096), Why: "far longer than the limit"},
		{Token: v0[:20] + "\u0000" + v0[21:], Why: "NUL byte"},
		{Token: v0[:20] + "é" + v0[22:], Why: "non-ASCII character"},
	}
	// Keep only cases that really are invalid and distinct from valid tokens.
	out := invalid[:0]
	for _, c := range invalid {
		if c.Token != v0 {
			out = append(out, c)
		}
	}
	return tokenVectors{
		Comment:     "Lease token test vectors shared by every language suite. Valid tokens decode to the given ids and secret (hex of 16 bytes); every invalid token is rejected as a bad token before any store access. Regenerate with: go test ./core -run TestTokenVectorsAreStable -update-vectors",
		MaxTokenLen: MaxTokenLen,
		Valid:       valid,
		Invalid:     out,
	}
}

type statusVector struct {
	Code int    `json:"code"`
	Name string `json:"name"`
}

func buildStatusVectors() []statusVector {
	out := []statusVector{{0, "ok"}}
	for _, k := range Kinds() {
		out = append(out, statusVector{int(k), k.String()})
	}
	return out
}

type durationVectors struct {
	Comment  string           `json:"comment"`
	MaxUS    int64            `json:"max_us"`
	Accepted []durationVector `json:"accepted"`
	Rejected []durationVector `json:"rejected"`
	// Shown: how every surface's messages write a duration (FormatDuration).
	Shown []shownDuration `json:"shown"`
}

type shownDuration struct {
	Nanoseconds string `json:"nanoseconds"`
	Shown       string `json:"shown"`
}

type durationVector struct {
	Nanoseconds string `json:"nanoseconds"` // decimal string: exceeds 2^53 in places
	Text        string `json:"text"`        // the CLI spelling, when it has one
}

func buildDurationVectors() durationVectors {
	return durationVectors{
		Comment: "Claim and renewal durations: positive whole microseconds up to 24h inclusive. nanoseconds is a decimal string; text is the CLI spelling.",
		MaxUS:   MaxDurationUS,
		Accepted: []durationVector{
			{"1000", "1us"}, {"1500000", "1500us"}, {"250000000", "250ms"}, {"30000000000", "30s"},
			{"86400000000000", "24h"}, {"86399999999000", "86399999999us"},
		},
		Rejected: []durationVector{
			{"0", "0s"}, {"-1000", "-1us"}, {"1", "1ns"}, {"1500", "1500ns"}, {"999", "999ns"},
			{"86400000001000", "86400000001us"}, {"86400000000001", ""}, {"172800000000000", "48h"},
			{"9223372036854775807", ""}, {"-9223372036854775808", ""},
		},
		Shown: shownDurations(),
	}
}

// shownDurations are FormatDuration's texts of durations people write and
// of every rejected kind: the vector every surface's formatter must match.
func shownDurations() []shownDuration {
	var out []shownDuration
	for _, ns := range []int64{
		0, 1, 999, 1000, 1500, 1_000_000, 1_500_000, 250_000_000, 1_000_000_000, 1_500_000_000,
		30_000_000_000, 90_000_000_000, 3_600_000_000_000, 5_400_000_000_000, 5_401_000_000_000,
		86_399_999_999_000, 86_400_000_000_000, 86_400_000_001_000, 86_400_000_000_001, 172_800_000_000_000,
		-1000, -90_000_000_000, math.MaxInt64, math.MinInt64,
	} {
		out = append(out, shownDuration{strconv.FormatInt(ns, 10), FormatDuration(time.Duration(ns))})
	}
	return out
}

func writeOrCompare(t *testing.T, name string, v any) {
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := vectorDir + name
	if *updateVectors {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (regenerate with -update-vectors)", path, err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from what the codec produces now: a token, status or duration rule changed. "+
			"If that is intended, bump the token version or ABI and regenerate with -update-vectors", path)
	}
}

func TestTokenVectorsAreStable(t *testing.T) {
	writeOrCompare(t, "tokens.json", buildTokenVectors(t))
	writeOrCompare(t, "durations.json", buildDurationVectors())
}

// statuses.json is generated from include/leases.h (abi/leases_abi.py, make
// abi-generate), the ABI's one source: the core's kinds must number and name
// the statuses exactly as it does.
func TestKindsAreTheHeaderStatuses(t *testing.T) {
	raw, err := os.ReadFile(vectorDir + "statuses.json")
	if err != nil {
		t.Fatal(err)
	}
	var got []statusVector
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := buildStatusVectors()
	if len(got) != len(want) {
		t.Fatalf("statuses.json has %d statuses, core has %d kinds (and ok)", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("status %d: statuses.json says %+v, core says %+v", i, got[i], want[i])
		}
	}
}
