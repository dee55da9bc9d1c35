// Rendering: the handler wrappers that read the clock, build a page's data
// and write it as HTML (html/template, contextual escaping) or JSON, and
// map errors to statuses. No data ever reaches a page unescaped.
package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/internal/textesc"
)

// handlerFunc builds one page's data from the request and the common view.
type handlerFunc func(r *http.Request, v *view) (pageData, error)

// requestError is bad input to the server itself (a parameter that is not
// a number); core reports the rest.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(msg string) error { return &requestError{msg} }

// status maps an error to an HTTP status.
func status(err error) int {
	var re *requestError
	if errors.As(err, &re) {
		return http.StatusBadRequest
	}
	switch core.KindOf(err) {
	case core.KindInvalidArgument, core.KindInvalidDuration:
		return http.StatusBadRequest
	case core.KindNotFound:
		return http.StatusNotFound
	case core.KindWrongState:
		return http.StatusConflict
	case core.KindBusy, core.KindStorage, core.KindClosed, core.KindOutcomeUnknown:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// common reads what every page shows: the authority's clock.
func (s *Server) common(w http.ResponseWriter, r *http.Request) (*view, error) {
	c, err := s.a.ReadClock(r.Context())
	if err != nil {
		return nil, err
	}
	return &view{Clock: c, Actions: s.cfg.AllowActions, CSRF: s.formToken(w, r),
		Refresh: s.cfg.Refresh.Milliseconds(), Notice: notice(r.URL.Query().Get("done"))}, nil
}

// notice is the line shown after an action redirected back: a fixed text
// chosen by a word, never the word itself.
func notice(done string) string {
	return map[string]string{"cancelled": "The job was cancelled.",
		"redriven":     "The job was redriven: it is requested again, its attempts start from 1.",
		"redriven-all": "Redriven: those jobs are requested again."}[done]
}

// view builds a view's data from the request and writes it with out; a
// failure on the way is answered by fail (a page, or JSON under /api).
func (s *Server) view(build handlerFunc, out func(w http.ResponseWriter, r *http.Request, data pageData)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := s.common(w, r)
		var data pageData
		if err == nil {
			data, err = build(r, v)
		}
		if err != nil {
			s.fail(w, r, status(err), err.Error())
			return
		}
		out(w, r, data)
	}
}

func (s *Server) page(name string, build handlerFunc) http.HandlerFunc {
	return s.view(build, func(w http.ResponseWriter, r *http.Request, data pageData) {
		s.render(w, r, http.StatusOK, name, data)
	})
}

func (s *Server) api(build handlerFunc) http.HandlerFunc {
	return s.view(build, func(w http.ResponseWriter, _ *http.Request, data pageData) {
		writeJSON(w, http.StatusOK, data)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

type errorView struct {
	view
	Status  int    `json:"-"`
	Message string `json:"-"`
}

// fail answers an error: JSON for the API, a page otherwise. The message
// is core's (never a secret; a PostgreSQL URL's password is redacted by
// the store) or the server's own.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if code >= 500 && r.Context().Err() == nil { // not a browser that went away mid-request
		s.log.Printf("%s %s: %d %s", r.Method, r.URL.Path, code, msg)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, map[string]any{"error": map[string]any{"status": code, "message": msg}})
		return
	}
	s.render(w, r, code, "error", &errorView{view: view{Title: http.StatusText(code)}, Status: code, Message: msg})
}

// render executes a page into a buffer first, so a failure midway never
// sends half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, data pageData) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		s.log.Printf("%s %s: render %s: %v", r.Method, r.URL.Path, name, err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// parseTemplates parses each page with the layout: one template set per
// page, so their blocks do not collide.
func parseTemplates() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" {
			continue
		}
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", page, err)
		}
		out[page] = t
	}
	return out, nil
}

// funcs are the template helpers. Each returns plain text (or a URL built
// from escaped parts); html/template escapes it for where it lands.
var funcs = template.FuncMap{
	"name": core.DisplayName,
	// Free text (reasons, event details, paths) and facts' JSON values show
	// control and invisible characters escaped, as the CLI's text output
	// does (internal/textesc): a U+202E cannot reverse a reason, an ESC or
	// a CR cannot hide part of one.
	"text":  textesc.Text,
	"lines": textesc.Lines,
	"json":  func(s string) string { return textesc.JSON([]byte(s)) },
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
	},
	"rel": relative,
	// keep is a retention duration: "forever" for 0 (kept for good).
	"keep": func(d time.Duration) string {
		switch {
		case d == 0:
			return "forever"
		case d%(24*time.Hour) == 0:
			return fmt.Sprintf("%dd", d/(24*time.Hour))
		}
		return span(d)
	},
	"dur":  func(d time.Duration) string { return span(d) },
	"size": size,
	"productionURL": func(name string) string {
		return "/production?" + url.Values{"name": {name}}.Encode()
	},
	"stateURL": func(name, state string) string {
		return "/production?" + url.Values{"name": {name}, "state": {state}}.Encode()
	},
	"workerURL": func(production, worker string) string {
		return "/production?" + url.Values{"name": {production}, "worker": {worker}}.Encode()
	},
	"jobURL": func(production, id string) string {
		return "/job?" + url.Values{"production": {production}, "id": {id}}.Encode()
	},
	"eventsURL": func(production string) string {
		return "/events?" + url.Values{"production": {production}}.Encode()
	},
	"seq":  func(n int64) string { return strconv.FormatInt(n, 10) },
	"lagd": func(c core.ClockReading) string { return span(c.Lag()) },
	"pct":  func(n int) string { return strconv.Itoa(n) },
	"dash": func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	},
}

// relative is t against the authority's now: "in 25s", "3m 10s ago".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	if d >= 0 {
		return "in " + span(d)
	}
	return span(-d) + " ago"
}

// span is a duration for people: the two largest units.
func span(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

func size(n int64) string {
	switch {
	case n < 1024:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
