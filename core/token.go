package core

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"unsafe"
)

// Token format, version 1 (docs/tokens.md):
//
//	"lt1." + base64url-without-padding(production[16] | job[16] | secret[16] | crc32c[4])
//
// The CRC-32C covers the prefix and the 48 id bytes, so any single changed
// byte is detected before the store is consulted. Decoding is canonical: the
// strict base64 decoder refuses non-zero trailing bits, so exactly one text
// encodes each token.
const (
	tokenPrefix   = "lt1."
	tokenBodyLen  = 16*3 + 4
	tokenTextLen  = len(tokenPrefix) + 70 // base64 raw of 52 bytes
	MaxTokenLen   = 128                   // the decoder refuses longer input before parsing
	secretVersion = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Secret is a claim secret: the credential, and the fencing token, of one
// claim. Every way Go has to show a value shows it as "[redacted]": each fmt
// verb and flag, JSON, text, slog. Gob and MarshalBinary refuse it (a token,
// EncodeToken, is its only serialization). Its bytes sit behind an opaque
// pointer rather than in an array, because fmt prints what it cannot call a
// method on (an unexported field holding a Secret, %p of one, a verb fmt
// finds invalid) by reflection, and reflection shows an unsafe.Pointer as an
// address, never what it points to. Compare secrets with Equal: == compares
// the pointers.
type Secret struct {
	p unsafe.Pointer // *[16]byte, immutable once made; nil in the zero Secret
}

// NewSecret makes a Secret of 16 bytes (it keeps a copy).
func NewSecret(b [16]byte) Secret { return Secret{p: unsafe.Pointer(&b)} }

// Bytes returns a copy of the secret's bytes: the credential itself, for the
// token encoder and for tests. The zero Secret is 16 zero bytes.
func (s Secret) Bytes() [16]byte {
	if s.p == nil {
		return [16]byte{}
	}
	return *(*[16]byte)(s.p)
}

// Equal reports whether two secrets hold the same bytes, in constant time.
func (s Secret) Equal(o Secret) bool {
	a, b := s.Bytes(), o.Bytes()
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

const redacted = "[redacted]"

func (Secret) String() string   { return redacted }
func (Secret) GoString() string { return redacted }

// Format shows "[redacted]" for every verb and flag.
func (Secret) Format(f fmt.State, verb rune) { formatAs(f, verb, redacted) }

// MarshalJSON writes the string "[redacted]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText writes "[redacted]".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue logs "[redacted]" under every slog handler.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// errNoBinarySecret is what binary serializations (gob, MarshalBinary) get:
// one that silently wrote "[redacted]" would hand back a broken credential.
var errNoBinarySecret = errors.New("a claim secret is never serialized; EncodeToken turns a lease into a token")

// MarshalBinary refuses: see errNoBinarySecret. Gob uses it too.
func (Secret) MarshalBinary() ([]byte, error) { return nil, errNoBinarySecret }

// formatAs writes s for every verb and flag (quoted for %q), so no verb can
// reach a value's fields.
func formatAs(f fmt.State, verb rune, s string) {
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	io.WriteString(f, s)
}

func (s Secret) hash() []byte {
	b := s.Bytes()
	h := sha256.Sum256(b[:])
	return h[:]
}

func (s Secret) matches(storedHash []byte) bool {
	return len(storedHash) == sha256.Size && subtle.ConstantTimeCompare(s.hash(), storedHash) == 1
}

// Token is a decoded lease token. Its only serialization is EncodeToken:
// formatted, marshalled or logged, it shows its ids and a redacted secret.
type Token struct {
	ProductionID string
	JobID        string
	Secret       Secret
}

// String shows the ids, never the secret.
func (t Token) String() string {
	return "token{production=" + t.ProductionID + " job=" + t.JobID + " secret=" + redacted + "}"
}

// GoString is String.
func (t Token) GoString() string { return t.String() }

// Format shows String for every verb and flag.
func (t Token) Format(f fmt.State, verb rune) { formatAs(f, verb, t.String()) }

// MarshalJSON writes the ids and a redacted secret.
func (t Token) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ProductionID string `json:"production_id"`
		JobID        string `json:"job_id"`
		Secret       Secret `json:"secret"`
	}{t.ProductionID, t.JobID, t.Secret})
}

// MarshalText writes String.
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// LogValue logs the ids and a redacted secret.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.String("production_id", t.ProductionID), slog.String("job_id", t.JobID),
		slog.String("secret", redacted))
}

// MarshalBinary refuses, as a Secret's does.
func (Token) MarshalBinary() ([]byte, error) { return nil, errNoBinarySecret }

// EncodeToken encodes t canonically.
func EncodeToken(t Token) (string, error) {
	p, ok1 := parseUUID(t.ProductionID)
	j, ok2 := parseUUID(t.JobID)
	if !ok1 || !ok2 {
		return "", errf(KindInvalidArgument, "token ids must be canonical UUIDs")
	}
	var body [tokenBodyLen]byte
	copy(body[0:16], p[:])
	copy(body[16:32], j[:])
	secret := t.Secret.Bytes()
	copy(body[32:48], secret[:])
	binary.BigEndian.PutUint32(body[48:], tokenCRC(body[:48]))
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(body[:]), nil
}

func tokenCRC(ids []byte) uint32 {
	c := crc32.Update(0, castagnoli, []byte(tokenPrefix))
	return crc32.Update(c, castagnoli, ids)
}

// DecodeToken parses a token text. Every error is KindBadToken, and no error
// message repeats any part of the input.
func DecodeToken(text string) (Token, error) {
	if len(text) > MaxTokenLen {
		return Token{}, errf(KindBadToken, "token is longer than %d bytes", MaxTokenLen)
	}
	if !strings.HasPrefix(text, tokenPrefix) {
		if strings.HasPrefix(text, "lt") {
			return Token{}, errf(KindBadToken, "token version is not supported (want %q)", tokenPrefix)
		}
		return Token{}, errf(KindBadToken, "not a lease token")
	}
	if len(text) != tokenTextLen {
		return Token{}, errf(KindBadToken, "token has the wrong length")
	}
	body, err := base64.RawURLEncoding.Strict().DecodeString(text[len(tokenPrefix):])
	if err != nil || len(body) != tokenBodyLen {
		return Token{}, errf(KindBadToken, "token is not canonical base64url")
	}
	if binary.BigEndian.Uint32(body[48:]) != tokenCRC(body[:48]) {
		return Token{}, errf(KindBadToken, "token checksum does not match")
	}
	var p, j, secret [16]byte
	copy(p[:], body[0:16])
	copy(j[:], body[16:32])
	copy(secret[:], body[32:48])
	if secret[6]>>4 != secretVersion || secret[8]&0xc0 != 0x80 {
		return Token{}, errf(KindBadToken, "token secret is not a random UUID")
	}
	return Token{ProductionID: formatUUID(p), JobID: formatUUID(j), Secret: NewSecret(secret)}, nil
}
