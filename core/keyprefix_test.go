package core

import (
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func keysOfJobs(js []Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.Key
	}
	return out
}

// TestAKeyPrefixListsExactlyTheJobsWhoseKeyStartsWithItInByteOrder: the
// listing by key prefix holds every job of the production whose key starts
// with the prefix, byte for byte (no pattern characters, no collation, any
// UTF-8 including the last code point), in byte order of the keys, once,
// on every page size, forwards and backwards.
func TestAKeyPrefixListsExactlyTheJobsWhoseKeyStartsWithItInByteOrder(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.CreateProduction("q")
	require.NoError(t, err)
	keys := []string{"ab", "a", "abc", "Ab", "ab%", "a_b", "ab_x", "ac", "b", "ab€", "abÿ", "ab中", "ab😀", "ab😀z",
		"😀", "😀a", "é", "éa", "f", "ab-", "aB", "ab\\", "ab~", "abz"}
	for i, k := range keys {
		_, err := f.a.RequestJob("p", k, nil)
		require.NoError(t, err)
		if i%3 == 0 {
			f.claim("w", time.Minute)
		}
		_, err = f.a.RequestJob("q", k, nil) // another production's never show
		require.NoError(t, err)
	}
	for _, prefix := range []string{"ab", "a", "ab%", "a_", "ab\U0010FFFF", "\U0010FFFF", "é", "ab😀", "😀", "ab\uD7FF", "ab~", "abc", "zz", "ab€"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		sort.Strings(want) // Go compares strings bytewise
		for _, limit := range []int{1, 2, 3, 100} {
			pages := allJobPages(t, f.a, "p", JobQuery{KeyPrefix: prefix, Limit: limit})
			got := keysOfJobs(flatten(pages))
			if len(want) == 0 {
				require.Empty(t, got, "prefix %q", prefix)
				continue
			}
			require.Equal(t, want, got, "prefix %q limit %d", prefix, limit)
			// Backwards from the last page to the first lists the same.
			last, err := f.a.ListJobs(ctx, "p", JobQuery{KeyPrefix: prefix, Limit: limit})
			require.NoError(t, err)
			for last.Next != "" {
				last, err = f.a.ListJobs(ctx, "p", JobQuery{KeyPrefix: prefix, Limit: limit, After: last.Next})
				require.NoError(t, err)
			}
			back := keysOfJobs(last.Jobs)
			for page := last; page.Prev != ""; {
				page, err = f.a.ListJobs(ctx, "p", JobQuery{KeyPrefix: prefix, Limit: limit, Before: page.Prev})
				require.NoError(t, err)
				require.Len(t, page.Jobs, limit, "prefix %q: a page before is full", prefix)
				require.NotEmpty(t, page.Next, "prefix %q: a page before has one after", prefix)
				back = append(keysOfJobs(page.Jobs), back...)
			}
			require.Equal(t, want, back, "prefix %q limit %d backwards", prefix, limit)
		}
	}
	// With states: only those states, still in key order.
	all := flatten(allJobPages(t, f.a, "p", JobQuery{KeyPrefix: "ab", Limit: 100}))
	var claimed []string
	for _, j := range all {
		if j.State == StateClaimed {
			claimed = append(claimed, j.Key)
		}
	}
	require.NotEmpty(t, claimed)
	got := flatten(allJobPages(t, f.a, "p", JobQuery{KeyPrefix: "ab", States: []string{StateClaimed, StateCompleted}, Limit: 1}))
	require.Equal(t, claimed, keysOfJobs(got))
}

// TestAKeyPrefixThatIsNotAKeysTextIsAClearError: a prefix of bad UTF-8, a
// NUL byte or longer than a key can be is refused with an error naming it,
// as is a cursor of another listing.
func TestAKeyPrefixThatIsNotAKeysTextIsAClearError(t *testing.T) {
	f := newFixture(t)
	_, err := f.a.RequestJob("p", "k", nil)
	require.NoError(t, err)
	for prefix, says := range map[string]string{
		"a\xffb":                          "key prefix is not valid UTF-8",
		"a\x00":                           "key prefix contains a NUL byte",
		strings.Repeat("k", MaxNameLen+1): "key prefix is",
	} {
		_, err := f.a.ListJobs(ctx, "p", JobQuery{KeyPrefix: prefix})
		requireKind(t, err, KindInvalidArgument)
		require.ErrorContains(t, err, says)
	}
	_, err = f.a.ListJobs(ctx, "p", JobQuery{KeyPrefix: "k", Key: "k"})
	requireKind(t, err, KindInvalidArgument)
	// A request-order cursor is not this listing's.
	_, err = f.a.RequestJob("p", "k2", nil)
	require.NoError(t, err)
	page, err := f.a.ListJobs(ctx, "p", JobQuery{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	_, err = f.a.ListJobs(ctx, "p", JobQuery{KeyPrefix: "k", After: page.Next})
	requireKind(t, err, KindInvalidArgument)
	require.ErrorContains(t, err, "cursor belongs to another listing")
}

// TestTheEndOfAKeyPrefixRangeIsTheLeastTextAboveEveryKeyThatStartsWithIt:
// the range's upper bound is valid UTF-8 (each store compares it as text),
// above every text the prefix starts and at or below every text above them.
func TestTheEndOfAKeyPrefixRangeIsTheLeastTextAboveEveryKeyThatStartsWithIt(t *testing.T) {
	for prefix, want := range map[string]string{
		"ab": "ac", "a~": "a\x7f", "a\x7f": "a\u0080", "aÿ": "aĀ", "a\uD7FF": "a\uE000", "a\uFFFF": "a\U00010000",
		"a\U0010FFFF": "b", "a\U0010FFFF\U0010FFFF": "b", "\U0010FFFF": "", "😀": "😁",
	} {
		got := keyPrefixEnd(prefix)
		require.Equal(t, want, got, "prefix %q", prefix)
		require.True(t, utf8.ValidString(got), "prefix %q", prefix)
		if got != "" {
			require.Less(t, prefix+"\U0010FFFF\U0010FFFF", got, "prefix %q", prefix)
		}
	}
}
