// The coordinator actions (only with AllowActions; the guard has checked
// origin and CSRF token) and /healthz.
package web

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/libleases/libleases/core"
)

// actionFunc performs one action and returns where to go next.
type actionFunc func(r *http.Request) (redirect string, err error)

func (s *Server) action(do actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		to, err := do(r)
		if err != nil {
			s.fail(w, r, status(err), err.Error())
			return
		}
		// 303: the browser shows the result with a GET, so a reload never
		// posts the form again.
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// cancel is a coordinator cancel of one job (core.Authority.Cancel).
func (s *Server) cancel(r *http.Request) (string, error) {
	production, id := r.PostFormValue("production"), r.PostFormValue("id")
	if err := s.a.Cancel(production, id); err != nil {
		return "", err
	}
	return "/job?" + url.Values{"production": {production}, "id": {id}, "done": {"cancelled"}}.Encode(), nil
}

// redriveJob is a coordinator redrive of one failed, dead or cancelled job
// (core.Authority.RetryJob).
func (s *Server) redriveJob(r *http.Request) (string, error) {
	production, id := r.PostFormValue("production"), r.PostFormValue("id")
	if err := s.a.RetryJob(production, id); err != nil {
		return "", err
	}
	return "/job?" + url.Values{"production": {production}, "id": {id}, "done": {"redriven"}}.Encode(), nil
}

// redrive returns every job of a production in one state (failed, dead or
// cancelled) to the queue (core.Authority.Redrive).
func (s *Server) redrive(r *http.Request) (string, error) {
	production, state := r.PostFormValue("production"), r.PostFormValue("state")
	if _, err := s.a.Redrive(production, state); err != nil {
		return "", err
	}
	return "/production?" + url.Values{"name": {production}, "done": {"redriven-all"}}.Encode(), nil
}

// unavailable answers 503 as /healthz does when the store does not answer,
// before next runs: a scrape then fails as unavailable, never with zeros.
func (s *Server) unavailable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.answer(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// answer checks that the store answers a read of the clock; if not, it
// writes the 503 and says so.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) bool {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.a.ReadClock(ctx); err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("unavailable: the store does not answer (" + core.KindOf(err).String() + ")\n"))
		return false
	}
	return true
}

// healthz answers a load balancer: 200 when the store answers a read of
// the clock, 503 with the kind of failure otherwise. Only the kind: a
// message could name the server, and this answer goes to anyone.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.answer(w, r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	}
}
