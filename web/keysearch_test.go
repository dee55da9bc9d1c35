package web

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheSearchBoxListsTheJobsWhoseKeyStartsWithTheText: a search text
// that is no job id lists the production's jobs whose key starts with it,
// in key order, paged forwards and backwards with the search kept; an
// exact key is one such prefix.
func TestTheSearchBoxListsTheJobsWhoseKeyStartsWithTheText(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		_, err := st.writer.CreateProduction("s")
		require.NoError(t, err)
		var want []string
		for i := 12; i >= 1; i-- { // requested in the reverse of key order
			k := fmt.Sprintf("render/%03d", i)
			_, err := st.writer.RequestJob("s", k, nil)
			require.NoError(t, err)
			want = append([]string{k}, want...)
		}
		for _, k := range []string{"render/1x", "report/1", "Render/002", "render"} {
			_, err := st.writer.RequestJob("s", k, nil)
			require.NoError(t, err)
		}
		type page struct {
			Jobs []map[string]any `json:"jobs"`
			Next string           `json:"next"`
			Prev string           `json:"prev"`
		}
		keys := func(p page) []string {
			var out []string
			for _, j := range p.Jobs {
				out = append(out, j["key"].(string))
			}
			return out
		}
		var got []string
		var pages []page
		q := url.Values{"name": {"s"}, "q": {"render/0"}, "limit": {"5"}}
		for {
			var p page
			st.getJSON("/api/production?"+q.Encode(), &p)
			pages = append(pages, p)
			got = append(got, keys(p)...)
			if p.Next == "" {
				break
			}
			q.Set("after", p.Next)
			require.Less(t, len(pages), 10)
		}
		require.Equal(t, want, got)
		require.Len(t, pages, 3)
		// Back from the last page.
		q.Del("after")
		q.Set("before", pages[2].Prev)
		var back page
		st.getJSON("/api/production?"+q.Encode(), &back)
		require.Equal(t, want[5:10], keys(back))
		// An exact key is found as before.
		var one page
		st.getJSON("/api/production?"+url.Values{"name": {"s"}, "q": {"report/1"}}.Encode(), &one)
		require.Equal(t, []string{"report/1"}, keys(one))
		// The page shows the same jobs, with the search in its links.
		html := st.get("/production?" + url.Values{"name": {"s"}, "q": {"render/0"}, "limit": {"5"}}.Encode())
		require.Equal(t, 200, html.code)
		for _, k := range want[:5] {
			require.Contains(t, html.body, k)
		}
		require.NotContains(t, html.body, "report/1")
		require.Contains(t, html.body, "q=render%2F0")
	})
}
