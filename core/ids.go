package core

import (
	"crypto/rand"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits on caller input; documented constants of every surface.
const (
	MaxNameLen    = 200     // production names, worker names, keys (bytes)
	MaxReasonLen  = 4096    // failure reasons (bytes)
	MaxPayloadLen = 1 << 20 // job payload (bytes)
	MaxFactsLen   = 1 << 20 // facts JSON (bytes)
	MaxPathLen    = 4096    // output paths (bytes)
)

// parseUUID accepts exactly one spelling: 36 characters, lowercase hex,
// hyphens at 8, 13, 18 and 23. uuid.Parse also accepts braces, URNs, upper
// case and no hyphens, which would give one id many names.
func parseUUID(s string) ([16]byte, bool) {
	var out [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return out, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i--
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return out, false
		}
		out[j] = hi<<4 | lo
		j++
	}
	return out, j == 16
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func formatUUID(b [16]byte) string { return uuid.UUID(b).String() }

func newUUID() (string, error) {
	u, err := uuid.NewRandomFromReader(rand.Reader)
	if err != nil {
		return "", &Error{Kind: KindInternal, Msg: "random source failed", Err: err}
	}
	return u.String(), nil
}

// checkText validates a caller string: valid UTF-8, no NUL, bounded.
func checkText(what, s string, max int, allowEmpty bool) error {
	if s == "" && !allowEmpty {
		return errf(KindInvalidArgument, "%s must not be empty", what)
	}
	if len(s) > max {
		return errf(KindInvalidArgument, "%s is %d bytes, the limit is %d", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return errf(KindInvalidArgument, "%s is not valid UTF-8", what)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return errf(KindInvalidArgument, "%s contains a NUL byte", what)
		}
	}
	return nil
}

func checkID(what, s string) error {
	if _, ok := parseUUID(s); !ok {
		return errf(KindInvalidArgument, "%s must be a lowercase hyphenated UUID", what)
	}
	return nil
}
