package web

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/stretchr/testify/require"
)

// sneaky is free text that would steer or hide if shown raw: ESC (a
// terminal's escape sequences), BEL, CR, U+202E RIGHT-TO-LEFT OVERRIDE
// (everything after it reads reversed), U+200B ZERO WIDTH SPACE (invisible),
// and a backslash (so the escaped form stays unambiguous).
const sneaky = "paid\x1b[2K\x07\r\u202Eevil\u200Bz\\"

// sneakyShown is sneaky as every page shows it: as the CLI's text output does.
const sneakyShown = `paid\u001b[2K\u0007\u000d\u202eevil\u200bz\\`

// rawControls are the characters that must never reach a page raw.
var rawControls = []string{"\x1b", "\x07", "\r", "\u202E", "\u200B"}

// Control and direction-override characters in reasons, event details,
// fact values, output paths and payload previews are shown escaped (\uXXXX,
// a backslash doubled), never raw: a U+202E cannot make a reason read
// reversed, and nothing in the text can hide part of it.
func TestControlAndDirectionCharactersInFreeTextAreShownEscaped(t *testing.T) {
	eachStore(t, func(t *testing.T, location string) {
		st := newSite(t, location, Config{})
		_, err := st.writer.CreateProduction("p")
		require.NoError(t, err)
		failed, err := st.writer.RequestJob("p", "failed", []byte("line 1\nline 2\t"+sneaky))
		require.NoError(t, err)
		l, err := st.writer.ClaimJob("p", failed, "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Fail(sneaky))

		done, err := st.writer.RequestJob("p", "done", nil)
		require.NoError(t, err)
		l, err = st.writer.ClaimJob("p", done, "w", time.Minute)
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "out\u202Etxt.exe")
		require.NoError(t, os.Mkdir(dir, 0o755))
		x, err := l.BeginExecution(dir)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(x.TempPath(), []byte("x"), 0o600))
		f, err := core.ParseFacts(`{"metadata":{"note":"x` + "\u202E" + `y` + "\u200B" + `"},"provenance":{"tool":"t` + "\u202E" + `"}}`)
		require.NoError(t, err)
		require.NoError(t, x.Finish(f))

		pages := map[string][]string{
			jobPath("p", failed): {`<dd class="reason" id="job-reason">` + sneakyShown + `</dd>`,
				`<td class="reason">` + sneakyShown + `</td>`, // the attempt history
				"line 1\nline 2\t" + sneakyShown},             // the preview keeps its lines
			"/production?" + url.Values{"name": {"p"}}.Encode(): {`<td class="reason">` + sneakyShown + `</td>`},
			jobPath("p", done): {`&#34;x\u202ey\u200b&#34;`, `&#34;t\u202e&#34;`, // the facts' JSON values (quotes as &#34;), still JSON
				strings.ReplaceAll(dir, "\u202E", `\u202e`)},
			"/events?" + url.Values{"production": {"p"}}.Encode(): nil,
			"/": nil,
		}
		for path, want := range pages {
			r := st.get(path)
			require.Equal(t, http.StatusOK, r.code, path)
			for _, c := range rawControls {
				require.NotContains(t, r.body, c, "%s shows %U raw", path, []rune(c)[0])
			}
			for _, w := range want {
				require.Contains(t, r.body, w, path)
			}
		}
		// The JSON API keeps every byte, as the CLI's --json does.
		var jv struct {
			Job map[string]any `json:"job"`
		}
		st.getJSON("/api"+jobPath("p", failed), &jv)
		require.Equal(t, sneaky, jv.Job["reason"])
	})
}
