// What every request passes before a handler: the security headers, the
// Host check (DNS rebinding), the method policy (read-only unless actions
// are allowed) and, for an action, the origin and CSRF checks.
package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// csp allows this origin's script and style files and nothing inline, no
// framing, no plugins, forms posting only here.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const csrfCookie = "leases_csrf"

func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !s.cfg.Public && !s.hostAllowed(r.Host) {
			// A page reached through another name is a DNS-rebinding
			// attempt: a foreign site whose name now points here.
			http.Error(w, "misdirected request: this server answers only to its own address or localhost",
				http.StatusMisdirectedRequest)
			return
		}
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
		case r.Method == http.MethodPost && s.cfg.AllowActions && strings.HasPrefix(r.URL.Path, "/actions/"):
			if why := s.forged(r); why != "" {
				s.fail(w, r, http.StatusForbidden, "refused: "+why)
				return
			}
		default:
			allow := "GET, HEAD"
			if s.cfg.AllowActions && strings.HasPrefix(r.URL.Path, "/actions/") {
				allow = "POST"
			}
			h.Set("Allow", allow)
			msg := "method not allowed: this server is read-only (start it with --allow-actions for the coordinator actions)"
			if s.cfg.AllowActions {
				msg = "method not allowed here"
			}
			http.Error(w, msg, http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed: the Host header names this host by a loopback name or
// address, or the listen address's own host. The port is not compared:
// rebinding changes the name, and the name is what is checked.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if loopbackHost(host) {
		return true
	}
	listen, _, err := net.SplitHostPort(s.cfg.Listen)
	return err == nil && listen != "" && strings.EqualFold(host, listen)
}

// forged says why a POST is not from a page of this server: an Origin (or,
// without one, Sec-Fetch-Site or a Referer) naming another origin, none of
// them, or a CSRF token that does not match the cookie it was issued for.
func (s *Server) forged(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		// A browser sends Origin: null on every POST from a page whose
		// Referrer-Policy is no-referrer (ours), and no Referer. Its
		// Sec-Fetch-Site, which no page can set, then says where the form
		// was: only this very origin passes.
		switch r.Header.Get("Sec-Fetch-Site") {
		case "same-origin":
			return s.tokenMismatch(r)
		case "":
		default:
			return "the request comes from another origin"
		}
		ref, err := url.Parse(r.Referer())
		if r.Referer() == "" || err != nil {
			return "the request names no origin (Origin or Referer)"
		}
		origin = ref.Scheme + "://" + ref.Host
	}
	o, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(o.Host, r.Host) || (o.Scheme != "http" && o.Scheme != "https") {
		return "the request comes from another origin"
	}
	return s.tokenMismatch(r)
}

// tokenMismatch says why the form's CSRF token is not the one issued for
// this browser's cookie, or "" when it is.
func (s *Server) tokenMismatch(r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return "the form's token is missing (reload the page and try again)"
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrfToken(c.Value))) {
		return "the form's token does not match (reload the page and try again)"
	}
	return ""
}

// csrfToken is the form token for a browser's cookie: a MAC of it under
// this process's key (double submit, signed, so a cookie planted by a
// sibling host cannot be paired with a token the planter made up).
func (s *Server) csrfToken(cookie string) string {
	m := hmac.New(sha256.New, s.csrfKey[:])
	m.Write([]byte(cookie))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// formToken returns the CSRF token for this browser, giving it a cookie
// first when it has none. "" when actions are not allowed: no form is shown.
func (s *Server) formToken(w http.ResponseWriter, r *http.Request) string {
	if !s.cfg.AllowActions {
		return ""
	}
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return s.csrfToken(c.Value)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return ""
	}
	v := base64.RawURLEncoding.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return s.csrfToken(v)
}
