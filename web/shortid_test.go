package web

import (
	"database/sql"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// renameJob gives a requested job (no facts, no attempts) a new id, so that
// a test can make two ids share a prefix.
func renameJob(t *testing.T, location, from, to string) {
	t.Helper()
	if strings.HasPrefix(location, "postgres") {
		pgtest.Exec(t, location, `UPDATE leases_jobs SET id = $1 WHERE id = $2`, to, from)
		return
	}
	db, err := sql.Open("sqlite", location)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE jobs SET id = ? WHERE id = ?`, to, from)
	require.NoError(t, err)
}

func TestThePageSearchFindsAJobByAUniqueIDPrefixAndListsTheCandidatesOfAnAmbiguousOne(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		ids := st.seed("p", 6)
		type page struct {
			Jobs   []map[string]any `json:"jobs"`
			Notice string           `json:"search_notice"`
		}
		search := func(q string) page {
			var pv page
			st.getJSON("/api/production?"+url.Values{"name": {"p"}, "q": {q}}.Encode(), &pv)
			return pv
		}
		for _, q := range []string{ids[1][:8], ids[1][:13], ids[1]} {
			pv := search(q)
			require.Len(t, pv.Jobs, 1, q)
			require.Equal(t, ids[1], pv.Jobs[0]["id"], q)
			require.Empty(t, pv.Notice)
		}
		r := st.get("/production?" + url.Values{"name": {"p"}, "q": {ids[1][:8]}}.Encode())
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, r.body, ids[1])
		require.NotContains(t, r.body, ids[0])

		// Two requested jobs whose ids share their first 8 characters.
		a, b := "0a1b2c3d-0000-4000-8000-000000000001", "0a1b2c3d-0000-4000-8000-000000000002"
		renameJob(t, location, ids[3], a)
		renameJob(t, location, ids[4], b)
		pv := search("0a1b2c3d")
		require.Empty(t, pv.Jobs)
		require.Equal(t, "invalid_argument: job id prefix 0a1b2c3d is ambiguous: it begins "+a+", "+b+
			"; give more of the id", pv.Notice)
		r = st.get("/production?" + url.Values{"name": {"p"}, "q": {"0a1b2c3d"}}.Encode())
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, r.body, `id="search-notice"`)
		require.Contains(t, r.body, "ambiguous: it begins "+a+", "+b)
		pv = search("0a1b2c3d-0000-4000-8000-00000000000")
		require.Empty(t, pv.Jobs, "a prefix that is still ambiguous")
		pv = search("0a1b2c3d-0000-4000-8000-000000000002")
		require.Len(t, pv.Jobs, 1)
		require.Equal(t, b, pv.Jobs[0]["id"])

		// A text that is no id prefix is a key, as before; so is a prefix of no job.
		for _, q := range []string{"kc", "0a1b2c3", "0a1b2c3e"} {
			pv := search(q)
			require.Empty(t, pv.Notice, q)
			if q == "kc" {
				require.Len(t, pv.Jobs, 1)
				require.Equal(t, ids[2], pv.Jobs[0]["id"])
			} else {
				require.Empty(t, pv.Jobs, q)
			}
		}
	})
}
