package core

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Found by the reliability suite's secret-leak scan: fmt cannot call the
// redacting String of an unexported field, so a Lease formatted by value
// printed its secret's bytes. The value is taken through reflect, as a
// caller's %v of *lease would, without tripping vet's copylocks check.
func TestALeaseFormattedByValueNeverShowsItsSecret(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Hour)
	tok, err := l.Export()
	require.NoError(t, err)
	dec, err := DecodeToken(tok)
	require.NoError(t, err)
	raw := string(dec.Secret[:])
	h := hex.EncodeToString(dec.Secret[:])
	u := uuid.UUID(dec.Secret).String()
	byValue := reflect.ValueOf(l).Elem().Interface()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{l, byValue, []any{byValue}, struct{ L any }{byValue}} {
			s := fmt.Sprintf(verb, v)
			for _, form := range []string{raw, h, strings.ToUpper(h), u, strings.ToUpper(u)} {
				require.NotContains(t, s, form, "%s of %T shows the secret", verb, v)
			}
			require.NotContains(t, s, strings.ReplaceAll(fmt.Sprintf("%v", []byte(raw)), " ", ", "))
		}
	}
}
