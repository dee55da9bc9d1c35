package core

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func loadTokenVectors(t *testing.T) tokenVectors {
	raw, err := os.ReadFile(vectorDir + "tokens.json")
	require.NoError(t, err)
	var v tokenVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Valid)
	require.NotEmpty(t, v.Invalid)
	return v
}

func TestTokenVectorsDecodeExactlyAsWritten(t *testing.T) {
	v := loadTokenVectors(t)
	require.Equal(t, MaxTokenLen, v.MaxTokenLen)
	for _, c := range v.Valid {
		tok, err := DecodeToken(c.Token)
		require.NoError(t, err, c.Token)
		require.Equal(t, c.ProductionID, tok.ProductionID)
		require.Equal(t, c.JobID, tok.JobID)
		secret := tok.Secret.Bytes()
		require.Equal(t, c.SecretHex, hex.EncodeToString(secret[:]))
		again, err := EncodeToken(tok)
		require.NoError(t, err)
		require.Equal(t, c.Token, again, "one encoding per token")
	}
	for _, c := range v.Invalid {
		_, err := DecodeToken(c.Token)
		requireKind(t, err, KindBadToken)
	}
}

func TestEverySingleByteChangeToAValidTokenIsRejected(t *testing.T) {
	v := loadTokenVectors(t)
	for _, c := range v.Valid {
		for i := 0; i < len(c.Token); i++ {
			for b := 0; b < 256; b++ {
				if byte(b) == c.Token[i] {
					continue
				}
				m := []byte(c.Token)
				m[i] = byte(b)
				if _, err := DecodeToken(string(m)); err == nil {
					t.Fatalf("token with byte %d changed to %#x was accepted", i, b)
				}
			}
		}
	}
}

func TestTokenDecoderRefusesOversizeInputBeforeParsing(t *testing.T) {
	_, err := DecodeToken("lt1." + strings.Repeat("A", 1<<20))
	requireKind(t, err, KindBadToken)
	require.Contains(t, err.Error(), "longer than")
}

func TestTokenErrorsNeverEchoTheInput(t *testing.T) {
	v := loadTokenVectors(t)
	for _, c := range v.Invalid {
		_, err := DecodeToken(c.Token)
		if len(c.Token) > 8 {
			require.NotContains(t, err.Error(), c.Token[4:])
		}
	}
}

func TestImportChecksProductionJobAndSecret(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Minute)
	tok, err := l.Export()
	require.NoError(t, err)
	good, err := DecodeToken(tok)
	require.NoError(t, err)

	imported, err := f.a.Import(tok)
	require.NoError(t, err)
	require.Equal(t, l.JobID(), imported.JobID())
	require.Equal(t, "p", imported.Production())
	require.Equal(t, "w", imported.Worker())
	require.Equal(t, l.ExpiryUnixUS(), imported.ExpiryUnixUS())

	q, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	wrongProd := good
	wrongProd.ProductionID = q.ID
	s, _ := EncodeToken(wrongProd)
	_, err = f.a.Import(s)
	requireKind(t, err, KindNotFound) // the job belongs to another production

	unknownProd := good
	unknownProd.ProductionID = "00000000-0000-4000-8000-000000000000"
	s, _ = EncodeToken(unknownProd)
	_, err = f.a.Import(s)
	requireKind(t, err, KindNotFound)

	unknownJob := good
	unknownJob.JobID = "00000000-0000-4000-8000-000000000001"
	s, _ = EncodeToken(unknownJob)
	_, err = f.a.Import(s)
	requireKind(t, err, KindNotFound)

	wrongSecret := good
	flipped := good.Secret.Bytes()
	flipped[15] ^= 1
	wrongSecret.Secret = NewSecret(flipped)
	s, _ = EncodeToken(wrongSecret)
	_, err = f.a.Import(s)
	requireKind(t, err, KindLeaseLost)

	_, err = f.a.Import("lt1.not-a-token")
	requireKind(t, err, KindBadToken)

	f.clk.advance(time.Minute)
	_, err = f.a.Import(tok)
	requireKind(t, err, KindExpired)
}

func TestParseUUIDAcceptsOnlyTheCanonicalSpelling(t *testing.T) {
	_, ok := parseUUID("0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2d")
	require.True(t, ok)
	for _, s := range []string{
		"0E7D3B2A-1C4F-4A5B-8C6D-7E8F9A0B1C2D",
		"{0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2d}",
		"urn:uuid:0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2d",
		"0e7d3b2a1c4f4a5b8c6d7e8f9a0b1c2d",
		"0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2",
		"0e7d3b2a-1c4f-4a5b-8c6d_7e8f9a0b1c2d",
		"0e7d3b2a-1c4f-4a5b-8c6d-7e8f9a0b1c2g",
		"",
	} {
		_, ok := parseUUID(s)
		require.False(t, ok, s)
	}
}

func FuzzDecodeToken(f *testing.F) {
	raw, err := os.ReadFile(vectorDir + "tokens.json")
	if err != nil {
		f.Fatal(err)
	}
	var v tokenVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		f.Fatal(err)
	}
	for _, c := range append(v.Valid, v.Invalid...) {
		f.Add(c.Token)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := DecodeToken(s)
		if err != nil {
			if KindOf(err) != KindBadToken {
				t.Fatalf("decode error of kind %v", KindOf(err))
			}
			return
		}
		// Canonical: whatever decodes re-encodes to the very same text.
		again, err := EncodeToken(tok)
		if err != nil || again != s {
			t.Fatalf("accepted a non-canonical token")
		}
	})
}

// A Secret keeps its bytes behind a pointer, so == compares pointers: Equal
// compares what they hold.
func TestSecretsCompareByTheirBytesWithEqual(t *testing.T) {
	b := [16]byte{1, 2, 3}
	require.True(t, NewSecret(b).Equal(NewSecret(b)))
	require.Equal(t, b, NewSecret(b).Bytes())
	other := b
	other[15] = 1
	require.False(t, NewSecret(b).Equal(NewSecret(other)))
	require.True(t, Secret{}.Equal(NewSecret([16]byte{})), "the zero Secret is 16 zero bytes")
	s := NewSecret(b)
	b[0] = 9
	require.Equal(t, byte(1), s.Bytes()[0], "NewSecret keeps a copy")
}
