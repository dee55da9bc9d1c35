package core

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strings"
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

// Secret is a claim secret. It formats as "[redacted]" so that it cannot leak
// through %v, %s or %#v.
type Secret [16]byte

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return "[redacted]" }

func (s Secret) hash() []byte {
	h := sha256.Sum256(s[:])
	return h[:]
}

func (s Secret) matches(storedHash []byte) bool {
	return len(storedHash) == sha256.Size && subtle.ConstantTimeCompare(s.hash(), storedHash) == 1
}

// Token is a decoded lease token.
type Token struct {
	ProductionID string
	JobID        string
	Secret       Secret
}

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
	copy(body[32:48], t.Secret[:])
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
	var p, j [16]byte
	var t Token
	copy(p[:], body[0:16])
	copy(j[:], body[16:32])
	copy(t.Secret[:], body[32:48])
	if t.Secret[6]>>4 != secretVersion || t.Secret[8]&0xc0 != 0x80 {
		return Token{}, errf(KindBadToken, "token secret is not a random UUID")
	}
	t.ProductionID, t.JobID = formatUUID(p), formatUUID(j)
	return t, nil
}
